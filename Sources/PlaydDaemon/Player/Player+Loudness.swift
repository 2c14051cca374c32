import CoreStream
import CLinux
#if canImport(Glibc)
import Glibc
#endif

/// Measured loudness for ReplayGain (`[replaygain] source = "measured"` or `"auto"`,
/// issue 43): every local file queued is measured once (EBU R128, ``LoudnessMeter``)
/// on a thread of its own at nice 10 and in the idle I/O class, the files in queue
/// order, so the next tracks are measured first. The engine reads the figures by path
/// when a track starts (``PlaybackEngine/setLoudnessLookup(_:)``); a track that starts
/// before its measurement is done plays with its tags (or none) and is measured for
/// next time. Measurements are kept in memory for the daemon's life, at most
/// ``LoudnessStore/capacity`` files, each measured once (the queue is offered again
/// at every queue change: what is measured already is left out here, so an edit costs
/// no stat per entry on the measuring thread).
final class LoudnessStore: Sendable {
    struct Entry: Sendable {
        let figures: LoudnessFigures?
    }
    /// Twice the default queue limit, as the probe cache; about 100 bytes an entry.
    static let capacity = 32_768

    /// Written by the measuring thread, read by the engine (under its control lock)
    /// and the control thread. A leaf lock: nothing is called while holding it.
    private let entries = Locked<[String: Entry]>([:])
    /// Paths submitted and not measured yet. Same lock discipline.
    private let waiting = Locked<Set<String>>([])
    private let worker = SerialWorker(name: "playd-loudness")

    /// The library's index, when there is one (``attach(_:)``): figures it holds are
    /// read from it, and ``measureLibrary()`` measures its songs into it. Set once, at
    /// start, before anything is measured.
    private let library = Locked<LibraryLoudness?>(nil)

    func attach(_ l: LibraryLoudness) { library.withLock { $0 = l } }

    /// Songs of the library measured, to measure, and whether a pass runs (nil: no
    /// library).
    var libraryProgress: (measured: Int, songs: Int, running: Bool, sinceStart: Int)? {
        library.withLock { $0 }.map { ($0.measured.load(ordering: .relaxed), $0.total.load(ordering: .relaxed),
                                       $0.running.load(ordering: .relaxed), $0.measuredSinceStart.load(ordering: .relaxed)) }
    }

    /// Measures the library's songs not measured yet, a folder per job on the loudness
    /// thread (the queue's files, asked for meanwhile, go in between: the next track is
    /// never stuck behind a library of 50,000 songs). Control thread.
    func measureLibrary() {
        guard let l = library.withLock({ $0 }) else { return }
        l.stopRequested.store(false, ordering: .relaxed)
        guard !l.running.exchange(true, ordering: .relaxed) else { return }
        worker.submit { [self] in
            _ = clinux_lower_thread_priority(10)
            l.count()
            libraryStep(l)
        }
    }

    /// Whether `path` has figures or is known not to be measurable.
    func isKnown(_ path: String) -> Bool { entries.withLock { $0[path] != nil } }

    /// Before a file plays (on the thread that opened it, not the control thread): its
    /// figures from the index, or measured here if that takes under `seconds`; else it
    /// plays without them and is measured in the background for next time.
    func measureBeforePlay(_ path: String, seconds: Double = 1) {
        guard !isKnown(path) else { return }
        if let db = library.withLock({ $0?.databasePath }), let stored = LibraryLoudness.stored(path, databasePath: db) {
            entries.withLock { $0[path] = Entry(figures: stored) }
            return
        }
        let deadline = monotonicNanoseconds() &+ UInt64(seconds * 1e9)
        do {
            if let meter = try LoudnessMeter.measure(path: path, until: deadline) {
                entries.withLock { e in
                    if e.count >= Self.capacity { e.removeAll() }
                    e[path] = Entry(figures: meter.figures)
                }
                return
            }
        } catch {
            return  // not audio: the open fails the play with its own error
        }
        measure([path])
    }

    /// Stops the library's measuring after the folder being measured. Any thread.
    func stopLibrary() { library.withLock { $0 }?.stopRequested.store(true, ordering: .relaxed) }

    /// One folder, then the next as a new job. Loudness thread.
    private func libraryStep(_ l: LibraryLoudness) {
        guard !l.stopRequested.load(ordering: .relaxed) else { l.running.store(false, ordering: .relaxed); return }
        let done: [String: LoudnessFigures?]?
        do { done = try l.step() } catch {
            l.running.store(false, ordering: .relaxed)
            return
        }
        guard let done else { l.running.store(false, ordering: .relaxed); return }
        // What the queue measured already gets its album figure too.
        entries.withLock { e in
            for (path, f) in done where e[path] != nil { e[path] = Entry(figures: f) }
        }
        worker.submit { [self] in libraryStep(l) }
    }

    /// The figures for `path`, if measured (nil also for a file that could not be).
    func figures(_ path: String) -> LoudnessFigures? { entries.withLock { $0[path]?.figures } }

    var measuredCount: Int { entries.withLock { $0.count } }
    var pendingCount: Int { waiting.withLock { $0.count } }

    /// Queues `paths` not measured and not waiting already.
    func measure(_ paths: [String]) {
        let unmeasured = entries.withLock { e in paths.filter { e[$0] == nil } }
        let fresh = waiting.withLock { w -> [String] in
            var out: [String] = []
            for p in unmeasured where !w.contains(p) && w.count < Self.capacity {
                w.insert(p)
                out.append(p)
            }
            return out
        }
        guard !fresh.isEmpty else { return }
        worker.submit { [self] in
            _ = clinux_lower_thread_priority(10)
            for p in fresh { measureOne(p) }
        }
    }

    /// On the measuring thread: measure and store (nil figures for a file that could not
    /// be: it is not tried again). The decoder opens regular files only.
    private func measureOne(_ path: String) {
        defer { _ = waiting.withLock { $0.remove(path) } }
        // The index has it (measured by the library's pass, album figure and all)?
        let fromIndex = library.withLock { $0 }?.stored(path)
        let figures = fromIndex ?? (try? LoudnessMeter.measure(path: path).figures)
        entries.withLock { e in
            if e.count >= Self.capacity { e.removeAll() }
            e[path] = Entry(figures: figures)
        }
    }
}

extension Player {
    /// Measures the queue's local files when measured loudness is in use (ReplayGain on,
    /// as the config or MPD's `replay_gain_mode` set it, and a source other than tags);
    /// from the end of a turn that changed the queue, a reload, and a mode change.
    /// Control thread.
    func measureQueuedLoudness() {
        let level = engine.status().level
        guard level.replayGain != .off, level.source != .tags else { return }
        var paths: [String] = []
        let q = queue
        // From the current entry on, then the ones before it.
        let start = q.current ?? 0
        for k in 0..<q.entries.count {
            let e = q.entries[(start + k) % q.entries.count]
            if !NetworkInput.isStreamURL(e.path) { paths.append(e.path) }
        }
        loudness.measure(paths)
    }
}
