import CLinux
import CoreStream
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Signals → a callback on an ordinary thread. The handler only sets the signal's bit
/// and writes an eventfd (both async-signal-safe); a watcher thread turns each bit into
/// a call of `action` with the signal number.
///
/// What playd does with each: SIGTERM and SIGINT stop (fade out, save, exit); SIGHUP
/// reloads the config; SIGUSR1, SIGUSR2 and SIGALRM are ignored (their default action
/// is to kill the process silently, without saving: a stray `kill -USR1` must not cost
/// the user their place); SIGPIPE is ignored (a client gone mid-reply is an EPIPE).
enum SignalWake {
    private static let fd = Atomic<Int32>(-1)
    /// Bit `n` set: signal `n` arrived and is not handled yet. Set by the handler,
    /// cleared by the watcher thread.
    private static let pending = Atomic<UInt64>(0)

    static let handled: [Int32] = [SIGTERM, SIGINT, SIGHUP]
    static let ignored: [Int32] = [SIGPIPE, SIGUSR1, SIGUSR2, SIGALRM]

    static func install(_ action: @escaping @Sendable (Int32) -> Void) {
        let e = EventFD.make()
        fd.store(e, ordering: .relaxed)
        for s in handled {
            signal(s) { n in
                SignalWake.pending.bitwiseOr(UInt64(1) << UInt64(n & 63), ordering: .relaxed)
                EventFD.signal(SignalWake.fd.load(ordering: .relaxed))
            }
        }
        for s in ignored { signal(s, SIG_IGN) }
        _ = clinux_unblock_termination_signals()
        let t = Thread(e, action)
        t.start()
    }

    private final class Thread: @unchecked Sendable {
        // @unchecked Sendable: immutable after init.
        let fd: Int32
        let action: @Sendable (Int32) -> Void
        init(_ fd: Int32, _ action: @escaping @Sendable (Int32) -> Void) { self.fd = fd; self.action = action }
        func start() {
            var handle = pthread_t()
            let box = Unmanaged.passRetained(self).toOpaque()
            pthread_create(&handle, nil, { arg in
                let me = Unmanaged<Thread>.fromOpaque(arg!).takeRetainedValue()
                while true {
                    EventFD.wait(me.fd, timeoutNanoseconds: -1)
                    EventFD.drain(me.fd)
                    let bits = SignalWake.pending.exchange(0, ordering: .relaxed)
                    for s in SignalWake.handled where bits & (UInt64(1) << UInt64(s)) != 0 { me.action(s) }
                }
            }, box)
            pthread_detach(handle)
        }
    }
}
