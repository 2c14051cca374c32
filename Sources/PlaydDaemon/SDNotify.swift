import CLinux
#if canImport(Glibc)
import Glibc
#endif

/// systemd's readiness protocol (sd_notify) without libsystemd: one datagram to
/// `$NOTIFY_SOCKET`. Does nothing when not started by systemd with Type=notify.
public enum SDNotify {
    public static func send(_ message: String) {
        guard let env = getenv("NOTIFY_SOCKET") else { return }
        var path = Array(String(cString: env).utf8)
        guard !path.isEmpty else { return }
        if path[0] == UInt8(ascii: "@") { path[0] = 0 }  // abstract namespace
        let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return }
        defer { close(fd) }
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        guard path.count < MemoryLayout.size(ofValue: addr.sun_path) else { return }
        withUnsafeMutableBytes(of: &addr.sun_path) { raw in for (i, b) in path.enumerated() { raw[i] = b } }
        let len = socklen_t(MemoryLayout<sa_family_t>.size + path.count)
        let bytes = Array(message.utf8)
        _ = withUnsafePointer(to: &addr) { a in
            a.withMemoryRebound(to: sockaddr.self, capacity: 1) { sa in
                bytes.withUnsafeBytes { sendto(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL), sa, len) }
            }
        }
    }

    /// `WATCHDOG=1` when systemd asked for it (`WatchdogSec` sets `$WATCHDOG_USEC`, and
    /// `$WATCHDOG_PID` when it names this process). Sent from the control loop's tick,
    /// so it stops when that loop is wedged.
    public static func watchdog() {
        guard getenv("WATCHDOG_USEC") != nil else { return }
        if let pid = getenv("WATCHDOG_PID"), let n = Int32(String(cString: pid)), n != getpid() { return }
        send("WATCHDOG=1")
    }
}
