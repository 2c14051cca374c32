import CoreStream
#if canImport(Glibc)
import Glibc
#endif

/// Turns what a user gives `add` into file paths: files as they are, directories
/// walked recursively in natural order ("2 Song" before "10 Song"), and M3U/M3U8/PLS
/// playlists read line by line (relative entries against the playlist's directory).
enum QueueSources {
    typealias Error = StreamError

    /// File name extensions taken from directories (playlists and explicit files may
    /// name anything: an unplayable entry is reported and skipped when its turn comes).
    static let audioExtensions: Set<String> = ["flac", "mp3", "m4a", "m4b", "mp4", "aac", "ogg", "oga", "opus",
                                                "wav", "wv", "ape", "aif", "aiff", "alac", "wma", "mka", "mpc", "caf"]

    /// How much one `add` may bring in.
    struct Limits {
        /// Entries in all (the room left in the queue): more is `too_large`.
        var maxEntries = 16_384
        /// Bytes of one playlist file.
        var playlistBytes = 4 << 20
        /// Entries of one playlist file.
        var playlistEntries = 10_000
        /// How a playlist on a web server is fetched (`streams.timeout`).
        var stream = StreamOptions()
    }

    /// What one `add` brings in: the files, and how many entries were left out for
    /// leading out of the music roots.
    struct Collected: Sendable {
        var files: [String]
        var refused: Int
    }

    /// Every source admitted (``SourceAdmission``), expanded (folders walked,
    /// playlists read) and what the expansion found admitted again. Thread: any; file
    /// I/O of a duration nobody bounds (a large folder, a slow disk): the player runs it
    /// on its walker thread when ``fansOut(_:)``.
    static func collect(_ sources: [String], admission: SourceAdmission, limits: Limits) throws -> Collected {
        var files: [String] = []
        for p in sources {
            var l = limits
            l.maxEntries = max(0, limits.maxEntries - files.count)
            files += try expand(try admission.admit(p), limits: l)
        }
        let (kept, refused) = admission.admitAll(files)
        return Collected(files: kept, refused: refused)
    }

    /// Whether collecting `sources` goes to the walker, as it may take long: more than
    /// one source, a playlist, or a relative path (resolved against the music roots).
    /// One absolute path is read on a thread of its own (``Player/collect(_:)``), where
    /// a folder is told from a file (``isFolder(_:)``); this looks at no disk.
    static func fansOut(_ sources: [String]) -> Bool {
        guard sources.count == 1, let p = sources.first else { return true }
        if NetworkInput.isStreamURL(p) { return isPlaylist(p) }
        guard p.hasPrefix("/") else { return true }
        return ["m3u", "m3u8", "pls"].contains(fileExtension(p))
    }

    /// Whether `path` is a folder (a stat: off the control thread).
    static func isFolder(_ path: String) -> Bool {
        var st = stat()
        return PathBytes.stat(path, &st) == 0 && (st.st_mode & S_IFMT) == S_IFDIR
    }

    static func expand(_ path: String, limits: Limits = Limits()) throws(Error) -> [String] {
        // A stream URL is an entry as it is (opened when it plays, off the control
        // thread), unless it names a playlist: a radio's .pls/.m3u link is fetched.
        if NetworkInput.isStreamURL(path) {
            guard isPlaylist(path) else { return [path] }
            return try remotePlaylist(path, limits)
        }
        var st = stat()
        guard PathBytes.stat(path, &st) == 0 else {
            // LocalFile gives the answer outside the roots the same way for files that
            // exist and files that do not.
            _ = try LocalFile.openRegular(path)
            throw StreamError(.fileNotFound, "\(path): no such file")
        }
        if (st.st_mode & S_IFMT) == S_IFDIR {
            var seen: Set<[UInt64]> = []
            var out: [String] = []
            var visited = 0
            try walk(path, &seen, &out, &visited, limits.maxEntries)
            return out
        }
        let entries: [String]
        switch fileExtension(path) {
        case "m3u", "m3u8": entries = try playlist(path, limits) { line in line.hasPrefix("#") ? nil : line }
        case "pls":
            entries = try playlist(path, limits) { line in
                // FileN=path
                guard line.lowercased().hasPrefix("file"), let eq = line.firstIndex(of: "=") else { return nil }
                return String(line[line.index(after: eq)...])
            }
        default:
            // A single file is checked when it plays (and listed by a probe that refuses
            // FIFOs and devices); refused here already when it is not a regular file.
            guard (st.st_mode & S_IFMT) == S_IFREG else {
                throw StreamError(.notRegularFile, "\(path): not a regular file (a FIFO, socket or device)")
            }
            return [path]
        }
        guard entries.count <= limits.maxEntries else { throw tooMany(path, limits.maxEntries) }
        return entries
    }

    private static func tooMany(_ path: String, _ n: Int) -> Error {
        StreamError(.tooLarge, "\(path): more than \(n) entries (the room left in the queue, limits.max_queue_length); nothing was added")
    }

    /// Whether `path` (a file or a URL, its query left aside) names an M3U/M3U8/PLS.
    static func isPlaylist(_ path: String) -> Bool {
        let bare = NetworkInput.isStreamURL(path) ? String(path.prefix { $0 != "?" && $0 != "#" }) : path
        return ["m3u", "m3u8", "pls"].contains(fileExtension(bare))
    }

    /// A playlist on a web server (a radio's link): fetched within `streams.timeout` and
    /// `limits.max_playlist_size`, and only its http(s) entries kept, relative ones
    /// against the playlist's URL: a playlist from the network never names a local file.
    /// An HLS playlist (`#EXT-X-` lines) is refused: its entries are segments.
    private static func remotePlaylist(_ url: String, _ limits: Limits) throws(Error) -> [String] {
        let bytes = try NetworkInput.fetch(url, limit: limits.playlistBytes, options: limits.stream)
        let text = PathBytes.text(bytes[...])
        if text.contains("#EXT-X-") {
            throw StreamError(.unsupportedFormat, "\(url): an HLS playlist, which playd does not play")
        }
        let pls = fileExtension(String(url.prefix { $0 != "?" && $0 != "#" })) == "pls"
        let dir = String(url[..<(url.lastIndex(of: "/") ?? url.endIndex)])
        let origin: String = {
            guard let r = url.firstRange(of: "://"), let slash = url[r.upperBound...].firstIndex(of: "/") else { return url }
            return String(url[..<slash])
        }()
        var out: [String] = []
        for raw in text.split(whereSeparator: { $0 == "\n" || $0 == "\r" }) {
            var line = trim(raw, " \t\u{FEFF}")
            if pls {
                guard line.lowercased().hasPrefix("file"), let eq = line.firstIndex(of: "=") else { continue }
                line = trim(line[line.index(after: eq)...], " \t")
            } else if line.hasPrefix("#") {
                continue
            }
            guard !line.isEmpty, !line.contains("\0") else { continue }
            let entry: String
            if NetworkInput.isStreamURL(line) { entry = line }
            else if NetworkInput.hasScheme(line) { continue }  // file:, ftp:, …: never from the network
            else if line.hasPrefix("/") { entry = origin + line }
            else { entry = dir + "/" + line }
            out.append(entry)
            guard out.count <= limits.playlistEntries else {
                throw StreamError(.tooLarge, "\(url): more than \(limits.playlistEntries) entries (limits.max_playlist_entries); nothing was added")
            }
        }
        guard !out.isEmpty else { throw StreamError(.notAudio, "\(url): a playlist with no http(s) entries") }
        return out
    }

    private static func trim(_ s: Substring, _ set: String) -> String {
        String(s.drop { set.contains($0) }.reversed().drop { set.contains($0) }.reversed())
    }

    private static func fileExtension(_ path: String) -> String {
        let name = path.split(separator: "/").last.map(String.init) ?? path
        guard let dot = name.lastIndex(of: "."), dot != name.startIndex else { return "" }
        return name[name.index(after: dot)...].lowercased()
    }

    /// Names looked at in one folder walk, at most: `add /` with no music roots would
    /// otherwise walk the whole file system on the control thread. 200,000 names take
    /// about 0.3 s to stat here; a larger music folder is what the library is for.
    static let maxNamesVisited = 200_000

    /// Audio files (regular files only) under `dir`, natural order, each directory once
    /// (symlink loops); more than `max` files, or more than ``maxNamesVisited`` names
    /// looked at, is `too_large`.
    private static func walk(_ dir: String, _ seen: inout Set<[UInt64]>, _ out: inout [String],
                             _ visited: inout Int, _ max: Int) throws(Error) {
        var st = stat()
        guard PathBytes.stat(dir, &st) == 0, seen.insert([UInt64(st.st_dev), UInt64(st.st_ino)]).inserted,
              let names = names(in: dir) else { return }
        visited += names.count
        guard visited <= maxNamesVisited else {
            throw StreamError(.tooLarge, "\(dir): more than \(maxNamesVisited) names to look at; add a smaller folder, or use the library")
        }
        for name in names.sorted(by: naturalLess) {
            let p = dir.hasSuffix("/") ? dir + name : dir + "/" + name
            var s = stat()
            guard PathBytes.stat(p, &s) == 0 else { continue }
            if (s.st_mode & S_IFMT) == S_IFDIR {
                try walk(p, &seen, &out, &visited, max)
            } else if (s.st_mode & S_IFMT) == S_IFREG, audioExtensions.contains(fileExtension(p)) {
                out.append(p)
                if out.count > max { throw tooMany(dir, max) }
            }
        }
    }

    /// The names in `dir` but hidden ones, unsorted; nil when it cannot be read.
    static func names(in dir: String) -> [String]? {
        guard let d = PathBytes.opendir(dir) else { return nil }
        defer { closedir(d) }
        var names: [String] = []
        while let e = readdir(d) {
            let name = PathBytes.name(of: e)
            if !name.hasPrefix(".") { names.append(name) }
        }
        return names
    }

    /// A playlist's entries. The file is read through ``LocalFile`` (a regular file,
    /// at most `limits.playlistBytes`: `ln -s /dev/zero z.m3u` grew 1.5 GB in 3 s
    /// before), and gives at most `limits.playlistEntries` entries.
    private static func playlist(_ path: String, _ limits: Limits, _ entry: (String) -> String?) throws(Error) -> [String] {
        let bytes = try LocalFile.read(path, limit: limits.playlistBytes)
        let base = path.contains("/") ? String(path[..<path.lastIndex(of: "/")!]) : "."
        var out: [String] = []
        for raw in bytes.split(separator: 0x0A, omittingEmptySubsequences: true) {
            // A NUL byte ends a C path early: such a line names no file.
            if raw.contains(0) { continue }
            var text = PathBytes.text(raw)
            if text.hasPrefix("\u{FEFF}") { text.removeFirst() }
            while let last = text.last, last.isNewline || last == " " { text.removeLast() }
            guard !text.isEmpty, let e = entry(text), !e.isEmpty else { continue }
            if e.hasPrefix("file://") { out.append(String(e.dropFirst(7))) } else if NetworkInput.hasScheme(e) {
                // A URL (a radio's stream): kept, and admitted or refused with the rest.
                out.append(e)
            } else {
                out.append(e.hasPrefix("/") ? e : base + "/" + e)
            }
            guard out.count <= limits.playlistEntries else {
                throw StreamError(.tooLarge, "\(path): more than \(limits.playlistEntries) entries (limits.max_playlist_entries); nothing was added")
            }
        }
        return out
    }

    /// Natural order: digit runs compare as numbers, the rest case-insensitively.
    static func naturalLess(_ a: String, _ b: String) -> Bool {
        var i = a.unicodeScalars.makeIterator(), j = b.unicodeScalars.makeIterator()
        var x = i.next(), y = j.next()
        func isDigit(_ c: Unicode.Scalar?) -> Bool { c.map { $0.value >= 48 && $0.value <= 57 } ?? false }
        while let cx = x, let cy = y {
            if isDigit(cx) && isDigit(cy) {
                var nx = "", ny = ""
                while isDigit(x) { nx.unicodeScalars.append(x!); x = i.next() }
                while isDigit(y) { ny.unicodeScalars.append(y!); y = j.next() }
                let tx = nx.drop { $0 == "0" }, ty = ny.drop { $0 == "0" }
                if tx.count != ty.count { return tx.count < ty.count }
                if tx != ty { return tx < ty }
                continue
            }
            let lx = Character(cx).lowercased(), ly = Character(cy).lowercased()
            if lx != ly { return lx < ly }
            x = i.next()
            y = j.next()
        }
        if x == nil && y == nil { return a < b }
        return x == nil
    }
}
