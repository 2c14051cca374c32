import CLinux
import CoreStream
import CSQLite
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// One indexed file.
public struct LibrarySong: Sendable, Equatable {
    public var path: String
    public var title: String?
    public var artist: String?
    public var album: String?
    public var albumArtist: String?
    public var genre: String?
    public var date: String?
    public var track: Int?
    public var disc: Int?
    public var duration: Double?
    public var codec: String?
    public var sampleRate: Int?
    public var channels: Int?
    /// Why the tags could not be read (the file is still listed, by its name).
    public var error: String?
    /// Modification time when indexed, seconds since 1970 (the index keeps nanoseconds,
    /// to notice a change within a second; MPD's `Last-Modified:` printed them as
    /// seconds, year 1068291701, issue 39).
    public var modified: Int? = nil
    /// The decoded sample width ("16", "24", "f"), as ``ProbedTrack/sampleWidth``.
    public var width: String? = nil
}

/// The music library: the files under `library.music_roots`, their tags, duration and
/// format, indexed in SQLite (`library.db` next to the state file).
///
/// **Scans** run on a thread of their own at nice 10 and idle I/O priority, never on
/// the engine's threads. A scan walks one root or a folder under it depth-first
/// (memory grows with the depth and the number of folders, not files), compares each
/// audio file's size and mtime with the index and probes only new and changed files;
/// rows of files not seen again are removed at the end. Writes are batched in
/// transactions. Symlinks are followed only when they stay inside the roots; a folder
/// reached twice (a symlink loop) is walked once; an unreadable folder is reported and
/// the scan goes on (its files stay indexed as they were).
///
/// **Queries** run on the control thread on their own connection; SQLite's WAL mode
/// lets them read while a scan writes.
///
/// Thread safety: the query methods on the control thread; `update` starts the scanner
/// thread; progress is in atomics readable anywhere.
public final class MusicLibrary: @unchecked Sendable {
    // @unchecked Sendable: `db` is used by the control thread only; the scanner thread
    // opens its own connection; shared progress is atomics; `scanThread` is touched by
    // the control thread only.

    /// The roots, resolved (realpath) and without a trailing slash.
    public let roots: [String]
    public let databasePath: String
    private let db: SQLiteDatabase

    /// What a scan reports when it ends (and while it runs, through ``progress``).
    public struct ScanReport: Sendable, Equatable {
        public var job = 0
        public var path = ""
        public var scanned = 0
        public var added = 0
        public var updated = 0
        public var removed = 0
        /// Folders that could not be read, files whose tags could not be read, symlinks
        /// leading out of the roots (skipped), loops (walked once).
        public var unreadable: [String] = []
        public var tagErrors = 0
        public var skippedLinks = 0
        /// Names with a control character in them, left out.
        public var skippedNames = 0
        public var seconds = 0.0
    }

    /// Written by the scanner thread, read by anyone.
    private let scanningJob = Atomic<Int>(0)
    private let scannedFiles = Atomic<Int>(0)
    private let scanStarted = Atomic<UInt64>(0)
    private let lastJob = Mutex<Int>(0)
    private var scanThread: PThread?
    /// Called on the scanner thread when a scan ends.
    private let onScanEnd: @Sendable (ScanReport) -> Void

    public struct Error: Swift.Error, CustomStringConvertible {
        public var message: String
        /// An `update` refused because one runs (the protocols give it its own code).
        public var updateRunning = false
        public var description: String { message }
    }

    public init(roots: [String], databasePath: String, onScanEnd: @escaping @Sendable (ScanReport) -> Void) throws(Error) {
        var resolved: [String] = []
        for r in roots {
            guard let real = Self.realPath(r) else {
                throw Error(message: "library.music_roots: \(r): \(String(cString: strerror(errno)))")
            }
            resolved.append(real == "/" ? "" : real)
        }
        self.roots = resolved
        self.databasePath = databasePath
        self.onScanEnd = onScanEnd
        do {
            db = try SQLiteDatabase(path: databasePath)
            try Self.createSchema(db)
        } catch {
            throw Error(message: error.message)
        }
    }

    deinit { scanThread?.join() }

    private static func createSchema(_ db: SQLiteDatabase) throws(SQLiteDatabase.Error) {
        try db.execute("""
            PRAGMA journal_mode = WAL;
            PRAGMA synchronous = NORMAL;
            CREATE TABLE IF NOT EXISTS songs (
                path TEXT PRIMARY KEY NOT NULL,
                dir TEXT NOT NULL,
                size INTEGER NOT NULL,
                mtime INTEGER NOT NULL,
                title TEXT, artist TEXT, album TEXT, album_artist TEXT, genre TEXT, date TEXT,
                track INTEGER, disc INTEGER, duration REAL,
                codec TEXT, sample_rate INTEGER, channels INTEGER,
                error TEXT,
                seen INTEGER NOT NULL
            );
            CREATE INDEX IF NOT EXISTS songs_dir ON songs(dir);
            CREATE INDEX IF NOT EXISTS songs_artist ON songs(artist);
            CREATE INDEX IF NOT EXISTS songs_album ON songs(album);
            CREATE TABLE IF NOT EXISTS dirs (
                path TEXT PRIMARY KEY NOT NULL,
                parent TEXT NOT NULL,
                seen INTEGER NOT NULL
            );
            CREATE INDEX IF NOT EXISTS dirs_parent ON dirs(parent);
            """)
        // Added after the first index format: the decoded sample width for MPD's
        // `Format:`. An index from before gets it at its next update: its songs are
        // marked changed (size -1), so the scan reads them again.
        let columns = try db.prepare("PRAGMA table_info(songs)")
        var hasWidth = false
        while try columns.step() { if columns.text(1) == "width" { hasWidth = true } }
        if !hasWidth { try db.execute("ALTER TABLE songs ADD COLUMN width TEXT; UPDATE songs SET size = -1;") }
        // Added for issue 43: each song's EBU R128 figures and its album's, measured in
        // the background after a scan (LibraryLoudness). `measured` is 0 until then, and
        // set back to 0 when the scan finds the file changed.
        let again = try db.prepare("PRAGMA table_info(songs)")
        var hasMeasured = false
        while try again.step() { if again.text(1) == "measured" { hasMeasured = true } }
        if !hasMeasured {
            try db.execute("""
                ALTER TABLE songs ADD COLUMN lufs REAL; ALTER TABLE songs ADD COLUMN lra REAL;
                ALTER TABLE songs ADD COLUMN true_peak REAL; ALTER TABLE songs ADD COLUMN sample_peak REAL;
                ALTER TABLE songs ADD COLUMN seconds REAL;
                ALTER TABLE songs ADD COLUMN album_lufs REAL; ALTER TABLE songs ADD COLUMN album_true_peak REAL;
                ALTER TABLE songs ADD COLUMN measured INTEGER NOT NULL DEFAULT 0;
                """)
        }
        try db.execute("CREATE INDEX IF NOT EXISTS songs_unmeasured ON songs(measured, dir)")
    }

    // MARK: - Paths

    static func realPath(_ path: String) -> String? {
        PathBytes.realPath(path)
    }

    /// The resolved path of `path` when it lies under a root (after following symlinks
    /// and `..`), else nil. `path` may be relative to the first root.
    public func resolveInside(_ path: String) -> String? { Self.resolveInside(path, roots: roots) }

    /// The same for any roots. Thread: any.
    static func resolveInside(_ path: String, roots: [String]) -> String? {
        let absolute = path.hasPrefix("/") ? path : (roots.first.map { $0 + "/" + path } ?? path)
        guard absolute.utf8.count < Int(PATH_MAX), let real = realPath(absolute) else { return nil }
        return !roots.isEmpty && LocalFile.isInside(real, roots: roots) ? real : nil
    }

    /// Whether a resolved path is a root or under one.
    public func isInside(_ real: String) -> Bool {
        !roots.isEmpty && LocalFile.isInside(real, roots: roots)
    }

    // MARK: - Scanning

    public var isScanning: Bool { scanningJob.load(ordering: .relaxed) != 0 }

    /// When the index last changed (its file's modification time, seconds since 1970):
    /// MPD's `db_update`.
    public var lastUpdate: Int {
        var st = stat()
        return PathBytes.stat(databasePath, &st) == 0 ? Int(st.st_mtim.tv_sec) : 0
    }
    public var scanningJobID: Int { scanningJob.load(ordering: .relaxed) }

    /// Files looked at by the running scan, and files per second.
    public var progress: (job: Int, scanned: Int, rate: Double)? {
        let job = scanningJob.load(ordering: .relaxed)
        guard job != 0 else { return nil }
        let n = scannedFiles.load(ordering: .relaxed)
        let elapsed = Double(monotonicNanoseconds() &- scanStarted.load(ordering: .relaxed)) / 1e9
        return (job, n, elapsed > 0 ? Double(n) / elapsed : 0)
    }

    /// Starts a scan of every root, or of `path` (a folder or file under a root), in the
    /// background. Returns its job number. One scan at a time: a second request while
    /// one runs is refused.
    public func update(_ path: String? = nil) throws(Error) -> Int {
        var targets: [String] = roots
        if let p = path, !p.isEmpty {
            guard let real = resolveInside(p) else {
                throw Error(message: "\(p): not a readable folder or file under the music roots")
            }
            targets = [real]
        }
        guard scanningJob.load(ordering: .relaxed) == 0 else {
            throw Error(message: "a library update is already running (job \(scanningJob.load(ordering: .relaxed)))",
                        updateRunning: true)
        }
        scanThread?.join()
        let job = lastJob.withLock { $0 += 1; return $0 }
        scanningJob.store(job, ordering: .relaxed)
        scannedFiles.store(0, ordering: .relaxed)
        scanStarted.store(monotonicNanoseconds(), ordering: .relaxed)
        let box = Handoff((self, targets, job))
        scanThread = PThread(name: "playd-library") {
            let (library, targets, job) = box.value
            _ = clinux_lower_thread_priority(10)
            var report = ScanReport(job: job, path: targets.count == 1 ? targets[0] : "")
            let t0 = monotonicNanoseconds()
            do {
                let scanner = try Scanner(library: library, report: report)
                for t in targets { try scanner.scan(t) }
                report = scanner.report
            } catch {
                report.unreadable.append("\(library.databasePath): \(error)")
            }
            report.seconds = Double(monotonicNanoseconds() - t0) / 1e9
            // The scanner's connection and FFmpeg's probe buffers are gone: give the
            // freed heap back to the system.
            ProcessTuning.releaseFreeMemory()
            library.scanningJob.store(0, ordering: .relaxed)
            library.onScanEnd(report)
        }
        return job
    }

    /// Waits for a running scan to end (tests, shutdown).
    public func waitForScan() {
        scanThread?.join()
    }

    /// The scanner thread's state: its own connection and prepared statements.
    private final class Scanner {
        let library: MusicLibrary
        let db: SQLiteDatabase
        var report: ScanReport
        let generation: Int64
        let lookup: SQLiteDatabase.Statement
        let touch: SQLiteDatabase.Statement
        let upsert: SQLiteDatabase.Statement
        let upsertDir: SQLiteDatabase.Statement
        var pending = 0
        /// (device, inode) of folders walked in this scan: a folder reached twice (a
        /// symlink loop, a bind mount) is walked once.
        var visited: Set<[UInt64]> = []

        init(library: MusicLibrary, report: ScanReport) throws {
            self.library = library
            self.report = report
            db = try SQLiteDatabase(path: library.databasePath)
            try db.execute("PRAGMA synchronous = NORMAL;")
            generation = Int64(monotonicNanoseconds() / 1000)
            lookup = try db.prepare("SELECT size, mtime FROM songs WHERE path = ?1")
            touch = try db.prepare("UPDATE songs SET seen = ?2 WHERE path = ?1")
            upsert = try db.prepare("""
                INSERT INTO songs (path, dir, size, mtime, title, artist, album, album_artist, genre, date,
                                   track, disc, duration, codec, sample_rate, channels, error, seen, width)
                VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19)
                ON CONFLICT(path) DO UPDATE SET dir = ?2, size = ?3, mtime = ?4, title = ?5, artist = ?6, album = ?7,
                    album_artist = ?8, genre = ?9, date = ?10, track = ?11, disc = ?12, duration = ?13, codec = ?14,
                    sample_rate = ?15, channels = ?16, error = ?17, seen = ?18, width = ?19, measured = 0
                """)
            upsertDir = try db.prepare("""
                INSERT INTO dirs (path, parent, seen) VALUES (?1, ?2, ?3)
                ON CONFLICT(path) DO UPDATE SET parent = ?2, seen = ?3
                """)
        }

        func scan(_ target: String) throws {
            try db.execute("BEGIN")
            var st = stat()
            guard PathBytes.stat(target, &st) == 0 else {
                report.unreadable.append("\(target): \(String(cString: strerror(errno)))")
                try db.execute("COMMIT")
                return
            }
            if (st.st_mode & S_IFMT) == S_IFREG {
                try file(target, st)
            } else {
                try walk(target)
            }
            try db.execute("COMMIT")
            // What was not seen under the target is gone.
            let removeSongs = try db.prepare("DELETE FROM songs WHERE (path = ?1 OR path LIKE ?2 ESCAPE '\\') AND seen != ?3")
            try removeSongs.run([.text(target), .text(Self.escapeLike(target) + "/%"), .int(generation)])
            report.removed += db.changes
            let removeDirs = try db.prepare("DELETE FROM dirs WHERE path LIKE ?1 ESCAPE '\\' AND seen != ?2")
            try removeDirs.run([.text(Self.escapeLike(target) + "/%"), .int(generation)])
        }

        static func escapeLike(_ s: String) -> String {
            var out = ""
            for c in s {
                if c == "%" || c == "_" || c == "\\" { out.append("\\") }
                out.append(c)
            }
            return out
        }

        private func walk(_ top: String) throws {
            var stack = [top]
            while let dir = stack.popLast() {
                var st = stat()
                guard PathBytes.stat(dir, &st) == 0 else { continue }
                guard visited.insert([UInt64(st.st_dev), UInt64(st.st_ino)]).inserted else { continue }
                try upsertDir.run([.text(dir), .text(parent(dir)), .int(generation)])
                guard let d = PathBytes.opendir(dir) else {
                    report.unreadable.append("\(dir): \(String(cString: strerror(errno)))")
                    // Keep what was indexed under it: it may come back.
                    let keep = try db.prepare("UPDATE songs SET seen = ?2 WHERE path LIKE ?1 ESCAPE '\\'")
                    try keep.run([.text(Self.escapeLike(dir) + "/%"), .int(generation)])
                    let keepDirs = try db.prepare("UPDATE dirs SET seen = ?2 WHERE path LIKE ?1 ESCAPE '\\'")
                    try keepDirs.run([.text(Self.escapeLike(dir) + "/%"), .int(generation)])
                    continue
                }
                var subdirs: [String] = []
                while let e = readdir(d) {
                    let name = PathBytes.name(of: e)
                    if name.hasPrefix(".") { continue }  // ., .., hidden files (as MPD)
                    // A name with a control character (`a\nOK\nb.mp3`) is left out, as MPD
                    // leaves it out: no client could name it back, and listings blank it.
                    if name.utf8.contains(where: { $0 < 0x20 || $0 == 0x7F }) { report.skippedNames += 1; continue }
                    let full = dir + "/" + name
                    var lst = stat()
                    guard PathBytes.lstat(full, &lst) == 0 else { continue }
                    var target = lst
                    if (lst.st_mode & S_IFMT) == S_IFLNK {
                        // Followed only when it stays inside the roots.
                        guard let real = MusicLibrary.realPath(full), library.isInside(real), PathBytes.stat(full, &target) == 0 else {
                            report.skippedLinks += 1
                            continue
                        }
                    }
                    switch target.st_mode & S_IFMT {
                    case S_IFDIR: subdirs.append(full)
                    case S_IFREG: try file(full, target)
                    default: continue
                    }
                }
                closedir(d)
                // Natural order, pushed reversed so the first is walked first.
                stack += subdirs.sorted { QueueSources.naturalLess($0, $1) }.reversed()
            }
        }

        private func parent(_ path: String) -> String {
            guard let slash = path.lastIndex(of: "/") else { return "" }
            return String(path[..<slash])
        }

        private func file(_ path: String, _ st: stat) throws {
            let ext = path.split(separator: ".").last.map { $0.lowercased() } ?? ""
            guard path.contains("."), QueueSources.audioExtensions.contains(ext) else { return }
            library.scannedFiles.add(1, ordering: .relaxed)
            report.scanned += 1
            let size = Int64(st.st_size)
            let mtime = Int64(st.st_mtim.tv_sec) * 1_000_000_000 + Int64(st.st_mtim.tv_nsec)
            lookup.bind([.text(path)])
            var known = false
            if try lookup.step() {
                known = true
                if lookup.int(0) == size && lookup.int(1) == mtime {
                    try touch.run([.text(path), .int(generation)])
                    try commitEvery()
                    return
                }
            }
            let p = AudioDecoder.probe(path: path)
            if p == nil { report.tagErrors += 1 }
            typealias V = SQLiteDatabase.Statement.Value
            try upsert.run([.text(path), .text(parent(path)), .int(size), .int(mtime),
                            V(p?.title), V(p?.artist), V(p?.album), V(p?.albumArtist), V(p?.genre), V(p?.date),
                            V(p?.trackNumber), V(p?.discNumber), V(p?.durationSeconds), V(p?.codec),
                            V(p?.sampleRate), V(p?.channels),
                            p == nil ? .text("no audio could be read (damaged or not audio)") : .null,
                            .int(generation), V(p?.sampleWidth)])
            if known { report.updated += 1 } else { report.added += 1 }
            try commitEvery()
        }

        private func commitEvery() throws {
            pending += 1
            if pending >= 500 {
                pending = 0
                try db.execute("COMMIT; BEGIN")
            }
        }
    }

    // MARK: - Queries

    private static let columns = "path, title, artist, album, album_artist, genre, date, track, disc, duration, codec, sample_rate, channels, error, mtime, width"
    private static let order = "ORDER BY album_artist, artist, album, disc, track, path"

    private func songs(_ sql: String, _ values: [SQLiteDatabase.Statement.Value]) throws(Error) -> [LibrarySong] {
        do {
            let s = try db.prepare(sql)
            s.bind(values)
            var out: [LibrarySong] = []
            while try s.step() {
                out.append(LibrarySong(path: s.text(0) ?? "", title: s.text(1), artist: s.text(2), album: s.text(3),
                                       albumArtist: s.text(4), genre: s.text(5), date: s.text(6),
                                       track: s.int(7).map { Int($0) }, disc: s.int(8).map { Int($0) },
                                       duration: s.double(9), codec: s.text(10),
                                       sampleRate: s.int(11).map { Int($0) }, channels: s.int(12).map { Int($0) },
                                       error: s.text(13), modified: s.int(14).map { Int($0 / 1_000_000_000) }, width: s.text(15)))
            }
            return out
        } catch {
            throw Error(message: error.message)
        }
    }

    /// Songs with `query` anywhere in a tag or the path (case-insensitive for ASCII).
    public func search(_ query: String, limit: Int = 10_000) throws(Error) -> [LibrarySong] {
        let like = "%" + Scanner.escapeLike(query) + "%"
        let fields = ["title", "artist", "album", "album_artist", "genre", "path"]
        let cond = fields.map { "\($0) LIKE ?1 ESCAPE '\\'" }.joined(separator: " OR ")
        return try songs("SELECT \(Self.columns) FROM songs WHERE \(cond) \(Self.order) LIMIT ?2",
                         [.text(like), .int(Int64(limit))])
    }

    /// The fields `find` and `list` take.
    public static let fields: [String: String] = [
        "artist": "artist", "album": "album", "title": "title", "albumartist": "album_artist",
        "album_artist": "album_artist", "genre": "genre", "date": "date", "file": "path", "path": "path",
    ]

    /// Songs whose fields equal the values, or start with them when `prefix`.
    public func find(_ filters: [(field: String, value: String, prefix: Bool)], limit: Int = 100_000) throws(Error) -> [LibrarySong] {
        var conds: [String] = []
        var values: [SQLiteDatabase.Statement.Value] = []
        for f in filters {
            guard let column = Self.fields[f.field.lowercased()] else {
                throw Error(message: "unknown field '\(f.field)' (use \(Self.fields.keys.sorted().joined(separator: ", ")))")
            }
            values.append(.text(f.value))
            let n = values.count
            conds.append(f.prefix ? "substr(\(column), 1, length(?\(n))) = ?\(n)" : "\(column) = ?\(n)")
        }
        values.append(.int(Int64(limit)))
        let whereClause = conds.isEmpty ? "" : "WHERE " + conds.joined(separator: " AND ")
        return try songs("SELECT \(Self.columns) FROM songs \(whereClause) \(Self.order) LIMIT ?\(values.count)", values)
    }

    /// Distinct values of a field, sorted, optionally among songs matching filters.
    public func list(_ field: String, filters: [(field: String, value: String)] = []) throws(Error) -> [String] {
        guard let column = Self.fields[field.lowercased()], column != "path" else {
            throw Error(message: "cannot list '\(field)' (use artist, album, albumartist, genre, date or title)")
        }
        var conds = ["\(column) IS NOT NULL"]
        var values: [SQLiteDatabase.Statement.Value] = []
        for f in filters {
            guard let c = Self.fields[f.field.lowercased()] else { throw Error(message: "unknown field '\(f.field)'") }
            values.append(.text(f.value))
            conds.append("\(c) = ?\(values.count)")
        }
        do {
            let s = try db.prepare("SELECT DISTINCT \(column) FROM songs WHERE \(conds.joined(separator: " AND ")) ORDER BY \(column) COLLATE NOCASE")
            s.bind(values)
            var out: [String] = []
            while try s.step() { if let v = s.text(0) { out.append(v) } }
            return out
        } catch {
            throw Error(message: error.message)
        }
    }

    /// The folders and songs directly in `path` (a folder under a root, relative to
    /// the first root or absolute); nil or empty: the roots' contents.
    public func ls(_ path: String?) throws(Error) -> (dirs: [String], songs: [LibrarySong]) {
        var folders: [String]
        if let p = path, !p.isEmpty {
            guard let real = resolveInside(p) else { throw Error(message: "\(p): no such folder in the library") }
            folders = [real]
        } else {
            folders = roots
        }
        var dirs: [String] = []
        var found: [LibrarySong] = []
        for f in folders {
            do {
                let s = try db.prepare("SELECT path FROM dirs WHERE parent = ?1")
                s.bind([.text(f)])
                while try s.step() { if let d = s.text(0) { dirs.append(d) } }
            } catch {
                throw Error(message: error.message)
            }
            found += try songs("SELECT \(Self.columns) FROM songs WHERE dir = ?1", [.text(f)])
        }
        dirs.sort { QueueSources.naturalLess($0, $1) }
        found.sort { QueueSources.naturalLess($0.path, $1.path) }
        return (dirs, found)
    }

    /// Songs in the index: `count(*)`, which SQLite answers from its smallest index.
    /// (``counts()`` reads every row for its distinct artists and albums and total
    /// length: with 50,000 songs that was most of a start, 122–127 ms to READY=1 against
    /// 43 ms with no library, `scripts/bench-library`, 2026-11-26.)
    public func songCount() -> Int {
        guard let s = try? db.prepare("SELECT count(*) FROM songs"), (try? s.step()) == true else { return 0 }
        return Int(s.int(0) ?? 0)
    }

    /// Songs, artists, albums and total seconds in the index (MPD's `stats`): reads
    /// every row.
    public func counts() -> (songs: Int, artists: Int, albums: Int, seconds: Double) {
        guard let s = try? db.prepare("SELECT count(*), count(DISTINCT artist), count(DISTINCT album), total(duration) FROM songs"),
              (try? s.step()) == true else { return (0, 0, 0, 0) }
        return (Int(s.int(0) ?? 0), Int(s.int(1) ?? 0), Int(s.int(2) ?? 0), s.double(3) ?? 0)
    }
}
