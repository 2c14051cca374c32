import Foundation
import Testing
import PlaydProtocol
import CoreStreamTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// playd the daemon on its native PipeWire output (issue 46), against a private
/// headless PipeWire (scripts/pipewire): what desktop mixers see of the stream, the
/// stream's own volume, and a server killed and started again under a running daemon.
@Suite("PipeWire daemon", .checksSomething, .serialized)
struct PipeWireDaemonTests {
    /// A tagged 30 s tone at 48 kHz.
    func tagged(_ path: String, title: String, artist: String, album: String) throws {
        try Shell.ffmpeg(["-f", "lavfi", "-i", "sine=frequency=440:duration=30", "-ac", "2", "-ar", "48000",
                          "-metadata", "title=\(title)", "-metadata", "artist=\(artist)", "-metadata", "album=\(album)",
                          "-c:a", "flac", path])
    }

    /// The playd node's props and its channel volumes (from its Props param), once one
    /// exists.
    func playdNode(_ server: PipeWireServer) -> (props: [String: Any], volumes: [Double])? {
        guard let info = try? server.nodes(named: "playd").first, let props = info["props"] as? [String: Any] else { return nil }
        let params = info["params"] as? [String: Any]
        let volumes = ((params?["Props"] as? [[String: Any]])?.compactMap { $0["channelVolumes"] as? [Double] }.first) ?? []
        return (props, volumes)
    }

    /// The stream shows what plays (title, artist, album, the role and names) and
    /// changes with the track; `volume.mixer = "pipewire"` sets the stream's own volume
    /// (cubic, as pavucontrol and wpctl show it), and the samples stay untouched.
    @Test func mixersSeeWhatPlaysAndTheStreamVolume() throws {
        let d = try DaemonHarness(extraConfig: "[volume]\nmixer = \"pipewire\"", output: "pipewire")
        let server = try PipeWireServer(dir: d.dir + "/pw")
        // The spec from the harness cannot name the socket (it is made first): the
        // config's device names it now.
        let config = try String(contentsOfFile: d.configPath, encoding: .utf8)
        try config.replacingOccurrences(of: "device = \"pipewire\"", with: "device = \"\(server.outputSpec)\"")
            .write(toFile: d.configPath, atomically: true, encoding: .utf8)
        let a = d.dir + "/a.flac", b = d.dir + "/b.flac"
        try tagged(a, title: "First Song", artist: "Some Band", album: "An Album")
        try tagged(b, title: "Second Song", artist: "Other Band", album: "B Sides")
        try d.start()
        defer { _ = d.terminate() }
        #expect(d.request("status")?["mixer"]?.stringValue == "pipewire")
        #expect(d.request("add", ("paths", .array([.string(a), .string(b)])))?["ok"]?.boolValue == true)
        #expect(d.request("play", ("index", .int(0)))?["ok"]?.boolValue == true)
        var node: (props: [String: Any], volumes: [Double])?
        #expect(d.waitFor { node = playdNode(server); return node?.props["media.title"] as? String == "First Song" },
                "\(node?.props ?? [:])")
        #expect(node?.props["media.artist"] as? String == "Some Band")
        #expect(node?.props["media.album"] as? String == "An Album")
        #expect(node?.props["media.role"] as? String == "Music")
        #expect(node?.props["application.name"] as? String == "playd")
        #expect(node?.props["node.name"] as? String == "playd")

        #expect(d.request("volume", ("set", .int(50)))?["ok"]?.boolValue == true)
        #expect(d.waitFor { node = playdNode(server); return node?.volumes.first.map { abs($0 - 0.125) < 0.001 } == true },
                "channelVolumes \(node?.volumes ?? [])")
        #expect(d.request("status")?["volume"]?.numberValue == 50)

        #expect(d.request("next")?["ok"]?.boolValue == true)
        #expect(d.waitFor { node = playdNode(server); return node?.props["media.title"] as? String == "Second Song" },
                "\(node?.props ?? [:])")
        #expect(node?.props["media.artist"] as? String == "Other Band")
    }

    /// PipeWire killed under a playing daemon: `output_lost`, paused (as for an ALSA
    /// device), and once the server is back, `output_restored` and playing on from
    /// where it was heard, with no daemon restart.
    @Test func aRestartedServerIsReconnected() throws {
        let d = try DaemonHarness(output: "pipewire")
        let server = try PipeWireServer(dir: d.dir + "/pw")
        let config = try String(contentsOfFile: d.configPath, encoding: .utf8)
        try config.replacingOccurrences(of: "device = \"pipewire\"", with: "device = \"\(server.outputSpec)\"")
            .write(toFile: d.configPath, atomically: true, encoding: .utf8)
        let track = d.dir + "/long.flac"
        try Shell.ffmpeg(["-f", "lavfi", "-i", "sine=frequency=440:duration=60", "-ac", "2", "-ar", "48000", track])
        try d.start()
        defer { _ = d.terminate() }
        let pid = try #require(d.process?.processIdentifier)
        let events = try LineClient(path: d.socket)
        #expect(events.request(.obj(("id", .int(1)), ("cmd", .string("subscribe"))))?["ok"] == .bool(true))
        #expect(d.request("play", ("path", .string(track)))?["ok"] == .bool(true))
        #expect(d.waitFor { (d.request("status")?["position"]?.numberValue ?? 0) > 1 })
        func waitEvent(_ name: String, seconds: Double) -> JSON? {
            let deadline = Date().addingTimeInterval(seconds)
            while Date() < deadline {
                guard let line = events.readLine(timeoutMillis: 500), let e = try? JSON.parse(line) else { continue }
                if e["event"]?.stringValue == name { return e }
            }
            return nil
        }
        server.kill()
        #expect(waitEvent("output_lost", seconds: 10) != nil, "no output_lost: \(d.log.suffix(2000))")
        let during = d.request("status")
        #expect(during?["state"]?.stringValue == "paused")
        let heard = during?["position"]?.numberValue ?? -1
        try server.start()
        #expect(waitEvent("output_restored", seconds: 20) != nil, "no output_restored: \(d.log.suffix(2000))")
        #expect(d.waitFor { d.request("status")?["state"]?.stringValue == "playing" })
        #expect(d.waitFor { (d.request("status")?["position"]?.numberValue ?? 0) > heard + 0.5 })
        #expect(d.process?.processIdentifier == pid && d.process?.isRunning == true, "the daemon was restarted")
        // Audio reaches the restarted server's sink.
        let recorder = try PipeWireRecorder(server: server, path: d.dir + "/capture.raw", rate: 48_000)
        let rec = try recorder.finish()
        // (The tone is 0.125 in amplitude, less the daemon's default level.)
        #expect(rec.contains { abs($0) > 0.02 },
                "nothing reached the restarted server's sink (peak \(rec.map { abs($0) }.max() ?? 0)): \(d.log.suffix(2000))")
    }

    /// The recipe in docs/pipewire.md for playd as a system service beside a user's
    /// PipeWire: the service runs as that user, with XDG_RUNTIME_DIR naming the user's
    /// runtime folder (a drop-in's `User=` and `Environment=`). Then `auto` finds the
    /// server and plays through it. Without XDG_RUNTIME_DIR (a system service's
    /// environment) it cannot, and says so: the trap the recipe avoids. As root, the
    /// server and playd both run as nobody.
    @Test func theSystemServiceRecipeReachesTheUsersPipeWire() throws {
        let d = try DaemonHarness(output: "auto")
        let track = d.dir + "/tone.flac"
        try Shell.ffmpeg(["-f", "lavfi", "-i", "sine=frequency=440:duration=30", "-ac", "2", "-ar", "48000", track])
        var launcher: [String] = []
        if geteuid() == 0 {
            try FileManager.default.createDirectory(atPath: d.dir + "/pw", withIntermediateDirectories: true)
            _ = try Shell.run(["chown", "-R", "65534:65534", d.dir])
            launcher = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
        }
        let server = try PipeWireServer(dir: d.dir + "/pw", launcher: launcher)
        func localOutput() -> JSON? { d.request("outputs")?["outputs"]?.arrayValue?.first }

        try d.start(launcher: launcher, environment: ["XDG_RUNTIME_DIR": server.dir + "/runtime"])
        #expect(localOutput()?["kind"]?.stringValue == "pipewire", "\(localOutput().map { "\($0)" } ?? "")")
        #expect(d.request("play", ("path", .string(track)))?["ok"] == .bool(true))
        #expect(d.waitFor { (try? server.nodes(named: "playd"))?.first?["state"] as? String == "running" },
                "playd's stream never ran on the user's server: \(d.log.suffix(2000))")
        _ = d.terminate()

        // The trap: no XDG_RUNTIME_DIR, as a system service has none.
        try d.start(launcher: launcher, environment: ["XDG_RUNTIME_DIR": ""])
        let kind = localOutput()?["kind"]?.stringValue
        #expect(kind != nil && kind != "pipewire", "\(kind ?? "none")")
        _ = d.terminate()
    }
}
