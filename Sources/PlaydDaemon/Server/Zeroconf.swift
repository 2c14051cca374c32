import CoreStream
import CZeroconf
import Logging
#if canImport(Glibc)
import Glibc
#endif

/// The announced name: MPD's zeroconf_name with `%h`, as one DNS label.
public enum ZeroconfName {
    /// `name` with `%h` replaced by the host name, cut to one DNS label (63 bytes).
    public static func expand(_ name: String, host: String) -> String {
        // No Foundation in the daemon (memory: docs/library.md): split on "%h" by hand.
        var s = ""
        var rest = Substring(name)
        while let r = rest.firstRange(of: "%h") {
            s += rest[..<r.lowerBound] + host
            rest = rest[r.upperBound...]
        }
        s += rest
        while s.utf8.count > 63 { s.removeLast() }
        return s
    }
}

/// Announces the MPD TCP listener over Zeroconf (`_mpd._tcp`, as MPD does) through
/// Avahi, so phone apps and Home Assistant find playd. Optional at run time: without
/// libavahi-client3 or a D-Bus system bus it logs why and does nothing; without an
/// avahi-daemon it waits for one (Avahi's NO_FAIL) and announces when it appears.
///
/// Thread: made, polled (``poll()``, from the control loop's tick) and stopped on the
/// control thread. Avahi's own thread runs the publication; the state crosses over
/// through the C side's atomics and the poll lock.
final class ZeroconfAnnouncer {
    static let serviceType = "_mpd._tcp"
    private let handle: OpaquePointer
    private let logger: Logger
    private var reported: Int32 = -2

    static func hostName() -> String {
        var buf = [CChar](repeating: 0, count: 256)
        guard gethostname(&buf, buf.count - 1) == 0 else { return "localhost" }
        return PathBytes.text(cString: buf)
    }

    /// Nil when Avahi cannot be used at all (logged as a warning, not fatal).
    init?(name: String, port: UInt16, logger: Logger) {
        self.logger = logger
        var err = [CChar](repeating: 0, count: 256)
        guard let h = czc_publish(name, Self.serviceType, port, &err, err.count) else {
            let why = PathBytes.text(cString: err)
            logger.warning("zeroconf: not announced (\(why)); MPD clients must be given the address", metadata: ["zeroconf.name": "\(name)"])
            return nil
        }
        handle = h
        logger.info("zeroconf: announcing", metadata: ["zeroconf.name": "\(name)", "zeroconf.type": "\(Self.serviceType)", "zeroconf.port": "\(port)"])
        poll()
    }

    deinit { czc_stop(handle) }

    /// The name announced (after a collision: "NAME #2").
    var name: String {
        var buf = [CChar](repeating: 0, count: 128)
        czc_name(handle, &buf, buf.count)
        return PathBytes.text(cString: buf)
    }

    var state: Int32 { czc_state(handle) }

    /// Logs a change of state once.
    func poll() {
        let s = state
        guard s != reported else { return }
        reported = s
        switch s {
        case Int32(CZC_ESTABLISHED): logger.info("zeroconf: announced", metadata: ["zeroconf.name": "\(name)"])
        case Int32(CZC_WAITING): logger.warning("zeroconf: no avahi-daemon running; announcing when one starts")
        case Int32(CZC_FAILED):
            var buf = [CChar](repeating: 0, count: 256)
            czc_error(handle, &buf, buf.count)
            logger.warning("zeroconf: failed: \(PathBytes.text(cString: buf))")
        default: break
        }
    }
}
