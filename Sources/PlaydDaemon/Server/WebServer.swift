import CMicroHTTPD
import CoreStream
import PlaydProtocol
import PlaydSessions
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// The web remote's HTTP listener (issue 44): a third protocol on the same Player.
///
/// The bytes are libmicrohttpd's (a thread per connection, its caps on connections per
/// listener and per address, its idle timeout and a 64 KiB memory cap per connection,
/// which bounds the request head); what the requests mean is the JSON protocol's: a
/// `POST /api` body is one JSON request line, run by a ``JSONSession`` on the control
/// thread (posted, never run on an HTTP thread), and its reply line is the response.
/// Events go to `GET /events` (Server-Sent Events) from the one place that notifies
/// (``Daemon/notify(_:_:_:_:)``), the same lines a JSON subscriber gets. Routes:
///
/// | route | what |
/// |---|---|
/// | `GET /`, the shipped files | the page (read once at start; no path reaches the disk) |
/// | `GET /session` | whether a password is needed and this browser has a session |
/// | `POST /login`, `POST /logout` | the session cookie (HttpOnly, SameSite=Strict) |
/// | `POST /api` | one JSON request → its reply |
/// | `GET /events` | the JSON events as SSE, a comment every 15 s to keep it open |
/// | `GET /cover` | the playing track's picture, with an ETag |
///
/// Security: a listener on a non-loopback address needs `http.password` (the daemon
/// refuses to start otherwise). Without a password the Host header must name an IP
/// address or `localhost` (a DNS-rebinding page cannot reach it by a name of its own).
/// A request that changes state must be `application/json` (a cross-site form cannot
/// send that without a preflight, which is refused) and its Origin, when sent, must
/// be this listener's own. A wrong password holds that address back 0.25 s, doubling
/// to 8 s, as on the MPD listener.
///
/// Threads: libmicrohttpd's, one per connection, which wait for the control thread's
/// answer (never the other way round); `notify` on the control thread; `stop` on the
/// control thread's way out.
final class WebServer: @unchecked Sendable {
    // @unchecked Sendable: `daemons` is written in `init` and `stop` only; `files`,
    // `password`, `open` are immutable; everything else is behind its Mutex.

    struct Settings {
        var listen: [String] = []
        var password = ""
        var webRoot = ""
        var maxConnections = 100
        var maxConnectionsPerAddress = 80
        var timeoutSeconds = 60
        /// The listen streams (issue 45), served at /stream.FORMAT; nil without them.
        var hub: StreamHub?
    }

    /// A shipped file, read at start.
    struct StaticFile {
        let type: String
        let bytes: [UInt8]
    }

    /// The page's files: these names and no others are served.
    static let shipped: [(name: String, type: String)] = [
        ("index.html", "text/html; charset=utf-8"),
        ("app.js", "text/javascript; charset=utf-8"),
        ("style.css", "text/css; charset=utf-8"),
        ("manifest.webmanifest", "application/manifest+json"),
        ("icon.svg", "image/svg+xml"),
        ("icon-192.png", "image/png"),
        ("icon-512.png", "image/png"),
    ]

    /// A request body (a JSON request line, a login) is at most this: the JSON socket's line cap.
    static let maxBodyBytes = ControlServer.maxLineBytes
    /// An event stream that has this much unsent is cut off (the browser reconnects and
    /// reads `status` again): a tab asleep on a phone must not grow the daemon.
    static let maxEventBacklog = 256 * 1024
    /// Sessions kept (a login adds one; the oldest goes first).
    static let maxSessions = 256
    /// The answer to a request is waited for this long (a `play` on a hung mount is
    /// `timed_out` after 30 s in the Player itself; this is a hang guard beyond it).
    static let answerSeconds = 90

    let files: [String: StaticFile]
    let password: String
    /// The listen streams, if any (the Player's).
    let hub: StreamHub?
    /// No password is set: every listener is on loopback (checked in `init`).
    var open: Bool { password.isEmpty }
    private var daemons: [OpaquePointer] = []
    /// Runs work on the control thread (the ControlServer's `post`).
    private let post: (@escaping @Sendable () -> Void) -> Void
    /// Session tokens and when each was last used (monotonic ns).
    private let sessions = Mutex<[String: UInt64]>([:])
    /// Wrong passwords per address: how many, and the last one's time (ns).
    private let failures = Mutex<[String: (count: Int, last: UInt64)]>([:])
    /// The event streams open now.
    private let streams = Mutex<[ObjectIdentifier: EventStream]>([:])
    /// Requests whose connection's thread waits for the control thread: answered with an
    /// error by `stop` (posted work no longer runs then, and each thread would wait out
    /// its 90 s while libmicrohttpd's stop joins it).
    private let waiting = Mutex<(answers: [ObjectIdentifier: Answer], stopped: Bool)>(([:], false))
    /// Requests parked on work off the control thread. Control thread.
    private var parked: [(session: JSONSession, answer: Answer)] = []
    private var resumeWanted = false
    /// Makes a JSON session for one request (the daemon's counters). Control thread.
    private let makeSession: () -> JSONSession
    /// Log lines (refusals). Any thread.
    private let log: @Sendable (String) -> Void

    struct SetupError: Error { let message: String }

    init(_ s: Settings, makeSession: @escaping () -> JSONSession, post: @escaping (@escaping @Sendable () -> Void) -> Void,
         log: @escaping @Sendable (String) -> Void) throws(SetupError) {
        password = s.password
        hub = s.hub
        self.makeSession = makeSession
        self.post = post
        self.log = log
        var addresses: [(storage: sockaddr_storage, length: socklen_t, text: String)] = []
        for a in s.listen {
            guard let parsed = Self.parseAddress(a) else {
                throw SetupError(message: "http.listen: '\(a)' is not an address such as \"127.0.0.1:6680\" or \"[::1]:6680\"")
            }
            if !parsed.loopback && s.password.isEmpty {
                throw SetupError(message: "http.listen: \(a) is not a loopback address, so the web remote needs http.password (or http.password_file): playd does not start an open remote on a network")
            }
            addresses.append((parsed.storage, parsed.length, a))
        }
        let root = s.webRoot.isEmpty ? Self.defaultWebRoot() : s.webRoot
        var files: [String: StaticFile] = [:]
        for f in Self.shipped {
            guard let bytes = Self.readSmallFile(root + "/" + f.name) else {
                throw SetupError(message: "http: the web remote's \(f.name) is not in \(root) (set http.web_root to where the package put it)")
            }
            files[f.name] = StaticFile(type: f.type, bytes: bytes)
        }
        self.files = files
        let me = Unmanaged.passUnretained(self).toOpaque()
        for a in addresses {
            var storage = a.storage
            let d = withUnsafePointer(to: &storage) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    playd_http_start($0, a.length, UInt32(s.maxConnections), UInt32(s.maxConnectionsPerAddress), UInt32(s.timeoutSeconds),
                                     64 * 1024, Self.accessHandler, me, Self.completedHandler, me)
                }
            }
            guard let d else {
                let e = errno
                stop()
                throw SetupError(message: "http.listen: \(a.text): could not listen (\(String(cString: strerror(e))))")
            }
            daemons.append(d)
        }
    }

    deinit { stop() }

    /// Ends every event stream and closes the listeners (joins their threads). Control
    /// thread, on the way out; the threads waiting for the control thread get their
    /// answers first (`answerAll`).
    func stop() {
        // Under `streams`' lock too: an event stream registered after this sweep saw
        // `stopped` first (see `events`).
        let unanswered = streams.withLock { _ in waiting.withLock { w -> [Answer] in w.stopped = true; return Array(w.answers.values) } }
        let bye = Array((error(.internal, "playd is stopping").text + "\n").utf8)
        for a in unanswered { a.give(bye) }
        for s in streams.withLock({ Array($0.values) }) { s.close() }
        hub?.closeAll()
        for d in daemons { MHD_stop_daemon(d) }
        daemons.removeAll()
    }

    // MARK: - Control thread

    /// The turn's events, to every open event stream (the lines a JSON subscriber gets).
    /// Control thread: appends and wakes, never waits.
    func notify(_ lines: String) {
        guard !lines.isEmpty else { return }
        var sse: [UInt8] = []
        for line in lines.split(separator: "\n", omittingEmptySubsequences: true) {
            sse += Array("data: ".utf8) + Array(line.utf8) + [0x0A, 0x0A]
        }
        for s in streams.withLock({ Array($0.values) }) { s.send(sse) }
    }

    /// Work a parked request waited for has finished: they run again at the end of
    /// this turn (``resumeIfWanted()``). Control thread.
    func resumeParked() { resumeWanted = true }

    /// Runs the parked requests again, before the turn's flush (a file opened off the
    /// control thread is the Player's until then). Control thread.
    func resumeIfWanted() {
        guard resumeWanted else { return }
        resumeWanted = false
        let waiting = parked
        parked = []
        for p in waiting { finish(p.session, p.session.resume(), p.answer) }
    }

    /// Runs one request line. Control thread.
    private func run(_ line: [UInt8], _ answer: Answer) {
        let session = makeSession()
        finish(session, session.handle(line), answer)
    }

    private func finish(_ session: JSONSession, _ first: SessionOutput, _ answer: Answer) {
        var out = first
        var bytes = out.bytes
        while out.more {
            out = session.resume()
            bytes += out.bytes
        }
        if out.parked {
            answer.partial += bytes
            parked.append((session, answer))
            return
        }
        answer.give(answer.partial + bytes)
    }

    // MARK: - HTTP threads

    /// A reply a request waits for: given by the control thread, waited for by the
    /// connection's own thread.
    final class Answer: @unchecked Sendable {
        // @unchecked: `partial` is the control thread's; `value` is behind the Mutex,
        // and the semaphore is the hand-over.
        var partial: [UInt8] = []
        private let value = Mutex<[UInt8]?>(nil)
        private var semaphore = sem_t()
        init() { sem_init(&semaphore, 0, 0) }
        deinit { sem_destroy(&semaphore) }
        func give(_ bytes: [UInt8]) {
            value.withLock { $0 = bytes }
            sem_post(&semaphore)
        }
        /// The reply, or nil after `seconds`.
        func wait(seconds: Int) -> [UInt8]? {
            var deadline = timespec()
            clock_gettime(CLOCK_REALTIME, &deadline)
            deadline.tv_sec += seconds
            while sem_timedwait(&semaphore, &deadline) != 0 {
                if errno != EINTR { return nil }
            }
            return value.withLock { $0 }
        }
    }

    /// One `GET /events` response: what the control thread queued for it, and the
    /// semaphore its connection's thread waits on.
    final class EventStream: @unchecked Sendable {
        // @unchecked: `state` is behind the Mutex; the semaphore is thread-safe.
        private let state = Mutex<(pending: [UInt8], closed: Bool)>(([], false))
        private var semaphore = sem_t()
        init() {
            sem_init(&semaphore, 0, 0)
            // Reconnect after 2 s if the stream drops; a comment first so the browser
            // says "open" at once.
            state.withLock { $0.pending = Array("retry: 2000\n: playd events\n\n".utf8) }
        }
        deinit { sem_destroy(&semaphore) }
        func send(_ bytes: [UInt8]) {
            state.withLock { s in
                guard !s.closed else { return }
                if s.pending.count + bytes.count > WebServer.maxEventBacklog {
                    s.closed = true
                    s.pending = []
                } else {
                    s.pending += bytes
                }
            }
            sem_post(&semaphore)
        }
        func close() {
            state.withLock { $0.closed = true }
            sem_post(&semaphore)
        }
        /// Up to `max` bytes for the response, waiting up to 15 s (then a keep-alive
        /// comment). nil: the stream is over.
        func next(max: Int) -> [UInt8]? {
            var deadline = timespec()
            clock_gettime(CLOCK_REALTIME, &deadline)
            deadline.tv_sec += 15
            while true {
                let taken: [UInt8]?? = state.withLock { s in
                    if !s.pending.isEmpty {
                        let n = min(max, s.pending.count)
                        let chunk = Array(s.pending[..<n])
                        s.pending.removeFirst(n)
                        return .some(chunk)
                    }
                    return s.closed ? .some(nil) : nil
                }
                if let t = taken { return t }
                if sem_timedwait(&semaphore, &deadline) != 0 && errno == ETIMEDOUT { return Array(": keep-alive\n\n".utf8) }
            }
        }
    }

    /// Per-request state libmicrohttpd keeps for us between calls.
    final class Request {
        var body: [UInt8] = []
        var tooLarge = false
    }

    static let accessHandler: MHD_AccessHandlerCallback = { cls, connection, url, method, _, uploadData, uploadSize, context in
        guard let cls, let connection, let url, let method, let uploadSize, let context else { return .NO }
        let server = Unmanaged<WebServer>.fromOpaque(cls).takeUnretainedValue()
        if context.pointee == nil {
            context.pointee = Unmanaged.passRetained(Request()).toOpaque()
            return .YES
        }
        let request = Unmanaged<Request>.fromOpaque(context.pointee!).takeUnretainedValue()
        if uploadSize.pointee > 0 {
            if let data = uploadData, !request.tooLarge {
                if request.body.count + uploadSize.pointee > maxBodyBytes {
                    request.tooLarge = true
                    request.body = []
                } else {
                    data.withMemoryRebound(to: UInt8.self, capacity: uploadSize.pointee) {
                        request.body.append(contentsOf: UnsafeBufferPointer(start: $0, count: uploadSize.pointee))
                    }
                }
            }
            uploadSize.pointee = 0
            return .YES
        }
        return server.respond(connection, String(cString: url), String(cString: method), request)
    }

    static let completedHandler: MHD_RequestCompletedCallback = { _, _, context, _ in
        guard let context, let p = context.pointee else { return }
        Unmanaged<Request>.fromOpaque(p).release()
        context.pointee = nil
    }

    private func header(_ c: OpaquePointer, _ name: String) -> String? {
        MHD_lookup_connection_value(c, .HEADER_KIND, name).map { String(cString: $0) }
    }

    private func peer(_ c: OpaquePointer) -> String {
        var buffer = [CChar](repeating: 0, count: 64)
        return playd_http_peer(c, &buffer, buffer.count) == 0 ? String(cString: buffer) : "?"
    }

    private func respond(_ c: OpaquePointer, _ url: String, _ method: String, _ request: Request) -> MHD_Result {
        let path = String(url.prefix { $0 != "?" })
        // Without a password the page is reachable only by an address or `localhost`:
        // a page on another site whose name an attacker points at 127.0.0.1 (DNS
        // rebinding) sends its own name as the Host.
        if open, let host = header(c, "Host"), !Self.hostIsAddressOrLocal(host) {
            log("web remote: refused Host '\(host.prefix(100))' from \(peer(c)) (without http.password only an address or localhost may be used)")
            return send(c, 403, error(.notAllowed, "this remote answers to an address or localhost only (set http.password to use a name)"))
        }
        if request.tooLarge {
            return send(c, 413, error(.tooLarge, "a request body is at most \(Self.maxBodyBytes) bytes"))
        }
        switch (method, path) {
        case ("GET", "/"), ("HEAD", "/"):
            return sendFile(c, "index.html")
        case ("GET", _) where files[String(path.dropFirst())] != nil:
            return sendFile(c, String(path.dropFirst()))
        case ("GET", "/session"):
            let authed = authorized(c)
            return send(c, 200, JSON.obj(("ok", .bool(true)), ("password_required", .bool(!open)), ("authenticated", .bool(authed)),
                                         ("streams", .array((hub?.formats ?? []).map { .string($0.path.dropFirst().description) }))))
        case ("GET", _) where path.hasPrefix("/stream."):
            guard authorized(c) else {
                return send(c, 401, error(.notAllowed, "log in first: this remote has a password"),
                            headers: [("WWW-Authenticate", "Basic realm=\"playd\"")])
            }
            return listen(c, path)
        case ("POST", "/login"):
            if let refusal = crossSite(c) { return refusal }
            return login(c, request.body)
        case ("POST", "/logout"):
            if let refusal = crossSite(c) { return refusal }
            if let token = cookie(c) { _ = sessions.withLock { $0.removeValue(forKey: token) } }
            return send(c, 200, JSON.obj(("ok", .bool(true))), headers: [("Set-Cookie", "playd_session=; Max-Age=0; Path=/; HttpOnly; SameSite=Strict")])
        case ("POST", "/api"):
            if let refusal = crossSite(c) { return refusal }
            guard authorized(c) else { return send(c, 401, error(.notAllowed, "log in first: this remote has a password")) }
            return api(c, request.body)
        case ("GET", "/events"):
            guard authorized(c) else { return send(c, 401, error(.notAllowed, "log in first: this remote has a password")) }
            return events(c)
        case ("GET", "/cover"):
            guard authorized(c) else { return send(c, 401, error(.notAllowed, "log in first: this remote has a password")) }
            return cover(c)
        case (_, "/api"), (_, "/login"), (_, "/logout"):
            return send(c, 405, error(.badRequest, "\(method) \(path): use POST"), headers: [("Allow", "POST")])
        default:
            return send(c, 404, error(.badRequest, "no such page: \(path.prefix(200))"))
        }
    }

    /// A request that changes state from another site is refused: it must be JSON
    /// (a form cannot be, and a script on another origin must ask first, and is not
    /// answered), and its Origin, when the browser sends one, must name this host.
    private func crossSite(_ c: OpaquePointer) -> MHD_Result? {
        let type = header(c, "Content-Type")?.lowercased() ?? ""
        guard type.hasPrefix("application/json") else {
            return send(c, 415, error(.badRequest, "send the request as application/json"))
        }
        if let origin = header(c, "Origin") {
            let host = header(c, "Host") ?? ""
            guard origin == "http://" + host || origin == "https://" + host else {
                log("web remote: refused a cross-origin request from \(origin.prefix(200)) (\(peer(c)))")
                return send(c, 403, error(.notAllowed, "cross-origin request refused"))
            }
        }
        if header(c, "Sec-Fetch-Site") == "cross-site" {
            return send(c, 403, error(.notAllowed, "cross-origin request refused"))
        }
        return nil
    }

    private func cookie(_ c: OpaquePointer) -> String? {
        MHD_lookup_connection_value(c, .COOKIE_KIND, "playd_session").map { String(cString: $0) }
    }

    private func authorized(_ c: OpaquePointer) -> Bool {
        if open { return true }
        if let auth = header(c, "Authorization") {
            if auth.hasPrefix("Bearer "), Self.same(String(auth.dropFirst(7)), password) { return true }
            // A player given http://any:PASSWORD@box:6680/stream.mp3 (mpv, VLC) sends Basic.
            if auth.hasPrefix("Basic "), let raw = Base64.decode(String(auth.dropFirst(6))),
               let colon = raw.firstIndex(of: UInt8(ascii: ":")),
               Self.same(String(decoding: raw[(colon + 1)...], as: UTF8.self), password) { return true }
        }
        guard let token = cookie(c) else { return false }
        return sessions.withLock { s in
            guard s[token] != nil else { return false }
            s[token] = monotonicNanoseconds()
            return true
        }
    }

    /// Compares in time independent of where they differ.
    static func same(_ a: String, _ b: String) -> Bool {
        let x = Array(a.utf8), y = Array(b.utf8)
        var d = x.count ^ y.count
        for i in 0..<min(x.count, y.count) { d |= Int(x[i] ^ y[i]) }
        return d == 0
    }

    private func login(_ c: OpaquePointer, _ body: [UInt8]) -> MHD_Result {
        if open { return send(c, 200, JSON.obj(("ok", .bool(true)))) }
        let address = peer(c)
        // Hold an address that has been guessing, before looking at this guess.
        let hold = failures.withLock { f -> UInt64 in
            guard let e = f[address], monotonicNanoseconds() &- e.last < 600_000_000_000 else { return 0 }
            return ControlServer.authHold(e.count)
        }
        if hold > 0 { usleep(UInt32(min(hold / 1000, 8_000_000))) }
        let given = (try? JSON.parse(String(decoding: body, as: UTF8.self)))?["password"]?.stringValue ?? ""
        guard Self.same(given, password) else {
            failures.withLock { f in
                let now = monotonicNanoseconds()
                var e = f[address] ?? (0, now)
                if now &- e.last > 600_000_000_000 { e.count = 0 }
                e.count += 1
                e.last = now
                f[address] = e
                if f.count > 4096 { f = f.filter { now &- $0.value.last <= 600_000_000_000 } }
            }
            log("web remote: wrong password from \(address)")
            return send(c, 401, error(.notAllowed, "wrong password"))
        }
        failures.withLock { _ = $0.removeValue(forKey: address) }
        var rng = SystemRandomNumberGenerator()
        let token = (0..<4).map { _ in String(rng.next() as UInt64, radix: 16) }.joined(separator: "-")
        sessions.withLock { s in
            if s.count >= Self.maxSessions, let oldest = s.min(by: { $0.value < $1.value })?.key { s.removeValue(forKey: oldest) }
            s[token] = monotonicNanoseconds()
        }
        return send(c, 200, JSON.obj(("ok", .bool(true))),
                    headers: [("Set-Cookie", "playd_session=\(token); Path=/; HttpOnly; SameSite=Strict")])
    }

    /// Runs `line` on the control thread and waits for its reply.
    private func ask(_ line: [UInt8]) -> [UInt8]? {
        let answer = Answer()
        let id = ObjectIdentifier(answer)
        guard waiting.withLock({ w -> Bool in
            guard !w.stopped else { return false }
            w.answers[id] = answer
            return true
        }) else { return nil }
        defer { _ = waiting.withLock { $0.answers.removeValue(forKey: id) } }
        let box = UncheckedLine(line)
        post { [self] in run(box.bytes, answer) }
        return answer.wait(seconds: Self.answerSeconds)
    }

    private func api(_ c: OpaquePointer, _ body: [UInt8]) -> MHD_Result {
        // One request line: a newline inside would be a second request.
        var line = body
        while let last = line.last, last == 0x0A || last == 0x0D || last == 0x20 { line.removeLast() }
        guard !line.contains(0x0A) else { return send(c, 400, error(.badRequest, "one request per POST")) }
        guard !line.isEmpty else { return send(c, 400, error(.badJSON, "the body is empty: send one JSON request")) }
        guard let reply = ask(line) else { return send(c, 504, error(.internal, "the daemon did not answer within \(Self.answerSeconds) s")) }
        return send(c, 200, reply)
    }

    private func cover(_ c: OpaquePointer) -> MHD_Result {
        guard let reply = ask(Array(#"{"cmd":"cover"}"#.utf8)),
              let json = try? JSON.parse(String(decoding: reply, as: UTF8.self)) else {
            return send(c, 504, error(.internal, "the daemon did not answer"))
        }
        guard let data = json["cover"]?["data"]?.stringValue, let bytes = Base64.decode(data),
              let mime = json["cover"]?["mime"]?.stringValue else {
            return send(c, 404, error(.notPlaying, "the playing track has no picture"))
        }
        // FNV-1a of the picture: the browser asks again with it and gets 304 while the
        // same picture plays (an album's tracks share one).
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for b in bytes { hash = (hash ^ UInt64(b)) &* 0x100_0000_01b3 }
        let tag = "\"\(String(hash, radix: 16))-\(bytes.count)\""
        if header(c, "If-None-Match") == tag {
            return send(c, 304, [], type: nil, headers: [("ETag", tag), ("Cache-Control", "private, no-cache")])
        }
        let safe = ["image/jpeg", "image/png", "image/gif", "image/webp"].contains(mime) ? mime : "application/octet-stream"
        return send(c, 200, bytes, type: safe, headers: [("ETag", tag), ("Cache-Control", "private, no-cache")])
    }

    /// `GET /stream.FORMAT`: what the local output plays, encoded, for as long as the
    /// listener stays (issue 45).
    private func listen(_ c: OpaquePointer, _ path: String) -> MHD_Result {
        guard let hub, let format = StreamHub.Format.allCases.first(where: { $0.path == path }) else {
            return send(c, 404, error(.badRequest, "no such stream: \(path.prefix(100)) (http.streams lists the ones served)"))
        }
        let listener: StreamHub.Listener
        do {
            listener = try hub.attach(format, icy: header(c, "Icy-MetaData") == "1")
        } catch .notEnabled {
            return send(c, 404, error(.badRequest, "\(path) is not served (http.streams lists the ones served)"))
        } catch .full {
            return send(c, 503, error(.tooManyConnections, "\(hub.maxListeners) listeners already (http.max_listeners)"))
        } catch {
            return send(c, 500, self.error(.internal, "\(error)"))
        }
        let box = Unmanaged.passRetained(ListenBox(listener: listener, hub: hub)).toOpaque()
        guard let response = MHD_create_response_from_callback(UInt64.max, 16 * 1024, Self.listenReader, box, Self.listenFree) else {
            Unmanaged<ListenBox>.fromOpaque(box).release()
            hub.detach(listener)
            return .NO
        }
        MHD_add_response_header(response, "Content-Type", format.contentType)
        MHD_add_response_header(response, "Cache-Control", "no-store")
        MHD_add_response_header(response, "icy-name", "playd")
        if listener.icy { MHD_add_response_header(response, "icy-metaint", "\(StreamHub.Listener.metaInterval)") }
        let r = MHD_queue_response(c, 200, response)
        MHD_destroy_response(response)
        return r
    }

    final class ListenBox {
        let listener: StreamHub.Listener
        let hub: StreamHub
        init(listener: StreamHub.Listener, hub: StreamHub) { self.listener = listener; self.hub = hub }
    }

    static let listenReader: MHD_ContentReaderCallback = { cls, _, buffer, max in
        guard let cls, let buffer else { return -1 }
        let box = Unmanaged<ListenBox>.fromOpaque(cls).takeUnretainedValue()
        guard let bytes = box.listener.next(max: max) else { return -1 }
        bytes.withUnsafeBytes { UnsafeMutableRawPointer(buffer).copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
        return bytes.count
    }

    static let listenFree: MHD_ContentReaderFreeCallback = { cls in
        guard let cls else { return }
        let box = Unmanaged<ListenBox>.fromOpaque(cls).takeRetainedValue()
        box.hub.detach(box.listener)
    }

    private func events(_ c: OpaquePointer) -> MHD_Result {
        let stream = EventStream()
        let id = ObjectIdentifier(stream)
        // Registered unless `stop` has begun: one made after its sweep would never be
        // closed, and libmicrohttpd's stop would wait for its thread for ever.
        guard streams.withLock({ list -> Bool in
            guard !waiting.withLock({ $0.stopped }) else { return false }
            list[id] = stream
            return true
        }) else { return send(c, 503, error(.internal, "playd is stopping")) }
        let retained = Unmanaged.passRetained(StreamBox(stream: stream, server: self)).toOpaque()
        guard let response = MHD_create_response_from_callback(UInt64.max, 4096, Self.streamReader, retained, Self.streamFree) else {
            streams.withLock { _ = $0.removeValue(forKey: id) }
            Unmanaged<StreamBox>.fromOpaque(retained).release()
            return .NO
        }
        MHD_add_response_header(response, "Content-Type", "text/event-stream")
        MHD_add_response_header(response, "Cache-Control", "no-store")
        MHD_add_response_header(response, "X-Accel-Buffering", "no")
        let r = MHD_queue_response(c, 200, response)
        MHD_destroy_response(response)
        return r
    }

    final class StreamBox {
        let stream: EventStream
        unowned let server: WebServer
        init(stream: EventStream, server: WebServer) { self.stream = stream; self.server = server }
    }

    static let streamReader: MHD_ContentReaderCallback = { cls, _, buffer, max in
        guard let cls, let buffer else { return -1 }
        let box = Unmanaged<StreamBox>.fromOpaque(cls).takeUnretainedValue()
        guard let bytes = box.stream.next(max: max) else { return -1 }  // MHD_CONTENT_READER_END_OF_STREAM
        bytes.withUnsafeBytes { UnsafeMutableRawPointer(buffer).copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
        return bytes.count
    }

    static let streamFree: MHD_ContentReaderFreeCallback = { cls in
        guard let cls else { return }
        let box = Unmanaged<StreamBox>.fromOpaque(cls).takeRetainedValue()
        box.stream.close()
        let id = ObjectIdentifier(box.stream)
        box.server.streams.withLock { _ = $0.removeValue(forKey: id) }
    }

    /// How many event streams are open (status, tests).
    var openStreams: Int { streams.withLock { $0.count } }

    private func sendFile(_ c: OpaquePointer, _ name: String) -> MHD_Result {
        let f = files[name]!
        return send(c, 200, f.bytes, type: f.type, headers: [
            ("Cache-Control", "no-cache"),
            // The page loads only its own files; no inline script, no frame.
            ("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"),
            ("X-Frame-Options", "DENY"),
            ("Referrer-Policy", "no-referrer"),
        ])
    }

    private func error(_ code: ProtocolErrorCode, _ message: String) -> JSON {
        errorReply(id: nil, code, message)
    }

    private func send(_ c: OpaquePointer, _ status: UInt32, _ json: JSON, headers: [(String, String)] = []) -> MHD_Result {
        send(c, status, Array((json.text + "\n").utf8), type: "application/json", headers: headers)
    }

    private func send(_ c: OpaquePointer, _ status: UInt32, _ bytes: [UInt8], type: String? = "application/json",
                      headers: [(String, String)] = []) -> MHD_Result {
        let response = bytes.withUnsafeBytes { raw in
            MHD_create_response_from_buffer(raw.count, UnsafeMutableRawPointer(mutating: raw.baseAddress), .RESPMEM_MUST_COPY)
        }
        guard let response else { return .NO }
        if let type { MHD_add_response_header(response, "Content-Type", type) }
        MHD_add_response_header(response, "X-Content-Type-Options", "nosniff")
        for (k, v) in headers { MHD_add_response_header(response, k, v) }
        let r = MHD_queue_response(c, status, response)
        MHD_destroy_response(response)
        return r
    }

    // MARK: - Addresses and files

    /// "127.0.0.1:6680" or "[::1]:6680": the socket address and whether it is loopback.
    static func parseAddress(_ text: String) -> (storage: sockaddr_storage, length: socklen_t, loopback: Bool)? {
        guard text.utf8.count <= 64, let colon = text.lastIndex(of: ":"),
              let port = UInt16(text[text.index(after: colon)...]), port > 0 else { return nil }
        var host = String(text[..<colon])
        var storage = sockaddr_storage()
        if host.hasPrefix("[") && host.hasSuffix("]") {
            host = String(host.dropFirst().dropLast())
            var a = sockaddr_in6()
            a.sin6_family = sa_family_t(AF_INET6)
            a.sin6_port = port.bigEndian
            guard inet_pton(AF_INET6, host, &a.sin6_addr) == 1 else { return nil }
            let loop = host == "::1"
            withUnsafeMutableBytes(of: &storage) { dst in withUnsafeBytes(of: a) { dst.copyMemory(from: $0) } }
            return (storage, socklen_t(MemoryLayout<sockaddr_in6>.size), loop)
        }
        var a = sockaddr_in()
        a.sin_family = sa_family_t(AF_INET)
        a.sin_port = port.bigEndian
        guard inet_pton(AF_INET, host, &a.sin_addr) == 1 else { return nil }
        let loop = host.hasPrefix("127.")
        withUnsafeMutableBytes(of: &storage) { dst in withUnsafeBytes(of: a) { dst.copyMemory(from: $0) } }
        return (storage, socklen_t(MemoryLayout<sockaddr_in>.size), loop)
    }

    /// A Host header that is an IPv4 or bracketed IPv6 address or `localhost`, with or
    /// without a port.
    static func hostIsAddressOrLocal(_ host: String) -> Bool {
        var name = host.lowercased()
        if name.hasPrefix("[") { return name.contains("]") }
        if let colon = name.lastIndex(of: ":") { name = String(name[..<colon]) }
        if name == "localhost" { return true }
        var a = in_addr()
        return inet_pton(AF_INET, name, &a) == 1
    }

    /// Where the page's files are when `http.web_root` is not set: beside an installed
    /// binary (`/usr/bin/playd` → `/usr/share/playd/web`), else the source tree's
    /// `web/` (a build run in place).
    static func defaultWebRoot() -> String {
        var buffer = [CChar](repeating: 0, count: 4096)
        let n = readlink("/proc/self/exe", &buffer, buffer.count - 1)
        if n > 0 {
            let exe = String(decoding: buffer[..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
            let bin = String(exe[..<(exe.lastIndex(of: "/") ?? exe.startIndex)])
            let installed = bin + "/../share/playd/web"
            if access(installed + "/index.html", R_OK) == 0 { return installed }
        }
        // …/Sources/PlaydDaemon/Server/WebServer.swift → …/web
        var parts = #filePath.split(separator: "/", omittingEmptySubsequences: false)
        parts.removeLast(4)
        return parts.joined(separator: "/") + "/web"
    }

    /// A regular file of at most 4 MiB, whole.
    static func readSmallFile(_ path: String) -> [UInt8]? {
        let fd = Glibc.open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0, st.st_mode & S_IFMT == S_IFREG, st.st_size <= 4 << 20 else { return nil }
        var bytes = [UInt8](repeating: 0, count: Int(st.st_size))
        var done = 0
        while done < bytes.count {
            let r = bytes[done...].withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if r <= 0 { return nil }
            done += r
        }
        return bytes
    }
}

/// A request line handed to the control thread.
private struct UncheckedLine: @unchecked Sendable {
    // @unchecked: an immutable array of bytes.
    let bytes: [UInt8]
    init(_ bytes: [UInt8]) { self.bytes = bytes }
}
