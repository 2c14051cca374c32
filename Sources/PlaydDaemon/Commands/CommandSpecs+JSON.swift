import CoreStream
import PlaydProtocol
import PlaydSessions

/// The commands only JSON spells whose reply is JSON's own (a stored playlist's files,
/// the library's songs as objects, a cover as base64): specs like the rest, their
/// members made by JSONEncoding as their output (``CommandSpec/Reply/jsonMembers``).
/// MPD has its own commands for the same needs (CommandSpecs+MPD.swift).
extension CommandSpecs {
    static let jsonOnly: [CommandSpec] = [add("add", place: .end), add("insert", place: .next)]
        + jsonTransport + jsonStoredPlaylists + jsonLibrary + jsonReads

    /// `find`'s tags: each an optional member (`"artist": "Alpha"`, `"title": "D*"`).
    static let findTags = MusicLibrary.fields.keys.sorted()
    /// At most this many songs in one reply (default 10,000).
    static let songLimit = A.Kind.integer(1...1_000_000)

    /// `add` and `insert` (right after the entry playing): `path` or `url` (one), or
    /// `paths` (files, folders, playlists and URLs, expanded off the control thread).
    static func add(_ name: String, place: Command.Place) -> CommandSpec {
        .jsonMembers(name, .add, [A("path", .name, optional: true), A("url", .name, optional: true),
                                  A("paths", .list(.name), optional: true)]) { p, a throws(PlayerError) in
            var paths: [String] = []
            if a.has("paths") {
                for case .text(let t) in a.list("paths") { paths.append(t) }
            } else if let one = a.text("path") ?? a.text("url") {
                paths = [one]
            }
            guard !paths.isEmpty else { throw PlayerError(.badRequest, "\(name) needs \"path\", \"url\" or \"paths\"") }
            let out = try p.perform(.add(sources: paths, place: place))
            var reply: [(String, JSON)] = [("added", .array(out.added.map { JSON.int(Int64($0)) })), ("length", .int(p.queue.count))]
            if out.outsideRoots > 0 { reply.append(("outside_library", .int(out.outsideRoots))) }
            return reply
        }
    }

    static let jsonStoredPlaylists: [CommandSpec] = [
        .jsonMembers("load", .add, [A("name", .name)]) { p, a throws(PlayerError) in
            let ids = try p.perform(.loadPlaylist(a.text("name")!, range: nil, place: .end)).added
            return [("added", .int(Int64(ids.count))), ("length", .int(p.queue.count))]
        },
        .jsonMembers("playlists", .read) { p, _ throws(PlayerError) in
            [("playlists", .array(p.storedPlaylists.list().map {
                .obj(("name", .string($0.name)), ("modified", .int(Int64($0.modified))))
            }))]
        },
        .jsonMembers("playlist", .read, [A("name", .name)]) { p, a throws(PlayerError) in
            let name = a.text("name")!
            return [("name", .string(name)), ("files", .array(try p.storedPlaylistEntries(name).map(JSON.string)))]
        },
    ]

    static let jsonLibrary: [CommandSpec] = [
        .jsonMembers("update", .admin, [A("path", .name, optional: true)]) { p, a throws(PlayerError) in
            [("job", .int(try p.perform(.update(path: a.text("path"))).job ?? 0))]
        },
        .jsonMembers("search", .read, [A("query", .name), A("limit", songLimit, optional: true), A("add", .flag, optional: true)]) {
            p, a throws(PlayerError) in
            let library = try p.requireLibrary()
            guard let q = a.text("query"), !q.isEmpty else { throw PlayerError(.badRequest, "search needs \"query\"") }
            let songs: [LibrarySong]
            do { songs = try library.search(q, limit: a.integer("limit") ?? 10_000) } catch { throw PlayerError(any: error) }
            return try JSONCommands.songs(p, songs, add: a.flag("add") == true)
        },
        // Tags as members; a value ending in `*` matches as a prefix.
        .jsonMembers("find", .read, findTags.map { A($0, .name, optional: true) }
                     + [A("limit", songLimit, optional: true), A("add", .flag, optional: true)]) { p, a throws(PlayerError) in
            let library = try p.requireLibrary()
            let filters: [(field: String, value: String, prefix: Bool)] = findTags.compactMap { tag in
                a.text(tag).map { v in (tag, v.hasSuffix("*") ? String(v.dropLast()) : v, v.hasSuffix("*")) }
            }
            guard !filters.isEmpty else { throw PlayerError(.badRequest, "find needs one of \(findTags.joined(separator: ", "))") }
            let songs: [LibrarySong]
            do { songs = try library.find(filters, limit: a.integer("limit") ?? 10_000) } catch { throw PlayerError(any: error) }
            return try JSONCommands.songs(p, songs, add: a.flag("add") == true)
        },
        // `what`: artists or albums (or the singular); narrowed by `artist`, `album`.
        .jsonMembers("list", .read, [A("what", .name), A("artist", .name, optional: true), A("album", .name, optional: true)]) {
            p, a throws(PlayerError) in
            let library = try p.requireLibrary()
            let what = a.text("what")!
            let field = what.hasSuffix("s") ? String(what.dropLast()) : what
            var filters: [(field: String, value: String)] = []
            if let v = a.text("artist") { filters.append(("artist", v)) }
            if let v = a.text("album") { filters.append(("album", v)) }
            do { return [(what, .array(try library.list(field, filters: filters).map(JSON.string)))] } catch { throw PlayerError(any: error) }
        },
        .jsonMembers("ls", .read, [A("path", .name, optional: true)]) { p, a throws(PlayerError) in
            let library = try p.requireLibrary()
            do {
                let (dirs, songs) = try library.ls(a.text("path"))
                return [("directories", .array(dirs.map(JSON.string))), ("songs", .array(songs.map(JSONEncoding.song)))]
            } catch {
                throw PlayerError(any: error)
            }
        },
    ]

    static let jsonReads: [CommandSpec] = [
        // The playing track's embedded picture, read off the control thread (a hung
        // mount; Player+DiskReads.swift).
        .jsonMembers("cover", .read) { p, _ throws(PlayerError) in
            guard let t = p.snapshot().playing else { throw PlayerError(.notPlaying, "nothing is playing") }
            let path = t.path
            let read = try p.readOffThread("cover\0" + path, what: "cover of \(path)") {
                Result { () throws(StreamError) in try AudioDecoder.coverArt(path: path) }
            }
            let art: (mime: String, bytes: [UInt8])?
            do { art = try read.get() } catch { throw PlayerError(any: error) }
            guard let art else { return [("cover", .null)] }
            return [("cover", .obj(("mime", .string(art.mime)), ("size", .int(Int64(art.bytes.count))),
                                   ("data", .string(Base64.encode(art.bytes)))))]
        },
    ]

    /// JSON's `play`, `seek`, `loop` and `announce`: one command each where MPD has
    /// several (`play`/`playid`, `seek`/`seekid`/`seekcur`), their times read through
    /// the ``ArgumentSpec/Kind/time(relative:)`` kind.
    static let jsonTransport: [CommandSpec] = [
        // `path` or `url` (a file or stream, started `at` a time), `entry` (an id),
        // `index`, or none: the queue from where it stands.
        .jsonMembers("play", .control, [A("path", .source, optional: true), A("url", .source, optional: true),
                                        A("at", .time(relative: false), optional: true),
                                        A("entry", .id, optional: true), A("index", .index, optional: true)]) { p, a throws(PlayerError) in
            // `url` is `path` by another name: an http(s) URL is a stream either way.
            if let given = a.text("path") ?? a.text("url") {
                var frames: Int64?, seconds: Double?
                switch a.at("at")?.value {
                case .seconds(let s)?: seconds = s
                case .frames(let f)?: frames = f
                case nil: break
                }
                let out = try p.perform(.playFile(path: given, at: frames, atSeconds: seconds))
                var reply: [(String, JSON)] = [("file", .string(out.file ?? given))]
                // A stream is connected to after this reply: `buffering`, then `track` or `error`.
                if p.openingStream != nil { reply.append(("state", .string("buffering"))) }
                return reply
            }
            if let id = a.integer("entry") {
                try p.perform(.playID(id))
            } else if let index = a.integer("index") {
                try p.perform(.playIndex(index))
            } else {
                try p.perform(.playQueue)
            }
            return JSONEncoding.current(p)
        },
        .jsonMembers("seek", .control, [A("to", .time(relative: true))]) { p, a throws(PlayerError) in
            let frame = try p.perform(.seek(a.seekTarget("to")!)).seekedTo ?? 0
            let rate = p.snapshot().status.track?.sampleRate ?? 44100
            return [("position_frames", .int(frame)), ("position", .number(FrameTime.seconds(frame, rate: rate)))]
        },
        // `start` and `end` (`count` times, null: forever; `ping_pong`), or `clear`/`off`.
        .jsonMembers("loop", .control, [A("start", .time(relative: false), optional: true), A("end", .time(relative: false), optional: true),
                                        A("count", .integer(0...999_999_999), optional: true), A("ping_pong", .flag, optional: true),
                                        A("clear", .flag, optional: true), A("off", .flag, optional: true)]) { p, a throws(PlayerError) in
            if a.flag("clear") == true || a.flag("off") == true {
                try p.perform(.loop(nil))
                return [("loop", .null)]
            }
            guard let start = a.at("start"), let end = a.at("end") else {
                throw PlayerError(.badRequest, "loop needs \"start\" and \"end\", or \"clear\": true")
            }
            guard let track = p.snapshot().playing else { throw PlayerError(.notPlaying, "nothing is playing to loop in") }
            let region = LoopRegion(start: try frames(start, rate: track.sampleRate), end: try frames(end, rate: track.sampleRate),
                                    count: a.integer("count"), pingPong: a.flag("ping_pong") ?? false)
            try p.perform(.loop(region))
            return [("loop", JSONEncoding.loop(p.loopView(p.snapshot().status)))]
        },
        // `path` or `url` over the music (`duck`, `gain` in dB, `pause`, a `chime`
        // before), or `cancel`: true. Their ranges are the Player's (the schedule and
        // MPD's `sendmessage announce` come the same way).
        .jsonMembers("announce", .control, [A("path", .source, optional: true), A("url", .source, optional: true),
                                            A("chime", .source, optional: true), A("duck", decibels, optional: true),
                                            A("gain", decibels, optional: true), A("pause", .flag, optional: true),
                                            A("cancel", .flag, optional: true)]) { p, a throws(PlayerError) in
            if let cancel = a.flag("cancel") {
                guard cancel else { throw PlayerError(.badRequest, "\"cancel\" must be true") }
                try p.perform(.cancelAnnouncement)
                return []
            }
            guard let source = a.text("path") ?? a.text("url") else {
                throw PlayerError(.badRequest, "announce needs \"path\" (a file or URL), or \"cancel\": true")
            }
            var r = Player.AnnounceRequest(source: source)
            r.chime = a.text("chime")
            if let d = a.number("duck") { r.duckDB = d }
            if let g = a.number("gain") { r.gainDB = g }
            if let pause = a.flag("pause") { r.pause = pause }
            let waiting = try p.perform(.announce(r)).waiting ?? 0
            return [("queued", .bool(waiting > 0)), ("waiting", .int(waiting))]
        },
    ]

    /// A level in dB: any finite number here; the Player holds the ranges.
    static let decibels = A.Kind.number(-Double.infinity...Double.infinity, nan: false)

    /// A time as a frame count at `rate`, within the engine's 2^53 frames.
    static func frames(_ t: TimeArgument, rate: Int) throws(PlayerError) -> Int64 {
        switch t.value {
        case .seconds(let s):
            guard let f = FrameTime.checkedFrames(seconds: s, rate: rate) else { throw PlayerError(.badRequest, "\(s) s is out of range") }
            return f
        case .frames(let f):
            return f  // ≤ 2^53: checked as it was read
        }
    }
}
