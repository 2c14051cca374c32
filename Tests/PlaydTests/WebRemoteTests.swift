import Foundation
import Testing
import PlaydProtocol
import CoreStreamTestSupport

/// The web remote (issue 44) in a real browser: `Tests/Web/remote.py` drives the page
/// in headless Chromium through Selenium (Debian's packages) at a phone's size and a
/// desktop's, and checks each control's effect with `playctl status --json`; axe-core
/// checks each view. The daemon here is the built one, with `[http] listen` on loopback.
/// `PLAYD_SCREENSHOTS=docs` saves the screenshots the README shows.
@Suite("Web remote", .checksSomething, .serialized)
struct WebRemoteTests {
    static var script: String { Fixtures.repositoryRoot.path + "/Tests/Web/remote.py" }

    /// Runs remote.py; its output is the test's record.
    static func remote(_ args: [String]) throws -> (status: Int32, output: String) {
        let r = try Shell.run(["/usr/bin/python3", script] + args,
                              environment: ["SE_OFFLINE": "true", "PYTHONDONTWRITEBYTECODE": "1"])
        return (r.status, String(decoding: r.stdout, as: UTF8.self) + r.stderr)
    }

    /// An album of three tagged 30 s tones, the first with an embedded 300×300 picture,
    /// and a 2 s announcement clip.
    static func music(_ dir: String) throws {
        let album = dir + "/music/album"
        try FileManager.default.createDirectory(atPath: album, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: dir + "/music/clips", withIntermediateDirectories: true)
        try Shell.ffmpeg(["-f", "lavfi", "-i", "nullsrc=s=300x300,geq=r=X:g=Y:b=128", "-frames:v", "1", dir + "/cover.png"])
        for (i, (title, hz)) in [("First Tone", 440), ("Second Tone", 550), ("Third Tone", 660)].enumerated() {
            let tags = ["-metadata", "title=\(title)", "-metadata", "artist=Web Band", "-metadata", "album=Remote Album",
                        "-metadata", "track=\(i + 1)"]
            if i == 0 {
                try Shell.ffmpeg(["-f", "lavfi", "-i", "sine=frequency=\(hz):duration=30:sample_rate=44100", "-i", dir + "/cover.png",
                                  "-map", "0:a", "-map", "1", "-c:v", "copy", "-disposition:v", "attached_pic", "-ac", "2"]
                                 + tags + [album + "/0\(i + 1).flac"])
            } else {
                try Shell.ffmpeg(["-f", "lavfi", "-i", "sine=frequency=\(hz):duration=30:sample_rate=44100", "-ac", "2"]
                                 + tags + [album + "/0\(i + 1).flac"])
            }
        }
        try Shell.ffmpeg(["-f", "lavfi", "-i", "sine=frequency=880:duration=2:sample_rate=44100", "-ac", "2", dir + "/music/clips/chime.flac"])
        // The radio check's stream: a file on a plain web server (remote.py serves it).
        try Shell.ffmpeg(["-f", "lavfi", "-i", "sine=frequency=330:duration=60:sample_rate=44100", "-ac", "2", "-b:a", "128k", dir + "/radio.mp3"])
    }

    @Test func everyControlActsAndTheAccessibilityCheckPasses() throws {
        let port = ServerProcess.stablePorts()
        let h = try DaemonHarness(extraConfig: """
            [library]
            music_roots = ["$DIR/music"]
            [http]
            listen = ["127.0.0.1:\(port)"]
            streams = ["opus", "mp3"]
            """, output: "null")
        try Self.music(h.dir)
        try h.start()
        _ = h.waitForScan()
        let (st, _, err) = try h.playctl("add", h.dir + "/music/album")
        #expect(st == 0, "\(err)")
        let shots = ProcessInfo.processInfo.environment["PLAYD_SCREENSHOTS"].map { Fixtures.repositoryRoot.path + "/" + $0 } ?? h.dir + "/shots"
        let r = try Self.remote(["controls", "http://127.0.0.1:\(port)/", "--playctl", DaemonHarness.playctl, "--socket", h.socket,
                                 "--music", h.dir + "/music", "--stream", h.dir + "/radio.mp3",
                                 "--clip", h.dir + "/music/clips/chime.flac", "--shots", shots])
        #expect(r.status == 0, "\(r.output)\nplayd's log:\n\(h.log.suffix(3000))")
        // Every event stream the pages opened was closed with them.
        #expect(h.waitFor(seconds: 20) { h.request("ping") != nil })
        _ = h.terminate()
    }

    @Test func aPasswordGuardsTheRemoteAndOtherSitesCannotDriveIt() throws {
        let port = ServerProcess.stablePorts()
        let h = try DaemonHarness(extraConfig: """
            [http]
            listen = ["127.0.0.1:\(port)"]
            password_file = "$DIR/web-password"
            """, output: "null")
        try "correct horse\n".write(toFile: h.dir + "/web-password", atomically: true, encoding: .utf8)
        try h.start()
        let r = try Self.remote(["security", "http://127.0.0.1:\(port)/", "--password", "correct horse"])
        #expect(r.status == 0, "\(r.output)\nplayd's log:\n\(h.log.suffix(3000))")
        #expect(h.log.contains("wrong password from 127.0.0.1"), "the wrong password is logged with the address")
        _ = h.terminate()
    }

    /// No open remote on a network: a non-loopback address without a password stops
    /// the start, saying why; with one it starts. A second daemon (the same user's) on
    /// that port does not start: it says the address is in use, as MPD does. Before, the
    /// listener took the port with SO_REUSEPORT, and the two daemons shared it, each
    /// answering some of the phone's requests.
    @Test func aNetworkAddressWithoutAPasswordIsRefused() throws {
        let port = ServerProcess.stablePorts()
        let h = try DaemonHarness(extraConfig: "[http]\nlisten = [\"0.0.0.0:\(port)\"]", output: "null")
        #expect(throws: (any Error).self) { try h.start() }
        #expect(h.log.contains("http.listen: 0.0.0.0:\(port) is not a loopback address, so the web remote needs http.password"), "\(h.log)")
        let ok = try DaemonHarness(extraConfig: "[http]\nlisten = [\"0.0.0.0:\(port)\"]\npassword = \"pw\"", output: "null")
        try ok.start()
        let page = try Shell.run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "http://127.0.0.1:\(port)/"])
        #expect(String(decoding: page.stdout, as: UTF8.self) == "200")
        let second = try DaemonHarness(extraConfig: "[http]\nlisten = [\"0.0.0.0:\(port)\"]\npassword = \"pw\"", output: "null")
        #expect(throws: (any Error).self) { try second.start() }
        #expect(second.log.contains("http.listen: 0.0.0.0:\(port): could not listen (Address already in use)"), "\(second.log)")
        _ = ok.terminate()
    }

    /// Without a password, only an address or `localhost` may name the remote: a page
    /// whose own name points at 127.0.0.1 (DNS rebinding) sends that name as the Host.
    @Test func withoutAPasswordOnlyAnAddressOrLocalhostIsServed() throws {
        let port = ServerProcess.stablePorts()
        let h = try DaemonHarness(extraConfig: "[http]\nlisten = [\"127.0.0.1:\(port)\"]", output: "null")
        try h.start()
        func code(_ host: String) throws -> String {
            let r = try Shell.run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "-H", "Host: \(host)", "http://127.0.0.1:\(port)/"])
            return String(decoding: r.stdout, as: UTF8.self)
        }
        #expect(try code("127.0.0.1:\(port)") == "200")
        #expect(try code("localhost:\(port)") == "200")
        #expect(try code("attacker.example:\(port)") == "403")
        _ = h.terminate()
    }
}
