import CLinux
import CoreStream
import PlaydProtocol
import PlaydSessions
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// The byte server: listening sockets, connections, lines in and bytes out. It knows
/// no protocol: each listener makes a ``LineSession`` per connection (JSON, MPD), which
/// turns lines into replies; the server moves the bytes and enforces the limits.
///
/// A single control thread runs a `poll()` loop over the listening socket, every client
/// and a wake-up eventfd (work posted from other threads, shutdown). Sockets are non-blocking.
/// Limits keep one client from hurting others (defaults in ``Limits``):
/// - a request line is at most ``maxLineBytes`` (longer: `line_too_long`, the rest of
///   the line is discarded; MPD: the connection is closed);
/// - a reply is sent whole, whatever its size, to a client that has read what came
///   before it (at most ``maxPendingBytes`` unread); more unread, or more than
///   ``maxTotalPendingBytes`` unsent over all clients, and the client is cut off, as a
///   stuck reader would otherwise grow memory; with half of that unread nothing more is
///   run for it, and taking no byte for ``stallSeconds`` then cuts it off;
/// - at most ``Limits/maxConnections`` connections per listener and
///   ``Limits/maxConnectionsPerPeer`` per user (uid; TCP: per address) over all of
///   them; more are told why and closed;
/// - out of file descriptors (EMFILE), a spare descriptor accepts and closes the
///   waiting connection, and the listener rests 100 ms: the loop never spins;
/// - a connection silent for ``Limits/connectionTimeoutSeconds`` that waits for no
///   events is closed (MPD's `connection_timeout`);
/// - fairness: each turn of the loop handles at most ``linesPerTurn`` lines and one
///   read per client, and a long MPD command list runs a slice per turn;
/// - a request that waits for work off this thread (a folder walk) parks its
///   connection: no line of it is read, and it is not timed out, until
///   ``resumeParked()`` says the work is done; the other clients are served meanwhile;
/// - a wrong password holds the connection back (0.25 s, doubling to 8 s per failure of
///   the same peer in the last 10 minutes) and the 5th on one connection closes it.
/// The render thread is never involved.
///
/// Thread: `run()` on its own thread; `post`/`stop` from any thread.
public final class ControlServer: @unchecked Sendable {
    // @unchecked Sendable: everything but `posted` and `stopping` is owned by the
    // thread in `run()`; those two are a Mutex and an Atomic.

    public static let maxLineBytes = 64 * 1024
    /// What a client may leave unread before a new reply or event cuts it off.
    public static let maxPendingBytes = 1 << 20
    /// Unsent output of all clients together. A reply may be larger than
    /// `maxPendingBytes`: a queue of 16,384 tagged songs is 2–3 MB (MPD 0.23 answered
    /// 1.1 MB for 8,000; its own cap per client is 8 MiB), and the cap on one reply cut
    /// the connection instead (issue 39). 64 MiB keeps a hundred clients that ask for
    /// it and never read well inside the unit's MemoryMax (256M).
    public static let maxTotalPendingBytes = 64 << 20
    /// A backed-up client that takes no byte for this long is cut off: it is not
    /// reading (a slow one, a phone on a bad link, takes some bytes and is kept).
    static let stallSeconds: UInt64 = 10
    public static let maxClients = 1024
    /// Lines handled per client per turn of the loop.
    static let linesPerTurn = 32
    /// Wrong passwords on one connection before it is closed.
    static let maxAuthFailuresPerConnection = 5

    /// Connection limits (config `[limits]`). Set before `run()`, or on the control
    /// thread (reload).
    public struct Limits: Sendable, Equatable {
        /// Connections per listener (control socket, MPD socket, MPD TCP): MPD's 100.
        public var maxConnections = 100
        /// Connections one user (uid; a TCP client: its address) may hold over all
        /// listeners, so one local user cannot lock another out.
        public var maxConnectionsPerPeer = 80
        /// Seconds a connection may stay silent unless it waits for events.
        public var connectionTimeoutSeconds = 60
        public init() {}
    }
    /// Control thread (set before `run()`, or from work posted to it).
    public var limits = Limits()
    /// A client's drained output buffer keeps its capacity up to this; a larger one is freed.
    static let retainedBufferBytes = 16 * 1024

    public let path: String
    private let listenFD: Int32
    private let wakeFD: Int32
    private let stopping = Atomic<Bool>(false)
    /// Work handed to the control thread from other threads (`post`).
    private let posted = Mutex<[@Sendable () -> Void]>([])

    /// A listener's protocol: a session per connection, and the line a refused
    /// connection is told before it is closed.
    public struct Listener {
        public var name: String
        public var makeSession: () -> LineSession
        public var refusal: (Refusal) -> String
        public init(name: String, makeSession: @escaping () -> LineSession, refusal: @escaping (Refusal) -> String) {
            self.name = name
            self.makeSession = makeSession
            self.refusal = refusal
        }
    }
    private let mainListener: Listener
    /// Called at the end of every turn of the loop, after the lines and the posted work
    /// of that turn (the daemon flushes the player's notifications there). Set before `run()`.
    public var afterTurn: (() -> Void)?
    /// Connections refused by the connection limits, or accepted and closed while out
    /// of file descriptors.
    public let refusedByLimits = Atomic<Int>(0)
    /// Connections closed by the idle timeout.
    public let timedOutClients = Atomic<Int>(0)
    /// Connections open now. Written by the control thread, read by any.
    public let connectedClients = Atomic<Int>(0)
    /// Called about every `tickMillis` on the control thread (periodic state save, ticks).
    private let onTick: () -> Void
    /// A time (monotonic ns) to run `onTick` sooner than its period (the end of the
    /// schedule's fade). Control thread.
    public var tickDue: () -> UInt64? = { nil }
    private let tickMillis: Int32
    /// Counts connections cut off for not reading.
    public let droppedSlowClients = Atomic<Int>(0)
    /// Counts connections refused by `access`.
    public let refusedClients = Atomic<Int>(0)
    /// Who may connect (`control.allowed_users`/`allowed_groups`). Set before `run()`.
    public var access = AccessPolicy()
    /// Told of every connection with the peer's credentials (nil over TCP), its
    /// address (TCP; nil for Unix sockets), the listener's name ("control", "mpd",
    /// "mpd-tcp") and whether it was let in (nil: yes; else why not).
    /// Runs on the control thread; the daemon logs it. Set before `run()`.
    public var onConnection: ((_ peer: Peer?, _ address: String?, _ listener: String, _ refused: String?) -> Void)?

    public final class ClientContext {
        let fd: Int32
        /// The listener it came from, and who it is for the per-peer limits.
        let listener: String
        let peerKey: String
        var input: [UInt8] = []
        /// Bytes of `input` already handled.
        var inputStart = 0
        /// When it last sent something (monotonic ns).
        var lastActive = monotonicNanoseconds()
        /// No line of it is handled before this (a wrong password's hold).
        var holdUntil: UInt64 = 0
        var authFailures = 0
        /// The session said more work is pending (`SessionOutput.more`).
        var busy = false
        /// The session waits for work off the control thread (`SessionOutput.parked`)
        /// until ``ControlServer/resumeParked()``.
        var parked = false
        var output: [UInt8] = []
        var outputOffset = 0
        var discardingLongLine = false
        var closing = false
        /// The connection's protocol.
        let session: LineSession
        init(fd: Int32, listener: String, peerKey: String, session: LineSession) {
            self.fd = fd; self.listener = listener; self.peerKey = peerKey; self.session = session
        }
        var pending: Int { output.count - outputOffset }
        /// More than half of ``ControlServer/maxPendingBytes`` unread: its next request
        /// waits until it reads (a client that pipelines `status` after a 2 MB listing
        /// is not cut off for it; one that never reads gets nothing more run for it).
        var backedUp: Bool { pending > ControlServer.maxPendingBytes / 2 }
        /// When it last stopped taking bytes while backed up (0: it takes them): one that
        /// takes none for ``ControlServer/stallSeconds`` is cut off.
        var stalledSince: UInt64 = 0
        /// Unhandled input bytes.
        var buffered: Int { input.count - inputStart }
        var hasCompleteLine: Bool { input[inputStart...].contains(0x0A) }
    }
    private var clients: [Int32: ClientContext] = [:]
    /// Further listeners (MPD's socket and TCP). Set up before `run()`, then owned by
    /// the control thread.
    private var extraListeners: [(fd: Int32, path: String?, listener: Listener)] = []
    /// A listener that failed to accept for lack of descriptors rests until then
    /// (by fd). Control thread.
    private var restingUntil: [Int32: UInt64] = [:]
    /// Wrong passwords per peer: how many, and the last one's time. Control thread.
    private var peerAuthFailures: [String: (count: Int, last: UInt64)] = [:]
    /// Kept open to be closed when accept() fails with EMFILE, so the waiting
    /// connection can be accepted and closed instead of staying readable forever.
    private var spareFD: Int32 = -1

    public struct SetupError: Error, CustomStringConvertible {
        public var message: String
        public var description: String { message }
    }

    /// Creates the socket: detects and replaces a stale one, refuses one a live process
    /// holds, applies `mode` and `group`.
    public init(path: String, mode: UInt32, group: String, tickMillis: Int32 = 1000,
                listener: Listener, onTick: @escaping () -> Void) throws(SetupError) {
        self.path = path
        self.mainListener = listener
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
        spareFD = open("/dev/null", O_RDONLY | O_CLOEXEC)
    }

    deinit {
        close(listenFD)
        close(wakeFD)
        if spareFD >= 0 { close(spareFD) }
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
    public func addListener(path: String, mode: UInt32, group: String, _ listener: Listener) throws(SetupError) {
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
        extraListeners.append((try Self.makeUnixListener(path: path, mode: mode, group: group), path, listener))
    }

    /// Adds a TCP listener, `host:port` (IPv4), for another protocol. Call before `run()`.
    public func addListener(tcp address: String, _ listener: Listener) throws(SetupError) {
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
        extraListeners.append((fd, nil, listener))
    }

    /// Gives every session the chance to send something now (a completed MPD `idle`,
    /// JSON events): `body` returns the text for a session. Control thread.
    public func notifySessions(_ body: (LineSession) -> String) {
        for c in clients.values where !c.closing {
            let text = body(c.session)
            if !text.isEmpty { enqueueRaw(c, text); flush(c) }
        }
    }

    /// Work that parked sessions wait for has finished: each parked connection is
    /// resumed (``LineSession/resume()``) in this turn of the loop, and runs its
    /// request again; one still waiting parks again. Control thread.
    public func resumeParked() {
        for c in clients.values where c.parked {
            c.parked = false
            c.busy = true
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
        ControlThread.claim()
        var fds: [pollfd] = []
        var lastTick = monotonicNanoseconds()
        while !stopping.load(ordering: .relaxed) {
            let now = monotonicNanoseconds()
            fds.removeAll(keepingCapacity: true)
            let listeners = [listenFD] + extraListeners.map(\.fd)
            for l in listeners {
                let resting = (restingUntil[l] ?? 0) > now
                fds.append(pollfd(fd: resting ? -1 : l, events: Int16(POLLIN), revents: 0))
            }
            fds.append(pollfd(fd: wakeFD, events: Int16(POLLIN), revents: 0))
            let base = listeners.count + 1
            let order = Array(clients.keys)
            var timeout = Int64(tickMillis)
            for fd in order {
                let c = clients[fd]!
                // Input is read while it can be handled: a held or busy client, or one
                // with a turn's worth buffered, waits (TCP pushes back on the sender).
                let wantInput = c.holdUntil <= now && !c.busy && !c.parked && !c.backedUp && c.buffered <= Self.maxLineBytes
                fds.append(pollfd(fd: fd, events: (wantInput ? Int16(POLLIN) : 0) | (c.pending > 0 ? Int16(POLLOUT) : 0), revents: 0))
                if c.holdUntil > now { timeout = min(timeout, Int64((c.holdUntil - now) / 1_000_000) + 1) }
                // Work waiting: poll without sleeping (not for a closing client, whose
                // lines are never handled: that would spin until it is dropped).
                if !c.closing && !c.backedUp && (c.busy || (!c.parked && c.holdUntil <= now && c.hasCompleteLine)) { timeout = 0 }
                if let due = c.session.nextTickDue { timeout = min(timeout, max(0, Int64(due) - Int64(now)) / 1_000_000) }
            }
            for until in restingUntil.values where until > now { timeout = min(timeout, Int64((until - now) / 1_000_000) + 1) }
            let due = tickDue()
            if let d = due { timeout = min(timeout, d > now ? Int64((d - now) / 1_000_000) + 1 : 0) }
            let n = poll(&fds, nfds_t(fds.count), Int32(max(0, timeout)))
            if n < 0 && errno != EINTR { break }

            if fds[base - 1].revents != 0 {
                EventFD.drain(wakeFD)
                for work in posted.withLock({ q -> [@Sendable () -> Void] in let l = q; q.removeAll(); return l }) { work() }
            }
            let t0 = monotonicNanoseconds()
            for (i, fd) in order.enumerated() {
                guard let c = clients[fd] else { continue }
                let re = fds[i + base].revents
                if re & Int16(POLLIN | POLLHUP | POLLERR) != 0 { readFrom(c) }
                if c.backedUp {
                    // Nothing more is run for it until it reads.
                } else if c.busy, !c.closing {
                    apply(c, c.session.resume())
                } else if c.holdUntil <= t0 && !c.parked {
                    handleInput(c)
                }
                if re & Int16(POLLOUT) != 0 || c.pending > 0 { flush(c) }
                if !c.backedUp {
                    c.stalledSince = 0
                } else if c.stalledSince == 0 {
                    c.stalledSince = t0
                } else if t0 &- c.stalledSince > Self.stallSeconds * 1_000_000_000, !c.closing {
                    droppedSlowClients.add(1, ordering: .relaxed)
                    c.closing = true
                    c.output.removeAll()
                    c.outputOffset = 0
                }
                if c.closing && c.pending == 0 { drop(c) }
            }
            // After the clients: connections that hung up this turn no longer count
            // against the limits of the ones arriving.
            if fds[0].revents & Int16(POLLIN) != 0 { acceptClients(listenFD, mainListener, tcp: false) }
            for (i, l) in extraListeners.enumerated() where fds[1 + i].revents & Int16(POLLIN) != 0 {
                acceptClients(l.fd, l.listener, tcp: l.path == nil)
            }
            let t = monotonicNanoseconds()
            expireIdle(t)
            for c in clients.values where !c.closing {
                guard let due = c.session.nextTickDue, t >= due else { continue }
                let text = c.session.tick(now: t)
                if !text.isEmpty { enqueueRaw(c, text); flush(c) }
            }
            if t - lastTick >= UInt64(tickMillis) * 1_000_000 || due.map({ t >= $0 }) == true {
                lastTick = t
                onTick()
            }
            afterTurn?()
        }
        for c in Array(clients.values) { drop(c) }
        unlink(path)
        for l in extraListeners {
            close(l.fd)
            if let p = l.path { unlink(p) }
        }
    }

    /// Closes connections silent for longer than the timeout that wait for nothing.
    private func expireIdle(_ now: UInt64) {
        let limit = UInt64(max(1, limits.connectionTimeoutSeconds)) * 1_000_000_000
        for c in Array(clients.values) where !c.closing && now &- c.lastActive > limit {
            if c.busy || c.parked || c.pending > 0 || c.session.waitsForEvents { continue }
            timedOutClients.add(1, ordering: .relaxed)
            c.closing = true
            if c.pending == 0 { drop(c) }
        }
    }

    private func acceptClients(_ listener: Int32, _ l: Listener, tcp: Bool) {
        let name = l.name
        while true {
            var storage = sockaddr_storage()
            var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
            let fd = withUnsafeMutablePointer(to: &storage) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { clinux_accept_nonblocking_from(listener, $0, &length) }
            }
            if fd < 0 {
                let e = errno
                if e == EMFILE || e == ENFILE { outOfDescriptors(listener, l) }
                return
            }
            let address = tcp ? Self.describe(storage) : nil
            let peer = tcp ? nil : Peer.of(socket: fd, groups: !access.gids.isEmpty)
            let peerKey = peer.map { "uid:\($0.uid)" } ?? "addr:\(address?.split(separator: ":").dropLast().joined(separator: ":") ?? "?")"
            var refusal: Refusal?
            if !access.allows(peer) {
                let who = peer.map { "\($0)" } ?? "a TCP client (no credentials)"
                refusal = Refusal(reason: "permission denied: \(who) is not in control.allowed_users or control.allowed_groups", tooMany: false)
                refusedClients.add(1, ordering: .relaxed)
            } else if clients.count >= Self.maxClients || clients.values.filter({ $0.listener == name }).count >= limits.maxConnections {
                refusal = Refusal(reason: "too many connections (limits.max_connections = \(limits.maxConnections))", tooMany: true)
                refusedByLimits.add(1, ordering: .relaxed)
            } else if clients.values.filter({ $0.peerKey == peerKey }).count >= limits.maxConnectionsPerPeer {
                refusal = Refusal(reason: "too many connections from \(peer.map { "uid \($0.uid)" } ?? address ?? "this peer") (limits.max_connections_per_user = \(limits.maxConnectionsPerPeer))",
                                  tooMany: true)
                refusedByLimits.add(1, ordering: .relaxed)
            }
            onConnection?(peer, address, name, refusal?.reason)
            if let r = refusal {
                // One line saying why, then close. The socket's send buffer is empty, so
                // this short non-blocking send does not wait.
                let line = l.refusal(r)
                _ = line.utf8CString.withUnsafeBufferPointer { send(fd, $0.baseAddress, $0.count - 1, Int32(MSG_NOSIGNAL)) }
                close(fd)
                continue
            }
            let c = ClientContext(fd: fd, listener: name, peerKey: peerKey, session: l.makeSession())
            // A peer that has been guessing passwords waits before its first line too.
            if let f = peerAuthFailures[peerKey] { c.holdUntil = monotonicNanoseconds() + Self.authHold(f.count) }
            clients[fd] = c
            connectedClients.store(clients.count, ordering: .relaxed)
            if let hello = c.session.greeting() { enqueueRaw(c, hello) }
        }
    }

    /// accept() failed for lack of descriptors: the waiting connection stays readable,
    /// and polling on would spin at 100 % CPU. Close the spare descriptor, accept the
    /// connection with it, tell it why and close it; and let the listener rest 100 ms.
    private func outOfDescriptors(_ listener: Int32, _ l: Listener) {
        refusedByLimits.add(1, ordering: .relaxed)
        restingUntil[listener] = monotonicNanoseconds() + 100_000_000
        guard spareFD >= 0 else { return }
        close(spareFD)
        let fd = clinux_accept_nonblocking(listener)
        if fd >= 0 {
            let line = l.refusal(Refusal(reason: "playd is out of file descriptors; try again later", tooMany: true))
            _ = line.utf8CString.withUnsafeBufferPointer { send(fd, $0.baseAddress, $0.count - 1, Int32(MSG_NOSIGNAL)) }
            close(fd)
        }
        spareFD = open("/dev/null", O_RDONLY | O_CLOEXEC)
        onConnection?(nil, nil, l.name, "out of file descriptors (EMFILE)")
    }

    /// `1.2.3.4:5678` or `[::1]:5678`.
    private static func describe(_ storage: sockaddr_storage) -> String {
        var s = storage
        var host = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN) + 1)
        switch Int32(storage.ss_family) {
        case AF_INET:
            return withUnsafePointer(to: &s) {
                $0.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { sin in
                    var a = sin.pointee.sin_addr
                    inet_ntop(AF_INET, &a, &host, socklen_t(host.count))
                    return String(cString: host) + ":\(UInt16(bigEndian: sin.pointee.sin_port))"
                }
            }
        case AF_INET6:
            return withUnsafePointer(to: &s) {
                $0.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { sin in
                    var a = sin.pointee.sin6_addr
                    inet_ntop(AF_INET6, &a, &host, socklen_t(host.count))
                    return "[" + String(cString: host) + "]:\(UInt16(bigEndian: sin.pointee.sin6_port))"
                }
            }
        default: return "?"
        }
    }

    /// The hold after the `n`th wrong password from one peer: 0.25 s doubling to 8 s.
    static func authHold(_ n: Int) -> UInt64 {
        UInt64(250_000_000) << UInt64(min(5, max(0, n - 1)))
    }

    /// Reads what has arrived: one chunk a turn, so a fast sender cannot keep the loop.
    private func readFrom(_ c: ClientContext) {
        var chunk = [UInt8](repeating: 0, count: 16384)
        let n = recv(c.fd, &chunk, chunk.count, 0)
        if n == 0 { c.closing = true; c.output.removeAll(); c.outputOffset = 0; return }  // client gone
        if n < 0 {
            if errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR { return }
            c.closing = true; c.output.removeAll(); c.outputOffset = 0
            return
        }
        c.lastActive = monotonicNanoseconds()
        if c.inputStart > 0 && c.inputStart == c.input.count {
            c.input.removeAll(keepingCapacity: c.input.capacity <= Self.retainedBufferBytes)
            c.inputStart = 0
        } else if c.inputStart > Self.maxLineBytes {
            c.input.removeSubrange(..<c.inputStart)
            c.inputStart = 0
        }
        c.input.append(contentsOf: chunk[..<n])
    }

    /// Handles up to ``linesPerTurn`` complete lines of `c`'s input.
    private func handleInput(_ c: ClientContext) {
        var handled = 0
        while handled < Self.linesPerTurn, !c.closing, !c.busy, !c.parked, !c.backedUp, c.holdUntil <= monotonicNanoseconds() {
            guard let nl = c.input[c.inputStart...].firstIndex(of: 0x0A) else {
                if c.buffered > Self.maxLineBytes {
                    c.input.removeAll()
                    c.inputStart = 0
                    if !c.discardingLongLine {
                        c.discardingLongLine = true
                        tooLong(c)
                    }
                }
                return
            }
            let length = nl - c.inputStart
            let line = Array(c.input[c.inputStart..<nl])
            c.inputStart = nl + 1
            if c.discardingLongLine {
                c.discardingLongLine = false
                continue
            }
            if length > Self.maxLineBytes {
                tooLong(c)
                continue
            }
            handled += 1
            handleLine(c, line)
        }
    }

    private func handleLine(_ c: ClientContext, _ bytes: [UInt8]) {
        guard !c.closing else { return }
        apply(c, c.session.handle(bytes))
    }

    private func tooLong(_ c: ClientContext) {
        apply(c, c.session.lineTooLong(maxBytes: Self.maxLineBytes))
    }

    /// A session's output: send it, close, keep it busy, or hold it after a wrong password.
    private func apply(_ c: ClientContext, _ out: SessionOutput) {
        if !out.bytes.isEmpty { enqueueRaw(c, out.bytes) }
        if out.close { c.closing = true }
        c.busy = out.more && !out.close
        c.parked = out.parked && !out.close
        if out.authFailed {
            let now = monotonicNanoseconds()
            c.authFailures += 1
            var f = peerAuthFailures[c.peerKey] ?? (0, now)
            // A peer's count is forgotten 10 minutes after its last failure.
            if now &- f.last > 600_000_000_000 { f.count = 0 }
            f.count += 1
            f.last = now
            peerAuthFailures[c.peerKey] = f
            if peerAuthFailures.count > 4096 {
                peerAuthFailures = peerAuthFailures.filter { now &- $0.value.last <= 600_000_000_000 }
            }
            // Every connection of that peer is held, not only this one: connections
            // opened before the failures each had their guesses answered at once (60
            // connections × 5 guesses: 64 answered; issue 39). One guess per hold per
            // peer, however many connections it holds open.
            let until = now + Self.authHold(f.count)
            for other in clients.values where other.peerKey == c.peerKey { other.holdUntil = max(other.holdUntil, until) }
            if c.authFailures >= Self.maxAuthFailuresPerConnection { c.closing = true }
        }
    }

    /// Queues text that carries its own newlines (another protocol's reply).
    private func enqueueRaw(_ c: ClientContext, _ text: String) { enqueueRaw(c, Array(text.utf8)) }

    private func enqueueRaw(_ c: ClientContext, _ bytes: [UInt8]) {
        guard !c.closing else { return }
        if c.pending > Self.maxPendingBytes
            || (bytes.count > Self.maxPendingBytes / 16 && totalPending() + bytes.count > Self.maxTotalPendingBytes) {
            droppedSlowClients.add(1, ordering: .relaxed)
            c.closing = true
            c.output.removeAll()
            c.outputOffset = 0
            return
        }
        c.output.append(contentsOf: bytes)
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
            c.stalledSince = 0  // it takes bytes
        }
        // Drained. Keep a small buffer for the next reply; a burst (a long queue
        // listing, an event storm) may have grown it up to maxPendingBytes, and a
        // subscriber connected for months must not hold that high-water mark.
        c.output.removeAll(keepingCapacity: c.output.capacity <= Self.retainedBufferBytes)
        c.outputOffset = 0
    }

    /// Unsent bytes of all clients (counted for large replies only: a walk over the
    /// clients, 1,024 at most).
    private func totalPending() -> Int { clients.values.reduce(0) { $0 + $1.pending } }

    private func drop(_ c: ClientContext) {
        close(c.fd)
        clients[c.fd] = nil
        connectedClients.store(clients.count, ordering: .relaxed)
    }
}

