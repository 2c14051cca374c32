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
                              "deleteid", "disableoutput", "enableoutput", "find", "findadd", "idle", "list", "listplaylists", "load", "lsinfo", "move", "next", "noidle", "notcommands",
                              "outputs", "password", "pause", "ping", "play", "playid", "playlistid", "playlistinfo",
                              "plchanges", "previous", "random", "repeat", "rescan", "search", "searchadd", "seek", "seekcur", "seekid", "setvol", "single",
                              "stats", "status", "stop", "tagtypes", "toggleoutput", "update", "urlhandlers", "volume"]

    func mpdExecute(_ command: String, _ args: [String]) throws(Failure) -> [String] {
        do {
            return try mpdRun(command, args)
        } catch let f as Failure {
            throw f
        } catch let e as StreamError {
            switch e.code {
            case .fileNotFound: throw Failure(.noExist, e.message)
            case .outsideRoots: throw Failure(.permission, e.message)
            case .tooLarge: throw Failure(.playlistMax, e.message)
            case .invalidArgument: throw Failure(.arg, e.message)
            default: throw Failure(.system, e.message)
            }
        } catch let e as RequestError {
            switch e.code {
            case .notPlaying: throw Failure(.playerSync, e.message)
            case .outsideLibrary: throw Failure(.permission, e.message)
            case .tooLarge: throw Failure(.playlistMax, e.message)
            case .updateRunning: throw Failure(.updateAlready, e.message)
            default: throw Failure(.arg, e.message)
            }
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
            let c = library?.counts() ?? (songs: 0, artists: 0, albums: 0, seconds: 0)
            return ["artists: \(c.artists)", "albums: \(c.albums)", "songs: \(c.songs)",
                    "uptime: \((monotonicNanoseconds() - startedAt) / 1_000_000_000)",
                    "db_playtime: \(Int(c.seconds))", "db_update: 0", "playtime: 0"]
        case "update", "rescan":
            try count(0...1)
            guard library != nil else { throw Failure(.system, "No database") }
            let r = try libraryRequest("update", a.isEmpty ? .obj() : .obj(("path", .string(mpdPath(a[0])))))
            return ["updating_db: \(Int(r.first?.1.numberValue ?? 0))"]
        case "find", "search", "findadd", "searchadd":
            guard let library else { throw Failure(.system, "No database") }
            let filters = try mpdFilters(a)
            guard !filters.isEmpty else { throw Failure(.arg, "Incorrect number of filter arguments") }
            var songs: [LibrarySong]
            if command.hasPrefix("find") {
                songs = try library.find(filters.map { (field: $0.0 == "any" ? "title" : $0.0, value: $0.1, prefix: false) })
            } else {
                // MPD's search: case-insensitive, anywhere in the field ("any": any field).
                songs = try library.search(filters[0].1)
                for (field, value) in filters {
                    let v = value.lowercased()
                    songs = songs.filter { s in
                        let fieldValues: [String?] = field == "any"
                            ? [s.title, s.artist, s.album, s.albumArtist, s.genre, s.path]
                            : [Self.mpdField(s, field)]
                        return fieldValues.contains { $0?.lowercased().contains(v) == true }
                    }
                }
            }
            if command.hasSuffix("add") {
                try checkRoom(songs.count)
                queue.add(songs.map(\.path))
                queueChanged()
                return []
            }
            return songs.flatMap(mpdLibrarySong)
        case "list":
            guard let library else { throw Failure(.system, "No database") }
            guard let what = a.first?.lowercased() else { throw Failure(.arg, "Missing argument") }
            var rest = Array(a.dropFirst())
            // Old syntax: "list album ARTIST".
            if what == "album" && rest.count == 1 && !rest[0].hasPrefix("(") { rest = ["artist", rest[0]] }
            let filters = try mpdFilters(rest).map { (field: $0.0, value: $0.1) }
            let key = what == "albumartist" ? "AlbumArtist" : what.prefix(1).uppercased() + what.dropFirst()
            return try library.list(what, filters: filters).map { "\(key): \($0)" }
        case "play":
            try count(0...1)
            if a.isEmpty { _ = try playQueue(.obj()) } else { playEntry(try position(0)) }
        case "playid":
            try count(0...1)
            if a.isEmpty { _ = try playQueue(.obj()) } else { playEntry(try id(0)) }
        case "pause":
            try count(0...1)
            transport(a.isEmpty ? "toggle" : try bool(0) ? "pause" : "resume")
        case "stop": try count(0...0); transport("stop")
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
            // Checked before the addition: `volume 9223372036854775807` overflowed here.
            let change = try int(0)
            guard (-100...100).contains(change) else { throw Failure(.arg, "Number out of range: \(a[0])") }
            try mpdVolume(min(100, max(0, currentLevel().volume + change)))
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
            let files = admitAll(try QueueSources.expand(try admit(mpdPath(a[0])), limits: sourceLimits())).kept
            try checkRoom(files.count)
            if command == "add" { queue.add(files); queueChanged(); return [] }
            let at = a.count == 2 ? try int(1) : nil
            if let at, !(0...queue.count).contains(at) { throw Failure(.arg, "Bad song index") }
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
            let files = admitAll(try QueueSources.expand(try admit(mpdPath(a[0])), limits: sourceLimits())).kept
            try checkRoom(files.count)
            queue.add(files)
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
        let s = playerStatus()
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
        if let job = library?.scanningJobID, job != 0 { lines.append("updating_db: \(job)") }
        // MPD's `error:` line, which mpc prints as "ERROR: …": the output is gone.
        if let r = recovery { lines.append("error: \(String(r.error.message.map { $0 == "\n" ? " " : $0 }))") }
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
        // Range-checked before any conversion: `seekcur 1e300` trapped here.
        guard let magnitude = FrameTime.checkedFrames(seconds: abs(v), rate: t.sampleRate) else {
            throw Failure(.arg, "Time out of range: \(text)")
        }
        var frame = magnitude * (v < 0 ? -1 : 1)
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
        // `lo < queue.count` before `lo + 1`: a range of Int.max overflowed here.
        guard parts.count <= 2, let lo = Int(parts[0]), lo >= 0, lo < queue.count else { throw Failure(.arg, "Bad song index") }
        let hi = parts.count == 2 ? (parts[1].isEmpty ? queue.count : Int(parts[1]) ?? -1) : lo + 1
        guard hi > lo, hi <= queue.count else { throw Failure(.arg, "Bad song index") }
        return (lo, hi)
    }

    /// The music directory MPD URIs are relative to: the first `library.music_roots`.
    private var mpdRoot: String? {
        library?.roots.first ?? config.musicRoots.first.map { $0.hasSuffix("/") ? String($0.dropLast()) : $0 }
    }

    private func mpdPath(_ uri: String) -> String {
        if uri.hasPrefix("/") { return uri }
        if uri.hasPrefix("file://") { return String(uri.dropFirst(7)) }
        return (mpdRoot ?? "") + "/" + uri
    }

    private func mpdURI(_ path: String) -> String {
        if let root = mpdRoot, path.hasPrefix(root + "/") { return String(path.dropFirst(root.count + 1)) }
        return path
    }

    /// `find`/`search` arguments: TYPE VALUE pairs, or one filter expression
    /// `(TYPE == 'VALUE')` (MPD 0.21), several joined with AND.
    private func mpdFilters(_ a: [String]) throws -> [(String, String)] {
        if a.count == 1, a[0].hasPrefix("(") {
            var out: [(String, String)] = []
            var text = a[0]
            if text.hasPrefix("((") { text = String(text.dropFirst().dropLast()) }
            for part in Self.split(text, on: " AND ") {
                let p = String(part.drop { "( ".contains($0) }.reversed().drop { ") ".contains($0) }.reversed())
                guard let (field, value) = Self.pair(p, " == ") ?? Self.pair(p, " contains ") else {
                    throw Failure(.arg, "Unsupported filter expression: \(part)")
                }
                var v = value
                if v.count >= 2, let f = v.first, f == "'" || f == "\"", v.last == f { v = String(v.dropFirst().dropLast()) }
                out.append((field.lowercased(), String(v.filter { $0 != "\\" })))
            }
            return out
        }
        guard a.count % 2 == 0 else { throw Failure(.arg, "Incorrect number of filter arguments") }
        return stride(from: 0, to: a.count, by: 2).map { (a[$0].lowercased(), a[$0 + 1]) }
    }

    /// `text` split at every `separator`.
    static func split(_ text: String, on separator: String) -> [String] {
        var parts: [String] = []
        var rest = Substring(text)
        while let r = rest.firstRange(of: separator) {
            parts.append(String(rest[..<r.lowerBound]))
            rest = rest[r.upperBound...]
        }
        parts.append(String(rest))
        return parts
    }

    /// `text` cut at the first `separator` into two, if it has one.
    static func pair(_ text: String, _ separator: String) -> (String, String)? {
        guard let r = text.firstRange(of: separator) else { return nil }
        return (String(text[..<r.lowerBound]), String(text[r.upperBound...]))
    }

    private static func mpdField(_ s: LibrarySong, _ field: String) -> String? {
        switch field {
        case "artist": return s.artist
        case "album": return s.album
        case "albumartist": return s.albumArtist
        case "title": return s.title
        case "genre": return s.genre
        case "date": return s.date
        case "file": return s.path
        default: return nil
        }
    }

    /// A library song as `lsinfo`/`find` list it.
    private func mpdLibrarySong(_ s: LibrarySong) -> [String] {
        var lines = ["file: \(mpdURI(s.path))"]
        for (key, value) in [("Title", s.title), ("Artist", s.artist), ("Album", s.album), ("AlbumArtist", s.albumArtist),
                             ("Track", s.track.map(String.init)), ("Disc", s.disc.map(String.init)),
                             ("Date", s.date), ("Genre", s.genre)] {
            if let v = value { lines.append("\(key): \(v)") }
        }
        if let d = s.duration { lines += ["Time: \(Int(d.rounded()))", "duration: \(Self.decimals(d))"] }
        return lines
    }

    /// `lsinfo`: the folders and audio files in a music-root folder (from the library
    /// index, with tags, when there is one).
    private func mpdList(_ uri: String) throws -> [String] {
        if let library {
            do {
                let (dirs, songs) = try library.ls(uri.isEmpty ? nil : mpdPath(uri))
                return dirs.map { "directory: \(mpdURI($0))" } + songs.flatMap(mpdLibrarySong)
            } catch {
                throw Failure(.noExist, "No such directory")
            }
        }
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
