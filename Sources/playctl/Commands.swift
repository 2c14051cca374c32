import ArgumentParser
import CoreStream
import PlaydProtocol
#if canImport(Glibc)
import Glibc
#endif

// The subcommands, each a JSON request (docs/protocol.md) and its reply shown.

struct Play: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Play FILE (outside the queue), a folder or playlist (queued, then its first file), a queue entry (--index, --id), or start the queue.")

    /// A local folder or playlist file, which `play` queues rather than plays alone.
    static func isCollection(_ path: String) -> Bool {
        guard !NetworkInput.hasScheme(path) else { return false }
        var st = stat()
        if PathBytes.stat(absolute(path), &st) == 0 && (st.st_mode & S_IFMT) == S_IFDIR { return true }
        let ext = path.split(separator: ".").last.map { $0.lowercased() } ?? ""
        return ["m3u", "m3u8", "pls"].contains(ext) && PathBytes.stat(absolute(path), &st) == 0
    }
    @OptionGroup var connection: Connection
    @Argument(help: "Audio file.", completion: .file()) var file: String?
    @Option(name: .long, help: "Start at TIME.") var at: String?
    @Option(name: .long, help: "Play the queue entry at this position (1 is the first, as mpc counts).") var index: Int?
    @Option(name: .long, help: "Play the queue entry with this id.") var id: Int?
    func validate() throws { if let index { _ = try queueIndex(index, "--index") } }
    func run() throws {
        var fields: [(String, JSON)] = []
        if let file, at == nil, Self.isCollection(file) {
            // A folder or a playlist: its files join the queue, and the first of them plays.
            let r = try connection.send("add", [("paths", .array([.string(absolute(file))]))])
            guard let first = r["added"]?.arrayValue?.first else { fail("\(file): nothing in it to play", code: 1) }
            try connection.send("play", [("entry", first)])
            if !connection.json { print("queued \(r["added"]?.arrayValue?.count ?? 0) from \(absolute(file)), playing the first") }
            return
        }
        if let file {
            fields.append(("path", .string(absolute(file))))
        } else if let index {
            fields.append(("index", .int(try queueIndex(index, "--index"))))
        } else if let id {
            fields.append(("entry", .int(Int64(id))))
        }
        if let at {
            guard file != nil else { throw ValidationError("--at goes with FILE") }
            let t = try parseTime(at)
            guard t.direction == 0 else { throw ValidationError("--at cannot be relative") }
            fields.append(("at", .object(t.json)))
        }
        if let file, NetworkInput.isStreamURL(file) {
            try playStream(file, fields)
            return
        }
        try connection.send("play", fields)
        if !connection.json, let file { print("playing \(absolute(file))") }
    }

    /// A URL is answered at once (`buffering`) and opened off playd's control thread:
    /// waits on the same connection, subscribed before the play, for its `track` event
    /// (it plays) or an `error` event (a 404, a 500, a timeout), at most a minute, and
    /// exits non-zero with the server's status in the message. It printed "playing"
    /// and exited 0 for a 404 (issue 42).
    func playStream(_ url: String, _ fields: [(String, JSON)]) throws {
        let client = try connection.connect()
        guard client.request(.obj(("id", .int(1)), ("cmd", .string("subscribe"))))?["ok"] == .bool(true),
              let reply = client.request(.object([("id", .int(2)), ("cmd", .string("play"))] + fields)) else {
            fail("playd closed the connection without replying", code: 5)
        }
        if connection.json { print(reply.text) }
        guard reply["ok"]?.boolValue == true else {
            fail("\(reply["error"]?["code"]?.shown ?? "error"): \(reply["error"]?["message"]?.shown ?? reply.text)", code: 1)
        }
        let deadline = monotonicNanoseconds() + 60_000_000_000
        while monotonicNanoseconds() < deadline {
            guard let line = client.readLine(timeoutMillis: 1000) else { continue }
            guard let e = try? JSON.parse(line), let event = e["event"]?.stringValue.flatMap(EventName.init(rawValue:)) else { continue }
            if event == .track, e["file"]?.stringValue == url {
                if connection.json { print(line) } else { print("playing \(JSON.string(url).shown ?? url)") }
                return
            }
            if event == .error {
                if connection.json { print(line) }
                fail("\(e["code"]?.shown ?? "error"): \(e["message"]?.shown ?? line)", code: 1)
            }
        }
        fail("\(url): no answer from the stream within 60 s (playd goes on trying; playctl status shows it)", code: 1)
    }
}

struct Announce: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Play FILE or URL over the music, which is ducked (or paused, --pause) and comes back; `announce --cancel` stops it.",
        discussion: """
        The music ramps down by --duck dB over 150 ms, the clip plays at --gain dB (and the volume), the music ramps \
        back up over 500 ms. With --pause the music pauses at an exact frame instead and resumes from it. While \
        paused or stopped the clip plays alone. One announcement plays at a time; others wait their turn (16 at most).
        """)
    @OptionGroup var connection: Connection
    @Argument(help: "Audio file or http(s) URL.", completion: .file()) var source: String?
    @Option(name: .long, parsing: .unconditional, help: "The music's level under the clip, dB (−60…0, default −18).") var duck: Double?
    @Option(name: .long, parsing: .unconditional, help: "The clip's gain, dB (−30…12, default 0).") var gain: Double?
    @Flag(name: .long, help: "Pause the music for the clip; it resumes from the same frame.") var pause = false
    @Option(name: .long, help: "A sound played just before the clip, under the same duck.", completion: .file()) var chime: String?
    @Flag(name: .long, help: "Stop the announcement playing (the next waiting one follows).") var cancel = false
    func validate() throws {
        if cancel {
            guard source == nil, duck == nil, gain == nil, !pause, chime == nil else { throw ValidationError("--cancel takes nothing else") }
        } else if source == nil {
            throw ValidationError("give a FILE or URL to announce, or --cancel")
        }
        for (name, v) in [("--duck", duck), ("--gain", gain)] where v.map({ !$0.isFinite }) ?? false {
            throw ValidationError("\(name) must be a number of dB")
        }
    }
    func run() throws {
        if cancel {
            try connection.send("announce", [("cancel", .bool(true))])
            return
        }
        guard let source else { return }
        var fields: [(String, JSON)] = [("path", .string(absoluteIfPresent(source)))]
        if let duck { fields.append(("duck", .number(duck))) }
        if let gain { fields.append(("gain", .number(gain))) }
        if pause { fields.append(("pause", .bool(true))) }
        if let chime { fields.append(("chime", .string(absoluteIfPresent(chime)))) }
        let r = try connection.send("announce", fields)
        guard !connection.json else { return }
        if let waiting = r["waiting"]?.numberValue, waiting > 0 {
            print("queued \(absoluteIfPresent(source)) (\(Int(waiting)) waiting)")
        } else {
            print("announcing \(absoluteIfPresent(source))")
        }
    }
}

struct Add: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Add files, directories (recursively, natural order) and M3U/M3U8/PLS playlists to the queue.")
    @OptionGroup var connection: Connection
    @Argument(help: "Paths.", completion: .file()) var paths: [String]
    func run() throws {
        let r = try connection.send("add", [("paths", .array(paths.map { .string(absolute($0)) }))])
        if !connection.json { print("added \(r["added"]?.arrayValue?.count ?? 0), queue length \(Int(r["length"]?.numberValue ?? 0))") }
    }
}

struct Insert: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Insert paths to play next.")
    @OptionGroup var connection: Connection
    @Argument(help: "Paths.", completion: .file()) var paths: [String]
    func run() throws {
        let r = try connection.send("insert", [("paths", .array(paths.map { .string(absolute($0)) }))])
        if !connection.json { print("inserted \(r["added"]?.arrayValue?.count ?? 0)") }
    }
}

struct Remove: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Remove a queue entry by id (or --index).")
    @OptionGroup var connection: Connection
    @Argument(help: "Entry id.") var id: Int?
    @Option(name: .long, help: "The entry at this position instead (1 is the first).") var index: Int?
    func validate() throws { if let index { _ = try queueIndex(index, "--index") } }
    func run() throws {
        guard let field = try id.map({ ("entry", JSON.int(Int64($0))) }) ?? index.map({ ("index", JSON.int(try queueIndex($0, "--index"))) }) else {
            throw ValidationError("give an id, or --index")
        }
        try connection.send("remove", [field])
    }
}

struct Move: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Move the queue entry at position FROM to position TO (1 is the first).")
    @OptionGroup var connection: Connection
    @Argument var from: Int
    @Argument var to: Int
    func validate() throws { _ = try queueIndex(from, "FROM"); _ = try queueIndex(to, "TO") }
    func run() throws {
        try connection.send("move", [("from", .int(try queueIndex(from, "FROM"))), ("to", .int(try queueIndex(to, "TO")))])
    }
}

struct Clear: PlainRequest {
    static let configuration = CommandConfiguration(abstract: "Empty the queue and stop.")
    static let request = "clear"
    @OptionGroup var connection: Connection
}

struct Queue: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "List the queue: position (from 1), [id], title, duration.")
    @OptionGroup var connection: Connection
    func run() throws {
        let r = try connection.send("queue")
        if connection.json { return }
        for e in r["queue"]?.arrayValue ?? [] {
            let mark = e["current"]?.boolValue == true ? ">" : " "
            let title = e["title"]?.shown ?? String((e["file"]?.shown ?? "?").split(separator: "/").last ?? "?")
            let artist = e["artist"]?.shown.map { "\($0) — " } ?? ""
            let dur = e["duration"]?.numberValue.map(formatClock) ?? "?:??"
            print("\(mark)\(position(e["index"])). [\(Int(e["entry"]?.numberValue ?? 0))] \(artist)\(title) (\(dur))")
        }
    }
}

struct Next: PlainRequest {
    static let configuration = CommandConfiguration(abstract: "Play the next queue entry.")
    static let request = "next"
    @OptionGroup var connection: Connection
}

struct Prev: PlainRequest {
    static let configuration = CommandConfiguration(abstract: "Play the previous queue entry.")
    static let request = "prev"
    @OptionGroup var connection: Connection
}

struct RepeatMode: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "repeat", abstract: "Repeat the queue: on, off, or one (the current entry).")
    enum Mode: String, ExpressibleByArgument, CaseIterable { case on, off, one }
    @OptionGroup var connection: Connection
    @Argument var mode: Mode
    func run() throws { try connection.send("repeat", [("mode", .string(mode.rawValue))]) }
}

struct SingleMode: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "single",
                                                    abstract: "After the current entry: stop (on), play it again with repeat on, or do that once (oneshot).")
    enum Mode: String, ExpressibleByArgument, CaseIterable { case on, off, oneshot }
    @OptionGroup var connection: Connection
    @Argument var mode: Mode
    func run() throws { try connection.send("single", [("mode", .string(mode.rawValue))]) }
}

enum Switch: String, ExpressibleByArgument, CaseIterable { case on, off }

/// A subcommand that sends one request without fields.
protocol PlainRequest: ParsableCommand {
    static var request: String { get }
    var connection: Connection { get }
}
extension PlainRequest {
    func run() throws { try connection.send(Self.request) }
}

/// A subcommand that turns an option on or off.
protocol SwitchRequest: ParsableCommand {
    static var request: String { get }
    var connection: Connection { get }
    var state: Switch { get }
}
extension SwitchRequest {
    func run() throws { try connection.send(Self.request, [("on", .bool(state == .on))]) }
}

struct Shuffle: SwitchRequest {
    static let configuration = CommandConfiguration(abstract: "Play the queue in random order: on or off.")
    static let request = "shuffle"
    @OptionGroup var connection: Connection
    @Argument var state: Switch
}

struct Consume: SwitchRequest {
    static let configuration = CommandConfiguration(abstract: "Remove entries once played: on or off.")
    static let request = "consume"
    @OptionGroup var connection: Connection
    @Argument var state: Switch
}

struct Pause: PlainRequest {
    static let configuration = CommandConfiguration(abstract: "Pause.")
    static let request = "pause"
    @OptionGroup var connection: Connection
}

struct Resume: PlainRequest {
    static let configuration = CommandConfiguration(abstract: "Resume.")
    static let request = "resume"
    @OptionGroup var connection: Connection
}

struct Toggle: PlainRequest {
    static let configuration = CommandConfiguration(abstract: "Pause or resume.")
    static let request = "toggle"
    @OptionGroup var connection: Connection
}

struct Stop: PlainRequest {
    static let configuration = CommandConfiguration(abstract: "Stop.")
    static let request = "stop"
    @OptionGroup var connection: Connection
}

struct Seek: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Seek to TIME (absolute or +/- relative).")
    @OptionGroup var connection: Connection
    // Captured unparsed so "-10" is a time, not an option.
    @Argument(parsing: .allUnrecognized, help: "TIME") var time: [String] = []
    func run() throws {
        guard time.count == 1 else { throw ValidationError("give one TIME, e.g. 83.5, 1:23.5, +10, -10 or 123456f") }
        let t = try parseTime(time[0])
        let r = try connection.send("seek", [("to", .object(t.json))])
        if !connection.json, let p = r["position"]?.numberValue { print("at \(formatClock(p))") }
    }
}

struct Loop: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Loop START END (half-open), or `loop off`.",
        discussion: "Playback runs …, END−1, START, START+1, … with no gap. With --count N it wraps N times, then plays on past END.")
    @OptionGroup var connection: Connection
    @Argument(help: "START and END, or off.") var points: [String]
    @Option(name: .long, help: "Wrap this many times, then play on (default: forever).") var count: Int?
    @Flag(name: .long, help: "Turn round at each end instead of jumping back.") var pingPong = false
    func run() throws {
        if points == ["off"] {
            try connection.send("loop", [("clear", .bool(true))])
            return
        }
        guard points.count == 2 else { throw ValidationError("give START END, or off") }
        let a = try parseTime(points[0]), b = try parseTime(points[1])
        var fields: [(String, JSON)] = [("start", .object(a.json)), ("end", .object(b.json))]
        if let c = count { fields.append(("count", .int(Int64(c)))) }
        if pingPong { fields.append(("ping_pong", .bool(true))) }
        let r = try connection.send("loop", fields)
        if !connection.json, let l = r["loop"], let s = l["start"]?.numberValue, let e = l["end"]?.numberValue {
            print("loop \(formatPrecise(s)) – \(formatPrecise(e))")
        }
    }
}

struct Direction: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Play forward or in reverse from the frame being heard.")
    enum Way: String, ExpressibleByArgument, CaseIterable { case forward, reverse }
    @OptionGroup var connection: Connection
    @Argument(help: "forward or reverse.") var way: Way
    func run() throws {
        try connection.send("direction", [("direction", .string(way.rawValue))])
    }
}

struct Volume: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show or set the volume: 40, +5 or -5 (0–100, software, ramped).")
    @OptionGroup var connection: Connection
    // Captured unparsed so "-5" is a change, not an option.
    @Argument(parsing: .allUnrecognized, help: "N, +N or -N; nothing to show it.") var value: [String] = []
    func run() throws {
        var fields: [(String, JSON)] = []
        guard value.count <= 1 else { throw ValidationError("give one value: N, +N or -N") }
        if let v = value.first {
            // Parsed only: the range is the command spec's, checked once, in the daemon,
            // with the error every client gets (issue 40).
            guard let n = Int(v) else { throw ValidationError("give N, +N or -N") }
            if v.hasPrefix("+") || v.hasPrefix("-") {
                fields = [("change", .int(Int64(n)))]
            } else {
                fields = [("set", .int(Int64(n)))]
            }
        }
        let r = try connection.send("volume", fields)
        if !connection.json {
            print("volume \(Int(r["volume"]?.numberValue ?? 0))" + (r["muted"]?.boolValue == true ? " (muted)" : ""))
        }
    }
}

struct CrossfadeCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "crossfade",
        abstract: "Show or set the cross-fade between tracks: SECONDS (0: off), and MixRamp (as mpc's crossfade and mixramp).")
    @OptionGroup var connection: Connection
    @Argument(help: "Seconds of overlap, 0–3600 (0: gapless); nothing to show the settings.") var seconds: Int?
    // .unconditional: "-17" is the value, not an option.
    @Option(name: .customLong("mixramp-db"), parsing: .unconditional, help: "MixRamp: the level in dB where the tracks meet (MPD's mixrampdb).")
    var mixrampDB: Double?
    @Option(name: .customLong("mixramp-delay"), parsing: .unconditional, help: "MixRamp: seconds taken off its overlap, or off (MPD's mixrampdelay).")
    var mixrampDelay: String?
    func run() throws {
        var fields: [(String, JSON)] = []
        if let s = seconds {
            // The range is the command spec's (checked in the daemon, issue 40).
            fields.append(("seconds", .int(Int64(s))))
        }
        if let db = mixrampDB {
            guard db.isFinite else { throw ValidationError("--mixramp-db needs a number") }
            fields.append(("mixramp_db", .number(db)))
        }
        if let d = mixrampDelay {
            if d == "off" {
                fields.append(("mixramp_delay", .null))
            } else {
                guard let v = Double(d), v.isFinite else { throw ValidationError("--mixramp-delay needs seconds or off") }
                fields.append(("mixramp_delay", .number(v)))
            }
        }
        let r = try connection.send("crossfade", fields)
        if !connection.json {
            let s = Int(r["seconds"]?.numberValue ?? 0)
            var line = s > 0 ? "crossfade \(s) s" : "crossfade off"
            let db = MPDStyle.number(r["mixramp_db"]?.numberValue ?? 0)
            if let delay = r["mixramp_delay"]?.numberValue {
                line += ", mixramp \(db) dB, delay \(MPDStyle.number(delay)) s"
            } else {
                line += ", mixramp off (\(db) dB)"
            }
            print(line)
        }
    }
}

struct Mute: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Mute, keeping the volume.")
    @OptionGroup var connection: Connection
    func run() throws { try connection.send("mute", [("muted", .bool(true))]) }
}

struct Unmute: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Unmute, back to the volume set.")
    @OptionGroup var connection: Connection
    func run() throws { try connection.send("mute", [("muted", .bool(false))]) }
}

struct Cover: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Save the current track's embedded cover art.")
    @OptionGroup var connection: Connection
    @Option(name: .long, help: "File to write (default: cover.jpg / cover.png by type).", completion: .file()) var out: String?
    func run() throws {
        let r = try connection.send("cover")
        if connection.json { return }
        guard let c = r["cover"], !c.isNull, let data = c["data"]?.shown, let bytes = Base64.decode(data) else {
            fail("the track has no embedded cover art", code: 1)
        }
        let mime = c["mime"]?.shown ?? ""
        let path = out ?? (mime == "image/png" ? "cover.png" : "cover.jpg")
        guard let f = PathBytes.withCPath(path, { fopen($0, "wb") }) else { fail("\(path): \(String(cString: strerror(errno)))", code: 1) }
        let written = bytes.withUnsafeBytes { fwrite($0.baseAddress, 1, $0.count, f) }
        fclose(f)
        guard written == bytes.count else { fail("\(path): short write", code: 1) }
        print("\(path): \(mime), \(bytes.count) bytes")
    }
}

struct Outputs: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List the outputs: the local device and the feeds (Snapcast FIFOs).")
    @OptionGroup var connection: Connection
    func run() throws {
        let r = try connection.send("outputs")
        if connection.json { return }
        for o in r["outputs"]?.arrayValue ?? [] {
            print(OutputView.render(o))
        }
    }
}

struct Output: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Enable or disable an output by name (see `playctl outputs`).",
        discussion: "A disabled feed gets nothing and closes its FIFO. The disabled local output stays open, silent, as the clock that paces the feeds.")
    enum Action: String, ExpressibleByArgument, CaseIterable { case enable, disable }
    @OptionGroup var connection: Connection
    @Argument(help: "enable or disable.") var action: Action
    @Argument(help: "The output's name, e.g. local or snapcast.") var name: String
    func run() throws {
        let r = try connection.send("output", [("name", .string(name)), ("enabled", .bool(action == .enable))])
        if !connection.json { print(OutputView.render(r)) }
    }
}

struct Status: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Show what is playing.")
    @OptionGroup var connection: Connection
    func run() throws {
        let s = try connection.send("status")
        if connection.json { return }
        print(StatusView.render(s))
        if let a = s["announcing"], !a.isNull, let source = a["source"]?.shown {
            let waiting = Int(a["waiting"]?.numberValue ?? 0)
            print("announcing: \(source) (\(a["mode"]?.shown ?? "duck"))" + (waiting > 0 ? ", \(waiting) waiting" : ""))
        }
        // Stopped with a queue: where it stands and what `play` would start (as mpc
        // shows the queue position).
        if s["file"]?.shown == nil, let length = s["queue"]?["length"]?.numberValue, length > 0 {
            let q = try connection.send("queue")
            let entries = q["queue"]?.arrayValue ?? []
            let nextID = s["queue"]?["next_id"]?.numberValue ?? s["queue"]?["current_id"]?.numberValue
            let next = entries.first { $0["entry"]?.numberValue == nextID } ?? entries.first
            var line = "queue: \(Int(length)) \(length == 1 ? "entry" : "entries")"
            if let n = next {
                let title = n["title"]?.shown ?? String((n["file"]?.shown ?? "?").split(separator: "/").last ?? "?")
                line += "; next: \(position(n["index"])). \(n["artist"]?.shown.map { "\($0) — " } ?? "")\(title)"
            }
            print(line)
        }
    }
}

struct Watch: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Print events as they come.")
    @OptionGroup var connection: Connection
    @Option(name: .long, help: "Also print the position every this many milliseconds.") var ticks: Int?
    func run() throws {
        let client = try connection.connect()
        var req: [(String, JSON)] = [("id", .int(1)), ("cmd", .string("subscribe"))]
        if let t = ticks { req.append(("ticks", .int(t))) }
        guard client.send(JSON.object(req).text) else { fail("playd closed the connection", code: 5) }
        while let line = client.readLine() {
            guard let e = try? JSON.parse(line) else { continue }
            if e["event"] == nil { continue }
            if connection.json { print(line) } else { print(describe(e)) }
            fflush(nil)
        }
    }

    func describe(_ e: JSON) -> String {
        switch e["event"]?.stringValue.flatMap(EventName.init(rawValue:)) {
        case .state: return "state: \(e["state"]?.shown ?? "?")"
        case .track: return "track: \(e["file"]?.shown ?? "?")"
        case .trackEnd: return "ended: \(e["file"]?.shown ?? "?")"
        case .position: return "position: \(formatClock(e["position"]?.numberValue ?? 0))"
        case .underrun: return "underruns: \(Int(e["underruns"]?.numberValue ?? 0))"
        case .loopWrapped: return "loop pass \(Int(e["passes"]?.numberValue ?? 0))"
        case .direction: return "direction: \(e["direction"]?.shown ?? "?")"
        case .skipped: return "skipped \(e["file"]?.shown ?? "?"): \(e["code"]?.shown ?? "?"): \(e["message"]?.shown ?? "")"
        case .queue: return "queue: \(Int(e["length"]?.numberValue ?? 0)) entries"
        case .volume: return "volume: \(Int(e["volume"]?.numberValue ?? 0))" + (e["muted"]?.boolValue == true ? " (muted)" : "")
        case .error: return "error: \(e["code"]?.shown ?? "?"): \(e["message"]?.shown ?? "")"
        case .buffering: return "buffering: \(e["file"]?.shown ?? "?")"
        case .metadata: return "title: \(e["stream_title"]?.shown ?? "")"
        case .reconnecting: return "reconnecting (attempt \(Int(e["attempt"]?.numberValue ?? 0))): \(e["cause"]?.shown ?? "")"
        case .reconnected: return "reconnected: \(e["file"]?.shown ?? "?")"
        default: return e.text
        }
    }
}

struct Ping: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Check that playd answers.")
    @OptionGroup var connection: Connection
    func run() throws {
        try connection.send("ping")
        if !connection.json { print("pong") }
    }
}

