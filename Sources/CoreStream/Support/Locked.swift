#if canImport(Glibc)
import Glibc
#endif

/// A value behind a pthread mutex, for the engine's and the feeds' control state.
///
/// Why not `Synchronization.Mutex`: on Linux it is a priority-inheritance futex. When
/// it is contended, the kernel hands the lock straight to the waiting thread, and no
/// atomic operation in user space records that hand-over. ThreadSanitizer then sees no
/// happens-before edge and reports races between two accesses that both hold the
/// lock. CI hit this once (2026-11-21): `report` on the reader thread against
/// `status()`. TSan intercepts `pthread_mutex_lock`/`unlock`, so with this type its
/// reports are real. No thread that takes these locks is real-time (the render thread
/// never locks), so priority inheritance is not needed.
///
/// Thread: any.
public final class Locked<Value>: @unchecked Sendable {
    // @unchecked Sendable: `value` is only touched inside `withLock`, under `mutex`.
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private var value: Value

    public init(_ value: Value) {
        self.value = value
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    /// Runs `body` with the value, holding the lock.
    public func withLock<Result, E: Error>(_ body: (inout Value) throws(E) -> Result) throws(E) -> Result {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value)
    }

    /// Runs `body` holding the lock if no other thread holds it; nil (and `body` not
    /// run) if one does. For a caller that must not wait behind a slow holder (the
    /// control thread behind an output reopen on a worker, issue 38).
    public func withLockIfAvailable<Result, E: Error>(_ body: (inout Value) throws(E) -> Result) throws(E) -> Result? {
        guard pthread_mutex_trylock(mutex) == 0 else { return nil }
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value)
    }
}
