import CoreStream

/// Runs jobs one after another on a thread of their own: the file-system work of
/// `add` (folder walks, playlist reads) that must not run on the control thread,
/// where a walk of `add /` took seconds and a FUSE or NFS folder could block it for
/// ever.
///
/// The thread is started when a job arrives and ends when none is left, so an idle
/// player has no thread for it. It is detached: a job stuck on a hung file system
/// never keeps playd from exiting (SIGTERM is answered by the control thread).
///
/// Thread: `submit` from any.
final class SerialWorker: Sendable {
    private let name: String
    /// The jobs not yet started, and whether a thread is draining them. Protected by
    /// its lock; taken by `submit` (any thread) and the worker thread.
    private let state = Locked<(jobs: [@Sendable () -> Void], running: Bool)>(([], false))

    init(name: String) { self.name = name }

    func submit(_ job: @escaping @Sendable () -> Void) {
        let start = state.withLock { s -> Bool in
            s.jobs.append(job)
            guard !s.running else { return false }
            s.running = true
            return true
        }
        // No thread to be had (a thread limit): run the jobs here, as before there was a
        // walker, rather than never.
        if start && !PThread.detached(name: name, { [self] in drain() }) { drain() }
    }

    private func drain() {
        while let job = state.withLock({ s -> (@Sendable () -> Void)? in
            guard !s.jobs.isEmpty else { s.running = false; return nil }
            return s.jobs.removeFirst()
        }) {
            job()
        }
    }
}
