import CLinux
#if canImport(Glibc)
import Glibc
#endif

/// A blocking client for playd's control socket: connect, send a line, read lines.
/// Used by `playctl` and the integration tests.
public final class LineClient {
    public let path: String
    private let fd: Int32
    private var buffer: [UInt8] = []

    public enum ConnectError: Error, CustomStringConvertible {
        case notListening(String)
        case permissionDenied(String)
        case other(String, Int32)
        public var description: String {
            switch self {
            case .notListening(let p): return "no playd listening on \(p)"
            case .permissionDenied(let p): return "permission denied on \(p)"
            case .other(let p, let e): return "cannot connect to \(p): \(String(cString: strerror(e)))"
            }
        }
    }

    public init(path: String) throws(ConnectError) {
        self.path = path
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw .other(path, errno) }
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: addr.sun_path) else { close(fd); throw .other(path, ENAMETOOLONG) }
        withUnsafeMutableBytes(of: &addr.sun_path) { raw in
            for (i, b) in bytes.enumerated() { raw[i] = b }
        }
        let r = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        if r != 0 {
            let e = errno
            close(fd)
            switch e {
            case ENOENT, ECONNREFUSED: throw .notListening(path)
            case EACCES, EPERM: throw .permissionDenied(path)
            default: throw .other(path, e)
            }
        }
        self.fd = fd
    }

    /// Connects over TCP to an IPv4 `host` (MPD's `mpd.tcp` listener).
    public init(tcpPort: UInt16, host: String = "127.0.0.1") throws(ConnectError) {
        path = "\(host):\(tcpPort)"
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw .other(path, errno) }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = tcpPort.bigEndian
        guard inet_pton(AF_INET, host, &addr.sin_addr) == 1 else { close(fd); throw .other(path, EINVAL) }
        let r = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        if r != 0 {
            let e = errno
            close(fd)
            throw e == ECONNREFUSED ? .notListening(path) : .other(path, e)
        }
        self.fd = fd
    }

    deinit { close(fd) }

    /// Sends `line` plus a newline (or, with `newline: false`, a fragment). Returns false
    /// when the daemon has gone.
    @discardableResult
    public func send(_ line: String, newline: Bool = true) -> Bool {
        var bytes = Array(line.utf8)
        if newline { bytes.append(0x0A) }
        var off = 0
        while off < bytes.count {
            let n = bytes[off...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n < 0 { if errno == EINTR { continue }; return false }
            off += n
        }
        return true
    }

    /// Reads the next line (without its newline), or nil at end of stream / timeout.
    public func readLine(timeoutMillis: Int32 = -1) -> String? {
        while true {
            if let nl = buffer.firstIndex(of: 0x0A) {
                let line = String(decoding: buffer[..<nl], as: UTF8.self)
                buffer.removeSubrange(...nl)
                return line
            }
            guard receive(timeoutMillis: timeoutMillis) else { return nil }
        }
    }

    /// Reads exactly `count` bytes (an MPD binary chunk), or nil at end of stream /
    /// timeout.
    public func readBytes(_ count: Int, timeoutMillis: Int32 = -1) -> [UInt8]? {
        while buffer.count < count {
            guard receive(timeoutMillis: timeoutMillis) else { return nil }
        }
        let out = Array(buffer[..<count])
        buffer.removeSubrange(..<count)
        return out
    }

    /// Waits for bytes and appends them to `buffer`; false at end of stream / timeout.
    private func receive(timeoutMillis: Int32) -> Bool {
        while true {
            var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let pr = poll(&p, 1, timeoutMillis)
            if pr == 0 { return false }
            if pr < 0 { if errno == EINTR { continue }; return false }
            var chunk = [UInt8](repeating: 0, count: 65536)
            let n = recv(fd, &chunk, chunk.count, 0)
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return false }
            buffer.append(contentsOf: chunk[..<n])
            return true
        }
    }

    /// Sends a request object and returns the reply with the same `id` (events that
    /// arrive in between are skipped). An error reply without an id answers it too: the
    /// server says something about the connection itself (e.g. `not_allowed`).
    public func request(_ object: JSON, timeoutMillis: Int32 = 10_000) -> JSON? {
        // A failed send still reads: the server may have said why before it closed
        // (`not_allowed`), and that line is waiting in the receive queue.
        let sent = send(object.text)
        let id = object["id"]
        while let line = readLine(timeoutMillis: timeoutMillis) {
            guard let reply = try? JSON.parse(line) else { continue }
            if reply["event"] != nil { continue }
            if id == nil || reply["id"] == id { return reply }
            if reply["id"] == nil && reply["ok"] == .bool(false) { return reply }
            if !sent { return nil }
        }
        return nil
    }
}
