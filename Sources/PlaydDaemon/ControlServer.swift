import CLinux
import CoreStream
import PlaydProtocol
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// The Unix-socket listener: one JSON object per line in, one per line out.
///
/// A single control thread runs a `poll()` loop over the listening socket, every client
/// and a wake-up eventfd (events to broadcast, shutdown). Sockets are non-blocking.
/// Limits keep one client from hurting others: a request line is at most
/// ``maxLineBytes`` (longer: `line_too_long`, the rest of the line is discarded); a
/// client's unsent output is at most ``maxPendingBytes`` (more: the client is cut off,
/// as a stuck reader would otherwise grow memory). The render thread is never involved.
///
/// Thread: `run()` on its own thread; `broadcast`/`stop` from any thread.
public final class ControlServer: @unchecked Sendable {
    // @unchecked Sendable: everything but `outbox` and `stopping` is owned by the
    // thread in `run()`; those two are a Mutex and an Atomic.

    public static let maxLineBytes = 64 * 1024
    public static let maxPendingBytes = 1 << 20
    public static let maxClients = 1024
    /// A client's drained output buffer keeps its capacity up to this; a larger one is freed.
    static let retainedBufferBytes = 16 * 1024

    public let path: String
    private let listenFD: Int32
    private let wakeFD: Int32
    private let stopping = Atomic<Bool>(false)
    private let outbox = Mutex<[String]>([])
    /// Work handed to the control thread from other threads (`post`).
    private let posted = Mutex<[@Sendable () -> Void]>([])

    /// Handles one request line; returns the reply (nil: no reply). Runs on the control thread.
    public typealias Handler = (_ request: JSON, _ client: ClientContext) -> JSON
    private let handler: Handler
    /// Called about every `tickMillis` on the control thread (periodic state save, ticks).
    private let onTick: () -> Void
    private let tickMillis: Int32
    /// Counts connections cut off for not reading.
    public let droppedSlowClients = Atomic<Int>(0)
    /// Counts connections refused by `access`.
    public let refusedClients = Atomic<Int>(0)
    /// Who may connect (`control.allowed_users`/`allowed_groups`). Set before `run()`.
    public var access = AccessPolicy()
    /// Told of every connection with the peer's credentials (nil over TCP), the
    /// listener's name ("control", "mpd", "mpd-tcp") and whether `access` let it in.
    /// Runs on the control thread; the daemon logs it. Set before `run()`.
    public var onConnection: ((_ peer: Peer?, _ listener: String, _ allowed: Bool) -> Void)?

    public final class ClientContext {
        let fd: Int32
        var input: [UInt8] = []
        var output: [UInt8] = []
        var outputOffset = 0
        var discardingLongLine = false
        /// Receives events.
        public var subscribed = false
        /// Position ticks every this many milliseconds (0: none).
        public var tickInterval = 0
        var nextTick: UInt64 = 0
        var closing = false
        /// Another protocol than JSON (an MPD connection), nil for JSON clients.
        let session: LineSession?
        init(fd: Int32, session: LineSession? = nil) { self.fd = fd; self.session = session }
        var pending: Int { output.count - outputOffset }
    }
    private var clients: [Int32: ClientContext] = [:]
    /// Listeners for other protocols: each connection gets a session from `factory`.
    /// Set up before `run()`, then owned by the control thread.
    private var extraListeners: [(fd: Int32, path: String?, factory: () -> LineSession)] = []
    /// Builds a position-tick event for a subscriber.
    public var tickEvent: (() -> JSON)?

    public struct SetupError: Error, CustomStringConvertible {
        public var message: String
        public var description: String { message }
    }

    /// Creates the socket: detects and replaces a stale one, refuses one a live process
    /// holds, applies `mode` and `group`.
    public init(path: String, mode: UInt32, group: String, tickMillis: Int32 = 1000,
                handler: @escaping Handler, onTick: @escaping () -> Void) throws(SetupError) {
        self.path = path
        self.handler = handler
        self.onTick = onTick
        self.tickMillis = tickMillis
        let dir = String(path[..<(path.lastIndex(of: "/") ?? path.startIndex)])
        if !dir.isEmpty { try Self.makeDirectories(dir) }
        // Someone listening there already?
        if let _ = try? LineClient(path: path) {
            throw SetupError(message: "\(path): another playd is already listening on this socket")
        }
        var st = stat()
        if lstat(path, &st) == 0 {
            guard st.st_mode & S_IFMT == S_IFSOCK else {
                throw SetupError(message: "\(path): exists and is not a socket; refusing to replace it")
            }
            unlink(path)  // stale: left by a crashed playd
        }
        listenFD = try Self.makeUnixListener(path: path, mode: mode, group: group)
        wakeFD = EventFD.make()
    }

    deinit {
        close(listenFD)
        close(wakeFD)
    }

    /// A listening Unix socket at `path` with `mode` and `group` (the path must be free).
    private static func makeUnixListener(path: String, mode: UInt32, group: String) throws(SetupError) -> Int32 {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw SetupError(message: "socket() failed: \(String(cString: strerror(errno)))") }
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: addr.sun_path) else {
            close(fd)
            throw SetupError(message: "\(path): socket path longer than \(MemoryLayout.size(ofValue: addr.sun_path) - 1) bytes")
        }
        withUnsafeMutableBytes(of: &addr.sun_path) { raw in for (i, b) in bytes.enumerated() { raw[i] = b } }
        let old = umask(0o177)
        let r = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        umask(old)
        guard r == 0 else {
            let e = errno
            close(fd)
            throw SetupError(message: "\(path): bind() failed: \(String(cString: strerror(e)))")
        }
        if !group.isEmpty {
            guard let g = getgrnam(group) else {
                close(fd); unlink(path)
                throw SetupError(message: "control.socket_group: no group named '\(group)'")
            }
            if chown(path, uid_t.max, g.pointee.gr_gid) != 0 {
                let e = errno
                close(fd); unlink(path)
                throw SetupError(message: "\(path): chown() to group \(group) failed: \(String(cString: strerror(e)))")
            }
        }
        chmod(path, mode_t(mode))
        guard listen(fd, 128) == 0 else {
            let e = errno
            close(fd); unlink(path)
            throw SetupError(message: "\(path): listen() failed: \(String(cString: strerror(e)))")
        }
        return fd
    }

    /// Adds a listener on a Unix socket for another protocol (stale sockets replaced, a
    /// live one refused, as for the main one). Call before `run()`.
    public func addListener(path: String, mode: UInt32, group: String, factory: @escaping () -> LineSession) throws(SetupError) {
        let dir = String(path[..<(path.lastIndex(of: "/") ?? path.startIndex)])
        if !dir.isEmpty { try Self.makeDirectories(dir) }
        var st = stat()
        if lstat(path, &st) == 0 {
            guard st.st_mode & S_IFMT == S_IFSOCK else {
                throw SetupError(message: "\(path): exists and is not a socket; refusing to replace it")
            }
            if (try? LineClient(path: path)) != nil { throw SetupError(message: "\(path): another process is listening on this socket") }
            unlink(path)
        }
        extraListeners.append((try Self.makeUnixListener(path: path, mode: mode, group: group), path, factory))
    }

    /// Adds a TCP listener, `host:port` (IPv4), for another protocol. Call before `run()`.
    public func addListener(tcp address: String, factory: @escaping () -> LineSession) throws(SetupError) {
        guard let colon = address.lastIndex(of: ":"), let port = UInt16(address[address.index(after: colon)...]) else {
            throw SetupError(message: "\(address): expected host:port")
        }
        let host = String(address[..<colon])
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = port.bigEndian
        guard inet_pton(AF_INET, host, &addr.sin_addr) == 1 else { throw SetupError(message: "\(address): not an IPv4 address") }
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw SetupError(message: "socket() failed: \(String(cString: strerror(errno)))") }
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        let r = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard r == 0, listen(fd, 128) == 0 else {
            let e = errno
            close(fd)
            throw SetupError(message: "\(address): bind()/listen() failed: \(String(cString: strerror(e)))")
        }
        extraListeners.append((fd, nil, factory))
    }

    /// Tells every session something changed (MPD's idle subsystems). Control thread.
    public func notifySessions(_ changes: Set<String>) {
        for c in clients.values {
            guard let s = c.session else { continue }
            let text = s.notify(changes)
            if !text.isEmpty { enqueueRaw(c, text); flush(c) }
        }
    }

    private static func makeDirectories(_ dir: String) throws(SetupError) {
        var path = ""
        for part in dir.split(separator: "/") {
            path += "/" + part
            if mkdir(path, 0o755) != 0 && errno != EEXIST {
                throw SetupError(message: "\(path): mkdir() failed: \(String(cString: strerror(errno)))")
            }
        }
    }

    /// Queues an event line for every subscribed client. Thread: any.
    public func broadcast(_ event: JSON) {
        let line = event.text
        outbox.withLock { $0.append(line) }
        EventFD.signal(wakeFD)
    }

    /// Runs `work` on the control thread (the one in `run()`), soon. Thread: any.
    public func post(_ work: @escaping @Sendable () -> Void) {
        posted.withLock { $0.append(work) }
        EventFD.signal(wakeFD)
    }

    /// Makes `run()` return after closing every client and removing the socket. Thread: any.
    public func stop() {
        stopping.store(true, ordering: .relaxed)
        EventFD.signal(wakeFD)
    }

    /// The event loop. Returns after `stop()`.
    public func run() {
        var fds: [pollfd] = []
        var lastTick = monotonicNanoseconds()
        while !stopping.load(ordering: .relaxed) {
            fds.removeAll(keepingCapacity: true)
            fds.append(pollfd(fd: listenFD, events: Int16(POLLIN), revents: 0))
            fds.append(pollfd(fd: wakeFD, events: Int16(POLLIN), revents: 0))
            for l in extraListeners { fds.append(pollfd(fd: l.fd, events: Int16(POLLIN), revents: 0)) }
            let base = 2 + extraListeners.count
            let order = Array(clients.keys)
            for fd in order {
                let c = clients[fd]!
                fds.append(pollfd(fd: fd, events: Int16(POLLIN) | (c.pending > 0 ? Int16(POLLOUT) : 0), revents: 0))
            }
            let now = monotonicNanoseconds()
            var timeout = Int64(tickMillis)
            for c in clients.values where c.tickInterval > 0 {
                timeout = min(timeout, max(0, Int64(c.nextTick) - Int64(now)) / 1_000_000)
            }
            let n = poll(&fds, nfds_t(fds.count), Int32(timeout))
            if n < 0 && errno != EINTR { break }

            if fds[1].revents != 0 {
                EventFD.drain(wakeFD)
                for work in posted.withLock({ q -> [@Sendable () -> Void] in let l = q; q.removeAll(); return l }) { work() }
                let lines = outbox.withLock { q -> [String] in let l = q; q.removeAll(); return l }
                for line in lines {
                    for c in clients.values where c.subscribed { enqueue(c, line) }
                }
            }
            if fds[0].revents & Int16(POLLIN) != 0 { acceptClients(listenFD, "control", nil) }
            for (i, l) in extraListeners.enumerated() where fds[2 + i].revents & Int16(POLLIN) != 0 {
                acceptClients(l.fd, l.path == nil ? "mpd-tcp" : "mpd", l.factory)
            }
            for (i, fd) in order.enumerated() {
                guard let c = clients[fd] else { continue }
                let re = fds[i + base].revents
                if re & Int16(POLLIN | POLLHUP | POLLERR) != 0 { readFrom(c) }
                if re & Int16(POLLOUT) != 0 || c.pending > 0 { flush(c) }
                if c.closing && c.pending == 0 { drop(c) }
            }
            let t = monotonicNanoseconds()
            if let tick = tickEvent {
                var line: String?
                for c in clients.values where c.tickInterval > 0 && t >= c.nextTick {
                    if line == nil { line = tick().text }
                    enqueue(c, line!)
                    c.nextTick = t + UInt64(c.tickInterval) * 1_000_000
                    flush(c)
                }
            }
            if t - lastTick >= UInt64(tickMillis) * 1_000_000 {
                lastTick = t
                onTick()
            }
        }
        for c in Array(clients.values) { drop(c) }
        unlink(path)
        for l in extraListeners {
            close(l.fd)
            if let p = l.path { unlink(p) }
        }
    }

    private func acceptClients(_ listener: Int32, _ name: String, _ factory: (() -> LineSession)?) {
        while true {
            let fd = clinux_accept_nonblocking(listener)
            if fd < 0 { return }
            if clients.count >= Self.maxClients { close(fd); continue }
            let peer = Peer.of(socket: fd, groups: !access.gids.isEmpty)
            let allowed = access.allows(peer)
            onConnection?(peer, name, allowed)
            if !allowed {
                // One line saying why, then close. The socket's send buffer is empty, so
                // this short non-blocking send does not wait.
                refusedClients.add(1, ordering: .relaxed)
                let who = peer.map { "\($0)" } ?? "a TCP client (no credentials)"
                let reason = "\(who) is not in control.allowed_users or control.allowed_groups"
                let line = factory == nil
                    ? errorReply(id: nil, .notAllowed, reason).text + "\n"
                    : "ACK [4@0] {} permission denied: \(reason)\n"
                _ = line.utf8CString.withUnsafeBufferPointer { send(fd, $0.baseAddress, $0.count - 1, Int32(MSG_NOSIGNAL)) }
                close(fd)
                continue
            }
            let c = ClientContext(fd: fd, session: factory?())
            clients[fd] = c
            if let hello = c.session?.greeting() { enqueueRaw(c, hello) }
        }
    }

    private func readFrom(_ c: ClientContext) {
        var chunk = [UInt8](repeating: 0, count: 16384)
        while true {
            let n = recv(c.fd, &chunk, chunk.count, 0)
            if n == 0 { c.closing = true; c.output.removeAll(); c.outputOffset = 0; return }  // client gone
            if n < 0 {
                if errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR { break }
                c.closing = true; c.output.removeAll(); c.outputOffset = 0
                return
            }
            for b in chunk[..<n] {
                if b == 0x0A {
                    if c.discardingLongLine {
                        c.discardingLongLine = false
                    } else {
                        handleLine(c, c.input)
                    }
                    c.input.removeAll(keepingCapacity: c.input.capacity <= Self.retainedBufferBytes)
                } else if !c.discardingLongLine {
                    c.input.append(b)
                    if c.input.count > Self.maxLineBytes {
                        c.input.removeAll()
                        c.discardingLongLine = true
                        if c.session != nil {
                            c.closing = true  // MPD closes a connection whose line is too long
                        } else {
                            enqueue(c, errorReply(id: nil, .lineTooLong, "request line longer than \(Self.maxLineBytes) bytes").text)
                        }
                    }
                }
            }
            if n < chunk.count { break }
        }
    }

    private func handleLine(_ c: ClientContext, _ bytes: [UInt8]) {
        if let s = c.session {
            guard !c.closing else { return }
            let (reply, close) = s.receive(bytes)
            if !reply.isEmpty { enqueueRaw(c, reply) }
            if close { c.closing = true }
            return
        }
        var line = bytes
        if line.last == 0x0D { line.removeLast() }
        if line.allSatisfy({ $0 == 0x20 || $0 == 0x09 }) { return }
        guard let text = String(validating: line, as: UTF8.self) else {
            enqueue(c, errorReply(id: nil, .badJSON, "request is not valid UTF-8").text)
            return
        }
        let request: JSON
        do {
            request = try JSON.parse(text)
        } catch {
            enqueue(c, errorReply(id: nil, .badJSON, "invalid JSON: \(error)").text)
            return
        }
        guard case .object = request else {
            enqueue(c, errorReply(id: nil, .badJSON, "a request must be a JSON object").text)
            return
        }
        let reply = handler(request, c)
        if c.tickInterval > 0 && c.nextTick == 0 { c.nextTick = monotonicNanoseconds() }
        enqueue(c, reply.text)
    }

    private func enqueue(_ c: ClientContext, _ line: String) {
        guard !c.closing else { return }
        if c.pending + line.utf8.count + 1 > Self.maxPendingBytes {
            // A client that does not read: cut it off rather than grow without bound.
            droppedSlowClients.add(1, ordering: .relaxed)
            c.closing = true
            c.output.removeAll()
            c.outputOffset = 0
            return
        }
        if c.outputOffset > 0 && c.outputOffset == c.output.count {
            c.output.removeAll(keepingCapacity: true)
            c.outputOffset = 0
        }
        c.output.append(contentsOf: line.utf8)
        c.output.append(0x0A)
    }

    /// Queues text that carries its own newlines (another protocol's reply).
    private func enqueueRaw(_ c: ClientContext, _ text: String) {
        guard !c.closing else { return }
        if c.pending + text.utf8.count > Self.maxPendingBytes {
            droppedSlowClients.add(1, ordering: .relaxed)
            c.closing = true
            c.output.removeAll()
            c.outputOffset = 0
            return
        }
        c.output.append(contentsOf: text.utf8)
    }

    private func flush(_ c: ClientContext) {
        while c.pending > 0 {
            let n = c.output[c.outputOffset...].withUnsafeBytes { send(c.fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n < 0 {
                if errno == EAGAIN || errno == EWOULDBLOCK { return }
                if errno == EINTR { continue }
                c.closing = true
                c.output.removeAll(); c.outputOffset = 0
                return
            }
            c.outputOffset += n
        }
        // Drained. Keep a small buffer for the next reply; a burst (a long queue
        // listing, an event storm) may have grown it up to maxPendingBytes, and a
        // subscriber connected for months must not hold that high-water mark.
        c.output.removeAll(keepingCapacity: c.output.capacity <= Self.retainedBufferBytes)
        c.outputOffset = 0
    }

    private func drop(_ c: ClientContext) {
        close(c.fd)
        clients[c.fd] = nil
    }
}

/// `{"id":…,"ok":false,"error":{"code":"…","message":"…"}}`.
public func errorReply(id: JSON?, _ code: ProtocolErrorCode, _ message: String) -> JSON {
    errorReply(id: id, code: code.rawValue, message)
}

/// The same with a code name from elsewhere (the engine's `StreamError.Code.name`).
public func errorReply(id: JSON?, code: String, _ message: String) -> JSON {
    .obj(("id", id), ("ok", .bool(false)),
         ("error", .obj(("code", .string(code)), ("message", .string(message)))))
}
