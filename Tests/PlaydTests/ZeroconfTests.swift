import Foundation
import Testing
import CoreStreamTestSupport
import PlaydDaemon
#if canImport(Glibc)
import Glibc
#endif

/// A D-Bus system bus and an avahi-daemon, started by the test when the machine has
/// none running, and stopped again by ``stop()`` (those it started only).
final class SystemAvahi {
    private var startedBus: Process?
    private var startedAvahi = false

    init() throws {
        for tool in ["/usr/bin/dbus-daemon", "/usr/sbin/avahi-daemon", "/usr/bin/avahi-browse"] {
            try #require(FileManager.default.isExecutableFile(atPath: tool), "no \(tool): scripts/install-deps --test installs dbus, avahi-daemon and avahi-utils")
        }
        if !Self.busAnswers() {
            try? FileManager.default.createDirectory(atPath: "/run/dbus", withIntermediateDirectories: true)
            try? FileManager.default.removeItem(atPath: "/run/dbus/system_bus_socket")
            try? FileManager.default.removeItem(atPath: "/run/dbus/pid")
            // In the foreground (--nofork), as a child of the test: a forked bus would
            // keep the test's output pipe open.
            let bus = Process()
            bus.executableURL = URL(fileURLWithPath: "/usr/bin/dbus-daemon")
            bus.arguments = ["--system", "--nofork", "--nopidfile"]
            bus.standardOutput = FileHandle.nullDevice
            bus.standardError = FileHandle.nullDevice
            try bus.run()
            startedBus = bus
            let deadline = Date().addingTimeInterval(10)
            while !Self.busAnswers() && bus.isRunning && Date() < deadline { usleep(50_000) }
            try #require(Self.busAnswers(), "dbus-daemon --system did not answer")
        }
        try startAvahi()
    }

    static func busAnswers() -> Bool {
        (try? Shell.run(["dbus-send", "--system", "--print-reply", "--dest=org.freedesktop.DBus", "/org/freedesktop/DBus",
                         "org.freedesktop.DBus.ListNames"]))?.status == 0
    }

    static var avahiRunning: Bool { (try? Shell.run(["avahi-daemon", "--check"]))?.status == 0 }

    func startAvahi() throws {
        guard !Self.avahiRunning else { return }
        // --no-rlimits: a container may refuse avahi's own limits; -D returns once it runs.
        let r = try Shell.run(["avahi-daemon", "--no-rlimits", "-D"])
        try #require(r.status == 0, "avahi-daemon -D: \(r.stderr)")
        startedAvahi = true
    }

    func stopAvahi() throws {
        _ = try Shell.run(["avahi-daemon", "--kill"])
        let deadline = Date().addingTimeInterval(10)
        while Self.avahiRunning && Date() < deadline { usleep(50_000) }
        try #require(!Self.avahiRunning, "avahi-daemon did not stop")
    }

    func stop() {
        if startedAvahi { try? stopAvahi() }
        if let bus = startedBus, bus.isRunning {
            bus.terminate()
            let deadline = Date().addingTimeInterval(5)
            while bus.isRunning && Date() < deadline { usleep(20_000) }
            if bus.isRunning { kill(bus.processIdentifier, SIGKILL) }
        }
    }

    /// The resolved `_mpd._tcp` services: (name, port) of each `=` line, unescaped.
    static func browse() throws -> [(name: String, port: Int)] {
        let r = try Shell.run(["avahi-browse", "--resolve", "--terminate", "--parsable", "--no-db-lookup", "_mpd._tcp"])
        return String(decoding: r.stdout, as: UTF8.self).split(separator: "\n").compactMap { line in
            let f = line.split(separator: ";", omittingEmptySubsequences: false)
            guard f.count >= 9, f[0] == "=", let port = Int(f[8]) else { return nil }
            return (unescape(String(f[3])), port)
        }
    }

    /// avahi-browse's --parsable escaping: `\DDD` is a decimal byte.
    static func unescape(_ s: String) -> String {
        var bytes: [UInt8] = []
        let u = Array(s.utf8)
        var i = 0
        while i < u.count {
            if u[i] == UInt8(ascii: "\\"), i + 3 < u.count,
               let n = UInt8(String(decoding: u[(i + 1)...(i + 3)], as: UTF8.self)) {
                bytes.append(n); i += 4
            } else {
                bytes.append(u[i]); i += 1
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Browses until `found` holds, for up to `seconds`.
    static func browse(until found: ([(name: String, port: Int)]) -> Bool, seconds: Double = 20) throws -> [(name: String, port: Int)] {
        let deadline = Date().addingTimeInterval(seconds)
        var seen = try browse()
        while !found(seen) && Date() < deadline {
            usleep(200_000)
            seen = try browse()
        }
        return seen
    }
}

/// Zeroconf: the MPD TCP listener is announced as `_mpd._tcp` through a real
/// avahi-daemon (as MPD announces itself), seen by `avahi-browse`; without a daemon
/// playd logs it and serves all the same, and announces once one starts.
@Suite("Zeroconf", .checksSomething, .serialized)
struct ZeroconfTests {
    static func host() -> String {
        var buf = [CChar](repeating: 0, count: 256)
        gethostname(&buf, 255)
        return String(cString: buf)
    }

    @Test func theMPDListenerIsAnnouncedAndWithdrawn() throws {
        let avahi = try SystemAvahi()
        defer { avahi.stop() }
        let port = ServerProcess.stablePorts(2)
        let name = "playd-test-\(getpid())"
        let on = try DaemonHarness(extraConfig: "[mpd]\ntcp = \"127.0.0.1:\(port)\"\nzeroconf_name = \"\(name) @ %h\"", output: "null")
        let off = try DaemonHarness(extraConfig: "[mpd]\ntcp = \"127.0.0.1:\(port + 1)\"\nzeroconf = false\nzeroconf_name = \"\(name)-off\"", output: "null")
        try off.start()
        try on.start()
        let want = "\(name) @ \(Self.host())"
        let seen = try SystemAvahi.browse(until: { $0.contains { $0.name == want } })
        #expect(seen.contains { $0.name == want && $0.port == port }, "browsed: \(seen)")
        // Started before the one that is seen, and never announced.
        #expect(!seen.contains { $0.name.hasPrefix("\(name)-off") }, "browsed: \(seen)")
        #expect(on.log.contains("zeroconf: announced"))

        // A second playd with the same name is renamed as Avahi renames ("NAME #2").
        let twin = try DaemonHarness(extraConfig: "[mpd]\ntcp = \"127.0.0.1:\(port + 2)\"\nzeroconf_name = \"\(name) @ %h\"", output: "null")
        try twin.start()
        let renamed = try SystemAvahi.browse(until: { $0.contains { $0.name == want + " #2" } })
        #expect(renamed.contains { $0.name == want + " #2" && $0.port == port + 2 }, "browsed: \(renamed)")
        #expect(twin.terminate().status == 0)

        #expect(on.terminate().status == 0)
        let after = try SystemAvahi.browse(until: { !$0.contains { $0.name == want } })
        #expect(!after.contains { $0.name == want }, "still announced after playd stopped: \(after)")
        #expect(off.terminate().status == 0)
    }

    @Test func withoutAvahiDaemonPlaydServesAndAnnouncesWhenOneStarts() throws {
        let avahi = try SystemAvahi()
        defer { avahi.stop() }
        try avahi.stopAvahi()
        let port = ServerProcess.stablePorts()
        let name = "playd-late-\(getpid())"
        let d = try DaemonHarness(extraConfig: "[mpd]\ntcp = \"127.0.0.1:\(port)\"\nzeroconf_name = \"\(name)\"", output: "null")
        try d.start()
        let deadline = Date().addingTimeInterval(10)
        while !d.log.contains("zeroconf: no avahi-daemon running") && Date() < deadline { usleep(50_000) }
        #expect(d.log.contains("zeroconf: no avahi-daemon running"), "\(d.log)")
        let mpc = try Shell.run(["mpc", "-h", "127.0.0.1", "-p", "\(port)", "status"])
        #expect(mpc.status == 0, "the MPD listener serves without Avahi: \(mpc.stderr)")
        try avahi.startAvahi()
        let seen = try SystemAvahi.browse(until: { $0.contains { $0.name == name } })
        #expect(seen.contains { $0.name == name && $0.port == port }, "browsed: \(seen)")
        #expect(d.terminate().status == 0)
    }

    @Test(arguments: [("playd @ %h", "box", "playd @ box"), ("%h", "box", "box"), ("no host", "box", "no host"),
                      ("%h and %h", "a", "a and a"),
                      (String(repeating: "x", count: 60) + " @ %h", "kitchen", String(repeating: "x", count: 60) + " @ ")])
    func namesExpandToOneLabel(_ template: String, _ host: String, _ expected: String) {
        #expect(ZeroconfName.expand(template, host: host) == expected)
    }
}
