import Foundation
import Testing
import PlaydProtocol
import CoreStreamTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// `control.allowed_users` / `allowed_groups`: the peer's credentials from the kernel
/// (SO_PEERCRED), logged with each connection and checked, on both sockets.
@Suite("Peer access")
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

    @Test(arguments: ["user", "group", "supplementary group"])
    func aListedPeerIsLetInAndLogged(by: String) throws {
        let key: String
        switch by {
        case "user": key = "allowed_users = [\"\(getuid())\"]"
        case "group": key = "allowed_groups = [\"\(getgid())\"]"
        default:
            // A group this process has only as a supplementary one, if any.
            var groups = [gid_t](repeating: 0, count: 64)
            let n = getgroups(Int32(groups.count), &groups)
            guard n > 0, let g = groups[..<Int(n)].first(where: { $0 != getgid() }) else { return }
            key = "allowed_groups = [\"\(g)\"]"
        }
        let d = try DaemonHarness(controlKeys: key)
        try d.start()
        let reply = try #require(d.request("status"))
        #expect(reply["ok"] == .bool(true))
        let (status, out, _) = try d.playctl("status")
        #expect(status == 0, "\(out)")
        #expect(d.log.contains("client connected"))
        #expect(d.log.contains("peer.uid=\(getuid())") && d.log.contains("peer.pid="))
        #expect(!d.log.contains("client refused"))
    }

    @Test func unknownNamesFailTheStartNamingTheKey() throws {
        let d = try DaemonHarness(controlKeys: "allowed_groups = [\"no-such-group-xyz\"]")
        #expect(throws: (any Error).self) { try d.start() }
        #expect(d.log.contains("control.allowed_groups: no group named 'no-such-group-xyz'"), "\(d.log)")
    }
}
