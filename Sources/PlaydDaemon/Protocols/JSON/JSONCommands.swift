import CoreStream
import PlaydProtocol

/// The JSON protocol's command table: each `cmd` name, and how its request becomes a
/// ``Command`` (or a read of the player) and its reply (docs/protocol.md). The session
/// (JSONSession.swift) looks commands up here; nothing else knows the names.
enum JSONCommands {
    /// What a handler gets: the player, the request object, the session (for
    /// `subscribe`), and the server's counters (for `status`).
    struct Context {
        let player: Player
        let request: JSON
        let session: JSONSession
        let counters: ServerCounters
        subscript(_ key: String) -> JSON? { request[key] }
    }
    typealias Handler = @Sendable (Context) throws -> [(String, JSON)]

    /// The commands not yet specs (CommandSpecs.swift).
    static let legacyTable: [String: Handler] = [
        "status": { c in JSONEncoding.status(c.player, c.counters) },
        "play": play,
        "seek": seek,
        "loop": loop,
        "announce": announce,
        // This connection.
        "subscribe": { c in
            var ticks = 0
            if let t = c["ticks"] {
                guard let ms = t.integer(in: 50...60_000) else {
                    throw PlayerError(.badRequest, "\"ticks\" must be a number of milliseconds, 50…60000")
                }
                ticks = Int(ms)
            }
            c.session.subscribe(ticks: ticks)
            return [("subscribed", .bool(true))]
        },
        "unsubscribe": { c in c.session.unsubscribe(); return [] },
    ]

    /// A spec's reply in JSON members.
    static func members(_ reply: CommandSpec.Reply, _ p: Player, _ a: Arguments, _ output: CommandSpec.Output = .init()) -> [(String, JSON)] {
        switch reply {
        case .done: return []
        case .jsonMembers: return output.members
        case .current: return JSONEncoding.current(p)
        case .options: return JSONEncoding.options(p.queue)
        case .level: return level(p)
        case .crossfade: return JSONEncoding.crossfade(p.crossfade)
        case .direction: return [("direction", .string(p.snapshot().status.direction.rawValue))]
        case .length: return [("length", .int(p.queue.count))]
        case .queue:
            let q = p.queue
            return [("queue", .array(q.entries.enumerated().map { JSONEncoding.entry(p, $0.offset, $0.element) })),
                    ("current", q.current.map { JSON.int(Int64($0)) } ?? .null)]
        case .name: return [("name", a.text("name").map(JSON.string) ?? .null)]
        case .schedule: return JSONEncoding.schedule(p.scheduleView(day: a.text("day").flatMap { try? Player.scheduleDay($0) }))
        case .pong: return [("pong", .bool(true))]
        case .version: return [("version", .string(Daemon.version)), ("protocol", .int(1))]
        case .outputs: return [("outputs", .array(p.snapshot().outputs.map { .object(JSONEncoding.outputMembers($0)) }))]
        case .output:
            guard let o = p.snapshot().outputs.first(where: { $0.name == a.text("name") }) else { return [] }
            return JSONEncoding.outputMembers(o)
        // MPD's reads: no JSON command has these replies (JSON's `status` says it all).
        case .currentSong, .stats, .volume, .replayGainStatus, .urlHandlers, .decoders, .status, .mpdLines: return []
        }
    }

    // MARK: - Handlers

    static func level(_ p: Player) -> [(String, JSON)] {
        let l = p.currentLevel()
        return [("volume", .int(Int64(l.volume))), ("muted", .bool(l.muted))]
    }

    static func play(_ c: Context) throws -> [(String, JSON)] {
        // `url` is `path` by another name: an http(s) URL is a stream either way.
        if let key = c["path"] != nil ? "path" : c["url"] != nil ? "url" : nil, let p = c[key] {
            guard let given = p.stringValue, !given.isEmpty else { throw PlayerError(.badRequest, "\"\(key)\" must be a non-empty string") }
            guard given.utf8.count <= 4096 else { throw PlayerError(.badRequest, "\"\(key)\" longer than 4096 bytes") }
            var frames: Int64?, seconds: Double?
            if let at = c["at"] {
                let t = try timeArgument(at, field: "at")
                guard t.direction == 0 else { throw PlayerError(.badRequest, "\"at\" cannot be relative") }
                switch t.value {
                case .seconds(let s): seconds = s
                case .frames(let f): frames = f
                }
            }
            let out = try c.player.perform(.playFile(path: given, at: frames, atSeconds: seconds))
            var reply: [(String, JSON)] = [("file", .string(out.file ?? given))]
            // A stream is connected to after this reply: `buffering`, then `track` or `error`.
            if c.player.openingStream != nil { reply.append(("state", .string("buffering"))) }
            return reply
        }
        if c["index"] != nil || c["entry"] != nil {
            if let v = c["entry"] {
                try c.player.perform(.playID(try entryID(v)))
            } else {
                try c.player.perform(.playIndex(try entryIndex(c)))
            }
        } else {
            try c.player.perform(.playQueue)
        }
        return JSONEncoding.current(c.player)
    }

    /// `{"cmd":"announce","path":FILE|URL, "duck":DB, "gain":DB, "pause":BOOL, "chime":FILE}`,
    /// or `{"cmd":"announce","cancel":true}`.
    static func announce(_ c: Context) throws -> [(String, JSON)] {
        if let v = c["cancel"] {
            guard v.boolValue == true else { throw PlayerError(.badRequest, "\"cancel\" must be true") }
            try c.player.perform(.cancelAnnouncement)
            return []
        }
        func text(_ key: String) throws -> String? {
            guard let v = c[key], !v.isNull else { return nil }
            guard let s = v.stringValue, !s.isEmpty else { throw PlayerError(.badRequest, "\"\(key)\" must be a non-empty string") }
            guard s.utf8.count <= 4096 else { throw PlayerError(.badRequest, "\"\(key)\" longer than 4096 bytes") }
            return s
        }
        func decibels(_ key: String) throws -> Double? {
            guard let v = c[key], !v.isNull else { return nil }
            guard let d = v.numberValue, d.isFinite else { throw PlayerError(.badRequest, "\"\(key)\" must be a number of dB") }
            return d
        }
        guard let source = try text("path") ?? text("url") else {
            throw PlayerError(.badRequest, "announce needs \"path\" (a file or URL), or \"cancel\": true")
        }
        var r = Player.AnnounceRequest(source: source)
        r.chime = try text("chime")
        if let d = try decibels("duck") { r.duckDB = d }
        if let g = try decibels("gain") { r.gainDB = g }
        if let p = c["pause"], !p.isNull {
            guard let b = p.boolValue else { throw PlayerError(.badRequest, "\"pause\" must be true or false") }
            r.pause = b
        }
        let waiting = try c.player.perform(.announce(r)).waiting ?? 0
        return [("queued", .bool(waiting > 0)), ("waiting", .int(waiting))]
    }

    static func seek(_ c: Context) throws -> [(String, JSON)] {
        guard let to = c["to"] else { throw PlayerError(.badRequest, "seek needs \"to\"") }
        let t = try timeArgument(to, field: "to")
        let sign: Double = t.direction < 0 ? -1 : 1
        let command: Command
        switch t.value {
        case .seconds(let s): command = .seek(frames: nil, seconds: sign * s, relative: t.direction != 0)
        case .frames(let f):
            guard f <= FrameTime.maxFrames else { throw PlayerError(.badRequest, "\(f) frames is out of range") }
            command = .seek(frames: t.direction < 0 ? -f : f, seconds: nil, relative: t.direction != 0)
        }
        let frame = try c.player.perform(command).seekedTo ?? 0
        let rate = c.player.snapshot().status.track?.sampleRate ?? 44100
        return [("position_frames", .int(frame)), ("position", .number(FrameTime.seconds(frame, rate: rate)))]
    }

    static func loop(_ c: Context) throws -> [(String, JSON)] {
        if c["clear"]?.boolValue == true || c["off"]?.boolValue == true {
            try c.player.perform(.loop(nil))
            return [("loop", .null)]
        }
        guard let a = c["start"], let b = c["end"] else {
            throw PlayerError(.badRequest, "loop needs \"start\" and \"end\", or \"clear\": true")
        }
        guard let track = c.player.snapshot().playing else { throw PlayerError(.notPlaying, "nothing is playing to loop in") }
        let ta = try timeArgument(a, field: "start"), tb = try timeArgument(b, field: "end")
        guard ta.direction == 0 && tb.direction == 0 else { throw PlayerError(.badRequest, "loop points cannot be relative") }
        let start = try frames(ta, rate: track.sampleRate), end = try frames(tb, rate: track.sampleRate)
        var count: Int?
        if let n = c["count"], !n.isNull {
            guard let v = n.integer(in: 0...999_999_999) else {
                throw PlayerError(.invalidArgument, "\"count\" must be a whole number ≥ 0 (or null for forever); the current region is kept")
            }
            count = Int(v)
        }
        var pingPong = false
        if let p = c["ping_pong"], !p.isNull {
            guard let v = p.boolValue else { throw PlayerError(.badRequest, "\"ping_pong\" must be true or false") }
            pingPong = v
        }
        try c.player.perform(.loop(LoopRegion(start: start, end: end, count: count, pingPong: pingPong)))
        return [("loop", JSONEncoding.loop(c.player.loopView(c.player.snapshot().status)))]
    }

    /// The songs, and with `add` the queue they were appended to.
    static func songs(_ p: Player, _ songs: [LibrarySong], add: Bool) throws(PlayerError) -> [(String, JSON)] {
        var out: [(String, JSON)] = [("count", .int(songs.count)), ("songs", .array(songs.map(JSONEncoding.song)))]
        if add {
            let o = try p.perform(.add(sources: songs.map(\.path), place: .end))
            out += [("added", .array(o.added.map { JSON.int(Int64($0)) })), ("length", .int(p.queue.count))]
        }
        return out
    }

    static func entryID(_ v: JSON) throws -> Int {
        // Ids are positive and below 2^53 (PlayQueue never gets near): anything else
        // names no entry, and is checked before it becomes an Int.
        guard let id = v.integer(in: 0...FrameTime.maxFrames) else {
            throw PlayerError(.badRequest, "\"entry\" must be an entry id (a whole number ≥ 0), not \(v.text)")
        }
        return Int(id)
    }

    /// "entry" (an id; not "id": a request's "id" is the client's own tag) or "index".
    static func entryIndex(_ c: Context) throws -> Int {
        let q = c.player.queue
        if let v = c["entry"] {
            let id = try entryID(v)
            guard let i = q.index(ofID: id) else { throw PlayerError(.invalidArgument, "no queue entry with id \(id)") }
            return i
        }
        if let v = c["index"] ?? c["from"] {
            guard case .number = v else { throw PlayerError(.badRequest, "\"index\" must be a number, not \(v.text)") }
            guard let index = v.integer(in: 0...Int64(max(0, q.count - 1))), index < q.count else {
                throw PlayerError(.invalidArgument, "index \(v.text) is outside the queue (0…\(q.count - 1))")
            }
            return Int(index)
        }
        throw PlayerError(.badRequest, "give \"entry\" (an entry id) or \"index\"")
    }

    static func timeArgument(_ v: JSON, field: String) throws -> TimeArgument {
        let relative = v["relative"]?.boolValue ?? false
        if let s = v["seconds"]?.numberValue {
            guard s.isFinite else { throw PlayerError(.badRequest, "\"\(field)\".seconds must be finite") }
            guard relative || s >= 0 else { throw PlayerError(.invalidArgument, "\"\(field)\" is negative") }
            return TimeArgument(value: .seconds(abs(s)), direction: relative ? (s < 0 ? -1 : 1) : 0)
        }
        if let f = v["frames"]?.numberValue {
            guard f == f.rounded(), abs(f) < 9e15 else { throw PlayerError(.badRequest, "\"\(field)\".frames must be a whole number") }
            guard relative || f >= 0 else { throw PlayerError(.invalidArgument, "\"\(field)\" is negative") }
            return TimeArgument(value: .frames(Int64(abs(f))), direction: relative ? (f < 0 ? -1 : 1) : 0)
        }
        if let s = v.numberValue {
            guard s.isFinite, s >= 0 else { throw PlayerError(.invalidArgument, "\"\(field)\" must be a non-negative number of seconds") }
            return TimeArgument(value: .seconds(s))
        }
        if let text = v.stringValue {
            do { return try TimeArgument(parsing: text) } catch { throw PlayerError(.badRequest, "\"\(field)\": \(error)") }
        }
        throw PlayerError(.badRequest, "\"\(field)\" must be seconds (number), {\"seconds\": …} or {\"frames\": …}")
    }

    /// Signed frame count of a time argument.
    static func frames(_ t: TimeArgument, rate: Int) throws -> Int64 {
        let sign: Int64 = t.direction < 0 ? -1 : 1
        switch t.value {
        case .seconds(let s):
            guard let f = FrameTime.checkedFrames(seconds: s, rate: rate) else { throw PlayerError(.badRequest, "\(s) s is out of range") }
            return sign * f
        case .frames(let f):
            guard f <= FrameTime.maxFrames else { throw PlayerError(.badRequest, "\(f) frames is out of range") }
            return sign * f
        }
    }
}
