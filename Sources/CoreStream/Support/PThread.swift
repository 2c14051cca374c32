import CLinux
#if canImport(Glibc)
import Glibc
#endif

/// A joinable POSIX thread running one closure. Creating it allocates (the closure box);
/// what the closure does afterwards is up to it.
public final class PThread {
    private var handle = pthread_t()
    private var joined = false

    private final class Box {
        let body: () -> Void
        init(_ body: @escaping () -> Void) { self.body = body }
    }

    /// Starts `body` on a new thread named `name` (at most 15 bytes are kept).
    public init(name: String, _ body: @escaping @Sendable () -> Void) {
        let box = Unmanaged.passRetained(Box(body)).toOpaque()
        let r = pthread_create(&handle, nil, { arg in
            let b = Unmanaged<Box>.fromOpaque(arg!).takeRetainedValue()
            b.body()
            return nil
        }, box)
        precondition(r == 0, "pthread_create() failed: \(r)")
        _ = clinux_set_thread_name(handle, String(name.prefix(15)))
    }

    /// Waits for the thread to finish. Idempotent.
    public func join() {
        guard !joined else { return }
        joined = true
        pthread_join(handle, nil)
    }

    deinit { join() }
}

/// Hands a non-Sendable value to exactly one other thread.
///
/// @unchecked Sendable invariant: after `init`, only the receiving thread touches
/// `value` until that thread has been joined.
public struct Handoff<Value>: @unchecked Sendable {
    public let value: Value
    public init(_ value: Value) { self.value = value }
}

extension PThread {
    /// Starts `body` on a new detached thread named `name`: nobody joins it, so a body
    /// stuck in a system call (a read on a hung network or FUSE file system) cannot
    /// keep the process from exiting. Returns false when no thread could be made
    /// (EAGAIN under a thread limit): the caller decides, nothing traps.
    @discardableResult
    public static func detached(name: String, _ body: @escaping @Sendable () -> Void) -> Bool {
        var attributes = pthread_attr_t()
        pthread_attr_init(&attributes)
        defer { pthread_attr_destroy(&attributes) }
        pthread_attr_setdetachstate(&attributes, Int32(PTHREAD_CREATE_DETACHED))
        var handle = pthread_t()
        let box = Unmanaged.passRetained(Box(body)).toOpaque()
        let r = pthread_create(&handle, &attributes, { arg in
            Unmanaged<Box>.fromOpaque(arg!).takeRetainedValue().body()
            return nil
        }, box)
        guard r == 0 else {
            Unmanaged<Box>.fromOpaque(box).release()
            return false
        }
        _ = clinux_set_thread_name(handle, String(name.prefix(15)))
        return true
    }
}
