import Foundation
import Testing
import PlaydProtocol
import CoreStreamTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// `control.allowed_users` / `allowed_groups`: the peer's credentials from the kernel
/// (SO_PEERCRED), logged with each connection and checked, on both sockets.
@Suite("Peer access", .checksSomething, .tags(.addressSanitizer))
struct AccessTests {
    /// Some uid that is not this process's.
    static var otherUID: String { getuid() == 65534 ? "65533" : "65534" }

    @Test func aPeerNotListedGetsOneTypedErrorAndIsDisconnected() throws {
        let d = try DaemonHarness(controlKeys: "allowed_users = [\"\(Self.otherUID)\"]")
        try d.start(ping: false)
        let c = try LineClient(path: d.socket)
        let line = try #require(c.readLine(timeoutMillis: 5000))
        let reply = try JSON.parse(line)
        #expect(reply["ok"] == .bool(false))
        #expect(reply["error"]?["code"] == .string("not_allowed"))
        #expect(reply["error"]?["message"]?.stringValue?.contains("uid \(getuid())") == true)
        _ = c.send(#"{"cmd":"status"}"#)
        #expect(c.readLine(timeoutMillis: 2000) == nil, "the connection is closed after the error")

        let mpd = try LineClient(path: d.dir + "/mpd.sock")
        let ack = try #require(mpd.readLine(timeoutMillis: 5000))
        #expect(ack.hasPrefix("ACK [4@0] {} permission denied"), "\(ack)")
        #expect(mpd.readLine(timeoutMillis: 2000) == nil)

        let (status, _, err) = try d.playctl("status")
        #expect(status != 0)
        #expect(err.contains("not_allowed") || err.contains("allowed_users"), "\(err)")
        #expect(d.log.contains("client refused"))
        #expect(d.log.contains("peer.uid=\(getuid())"), "the refused peer's uid is logged")
        // Still serving: the refusals cost nothing else.
        #expect(d.process?.isRunning == true)
    }

    @Test(arguments: ["user", "group"])
    func aListedPeerIsLetInAndLogged(by: String) throws {
        let key = by == "user" ? "allowed_users = [\"\(getuid())\"]" : "allowed_groups = [\"\(getgid())\"]"
        // Connections are logged at debug.
        let d = try DaemonHarness(extraConfig: "[log]\nlevel = \"debug\"", controlKeys: key)
        try d.start()
        let reply = try #require(d.request("status"))
        #expect(reply["ok"] == .bool(true))
        let (status, out, _) = try d.playctl("status")
        #expect(status == 0, "\(out)")
        #expect(d.log.contains("client connected"))
        #expect(d.log.contains("peer.uid=\(getuid())") && d.log.contains("peer.pid="))
        #expect(!d.log.contains("client refused"))
    }

    /// A group a peer has only as a supplementary one lets it in: playctl runs as
    /// nobody (65534) with the listed group 4242 beside its own, and is served; the same
    /// user without that group is refused. Run under setpriv, so it checks the same
    /// whether the test runs as root (CI) or not.
    @Test func aSupplementaryGroupLetsAPeerIn() throws {
        let d = try DaemonHarness(extraConfig: "[log]\nlevel = \"debug\"", controlKeys: "allowed_groups = [\"4242\"]\nsocket_mode = \"0666\"")
        try d.start(ping: false)
        func playctl(_ groups: String) throws -> Shell.Output {
            try Shell.run(["setpriv", "--reuid=65534", "--regid=65534", groups, DaemonHarness.playctl, "status"],
                          environment: ["PLAYD_SOCKET": d.socket])
        }
        let member = try playctl("--groups=4242")
        #expect(member.status == 0, "\(member.stderr)")
        #expect(String(decoding: member.stdout, as: UTF8.self).contains("stopped"))
        let other = try playctl("--clear-groups")
        #expect(other.status != 0)
        #expect(other.stderr.contains("not_allowed") || other.stderr.contains("allowed_groups"), "\(other.stderr)")
        #expect(d.log.contains("client connected") && d.log.contains("peer.uid=65534"), "\(d.log)")
        #expect(d.log.contains("client refused"))
    }

    /// A user who may not open the socket (mode 0660, root's group) gets exit status 4
    /// and is told which group to join.
    @Test func playctlSaysWhichGroupToJoin() throws {
        let d = try DaemonHarness()
        try d.start()
        let r = try Shell.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", DaemonHarness.playctl, "status"],
                              environment: ["PLAYD_SOCKET": d.socket])
        #expect(r.status == 4, "\(r.stderr)")
        #expect(r.stderr.contains("permission denied on \(d.socket)") && r.stderr.contains("group"), "\(r.stderr)")
    }

    @Test func unknownNamesFailTheStartNamingTheKey() throws {
        let d = try DaemonHarness(controlKeys: "allowed_groups = [\"no-such-group-xyz\"]")
        #expect(throws: (any Error).self) { try d.start() }
        #expect(d.log.contains("control.allowed_groups: no group named 'no-such-group-xyz'"), "\(d.log)")
    }
}
