import CoreStream
#if canImport(Glibc)
import Glibc
#endif

/// Named playlists kept by the daemon (MPD's stored playlists): one M3U file per name in
/// a folder (`library.playlist_directory`), one line per entry, local files relative to
/// the first music root as MPD writes them, URLs as they are. MPD reads these files, and
/// playd reads MPD's.
///
/// Every read is capped (`limits.max_playlist_size`, `limits.max_playlist_entries`); a
/// name is one path component. Writes go to a temporary file renamed over the old one,
/// so a crash leaves the old list or the new one. Control thread.
public struct StoredPlaylists: Sendable {
    public struct Error: Swift.Error, Sendable {
        public enum Code: Sendable { case badName, noSuchPlaylist, exists, badIndex, tooLarge, io }
        public var code: Code
        public var message: String
        init(_ code: Code, _ message: String) { self.code = code; self.message = message }
    }

    public let directory: String
    /// The music root entries are written relative to (nil: absolute paths).
    public let root: String?
    public var maxBytes: Int
    public var maxEntries: Int

    public init(directory: String, root: String?, maxBytes: Int, maxEntries: Int) {
        self.directory = directory
        self.root = root
        self.maxBytes = maxBytes
        self.maxEntries = maxEntries
    }

    /// A name MPD would take: not empty, one path component, no line breaks, and short
    /// enough that `.NAME.m3u.tmp`, the file written first, fits in 255 bytes.
    public static func checkName(_ name: String) throws(Error) {
        guard !name.isEmpty, name != ".", name != "..", !name.contains("/"), !name.contains("\n"), !name.contains("\r"),
              !name.contains("\0"), name.utf8.count <= 246 else {
            throw Error(.badName, "Bad playlist name")
        }
    }

    func file(_ name: String) throws(Error) -> String {
        try Self.checkName(name)
        return directory + "/" + name + ".m3u"
    }

    public func exists(_ name: String) -> Bool {
        guard let f = try? file(name) else { return false }
        var st = stat()
        return PathBytes.stat(f, &st) == 0 && (st.st_mode & S_IFMT) == S_IFREG
    }

    /// The playlists, by name, with their modification times (seconds since 1970).
    public func list() -> [(name: String, modified: Int)] {
        guard let names = QueueSources.names(in: directory) else { return [] }
        var out: [(String, Int)] = []
        for n in names where n.hasSuffix(".m3u") && n.count > 4 {
            var st = stat()
            guard PathBytes.stat(directory + "/" + n, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG else { continue }
            out.append((String(n.dropLast(4)), Int(st.st_mtim.tv_sec)))
            if out.count >= maxEntries { break }
        }
        return out.sorted { $0.0 < $1.0 }
    }

    /// The entries of `name`: absolute paths and URLs.
    public func read(_ name: String) throws(Error) -> [String] {
        let f = try file(name)
        let bytes: [UInt8]
        do {
            bytes = try LocalFile.read(f, limit: maxBytes, withinRoots: false)
        } catch {
            if error.code == .fileNotFound { throw Error(.noSuchPlaylist, "No such playlist") }
            if error.code == .tooLarge { throw Error(.tooLarge, "\(name): larger than \(maxBytes) bytes (limits.max_playlist_size)") }
            throw Error(.io, "\(name): \(error.message)")
        }
        var entries: [String] = []
        for line in PathBytes.text(bytes).split(whereSeparator: { $0 == "\n" || $0 == "\r\n" || $0 == "\r" }) {
            let s = String(line)
            if s.isEmpty || s.hasPrefix("#") { continue }
            guard entries.count < maxEntries else {
                throw Error(.tooLarge, "\(name): more than \(maxEntries) entries (limits.max_playlist_entries)")
            }
            entries.append(absolute(s))
        }
        return entries
    }

    /// An entry as a path playd plays: a URL or an absolute path as it is, a relative
    /// one under the root.
    func absolute(_ entry: String) -> String {
        if entry.hasPrefix("/") || NetworkInput.hasScheme(entry) { return entry }
        return (root ?? "") + "/" + entry
    }

    /// An entry as the file holds it: relative to the root when under it.
    func relative(_ path: String) -> String {
        if let r = root, path.hasPrefix(r + "/") { return String(path.dropFirst(r.count + 1)) }
        return path
    }

    /// Writes `entries` as `name` (made or replaced).
    public func write(_ name: String, _ entries: [String]) throws(Error) {
        let f = try file(name)
        guard entries.count <= maxEntries else {
            throw Error(.tooLarge, "\(name): more than \(maxEntries) entries (limits.max_playlist_entries)")
        }
        let text = entries.map { relative($0) + "\n" }.joined()
        guard text.utf8.count <= maxBytes else {
            throw Error(.tooLarge, "\(name): larger than \(maxBytes) bytes (limits.max_playlist_size)")
        }
        if PathBytes.withCPath(directory, { mkdir($0, 0o755) }) != 0 && errno != EEXIST {
            throw Error(.io, "\(directory): cannot make the playlist folder: \(String(cString: strerror(errno)))")
        }
        let temp = directory + "/.\(name).m3u.tmp"
        let bytes = PathBytes.bytes(text)
        let fd = PathBytes.withCPath(temp) { Glibc.open($0, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0o644) }
        guard fd >= 0 else { throw Error(.io, "\(temp): \(String(cString: strerror(errno)))") }
        var written = 0
        while written < bytes.count {
            let n = bytes[written...].withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { close(fd); Self.unlink(temp); throw Error(.io, "\(temp): \(String(cString: strerror(errno)))") }
            written += n
        }
        let synced = fsync(fd) == 0
        close(fd)
        guard synced, Self.rename(temp, f) == 0 else {
            Self.unlink(temp)
            throw Error(.io, "\(f): cannot write the playlist: \(String(cString: strerror(errno)))")
        }
    }

    /// A new playlist from `entries`; one that exists is not replaced (as MPD's `save`).
    public func save(_ name: String, _ entries: [String]) throws(Error) {
        guard !exists(name) else { try Self.checkName(name); throw Error(.exists, "Playlist already exists") }
        try write(name, entries)
    }

    /// Adds `entries` at `position` (nil: the end), making the playlist when there is none.
    public func insert(_ name: String, _ entries: [String], at position: Int? = nil) throws(Error) {
        var list = exists(name) ? try read(name) : []
        let at = position ?? list.count
        guard at >= 0, at <= list.count else { throw Error(.badIndex, "Bad position") }
        list.insert(contentsOf: entries, at: at)
        try write(name, list)
    }

    public func clear(_ name: String) throws(Error) {
        guard exists(name) else { try Self.checkName(name); throw Error(.noSuchPlaylist, "No such playlist") }
        try write(name, [])
    }

    /// Removes the entries in `range`.
    public func delete(_ name: String, _ range: Range<Int>) throws(Error) {
        var entries = try read(name)
        guard range.lowerBound >= 0, range.upperBound <= entries.count, !range.isEmpty else { throw Error(.badIndex, "Bad song index") }
        entries.removeSubrange(range)
        try write(name, entries)
    }

    /// Moves the entry at `from` to `to`.
    public func move(_ name: String, from: Int, to: Int) throws(Error) {
        var entries = try read(name)
        guard entries.indices.contains(from), entries.indices.contains(to) else { throw Error(.badIndex, "Bad range") }
        entries.insert(entries.remove(at: from), at: to)
        try write(name, entries)
    }

    public func rename(_ from: String, to: String) throws(Error) {
        let (a, b) = (try file(from), try file(to))
        guard exists(from) else { throw Error(.noSuchPlaylist, "No such playlist") }
        guard !exists(to) else { throw Error(.exists, "Playlist exists already") }
        guard Self.rename(a, b) == 0 else { throw Error(.io, "\(from): \(String(cString: strerror(errno)))") }
    }

    static func rename(_ a: String, _ b: String) -> Int32 {
        PathBytes.withCPath(a) { pa in PathBytes.withCPath(b) { Glibc.rename(pa, $0) } }
    }

    @discardableResult
    static func unlink(_ path: String) -> Int32 { PathBytes.withCPath(path) { Glibc.unlink($0) } }

    public func remove(_ name: String) throws(Error) {
        let f = try file(name)
        guard exists(name) else { throw Error(.noSuchPlaylist, "No such playlist") }
        guard Self.unlink(f) == 0 else { throw Error(.io, "\(name): \(String(cString: strerror(errno)))") }
    }
}
