import CoreStream
import PlaydProtocol
#if canImport(Glibc)
import Glibc
#endif

/// How MPD's replies show the player: `status`, songs, library listings.
extension MPDCommands {
    static func status(_ p: Player) -> [String] {
        let s = p.playerStatus()
        let queue = p.queue
        var lines = [
            "volume: \(p.config.mixer == "none" ? -1 : p.currentLevel().volume)",
            "repeat: \(queue.repeats ? 1 : 0)", "random: \(queue.shuffle ? 1 : 0)",
            "single: \(queue.single == .oneshot ? "oneshot" : queue.single == .on ? "1" : "0")", "consume: \(queue.consume ? 1 : 0)",
            "partition: default", "playlist: \(p.playlistVersion)", "playlistlength: \(queue.count)", "mixrampdb: 0",
            // A stream being connected to plays, as in MPD (its `play` is answered at once).
            "state: \(s.state == .playing || p.openingStream != nil ? "play" : s.state == .paused ? "pause" : "stop")",
        ]
        if let i = queue.current {
            lines += ["song: \(i)", "songid: \(queue.entries[i].id)"]
        }
        if let n = queue.successor(), s.state != .stopped {
            lines += ["nextsong: \(n)", "nextsongid: \(queue.entries[n].id)"]
        }
        if let t = s.track, s.state != .stopped {
            let elapsed = s.positionSeconds
            let duration = t.isLive ? 0 : t.durationSeconds ?? 0
            lines += ["time: \(Int(elapsed.rounded())):\(Int(duration.rounded()))", "elapsed: \(decimals(elapsed))"]
            // A live stream has no duration line (as MPD).
            if !t.isLive { lines.append("duration: \(decimals(duration))") }
            lines.append("bitrate: \((t.bitRate ?? 0) / 1000)")
            if let o = s.output {
                let bits = o.sampleFormat == .float32 ? "f" : o.sampleFormat == .int32 ? "32" : "16"
                lines.append("audio: \(o.pcm.sampleRate):\(bits):\(o.pcm.channels)")
            }
        }
        if let job = p.library?.scanningJobID, job != 0 { lines.append("updating_db: \(job)") }
        // MPD's `error:` line, which mpc prints as "ERROR: …": the output is gone.
        if let loss = p.outputLoss { lines.append("error: \(String(loss.error.message.map { $0 == "\n" ? " " : $0 }))") }
        return lines
    }

    static func song(_ p: Player, _ index: Int?, path: String?) -> [String] {
        let queue = p.queue
        guard let file = index.map({ queue.entries[$0].path }) ?? path else { return [] }
        var lines = ["file: \(uri(p, file))"]
        let playing = p.engine.status().track
        if let t = playing, t.path == file, NetworkInput.isStreamURL(file) {
            // A radio, as MPD shows one: the ICY title whole as Title, the station as Name.
            if let title = p.streamTitle ?? t.title { lines.append("Title: \(title)") }
            if let name = t.stationName ?? t.tags["name"] { lines.append("Name: \(name)") }
            if let d = t.durationSeconds, !t.isLive { lines += ["Time: \(Int(d.rounded()))", "duration: \(decimals(d))"] }
        } else if let t = playing, t.path == file {
            for (key, value) in [("Title", t.title), ("Artist", t.artist), ("Album", t.album), ("AlbumArtist", t.albumArtist),
                                 ("Track", t.trackNumber.map(String.init)), ("Disc", t.discNumber.map(String.init)),
                                 ("Date", t.date), ("Genre", t.genre)] {
                if let v = value { lines.append("\(key): \(v)") }
            }
            if let d = t.durationSeconds { lines += ["Time: \(Int(d.rounded()))", "duration: \(decimals(d))"] }
        } else {
            let summary = p.probeSummary(file)
            if let t = summary.title { lines.append("Title: \(t)") }
            if let a = summary.artist { lines.append("Artist: \(a)") }
            if let d = summary.duration { lines += ["Time: \(Int(d.rounded()))", "duration: \(decimals(d))"] }
        }
        if let i = index { lines += ["Pos: \(i)", "Id: \(queue.entries[i].id)"] }
        return lines
    }

    static func filters(_ a: [String]) throws -> [(String, String)] {
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

    static func field(_ s: LibrarySong, _ field: String) -> String? {
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
    static func librarySong(_ p: Player, _ s: LibrarySong) -> [String] {
        var lines = ["file: \(uri(p, s.path))"]
        for (key, value) in [("Title", s.title), ("Artist", s.artist), ("Album", s.album), ("AlbumArtist", s.albumArtist),
                             ("Track", s.track.map(String.init)), ("Disc", s.disc.map(String.init)),
                             ("Date", s.date), ("Genre", s.genre)] {
            if let v = value { lines.append("\(key): \(v)") }
        }
        if let d = s.duration { lines += ["Time: \(Int(d.rounded()))", "duration: \(decimals(d))"] }
        return lines
    }

    /// `lsinfo`: the folders and audio files in a music-root folder (from the library
    /// index, with tags, when there is one).
    static func lsinfo(_ p: Player, _ target: String) throws -> [String] {
        if let library = p.library {
            do {
                let (dirs, songs) = try library.ls(target.isEmpty ? nil : path(p, target))
                return dirs.map { "directory: \(uri(p, $0))" } + songs.flatMap { librarySong(p, $0) }
            } catch {
                throw Failure(.noExist, "No such directory")
            }
        }
        guard let root = root(p) else { return [] }
        let dir = target.isEmpty ? root : path(p, target)
        guard let names = QueueSources.names(in: dir) else { throw Failure(.noExist, "No such directory") }
        var lines: [String] = []
        for name in names.sorted(by: QueueSources.naturalLess) {
            let full = dir + "/" + name
            var st = stat()
            guard PathBytes.stat(full, &st) == 0 else { continue }
            if (st.st_mode & S_IFMT) == S_IFDIR {
                lines.append("directory: \(uri(p, full))")
            } else if QueueSources.audioExtensions.contains(String(name.split(separator: ".").last ?? "").lowercased()) {
                lines.append("file: \(uri(p, full))")
            }
        }
        return lines
    }

    static func decimals(_ v: Double) -> String {
        let ms = Int((v * 1000).rounded())
        return "\(ms / 1000)." + String(String(1000 + ms % 1000).dropFirst())
    }

    /// `find`, `search`, `findadd`, `searchadd`.
    static func find(_ p: Player, _ a: [String], command: String) throws -> [String] {
        guard let library = p.library else { throw Failure(.system, "No database") }
        let filters = try filters(a)
        guard !filters.isEmpty else { throw Failure(.arg, "Incorrect number of filter arguments") }
        var songs: [LibrarySong]
        if command.hasPrefix("find") {
            songs = try library.find(filters.map { (field: $0.0 == "any" ? "title" : $0.0, value: $0.1, prefix: false) })
        } else {
            // MPD's search: case-insensitive, anywhere in the field ("any": any field).
            songs = try library.search(filters[0].1)
            for (name, value) in filters {
                let v = value.lowercased()
                songs = songs.filter { s in
                    let fieldValues: [String?] = name == "any"
                        ? [s.title, s.artist, s.album, s.albumArtist, s.genre, s.path]
                        : [field(s, name)]
                    return fieldValues.contains { $0?.lowercased().contains(v) == true }
                }
            }
        }
        if command.hasSuffix("add") {
            if !songs.isEmpty { try p.perform(.add(sources: songs.map(\.path), place: .end)) }
            return []
        }
        return songs.flatMap { librarySong(p, $0) }
    }

    static func list(_ p: Player, _ a: [String]) throws -> [String] {
        guard let library = p.library else { throw Failure(.system, "No database") }
        guard let what = a.first?.lowercased() else { throw Failure(.arg, "Missing argument") }
        var rest = Array(a.dropFirst())
        // Old syntax: "list album ARTIST".
        if what == "album" && rest.count == 1 && !rest[0].hasPrefix("(") { rest = ["artist", rest[0]] }
        let filters = try filters(rest).map { (field: $0.0, value: $0.1) }
        let key = what == "albumartist" ? "AlbumArtist" : what.prefix(1).uppercased() + what.dropFirst()
        return try library.list(what, filters: filters).map { "\(key): \($0)" }
    }
}
