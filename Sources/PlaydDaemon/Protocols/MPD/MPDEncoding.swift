import CoreStream
import PlaydProtocol
import PlaydSessions
#if canImport(Glibc)
import Glibc
#endif

/// How MPD's replies show the player: `status`, songs, library listings.
extension MPDCommands {
    /// A float as MPD prints one (`{}`: the shortest form that reads back, no ".0").
    static func shortest(_ v: Double) -> String {
        let t = Float(v).description
        return t.hasSuffix(".0") ? String(t.dropLast(2)) : t
    }

    /// A spec's reply in MPD's words. MPD's control commands answer only `OK`: what
    /// they changed is read with `status`, as MPD clients do.
    static func lines(_ reply: CommandSpec.Reply, _ p: Player, _ output: CommandSpec.Output = .init()) -> [String] {
        switch reply {
        case .status: return status(p)
        case .mpdLines, .mpdBinary: return output.lines
        case .jsonMembers: return []
        case .done, .current, .options, .level, .crossfade, .direction, .length, .queue, .name, .pong, .version, .output, .schedule: return []
        case .currentSong:
            let s = p.snapshot().status
            return song(p, p.heardEntries(s).current, path: s.track?.path)
        case .stats:
            let c = p.library?.counts() ?? (songs: 0, artists: 0, albums: 0, seconds: 0)
            return ["uptime: \((monotonicNanoseconds() - p.startedAt) / 1_000_000_000)", "playtime: \(p.playtimeSeconds)",
                    "artists: \(c.artists)", "albums: \(c.albums)", "songs: \(c.songs)",
                    "db_playtime: \(Int(c.seconds))", "db_update: \(p.library?.lastUpdate ?? 0)"]
        case .volume: return ["volume: \(p.currentLevel().volume)"]
        case .replayGainStatus: return ["replay_gain_mode: \(p.currentLevel().replayGain.rawValue)"]
        case .urlHandlers: return ["handler: http://", "handler: https://"]
        case .decoders: return ["plugin: ffmpeg"] + QueueSources.audioExtensions.sorted().map { "suffix: \($0)" }
        case .outputs:
            return p.snapshot().outputs.enumerated().flatMap { i, o in
                ["outputid: \(i)", "outputname: \(o.name)", "plugin: \(o.kind)", "outputenabled: \(o.enabled ? 1 : 0)"]
            }
        }
    }

    static func status(_ p: Player) -> [String] {
        let s = p.snapshot().status
        let queue = p.queue
        var lines = [
            "volume: \(p.config.mixer == "none" ? -1 : p.currentLevel().volume)",
            "repeat: \(queue.repeats ? 1 : 0)", "random: \(queue.shuffle ? 1 : 0)",
            "single: \(queue.single == .oneshot ? "oneshot" : queue.single == .on ? "1" : "0")", "consume: \(queue.consume ? 1 : 0)",
            "partition: default", "playlist: \(p.playlistVersion)", "playlistlength: \(queue.count)",
            "mixrampdb: \(shortest(p.crossfade.mixrampDB))",
            // A stream being connected to plays, as in MPD (its `play` is answered at once).
            "state: \(s.state == .playing || p.openingStream != nil ? "play" : s.state == .paused ? "pause" : "stop")",
        ]
        // MPD's order: xfade and mixrampdelay only when set.
        if p.crossfade.seconds > 0 { lines.append("xfade: \(p.crossfade.seconds)") }
        if p.crossfade.mixrampOn { lines.append("mixrampdelay: \(shortest(p.crossfade.mixrampDelay))") }
        let heard = p.heardEntries(s)
        if let i = heard.current {
            lines += ["song: \(i)", "songid: \(queue.entries[i].id)"]
        }
        // MPD 0.23's order and forms (PlayerCommands.cxx, checked against its replies):
        // time, elapsed, bitrate, duration (only when known), audio; times in whole
        // milliseconds (MPD keeps them so: 59.9995 s is "59.999"), `time:` rounds them to
        // seconds; `audio:` is the decoder's format, not the device's (a 16-bit FLAC is
        // 44100:16:2 where the device takes floats).
        if let t = s.track, s.state != .stopped {
            let elapsedMS = FrameTime.rescaleFloor(max(0, s.positionFrames), 1000, Int64(t.sampleRate))
            let durationMS = t.isLive ? nil : t.durationFrames.map { FrameTime.rescaleFloor($0, 1000, Int64(t.sampleRate)) }
            func roundS(_ ms: Int64) -> Int64 { (ms + 500) / 1000 }
            lines += ["time: \(roundS(elapsedMS)):\(durationMS.map(roundS) ?? 0)", "elapsed: \(milliseconds(elapsedMS))",
                      "bitrate: \((t.bitRate ?? 0) / 1000)"]
            if let d = durationMS, d > 0 { lines.append("duration: \(milliseconds(d))") }
            lines.append("audio: \(t.sampleRate):\(t.bitsPerSample.map { "\($0)" } ?? "f"):\(t.channels)")
        }
        if p.libraryJob != 0 { lines.append("updating_db: \(p.libraryJob)") }
        // MPD's `error:` line, which mpc prints as "ERROR: …": the output is gone.
        if let loss = p.outputLoss {
            lines.append("error: \(loss.error.message)")
        } else if let attempt = p.streamReconnecting {
            // A station that dropped: MPD has no word for it; `error:` is what MPD clients
            // show (mpc: "ERROR: …"), and it goes once the stream is back.
            lines.append("error: reconnecting to the stream (attempt \(attempt) of \(p.config.streamReconnects))")
        }
        if let n = heard.next {
            lines += ["nextsong: \(n)", "nextsongid: \(queue.entries[n].id)"]
        }
        return lines
    }

    /// MPD's tag types in MPD's order (`tagtypes`), each with the FFmpeg tag keys
    /// (lowercased: Vorbis comments, ID3v2 as libavformat names them, MP4 atoms) that
    /// fill it. A song's tags are listed in this order.
    static let tagTypes: [(name: String, keys: [String])] = [
        ("Artist", ["artist"]), ("ArtistSort", ["artistsort", "artist-sort", "sort_artist"]),
        ("Album", ["album"]), ("AlbumSort", ["albumsort", "album-sort", "sort_album"]),
        ("AlbumArtist", ["album_artist", "albumartist", "album artist"]),
        ("AlbumArtistSort", ["albumartistsort", "album_artist-sort", "sort_album_artist"]),
        ("Title", ["title"]), ("Track", ["track", "tracknumber"]), ("Name", ["name"]), ("Genre", ["genre"]),
        ("Date", ["date"]), ("OriginalDate", ["originaldate", "original_date"]), ("Composer", ["composer"]),
        ("ComposerSort", ["composersort", "composer-sort", "sort_composer"]), ("Performer", ["performer"]),
        ("Conductor", ["conductor"]), ("Work", ["work"]), ("Movement", ["movement", "movementname"]),
        ("MovementNumber", ["movementnumber"]), ("Ensemble", ["ensemble"]), ("Location", ["location"]),
        ("Grouping", ["grouping"]), ("Disc", ["disc", "discnumber"]), ("Label", ["label", "publisher"]),
        ("MUSICBRAINZ_ARTISTID", ["musicbrainz_artistid"]), ("MUSICBRAINZ_ALBUMID", ["musicbrainz_albumid"]),
        ("MUSICBRAINZ_ALBUMARTISTID", ["musicbrainz_albumartistid"]), ("MUSICBRAINZ_TRACKID", ["musicbrainz_trackid"]),
        ("MUSICBRAINZ_RELEASETRACKID", ["musicbrainz_releasetrackid"]), ("MUSICBRAINZ_WORKID", ["musicbrainz_workid"]),
    ]

    /// MPD's `Last-Modified:` form: UTC, seconds.
    static func isoTime(_ seconds: Int) -> String {
        var t = time_t(seconds), tm = tm()
        gmtime_r(&t, &tm)
        func two(_ v: Int32) -> String { v < 10 ? "0\(v)" : "\(v)" }
        return "\(Int(tm.tm_year) + 1900)-\(two(tm.tm_mon + 1))-\(two(tm.tm_mday))T\(two(tm.tm_hour)):\(two(tm.tm_min)):\(two(tm.tm_sec))Z"
    }

    /// A song as MPD lists it: `file`, `Last-Modified`, `Format`, the tags in MPD's
    /// order, `Time` and `duration`; a value's line breaks become spaces.
    static func songLines(_ p: Player, _ file: String, _ info: SongInfo) -> [String] {
        var lines = ["file: \(uri(p, file))"]
        if let m = info.modified { lines.append("Last-Modified: \(isoTime(m))") }
        if let f = info.format { lines.append("Format: \(f)") }
        lines += tagLines(info.tags)
        if let d = info.duration { lines += durationLines(d) }
        return lines
    }

    /// `tags` as MPD's tag lines, in ``tagTypes``' order, leaving out `except`.
    /// Control characters in the values are blanked on the way out (MPDSession.Reply).
    static func tagLines(_ tags: [String: String], except: String? = nil) -> [String] {
        tagTypes.compactMap { name, keys in
            guard name != except, let v = keys.lazy.compactMap({ tags[$0] }).first, !v.isEmpty else { return nil }
            return "\(name): \(v)"
        }
    }

    static func song(_ p: Player, _ index: Int?, path: String?) -> [String] {
        let queue = p.queue
        guard let file = index.map({ queue.entries[$0].path }) ?? path else { return [] }
        var lines: [String]
        let playing = p.snapshot().status.track
        if let t = playing, t.path == file, NetworkInput.isStreamURL(file) {
            // A radio, as MPD shows one: the ICY title whole as Title, the station as Name.
            lines = ["file: \(uri(p, file))"]
            if let title = p.streamTitle {
                lines.append("Title: \(title)")
            } else {
                // No ICY title: the stream's own tags, as MPD shows an Ogg stream's
                // Vorbis comments (Artist and Title both; Title alone was shown).
                lines += tagLines(t.tags, except: "Name")
            }
            if let name = t.stationName ?? t.tags["name"] { lines.append("Name: \(name)") }
            if let d = t.durationSeconds, !t.isLive { lines += durationLines(d) }
        } else {
            lines = songLines(p, file, p.songInfo(file))
        }
        if let i = index {
            lines += ["Pos: \(i)", "Id: \(queue.entries[i].id)"]
            if queue.entries[i].priority > 0 { lines.append("Prio: \(queue.entries[i].priority)") }
        }
        return lines
    }

    /// MPD's song filter (the `filter` kind reads it; `list` too, after its own rule):
    /// `TAG VALUE` pairs, or one expression of `==`/`contains` terms joined by ` AND `.
    static func filters(_ a: [String]) throws(PlayerError) -> [FilterTerm] {
        if a.count == 1, a[0].hasPrefix("(") {
            var out: [FilterTerm] = []
            var text = a[0]
            if text.hasPrefix("((") { text = String(text.dropFirst().dropLast()) }
            for part in Self.split(text, on: " AND ") {
                let p = String(part.drop { "( ".contains($0) }.reversed().drop { ") ".contains($0) }.reversed())
                guard let (field, value) = Self.pair(p, " == ") ?? Self.pair(p, " contains ") else {
                    throw PlayerError(.badRequest, "Unsupported filter expression: \(part)")
                }
                var v = value
                if v.count >= 2, let f = v.first, f == "'" || f == "\"", v.last == f { v = String(v.dropFirst().dropLast()) }
                out.append(FilterTerm(field.lowercased(), String(v.filter { $0 != "\\" })))
            }
            return out
        }
        guard a.count % 2 == 0 else { throw PlayerError(.badRequest, "Incorrect number of filter arguments") }
        return stride(from: 0, to: a.count, by: 2).map { FilterTerm(a[$0].lowercased(), a[$0 + 1]) }
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
        var info = SongInfo()
        info.duration = s.duration
        info.modified = s.modified
        if let rate = s.sampleRate, let width = s.width, let channels = s.channels { info.format = "\(rate):\(width):\(channels)" }
        for (key, value) in [("title", s.title), ("artist", s.artist), ("album", s.album), ("album_artist", s.albumArtist),
                             ("track", s.track.map(String.init)), ("disc", s.disc.map(String.init)),
                             ("date", s.date), ("genre", s.genre)] {
            if let v = value { info.tags[key] = v }
        }
        return songLines(p, s.path, info)
    }

    /// The stored playlists as `lsinfo` lists them at the top (after the songs).
    static func storedPlaylistLines(_ p: Player) -> [String] {
        p.storedPlaylists.list().flatMap { ["playlist: \($0.name)", "Last-Modified: \(isoTime($0.modified))"] }
    }

    /// `lsinfo`: the folders and songs in a music-root folder, from the library index
    /// (a music root always has one: `library.music_roots` makes it), so nothing here
    /// reads the disk on the control thread. No roots: nothing to list.
    static func lsinfo(_ p: Player, _ target: String) throws(PlayerError) -> [String] {
        guard let library = p.library else { return [] }
        do {
            // A song's URI lists that song (as MPD).
            if !target.isEmpty, let song = try library.find([(field: "file", value: path(p, target), prefix: false)]).first {
                return librarySong(p, song)
            }
            let (dirs, songs) = try library.ls(target.isEmpty ? nil : path(p, target))
            // MPD's order (Directory::Walk): the songs, then the subfolders, then
            // (at the top) the stored playlists.
            return songs.flatMap { librarySong(p, $0) } + dirs.map { "directory: \(uri(p, $0))" }
                + (target.isEmpty || target == "/" ? storedPlaylistLines(p) : [])
        } catch {
            throw PlayerError(.stream(.fileNotFound), "No such directory")
        }
    }

    /// Whole milliseconds as MPD prints a time: `59.999`.
    static func milliseconds(_ ms: Int64) -> String {
        "\(ms / 1000)." + String(String(1000 + ms % 1000).dropFirst())
    }

    /// A song's `Time:` and `duration:` lines as MPD writes them: the length in whole
    /// milliseconds (truncated, as MPD keeps it: 59.9995 s is 59.999, where rounding
    /// said 60.000), `Time:` that rounded to seconds. (The 1e-6 keeps a length of whole
    /// milliseconds whole after the division that made it a Double.)
    static func durationLines(_ seconds: Double) -> [String] {
        guard seconds.isFinite, seconds >= 0, seconds < 1e12 else { return [] }
        let ms = Int64((seconds * 1000 + 1e-6).rounded(.down))
        return ["Time: \((ms + 500) / 1000)", "duration: \(milliseconds(ms))"]
    }

    /// The library songs `find` (exact) or `search` (case-insensitive, anywhere)
    /// selects with the filter's terms (at least one: the kind sees to it).
    static func matchingSongs(_ p: Player, _ filters: [FilterTerm], exact: Bool) throws(PlayerError) -> [LibrarySong] {
        guard let library = p.library else { throw PlayerError(.noLibrary, "No database") }
        var songs: [LibrarySong]
        do {
            if exact {
                // `file` names a song by its URI, relative to the music directory.
                songs = try library.find(filters.map { (field: $0.tag == "any" ? "title" : $0.tag,
                                                         value: $0.tag == "file" ? path(p, $0.value) : $0.value, prefix: false) })
                return songs
            }
            // MPD's search: case-insensitive, anywhere in the field ("any": any field).
            songs = try library.search(filters.first?.value ?? "")
        } catch {
            throw PlayerError(any: error)
        }
        for term in filters {
            let (name, v) = (term.tag, term.value.lowercased())
            songs = songs.filter { s in
                let fieldValues: [String?] = name == "any"
                    ? [s.title, s.artist, s.album, s.albumArtist, s.genre, s.path]
                    : [name == "file" ? uri(p, s.path) : field(s, name)]
                return fieldValues.contains { $0?.lowercased().contains(v) == true }
            }
        }
        return songs
    }

    /// `find`, `search`, `findadd`, `searchadd`.
    static func find(_ p: Player, _ terms: [FilterTerm], exact: Bool, add: Bool) throws(PlayerError) -> [String] {
        let songs = try matchingSongs(p, terms, exact: exact)
        if add {
            if !songs.isEmpty { try p.perform(.add(sources: songs.map(\.path), place: .end)) }
            return []
        }
        return songs.flatMap { librarySong(p, $0) }
    }

    /// `count [FILTER…] [group TAG]`: songs and whole seconds, per value of TAG when
    /// grouped (MPD's Count.cxx: values sorted bytewise, a song without the tag counted
    /// under the empty value after its fallbacks, e.g. AlbumArtist → Artist).
    static func count(_ p: Player, _ terms: [FilterTerm], group: String?) throws(PlayerError) -> [String] {
        let songs: [LibrarySong]
        if terms.isEmpty {
            guard let library = p.library else { throw PlayerError(.noLibrary, "No database") }
            do { songs = try library.find([]) } catch { throw PlayerError(any: error) }
        } else {
            songs = try matchingSongs(p, terms, exact: true)
        }
        guard let group else { return stats(songs) }
        var groups: [String: [LibrarySong]] = [:]
        for s in songs { groups[groupValue(s, group) ?? "", default: []].append(s) }
        return groups.keys.sorted { Array($0.utf8).lexicographicallyPrecedes(Array($1.utf8)) }.flatMap { key in
            ["\(group): \(key)"] + stats(groups[key]!)
        }
    }

    /// `songs:` and `playtime:` as MPD sums them: milliseconds per song, then whole
    /// seconds of the total (floored).
    static func stats(_ songs: [LibrarySong]) -> [String] {
        var millis: Int64 = 0
        for s in songs {
            // Checked before the conversion: the index is ours, but a trap is a dead daemon.
            if let d = s.duration, d.isFinite, d > 0, d < 1e12 { millis &+= Int64((d * 1000).rounded(.down)) }
        }
        return ["songs: \(songs.count)", "playtime: \(millis / 1000)"]
    }

    /// A song's value for a `group` tag, with MPD's fallbacks (VisitFallback.hxx).
    static func groupValue(_ s: LibrarySong, _ tag: String) -> String? {
        switch tag {
        case "Artist", "ArtistSort": return s.artist
        case "Album", "AlbumSort": return s.album
        case "AlbumArtist", "AlbumArtistSort": return s.albumArtist ?? s.artist
        case "Title": return s.title
        case "Genre": return s.genre
        case "Date", "OriginalDate": return s.date
        case "Track": return s.track.map { "\($0)" }
        case "Disc": return s.disc.map { "\($0)" }
        default: return nil   // tags the index does not keep
        }
    }

    /// `listall`/`listallinfo`: everything under a folder, as MPD walks its database:
    /// a folder's songs, then each subfolder (`directory:`) followed by its contents.
    static func listAll(_ p: Player, _ target: String, info: Bool) throws(PlayerError) -> [String] {
        guard let library = p.library else { throw PlayerError(.noLibrary, "No database") }
        var lines: [String] = []
        func walk(_ folder: String?) throws {
            let (dirs, songs) = try library.ls(folder)
            for s in songs { lines += info ? librarySong(p, s) : ["file: \(uri(p, s.path))"] }
            for d in dirs {
                lines.append("directory: \(uri(p, d))")
                try walk(d)
            }
        }
        do {
            if !target.isEmpty, let song = try library.find([(field: "file", value: path(p, target), prefix: false)]).first {
                return info ? librarySong(p, song) : ["file: \(uri(p, song.path))"]
            }
            try walk(target.isEmpty ? nil : path(p, target))
        } catch {
            throw PlayerError(.stream(.fileNotFound), "No such directory")
        }
        return lines
    }

    /// The queue entries a filter selects (`playlistfind`: exact; `playlistsearch`:
    /// case-insensitive, anywhere), as `playlistinfo` shows them.
    static func queueFind(_ p: Player, _ filters: [FilterTerm], exact: Bool) throws(PlayerError) -> [String] {
        try p.probeForListing(p.queue.entries.lazy.map(\.path))
        var lines: [String] = []
        for (i, e) in p.queue.entries.enumerated() {
            let info = p.songInfo(e.path)
            let matches = filters.allSatisfy { term in
                let (name, value) = (term.tag, term.value)
                let values: [String]
                switch name {
                case "file": values = [uri(p, e.path)]
                // Any tag; the file name is not a tag (as MPD).
                case "any": values = tagTypes.compactMap { t in t.keys.lazy.compactMap { info.tags[$0] }.first }
                default:
                    guard let t = tagTypes.first(where: { $0.name.lowercased() == name }) else { return false }
                    values = t.keys.compactMap { info.tags[$0] }.prefix(1).map { $0 }
                }
                return values.contains { exact ? $0 == value : $0.lowercased().contains(value.lowercased()) }
            }
            if matches { lines += song(p, i, path: nil) }
        }
        return lines
    }

    /// `list TAG [FILTER…]`, and MPD's old `list album ARTIST`.
    static func list(_ p: Player, _ tag: String, _ words: [String]) throws(PlayerError) -> [String] {
        guard let library = p.library else { throw PlayerError(.noLibrary, "No database") }
        let what = tag.lowercased()
        var rest = words
        // Old syntax: "list album ARTIST".
        if what == "album" && rest.count == 1 && !rest[0].hasPrefix("(") { rest = ["artist", rest[0]] }
        let filters = try filters(rest).map { (field: $0.tag, value: $0.value) }
        let key = what == "albumartist" ? "AlbumArtist" : what.prefix(1).uppercased() + what.dropFirst()
        do {
            return try library.list(what, filters: filters).map { "\(key): \($0)" }
        } catch {
            throw PlayerError(any: error)
        }
    }
}
