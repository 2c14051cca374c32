import CLinux
import CoreStream
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// SIGTERM/SIGINT → a callback on an ordinary thread. The signal handler only writes
/// to an eventfd (async-signal-safe); a watcher thread turns that into the callback.
enum SignalWake {
    private static let fd = Atomic<Int32>(-1)

    static func install(_ action: @escaping @Sendable () -> Void) {
        let e = EventFD.make()
        fd.store(e, ordering: .relaxed)
        signal(SIGTERM) { _ in EventFD.signal(SignalWake.fd.load(ordering: .relaxed)) }
        signal(SIGINT) { _ in EventFD.signal(SignalWake.fd.load(ordering: .relaxed)) }
        signal(SIGPIPE, SIG_IGN)
        _ = clinux_unblock_termination_signals()
        let t = Thread(e, action)
        t.start()
    }

    private final class Thread: @unchecked Sendable {
        // @unchecked Sendable: immutable after init.
        let fd: Int32
        let action: @Sendable () -> Void
        init(_ fd: Int32, _ action: @escaping @Sendable () -> Void) { self.fd = fd; self.action = action }
        func start() {
            var handle = pthread_t()
            let box = Unmanaged.passRetained(self).toOpaque()
            pthread_create(&handle, nil, { arg in
                let me = Unmanaged<Thread>.fromOpaque(arg!).takeRetainedValue()
                EventFD.wait(me.fd, timeoutNanoseconds: -1)
                me.action()
                return nil
            }, box)
            pthread_detach(handle)
        }
    }
}
