import CoreStream
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// The reads a reply needs from the disk, off the control thread (issue 38): the probes
/// behind queue listings (tags, duration, format and modification time of each file not
/// yet in the cache) and cover art (MPD's `albumart` and `readpicture`, JSON `cover`,
/// the web remote's picture). On a hung FUSE or NFS mount such a read never returns; on
/// the control thread it stopped every client and the watchdog killed playd, and a
/// `playlistinfo` of 8,000 files not yet probed held every client for seconds.
///
/// The request waits instead (``PlayerError/Code/workPending``, as a folder `add` and a
/// `play` do) while the other clients are served, and runs again once the read is back.
/// A read that makes no progress for ``diskReadGraceSeconds`` (a hung mount) is not
/// waited for any longer: a listing then shows the files not probed yet without tags,
/// as it shows a URL, and a cover request is answered `timed_out`. The stuck thread
/// cannot be stopped (a thread in a FUSE request waits for the answer, for any
/// program); each read has a thread of its own, so the next one is not behind it.
extension Player {
    /// Seconds without progress after which a read is taken for stuck.
    static let diskReadGraceSeconds: UInt64 = 5
    /// Files one listing probe takes at most (a full queue is 16,384): the rest are
    /// probed by the next run of the request.
    static let probeBatch = 4096

    /// Throws `workPending` until `paths`' local files are in the listing cache
    /// (``songInfo(_:)`` then finds them). Control thread.
    func probeForListing(_ paths: some Sequence<String>) throws(PlayerError) {
        ControlThread.check()
        var missing: [String] = [], seen = Set<String>()
        for path in paths where probeCache[path] == nil && !NetworkInput.hasScheme(path) && seen.insert(path).inserted {
            missing.append(path)
            if missing.count == Self.probeBatch { break }
        }
        guard !missing.isEmpty else { return }
        if let run = diskReads.probing, run.stuck {
            // Stuck on a file (a hung mount): that file is listed without tags, and the
            // others are probed by a new run (what the stuck one finds later is kept).
            if let path = run.current { cache(path, SongInfo()) }
            diskReads.probing = nil
            missing.removeAll { probeCache[$0] != nil }
            guard !missing.isEmpty else { return }
        }
        if diskReads.probing == nil {
            let run = DiskReads.Progress()
            diskReads.probing = run
            let post = self.post, batch = missing
            let work: @Sendable () -> Void = {
                var infos: [(String, SongInfo)] = []
                for path in batch {
                    run.advance(to: path)
                    infos.append((path, Player.probeSong(path)))
                }
                run.advance(to: nil)
                let probed = infos
                post { [weak self] in
                    guard let self else { return }
                    for (path, info) in probed { self.cache(path, info) }
                    if self.diskReads.probing === run { self.diskReads.probing = nil }
                    self.resumeParked()
                }
            }
            DiskReads.start("playd-probe", work)
        }
        throw PlayerError(.workPending, "listing: probing \(missing.count) files")
    }

    /// What a read off this thread found. @unchecked Sendable: made on the reading
    /// thread and only read afterwards, on the control thread; its errors are
    /// StreamError, PlayerError and protocol failure values.
    struct ReadOutcome<T>: @unchecked Sendable {
        let result: Result<T, any Error>
        init(_ read: () throws -> T) { result = Result { try read() } }
    }

    /// `read`'s result for `key`, read off this thread: throws `workPending` until it is
    /// back (the request's next run finds it), `timed_out` once it has been stuck for
    /// ``diskReadGraceSeconds``. Control thread.
    func readOffThread<T: Sendable>(_ key: String, what: String, _ read: @escaping @Sendable () -> T) throws(PlayerError) -> T {
        ControlThread.check()
        if let done = diskReads.done[key] as? T { return done }
        if let run = diskReads.reading[key] {
            if run.stuck {
                throw PlayerError(.stream(.timedOut), "\(what): the read made no progress for \(Self.diskReadGraceSeconds) s (a hung disk or network mount?)")
            }
        } else {
            guard diskReads.reading.count < Self.maxFileOpens else {
                throw PlayerError(.stream(.timedOut), "\(what): \(Self.maxFileOpens) reads are still under way (a hung disk or network mount?); try again later")
            }
            let run = DiskReads.Progress()
            diskReads.reading[key] = run
            let post = self.post
            let work: @Sendable () -> Void = {
                let value = read()
                post { [weak self] in
                    guard let self, self.diskReads.reading[key] === run else { return }
                    self.diskReads.reading[key] = nil
                    self.diskReads.done[key] = value
                    self.resumeParked()
                }
            }
            DiskReads.start("playd-read", work)
        }
        throw PlayerError(.workPending, "\(what): reading")
    }

    /// The parked requests whose read has just passed its grace are run again (they
    /// answer without it). From ``tick()``.
    func diskReadTick() {
        var due = false
        if let run = diskReads.probing, run.stuck, !run.reported { run.reported = true; due = true }
        for (key, run) in diskReads.reading where run.stuck && !run.reported {
            run.reported = true
            due = true
            logger.warning("a read made no progress", metadata: ["read": "\(key.split(separator: "\0").last ?? "")"])
        }
        if due { resumeParked() }
    }

    /// What a listing shows of a local file, read from the disk. Any thread.
    static func probeSong(_ path: String) -> SongInfo {
        var info = SongInfo()
        guard let p = AudioDecoder.probe(path: path) else { return info }
        info.tags = p.tags
        info.duration = p.durationSeconds
        info.format = "\(p.sampleRate):\(p.sampleWidth):\(p.channels)"
        var st = stat()
        if PathBytes.stat(path, &st) == 0 { info.modified = Int(st.st_mtim.tv_sec) }
        return info
    }

    func cache(_ path: String, _ info: SongInfo) {
        if probeCache.count >= Self.songInfoCacheLimit { probeCache.removeAll(keepingCapacity: true) }
        probeCache[path] = info
    }
}

/// The reads under way and done (Player+DiskReads.swift). Control thread.
struct DiskReads {
    /// A read's progress: when it last moved, written by the thread reading.
    final class Progress: @unchecked Sendable {
        // @unchecked: `moved` is behind its Mutex; `reported` is the control thread's.
        /// When the read last moved on, and the file it is at.
        private let moved = Mutex<(at: UInt64, path: String?)>((monotonicNanoseconds(), nil))
        var reported = false
        /// The reading thread begins `path` (nil: done).
        func advance(to path: String?) { moved.withLock { $0 = (monotonicNanoseconds(), path) } }
        var current: String? { moved.withLock { $0.path } }
        var stuck: Bool { monotonicNanoseconds() &- moved.withLock { $0.at } > Player.diskReadGraceSeconds * 1_000_000_000 }
    }
    /// The listing probe under way.
    var probing: Progress?
    /// Cover reads under way, by key.
    var reading: [String: Progress] = [:]
    /// Reads done, kept until the end of the turn they arrived in: the sessions resumed
    /// in that turn take them (``Player/flush()`` drops them).
    var done: [String: any Sendable] = [:]
    /// Runs `work` on a thread of its own: one stuck on a hung mount holds only
    /// itself. (A thread costs about 50 µs to start; these reads come a few a second
    /// at most.) No thread to be had (a thread limit): here, as before.
    static func start(_ name: String, _ work: @escaping @Sendable () -> Void) {
        if !PThread.detached(name: name, work) { work() }
    }
}
