import CLinux
#if canImport(Glibc)
import Glibc
#endif

/// A Linux eventfd used as a wake-up line between threads: writing never blocks
/// (non-blocking, counter saturates far beyond our use), so the render thread may
/// signal with it. Reading drains the counter.
public enum EventFD {
    /// A new non-blocking, close-on-exec eventfd. Not real-time safe.
    public static func make() -> Int32 {
        let fd = clinux_eventfd_nonblocking()
        precondition(fd >= 0, "eventfd() failed: errno \(errno)")
        return fd
    }

    /// Wakes whoever polls `fd`. Thread: any. Real-time safe: yes (one syscall).
    @inline(__always)
    public static func signal(_ fd: Int32) {
        var one: UInt64 = 1
        _ = Glibc.write(fd, &one, 8)
    }

    /// Clears pending wake-ups. Thread: the waiting side. Real-time safe: yes.
    @inline(__always)
    public static func drain(_ fd: Int32) {
        var value: UInt64 = 0
        _ = Glibc.read(fd, &value, 8)
    }

    /// Sleeps until `fd` is signalled or `timeoutNanoseconds` pass (negative: forever).
    /// Returns true when signalled (the counter is drained). Real-time safe: yes.
    @discardableResult
    public static func wait(_ fd: Int32, timeoutNanoseconds: Int) -> Bool {
        let r = clinux_wait_readable(fd, Int64(timeoutNanoseconds))
        if r > 0 { drain(fd); return true }
        return false
    }
}

/// CLOCK_MONOTONIC in nanoseconds. Real-time safe: yes (vDSO).
@inline(__always)
public func monotonicNanoseconds() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return UInt64(ts.tv_sec) &* 1_000_000_000 &+ UInt64(ts.tv_nsec)
}
