import CoreStream
import PlaydProtocol
#if canImport(Glibc)
import Glibc
#endif

/// MPD's commands on playd's engine and queue. Runs on the control thread, like the
/// JSON requests, so both protocols see one player: a `playctl` change wakes an MPD
/// client's `idle player` and the other way round.
extension Daemon {
    typealias Failure = MPDSession.Failure

    static let mpdCommands = ["add", "addid", "clear", "close", "commands", "consume", "currentsong", "decoders", "delete",
                              "deleteid", "disableoutput", "enableoutput", "idle", "listplaylists", "load", "lsinfo", "move", "next", "noidle", "notcommands",
                              "outputs", "password", "pause", "ping", "play", "playid", "playlistid", "playlistinfo",
                              "plchanges", "previous", "random", "repeat", "seek", "seekcur", "seekid", "setvol", "single",
                              "stats", "status", "stop", "tagtypes", "toggleoutput", "urlhandlers", "volume"]

    func mpdExecute(_ command: String, _ args: [String]) throws(Failure) -> [String] {
        do {
            return try mpdRun(command, args)
        } catch let f as Failure {
            throw f
        } catch let e as StreamError {
            throw Failure(e.code == .fileNotFound ? .noExist : .system, e.message)
        } catch let e as RequestError {
            throw Failure(e.code == .notPlaying ? .playerSync : .arg, e.message)
        } catch {
            throw Failure(.system, "\(error)")
        }
    }

    private func mpdRun(_ command: String, _ a: [String]) throws -> [String] {
        func count(_ range: ClosedRange<Int>) throws {
            guard range.contains(a.count) else { throw Failure(.arg, "wrong number of arguments for \"\(command)\"") }
        }
        func int(_ i: Int) throws -> Int {
            guard let v = Int(a[i]) else { throw Failure(.arg, "Integer expected: \(a[i])") }
            return v
        }
        func bool(_ i: Int) throws -> Bool {
            guard a[i] == "0" || a[i] == "1" else { throw Failure(.arg, "Boolean (0/1) expected: \(a[i])") }
            return a[i] == "1"
        }
        func position(_ i: Int) throws -> Int {
            let p = try int(i)
            guard p >= 0 && p < queue.count else { throw Failure(.arg, "Bad song index") }
            return p
        }
        func id(_ i: Int) throws -> Int {
            guard let index = queue.index(ofID: try int(i)) else { throw Failure(.noExist, "No such song") }
            return index
        }
        switch command {
        case "ping": try count(0...0); return []
        case "status": return mpdStatus()
        case "currentsong": return mpdSong(queue.current, path: engine.status().track?.path)
        case "stats":
            return ["artists: 0", "albums: 0", "songs: 0", "uptime: \((monotonicNanoseconds() - startedAt) / 1_000_000_000)",
                    "db_playtime: 0", "db_update: 0", "playtime: 0"]
        case "play":
            try count(0...1)
            if a.isEmpty { _ = try playQueue(.obj()) } else { playEntry(try position(0)) }
        case "playid":
            try count(0...1)
            if a.isEmpty { _ = try playQueue(.obj()) } else { playEntry(try id(0)) }
        case "pause":
            try count(0...1)
            if a.isEmpty { engine.toggle() } else if try bool(0) { engine.pause() } else { engine.resume() }
        case "stop": try count(0...0); engine.stop()
        case "next": _ = try queueRequest("next", .obj())
        case "previous": _ = try queueRequest("prev", .obj())
        case "seek", "seekid":
            try count(2...2)
            let index = command == "seek" ? try position(0) : try id(0)
            if queue.current != index || engine.status().state == .stopped { playEntry(index) }
            try mpdSeek(a[1], relativeAllowed: false)
        case "seekcur": try count(1...1); try mpdSeek(a[0], relativeAllowed: true)
        case "setvol":
            try count(1...1)
            let v = try int(0)
            guard (0...100).contains(v) else { throw Failure(.arg, "Invalid volume value") }
            try mpdVolume(v)
        case "volume":
            try count(1...1)
            try mpdVolume(min(100, max(0, currentLevel().volume + (try int(0)))))
        case "repeat", "single":
            try count(1...1)
            let on = try bool(0)
            let single = command == "single" ? on : queue.repeatMode == .one
            let repeatOn = command == "repeat" ? on : queue.repeatMode != .off
            // playd has off, on and one; single without repeat plays the current one again too.
            queue.repeatMode = single ? .one : (repeatOn ? .on : .off)
            queueChanged()
            notifyMPD(["options"])
        case "random": try count(1...1); queue.setShuffle(try bool(0)); queueChanged(); notifyMPD(["options"])
        case "consume": try count(1...1); queue.consume = try bool(0); queueChanged(); notifyMPD(["options"])
        case "add", "addid":
            try count(command == "add" ? 1...1 : 1...2)
            let files = try QueueSources.expand(mpdPath(a[0]))
            if command == "add" { queue.add(files); queueChanged(); return [] }
            let at = a.count == 2 ? try int(1) : nil
            let ids = queue.add(files, at: at)
            queueChanged()
            return ids.prefix(1).map { "Id: \($0)" }
        case "delete":
            try count(1...1)
            let (lo, hi) = try mpdRange(a[0])
            for i in (lo..<hi).reversed() { _ = try queueRequest("remove", .obj(("index", .int(Int64(i))))) }
        case "deleteid": try count(1...1); _ = try queueRequest("remove", .obj(("index", .int(Int64(try id(0))))))
        case "clear": _ = try queueRequest("clear", .obj())
        case "move":
            try count(2...2)
            let (lo, hi) = try mpdRange(a[0])
            guard hi - lo == 1 else { throw Failure(.arg, "playd moves one song at a time") }
            _ = try queueRequest("move", .obj(("from", .int(Int64(lo))), ("to", .int(Int64(try position(1))))))
        case "playlistinfo", "playlistid":
            try count(0...1)
            var range = 0..<queue.count
            if let first = a.first {
                if command == "playlistid" { let i = try id(0); range = i..<(i + 1) } else {
                    let (lo, hi) = try mpdRange(first)
                    range = lo..<hi
                }
            }
            return range.flatMap { mpdSong($0, path: nil) }
        case "plchanges":
            try count(1...2)
            return (try int(0)) == playlistVersion ? [] : (0..<queue.count).flatMap { mpdSong($0, path: nil) }
        case "lsinfo": try count(0...1); return try mpdList(a.first ?? "")
        case "listplaylists": return []
        case "load":
            try count(1...2)
            queue.add(try QueueSources.expand(mpdPath(a[0])))
            queueChanged()
        case "outputs":
            try count(0...0)
            return engine.outputs().enumerated().flatMap { i, o in
                ["outputid: \(i)", "outputname: \(o.name)", "plugin: \(o.kind)", "outputenabled: \(o.enabled ? 1 : 0)"]
            }
        case "enableoutput", "disableoutput", "toggleoutput":
            try count(1...1)
            let list = engine.outputs()
            let i = try int(0)
            guard i >= 0 && i < list.count else { throw Failure(.noExist, "No such audio output") }
            let on = command == "enableoutput" ? true : command == "disableoutput" ? false : !list[i].enabled
            try engine.setOutputEnabled(list[i].name, on)
            saveState()
        case "commands": return Self.mpdCommands.map { "command: \($0)" }
        case "notcommands": return []
        case "tagtypes": return ["Artist", "Album", "AlbumArtist", "Title", "Track", "Disc", "Date", "Genre"].map { "tagtype: \($0)" }
        case "urlhandlers": return []
        case "decoders":
            return ["plugin: ffmpeg"] + QueueSources.audioExtensions.sorted().map { "suffix: \($0)" }
        default:
            throw Failure(.unknown, "unknown command \"\(command)\"")
        }
        return []
    }

    // MARK: - Pieces

    private func mpdStatus() -> [String] {
        let s = engine.status()
        var lines = [
            "volume: \(config.mixer == "none" ? -1 : currentLevel().volume)",
            "repeat: \(queue.repeatMode == .off ? 0 : 1)", "random: \(queue.shuffle ? 1 : 0)",
            "single: \(queue.repeatMode == .one ? 1 : 0)", "consume: \(queue.consume ? 1 : 0)",
            "partition: default", "playlist: \(playlistVersion)", "playlistlength: \(queue.count)", "mixrampdb: 0",
            "state: \(s.state == .playing ? "play" : s.state == .paused ? "pause" : "stop")",
        ]
        if let i = queue.current {
            lines += ["song: \(i)", "songid: \(queue.entries[i].id)"]
        }
        if let n = queue.successor(), s.state != .stopped {
            lines += ["nextsong: \(n)", "nextsongid: \(queue.entries[n].id)"]
        }
        if let t = s.track, s.state != .stopped {
            let elapsed = s.positionSeconds
            let duration = t.durationSeconds ?? 0
            lines += ["time: \(Int(elapsed.rounded())):\(Int(duration.rounded()))",
                      "elapsed: \(Self.decimals(elapsed))", "duration: \(Self.decimals(duration))",
                      "bitrate: \((t.bitRate ?? 0) / 1000)"]
            if let o = s.output {
                let bits = o.sampleFormat == .float32 ? "f" : o.sampleFormat == .int32 ? "32" : "16"
                lines.append("audio: \(o.pcm.sampleRate):\(bits):\(o.pcm.channels)")
            }
        }
        return lines
    }

    /// The `file:`-first block for queue entry `index`, or for `path` outside the queue.
    private func mpdSong(_ index: Int?, path: String?) -> [String] {
        guard let file = index.map({ queue.entries[$0].path }) ?? path else { return [] }
        var lines = ["file: \(mpdURI(file))"]
        let playing = engine.status().track
        if let t = playing, t.path == file {
            for (key, value) in [("Title", t.title), ("Artist", t.artist), ("Album", t.album), ("AlbumArtist", t.albumArtist),
                                 ("Track", t.trackNumber.map(String.init)), ("Disc", t.discNumber.map(String.init)),
                                 ("Date", t.date), ("Genre", t.genre)] {
                if let v = value { lines.append("\(key): \(v)") }
            }
            if let d = t.durationSeconds { lines += ["Time: \(Int(d.rounded()))", "duration: \(Self.decimals(d))"] }
        } else {
            let p = probeSummary(file)
            if let t = p.title { lines.append("Title: \(t)") }
            if let a = p.artist { lines.append("Artist: \(a)") }
            if let d = p.duration { lines += ["Time: \(Int(d.rounded()))", "duration: \(Self.decimals(d))"] }
        }
        if let i = index { lines += ["Pos: \(i)", "Id: \(queue.entries[i].id)"] }
        return lines
    }

    private func mpdSeek(_ text: String, relativeAllowed: Bool) throws {
        let s = engine.status()
        guard let t = s.track, s.state != .stopped else { throw Failure(.playerSync, "Not playing") }
        let relative = text.hasPrefix("+") || text.hasPrefix("-")
        guard !relative || relativeAllowed, let v = Double(text), v.isFinite else { throw Failure(.arg, "Time expected: \(text)") }
        var frame = FrameTime.frames(seconds: abs(v), rate: t.sampleRate) * (v < 0 ? -1 : 1)
        if relative { frame += s.positionFrames }
        frame = max(0, min(frame, t.durationFrames ?? Int64.max))
        try engine.seek(to: frame)
        notifyMPD(["player"])
    }

    private func mpdVolume(_ v: Int) throws {
        guard config.mixer != "none" else { throw Failure(.system, "No mixer") }
        var level = currentLevel()
        level.volume = v
        try applyLevel(level)
    }

    /// "N" or "START:END" (END exclusive; open END = the end of the queue).
    private func mpdRange(_ text: String) throws -> (Int, Int) {
        let parts = text.split(separator: ":", omittingEmptySubsequences: false)
        guard let lo = Int(parts[0]), lo >= 0 else { throw Failure(.arg, "Bad song index") }
        let hi = parts.count == 2 ? (parts[1].isEmpty ? queue.count : Int(parts[1]) ?? -1) : lo + 1
        guard hi > lo, hi <= queue.count else { throw Failure(.arg, "Bad song index") }
        return (lo, hi)
    }

    /// The music directory MPD URIs are relative to: the first `library.music_roots`.
    private var mpdRoot: String? { config.musicRoots.first.map { $0.hasSuffix("/") ? String($0.dropLast()) : $0 } }

    private func mpdPath(_ uri: String) -> String {
        if uri.hasPrefix("/") { return uri }
        if uri.hasPrefix("file://") { return String(uri.dropFirst(7)) }
        return (mpdRoot ?? "") + "/" + uri
    }

    private func mpdURI(_ path: String) -> String {
        if let root = mpdRoot, path.hasPrefix(root + "/") { return String(path.dropFirst(root.count + 1)) }
        return path
    }

    /// `lsinfo`: the folders and audio files in a music-root folder.
    private func mpdList(_ uri: String) throws -> [String] {
        guard let root = mpdRoot else { return [] }
        let dir = uri.isEmpty ? root : mpdPath(uri)
        guard let names = QueueSources.names(in: dir) else { throw Failure(.noExist, "No such directory") }
        var lines: [String] = []
        for name in names.sorted(by: QueueSources.naturalLess) {
            let full = dir + "/" + name
            var st = stat()
            guard stat(full, &st) == 0 else { continue }
            if (st.st_mode & S_IFMT) == S_IFDIR {
                lines.append("directory: \(mpdURI(full))")
            } else if QueueSources.audioExtensions.contains(String(name.split(separator: ".").last ?? "").lowercased()) {
                lines.append("file: \(mpdURI(full))")
            }
        }
        return lines
    }

    /// Wakes MPD clients idling on `subsystems`. Any thread.
    func notifyMPD(_ subsystems: Set<String>) {
        server?.post { [weak self] in self?.server.notifySessions(subsystems) }
    }

    private static func decimals(_ v: Double) -> String {
        let ms = Int((v * 1000).rounded())
        return "\(ms / 1000)." + String(String(1000 + ms % 1000).dropFirst())
    }
}
