import CoreStream
import CLinux
import Synchronization

/// The library's loudness (issue 43): after each scan, the songs the index has not
/// measured (new, or changed since) are measured on the loudness thread, a folder at a
/// time, and the figures stored in the index; an album (the songs of one folder with
/// one album tag, at most ``maxAlbumTracks``) gets its figure from its tracks' meters
/// gated as one programme. A folder with a changed song is measured again whole, so its
/// album figure stays true. It resumes where it stopped after a restart (the index
/// says what is measured). Thread: the loudness thread's jobs only (one SQLite
/// connection, opened there), apart from the counters, which any thread reads.
final class LibraryLoudness: @unchecked Sendable {
    // @unchecked Sendable: `db` and its statements are made and used by the loudness
    // thread's jobs only (a SerialWorker: one at a time); the counters are atomics.
    let databasePath: String
    private var db: SQLiteDatabase?
    /// Songs measured and songs to measure, as the last folder left them. Written by the
    /// loudness thread, read by the control thread for `status`.
    let measured = Atomic<Int>(0)
    let total = Atomic<Int>(0)
    /// Files this daemon has measured into the index since it started (what is
    /// measured already is not measured again: a restart with nothing changed leaves
    /// this at 0). Written by the loudness thread.
    let measuredSinceStart = Atomic<Int>(0)
    /// A pass is under way (set by the control thread when it asks, cleared by the
    /// loudness thread when nothing is left).
    let running = Atomic<Bool>(false)
    /// Set by the control thread to stop after the folder being measured.
    let stopRequested = Atomic<Bool>(false)

    /// An album's tracks measured together at most (their meters are kept until its
    /// figure is taken: about 0.3 MB an hour of audio each).
    static let maxAlbumTracks = 200
    /// Songs of one folder measured in one step at most (a folder of 20,000 files is
    /// measured 1,000 at a time, without album figures past this).
    static let maxFolderSongs = 1000

    init(databasePath: String) { self.databasePath = databasePath }

    private func open() throws -> SQLiteDatabase {
        if let db { return db }
        let d = try SQLiteDatabase(path: databasePath)
        // The scanner holds the write lock for a whole scan: wait for it (this thread
        // only measures).
        try d.execute("PRAGMA busy_timeout = 600000;")
        db = d
        return d
    }

    /// Stored figures of `path`, if the index has measured it. Loudness thread.
    func stored(_ path: String) -> LoudnessFigures?? {
        guard let d = try? open(),
              let s = try? d.prepare("SELECT lufs, lra, true_peak, sample_peak, seconds, album_lufs, album_true_peak FROM songs WHERE path = ?1 AND measured = 1") else { return nil }
        s.bind([.text(path)])
        guard (try? s.step()) == true else { return nil }
        guard let seconds = s.double(4) else { return .some(nil) }  // measured, but not audio
        return LoudnessFigures(integratedLUFS: s.double(0), rangeLU: s.double(1) ?? 0, truePeakDBTP: s.double(2),
                               samplePeakDBFS: s.double(3), seconds: seconds, albumLUFS: s.double(5), albumTruePeakDBTP: s.double(6))
    }

    /// Stored figures of `path` through a connection of its own (for a thread other than
    /// the loudness thread: the file opener's, before a play).
    static func stored(_ path: String, databasePath: String) -> LoudnessFigures?? {
        LibraryLoudness(databasePath: databasePath).stored(path)
    }

    /// Counts the index's songs and those measured. Loudness thread.
    func count() {
        guard let d = try? open(), let s = try? d.prepare("SELECT count(*), total(measured = 1) FROM songs WHERE error IS NULL"),
              (try? s.step()) == true else { return }
        total.store(Int(s.int(0) ?? 0), ordering: .relaxed)
        measured.store(Int(s.double(1) ?? 0), ordering: .relaxed)
    }

    /// Measures the next folder with a song not measured; returns the figures it stored
    /// by path (for the memory cache), or nil when nothing is left. Loudness thread.
    func step() throws -> [String: LoudnessFigures?]? {
        let d = try open()
        let next = try d.prepare("SELECT dir FROM songs WHERE measured = 0 AND error IS NULL LIMIT 1")
        guard try next.step(), let dir = next.text(0) else { return nil }
        let list = try d.prepare("SELECT path, album FROM songs WHERE dir = ?1 AND error IS NULL ORDER BY path LIMIT \(Self.maxFolderSongs)")
        list.bind([.text(dir)])
        var songs: [(path: String, album: String)] = []
        while try list.step() { songs.append((list.text(0) ?? "", list.text(1) ?? "")) }
        // Album groups (a tag, and at most maxAlbumTracks songs): their meters are kept
        // until the album's figure is taken; other songs' meters go at once.
        var groupSize: [String: Int] = [:]
        for s in songs where !s.album.isEmpty { groupSize[s.album, default: 0] += 1 }
        var figures: [String: LoudnessFigures?] = [:]
        var meters: [String: [(path: String, meter: LoudnessMeter)]] = [:]
        for s in songs {
            let meter = try? LoudnessMeter.measure(path: s.path)
            measuredSinceStart.add(1, ordering: .relaxed)
            figures[s.path] = meter?.figures
            if let meter, !s.album.isEmpty, let n = groupSize[s.album], n >= 2, n <= Self.maxAlbumTracks {
                meters[s.album, default: []].append((s.path, meter))
            }
        }
        for (_, group) in meters {
            guard let album = LoudnessMeter.album(group.map(\.meter)) else { continue }
            for (path, _) in group {
                figures[path]??.albumLUFS = album.integratedLUFS
                figures[path]??.albumTruePeakDBTP = album.truePeakDBTP
            }
        }
        meters.removeAll()
        try d.execute("BEGIN")
        let store = try d.prepare("""
            UPDATE songs SET lufs = ?2, lra = ?3, true_peak = ?4, sample_peak = ?5, seconds = ?6, album_lufs = ?7,
                             album_true_peak = ?8, measured = 1 WHERE path = ?1
            """)
        for (path, f) in figures {
            try store.run([.text(path), .init(f?.integratedLUFS), .init(f?.rangeLU), .init(f?.truePeakDBTP), .init(f?.samplePeakDBFS),
                           .init(f?.seconds), .init(f?.albumLUFS), .init(f?.albumTruePeakDBTP)])
        }
        // Songs past maxFolderSongs are left for the next step; a folder measured whole
        // has every song marked (a row the scan added meanwhile is measured next time).
        try d.execute("COMMIT")
        count()
        return figures
    }
}
