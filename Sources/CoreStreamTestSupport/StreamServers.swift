import Foundation

/// A server process a stream test starts on loopback and stops again.
public final class ServerProcess: @unchecked Sendable {
    // @unchecked Sendable: used from the test's thread only.
    public let process: Process
    public let port: Int
    public let log: String

    init(process: Process, port: Int, log: String) {
        self.process = process
        self.port = port
        self.log = log
    }

    /// Stops it (SIGKILL: a server that dies, for the drop tests) and waits.
    public func kill() {
        guard process.isRunning else { return }
        Glibc.kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }

    deinit { kill() }

    /// Whether something accepts TCP connections on 127.0.0.1:`port`.
    public static func listening(_ port: Int) -> Bool {
        onLoopback(port) { fd, addr, len in connect(fd, addr, len) } == 0
    }

    /// `call` on a new TCP socket with 127.0.0.1:`port` (connect, bind); the socket is
    /// closed after.
    static func onLoopback(_ port: Int, _ call: (Int32, UnsafePointer<sockaddr>, socklen_t) -> Int32) -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = in_port_t(UInt16(port).bigEndian)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        return withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { call(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
    }

    /// `count` consecutive TCP ports on 127.0.0.1, free now, below the kernel's ephemeral
    /// range (32768–60999 here). For a server a test kills and starts again on the same
    /// port: in the gap, a port in the ephemeral range can be handed to any socket another
    /// test process binds to port 0, and the restarted server then fails to bind while its
    /// clients reconnect to the stranger (a CI run's snapclient never resynced that way).
    public static func stablePorts(_ count: Int = 1) -> Int {
        func bindable(_ port: Int) -> Bool { onLoopback(port) { fd, addr, len in bind(fd, addr, len) } == 0 }
        while true {
            let first = Int.random(in: 20_000...(32_000 - count))
            if (first..<first + count).allSatisfy(bindable) { return first }
        }
    }

    /// A TCP port nothing listens on now.
    public static func freePort() -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = 0
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, len) } }
        _ = withUnsafeMutablePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) } }
        return Int(UInt16(bigEndian: addr.sin_port))
    }

    /// Runs `argv` with its output in `log`, SIGTERM and SIGINT unblocked (a test
    /// runner's children inherit them blocked).
    public static func spawn(_ argv: [String], log: String) throws -> Process {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        p.arguments = ["-c", "import os, signal, sys; signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM, signal.SIGINT}); os.execvp(sys.argv[1], sys.argv[1:])"] + argv
        FileManager.default.createFile(atPath: log, contents: nil)
        let h = FileHandle(forWritingAtPath: log)!
        p.standardOutput = h
        p.standardError = h
        p.standardInput = FileHandle.nullDevice
        try p.run()
        return p
    }

    /// Waits until `port` accepts, or throws naming the log.
    func waitListening(seconds: Double = 10) throws {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if Self.listening(port) { return }
            if !process.isRunning { break }
            usleep(20_000)
        }
        throw FixtureError("\(process.arguments?.dropFirst(3).first ?? "server") did not listen on \(port): \((try? String(contentsOfFile: log, encoding: .utf8)) ?? "")")
    }
}

/// A TCP listener on 127.0.0.1 that accepts (the kernel's backlog does) and never
/// answers: a server that hangs. Closed when released.
public final class SilentServer: @unchecked Sendable {
    // @unchecked Sendable: the descriptor is only closed, once.
    public let port: Int
    private let fd: Int32

    public init() {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        self.fd = fd
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, len) } }
        _ = withUnsafeMutablePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) } }
        listen(fd, 16)
        port = Int(UInt16(bigEndian: addr.sin_port))
    }

    deinit { close(fd) }
}

/// `scripts/test-httpd`: the files of a folder over HTTP, with or without byte ranges,
/// and `/status/NNN` answering NNN.
public enum TestHTTPServer {
    public static func start(serving dir: String, ranges: Bool = true) throws -> ServerProcess {
        let script = Fixtures.repositoryRoot.appendingPathComponent("scripts/test-httpd").path
        let log = dir + "/httpd-\(UInt32.random(in: 0...UInt32.max)).log"
        let p = try ServerProcess.spawn([script, dir] + (ranges ? [] : ["--no-range"]), log: log)
        // It prints its port first.
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline {
            if let text = try? String(contentsOfFile: log, encoding: .utf8), let line = text.split(separator: "\n").first,
               let port = Int(line) {
                let server = ServerProcess(process: p, port: port, log: log)
                try server.waitListening()
                return server
            }
            usleep(20_000)
        }
        p.terminate()
        throw FixtureError("test-httpd printed no port: \((try? String(contentsOfFile: log, encoding: .utf8)) ?? "")")
    }
}

/// Debian's icecast2 with a config of its own in `dir`, on a free loopback port, and
/// the ffmpeg CLI as its source.
public final class Icecast: @unchecked Sendable {
    // @unchecked Sendable: used from the test's thread only.
    public let dir: String
    public let port: Int
    public private(set) var server: ServerProcess?
    public private(set) var sources: [String: ServerProcess] = [:]
    public static let sourcePassword = "playd-source"
    public static let adminPassword = "playd-admin"

    public init(dir: String) throws {
        self.dir = dir
        port = ServerProcess.freePort()
        try FileManager.default.createDirectory(atPath: dir + "/log", withIntermediateDirectories: true)
        // icecast2 started as root drops to nobody (changeowner) and then writes its logs.
        chmod(dir + "/log", 0o777)
        try """
        <icecast>
          <limits><clients>50</clients><sources>4</sources><burst-size>65536</burst-size><source-timeout>10</source-timeout></limits>
          <authentication>
            <source-password>\(Self.sourcePassword)</source-password>
            <admin-user>admin</admin-user>
            <admin-password>\(Self.adminPassword)</admin-password>
          </authentication>
          <hostname>127.0.0.1</hostname>
          <listen-socket><port>\(port)</port><bind-address>127.0.0.1</bind-address></listen-socket>
          <paths>
            <basedir>/usr/share/icecast2</basedir>
            <logdir>\(dir)/log</logdir>
            <webroot>/usr/share/icecast2/web</webroot>
            <adminroot>/usr/share/icecast2/admin</adminroot>
          </paths>
          <logging><accesslog>access.log</accesslog><errorlog>error.log</errorlog><loglevel>3</loglevel></logging>
          <security><chroot>0</chroot><changeowner><user>nobody</user><group>nogroup</group></changeowner></security>
        </icecast>
        """.write(toFile: dir + "/icecast.xml", atomically: true, encoding: .utf8)
    }

    public func start() throws {
        let p = try ServerProcess.spawn(["icecast2", "-c", dir + "/icecast.xml"], log: dir + "/icecast.out")
        let s = ServerProcess(process: p, port: port, log: dir + "/icecast.out")
        try s.waitListening()
        server = s
    }

    public func stop() {
        for s in sources.values { s.kill() }
        sources = [:]
        server?.kill()
        server = nil
    }

    deinit { stop() }

    public func url(_ mount: String) -> String { "http://127.0.0.1:\(port)/\(mount)" }

    /// Feeds `mount` with `input` looped for ever, encoded as MP3 (or Ogg Vorbis for a
    /// `.ogg` mount) at real time, and waits until the mount is listed as live.
    public func feed(_ mount: String, input: String, name: String = "Test FM", bitrate: String = "128k") throws {
        do {
            try feedOnce(mount, input: input, name: name, bitrate: bitrate)
        } catch let e as FixtureError where server.map({ !$0.process.isRunning }) == true {
            // icecast2 itself died before the mount was listed: Debian's 2.4.4 crashed
            // with SIGSEGV soon after its start in 2 CI runs of about 40 (2026-11-28),
            // a fault of the server, not of what a test checks. Started again, once,
            // and said so; a second death fails the test.
            let log = (try? String(contentsOfFile: dir + "/icecast.out", encoding: .utf8)) ?? ""
            print("icecast2 died (status \(server?.process.terminationStatus ?? 0)) before /\(mount) was listed; started again. \(e) \(log.suffix(400))")
            sources[mount]?.kill()
            sources[mount] = nil
            try start()
            try feedOnce(mount, input: input, name: name, bitrate: bitrate)
        }
    }

    private func feedOnce(_ mount: String, input: String, name: String, bitrate: String) throws {
        let ogg = mount.hasSuffix(".ogg")
        let codec = ogg ? ["-c:a", "libvorbis", "-b:a", bitrate, "-content_type", "application/ogg", "-f", "ogg"]
                        : ["-c:a", "libmp3lame", "-b:a", bitrate, "-content_type", "audio/mpeg", "-f", "mp3"]
        let argv = ["ffmpeg", "-nostdin", "-v", "error", "-re", "-stream_loop", "-1", "-i", input]
            + codec + ["-ice_name", name, "icecast://source:\(Self.sourcePassword)@127.0.0.1:\(port)/\(mount)"]
        let p = try ServerProcess.spawn(argv, log: dir + "/source-\(mount).log")
        sources[mount] = ServerProcess(process: p, port: port, log: dir + "/source-\(mount).log")
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline {
            if try admin("/admin/listmounts").contains("/\(mount)") { return }
            usleep(50_000)
        }
        throw FixtureError("icecast lists no /\(mount): \((try? String(contentsOfFile: dir + "/source-\(mount).log", encoding: .utf8)) ?? "")")
    }

    /// Sets the mount's ICY title (what a station's playout sends with each song).
    public func setTitle(_ mount: String, _ title: String) throws {
        let song = title.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? title
        let reply = try admin("/admin/metadata?mount=/\(mount)&mode=updinfo&song=\(song)")
        guard reply.contains("successful") else { throw FixtureError("icecast metadata update: \(reply)") }
    }

    /// An admin request (basic auth) with curl; the reply's body.
    public func admin(_ path: String) throws -> String {
        let r = try Shell.run(["curl", "-s", "-m", "5", "-u", "admin:\(Self.adminPassword)", "http://127.0.0.1:\(port)\(path)"])
        return String(decoding: r.stdout, as: UTF8.self)
    }
}
