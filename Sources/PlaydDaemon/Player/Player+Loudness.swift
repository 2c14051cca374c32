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
        let figures = try? LoudnessMeter.measure(path: path).figures
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
