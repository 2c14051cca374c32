import Foundation
import Testing
import PlaydProtocol
import CoreStreamTestSupport

/// Outside text never breaks a protocol's framing or a terminal (issue 39): a radio
/// whose ICY title holds a newline, `OK` and an escape sequence (served by a local
/// icecast2), and a file in the music root named `a\nOK\nb.flac`. Before, MPD replies
/// carried them raw: the `OK` inside a value ended `currentsong` early, and mpc said
/// "expected more list_OK's"; playctl printed the escape sequence.
@Suite("Outside text and framing", .checksSomething, .serialized)
struct FramingTests {
    static let evilTitle = "Evil\nOK\nTitle \u{1B}[2J"

    /// mpc on the harness's MPD socket, bounded: a client that lost the framing may wait.
    static func mpc(_ h: DaemonHarness, _ args: String...) throws -> (Int32, String) {
        let r = try Shell.run(["timeout", "20", "mpc", "-h", h.dir + "/mpd.sock"] + args)
        return (r.status, String(decoding: r.stdout, as: UTF8.self) + r.stderr)
    }

    @Test func titlesAndNamesWithControlCharactersKeepEveryClientInStep() throws {
        let h = try DaemonHarness(extraConfig: "[library]\nmusic_roots = [\"$DIR/music\"]", output: "null")
        let music = h.dir + "/music"
        try FileManager.default.createDirectory(atPath: music, withIntermediateDirectories: true)
        let song = Fixtures.named("flac-44100-2.flac").path
        let evilName = music + "/a\nOK\nb.flac"
        try FileManager.default.copyItem(atPath: song, toPath: music + "/ok.flac")
        try FileManager.default.copyItem(atPath: song, toPath: evilName)
        let ice = try Icecast(dir: h.dir + "/ice")
        try ice.start()
        defer { ice.stop() }
        try ice.feed("live.mp3", input: StreamTests.tone, name: "Test FM")
        try ice.setTitle("live.mp3", Self.evilTitle)
        try h.start()
        // The scan leaves the name with control characters out (as MPD does).
        let songs = h.waitForScan()
        #expect(songs == 1, "songs indexed: \(songs ?? -1)")
        // Queued by path all the same (it is a regular file inside the root), and the radio.
        #expect(h.request("add", ("paths", .array([.string(music + "/ok.flac"), .string(evilName), .string(ice.url("live.mp3"))])))?["ok"] == .bool(true))
        #expect(h.request("play", ("index", .int(2)))?["ok"] == .bool(true))
        #expect(h.waitFor(seconds: 20) { h.request("status")?["stream"]?["stream_title"]?.stringValue == Self.evilTitle },
                "the ICY title arrives whole over JSON (escaped by JSON itself)")

        // mpc: each command answers in step, one line per entry, no stray line.
        var (st, out) = try Self.mpc(h, "current")
        #expect(st == 0 && !out.contains("\u{1B}") && out.split(separator: "\n").count == 1, "mpc current: \(out)")
        (st, out) = try Self.mpc(h, "playlist")
        #expect(st == 0 && out.split(separator: "\n").count == 3, "mpc playlist: \(out)")
        (st, out) = try Self.mpc(h, "ls")
        #expect(st == 0 && out.split(separator: "\n") == ["ok.flac"], "mpc ls: \(out)")
        (st, out) = try Self.mpc(h, "status")
        #expect(st == 0 && out.contains("[playing]"), "mpc status after the others: \(out)")

        // python-mpd2 (Home Assistant's client): the same replies parse, in step.
        let script = """
            import sys
            from mpd import MPDClient
            c = MPDClient()
            c.connect(sys.argv[1])
            song = c.currentsong()
            queue = c.playlistinfo()
            listing = c.lsinfo()
            status = c.status()
            print(len(queue), len([e for e in listing if "file" in e]), status["state"], repr(song.get("title", "")))
            """
        let py = try Shell.run(["/usr/bin/python3", "-c", script, h.dir + "/mpd.sock"])  // Debian's python3-mpd
        let printed = String(decoding: py.stdout, as: UTF8.self)
        #expect(py.status == 0 && printed.hasPrefix("3 1 play "), "python-mpd2: \(printed) \(py.stderr.suffix(600))")
        #expect(!printed.contains("\\x1b") && !printed.contains("\\n"), "the title reaches MPD clients with its control characters blanked: \(printed)")

        // playctl: nothing raw reaches the terminal.
        let (pst, status, _) = try h.playctl("status")
        #expect(pst == 0 && !status.contains("\u{1B}") && status.contains("Evil\u{FFFD}OK\u{FFFD}Title"), "playctl status: \(status)")
        let (qst, queue, _) = try h.playctl("queue")
        #expect(qst == 0 && !queue.contains("\u{1B}") && queue.split(separator: "\n").count == 3, "playctl queue: \(queue)")
        #expect(h.terminate().status == 0)
    }

    /// A reply larger than a client's unsent-output cap (1 MiB) is sent whole: a queue
    /// of 8,000 songs with long tags (about 4 MB listed) goes to mpc, to python-mpd2
    /// (with a command pipelined after it on the same connection) and to `playctl
    /// queue`. Before, the cap closed the connection in the middle of the reply.
    @Test func aQueueLargerThanOneMebibyteIsListedWhole() throws {
        let h = try DaemonHarness(output: "null")
        let song = h.dir + "/long.flac"
        let title = String(repeating: "A long title ", count: 30)
        try Shell.ffmpeg(["-f", "lavfi", "-i", "sine=d=1", "-metadata", "title=\(title)", "-metadata", "artist=\(title)", "-c:a", "flac", song])
        try h.start()
        for _ in 0..<16 {
            #expect(h.request("add", ("paths", .array(Array(repeating: JSON.string(song), count: 500))))?["ok"] == .bool(true))
        }
        let (st, out) = try Self.mpc(h, "playlist")
        #expect(st == 0 && out.split(separator: "\n").count == 8_000, "mpc playlist: \(out.suffix(300))")
        let script = """
            import socket, sys
            from mpd import MPDClient
            c = MPDClient()
            c.connect(sys.argv[1])
            print(len(c.playlistinfo()), c.status()["playlistlength"])
            # Pipelined: both commands written at once, then both replies read.
            s = socket.socket(socket.AF_UNIX)
            s.connect(sys.argv[1])
            s.recv(100)
            s.sendall(b"playlistinfo\\nping\\n")
            data = b""
            while not data.endswith(b"\\nOK\\nOK\\n"):
                chunk = s.recv(1 << 16)
                if not chunk:
                    break
                data += chunk
            lines = data.split(b"\\n")
            print(len(data) > (1 << 20), lines.count(b"OK"), sum(1 for l in lines if l.startswith(b"file: ")))
            """
        let py = try Shell.run(["/usr/bin/python3", "-c", script, h.dir + "/mpd.sock"])
        #expect(String(decoding: py.stdout, as: UTF8.self) == "8000 8000\nTrue 2 8000\n", "python: \(String(decoding: py.stdout, as: UTF8.self)) \(py.stderr.suffix(500))")
        let (qst, queue, qerr) = try h.playctl("queue")
        #expect(qst == 0 && queue.split(separator: "\n").count == 8_000, "playctl queue: \(qerr)")
        #expect(h.request("ping")?["ok"] == .bool(true))
        #expect(h.terminate().status == 0)
    }
}
