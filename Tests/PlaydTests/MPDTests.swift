import Foundation
import Testing
@testable import PlaydProtocol
@testable import PlaydSessions
import CoreStreamTestSupport
@testable import PlaydDaemon

/// `Last-Modified:` times as `date -u` writes them; a modification time far past any
/// calendar (a file's mtime is the owner's to set) still gives a line, not a trap.
@Suite("MPD times", .checksSomething)
struct MPDTimeTests {
    @Test(arguments: [0, 1_795_532_628, 15_032_385_535, 67_767_976_233_316_800, Int.max, -1])
    func lastModifiedIsUTC(_ seconds: Int) throws {
        let text = MPDCommands.isoTime(seconds)
        let r = try Shell.run(["date", "-u", "-d", "@\(seconds)", "+%Y-%m-%dT%H:%M:%SZ"])
        if r.status == 0 {
            #expect(text + "\n" == String(decoding: r.stdout, as: UTF8.self))
        } else {
            #expect(text.hasSuffix("Z"))
        }
    }
}

/// The MPD session state machine, line by line, against MPD's documented behaviour.
@Suite("MPD protocol session", .checksSomething, .tags(.addressSanitizer))
struct MPDSessionTests {
    final class Log: @unchecked Sendable { var calls: [[String]] = [] }

    func session(password: String? = nil) -> (MPDSession, Log) {
        let log = Log()
        let s = MPDSession(password: password) { command, args, _ throws(MPDSession.Failure) in
            log.calls.append([command] + args)
            if command == "fail" { throw MPDSession.Failure(.noExist, "No such song") }
            return command == "status" ? ["state: play"] : []
        }
        return (s, log)
    }

    func send(_ s: MPDSession, _ line: String) -> (String, Bool) {
        s.receive(Array(line.utf8))
    }

    @Test(arguments: [
        (#"add "My Music/a b.flac""#, ["add", "My Music/a b.flac"]),
        (#"seekcur "+10""#, ["seekcur", "+10"]),
        (#"find "artist" "Say \"hi\" \\ ok""#, ["find", "artist", #"Say "hi" \ ok"#]),
        ("pause   1", ["pause", "1"]),
        ("status", ["status"]),
    ])
    func argumentsAreSplitAndUnquoted(_ line: String, _ expected: [String]) throws {
        #expect(try MPDSession.split(line) == expected)
    }

    @Test func greetingRepliesAndErrors() {
        let (s, log) = session()
        #expect(s.greeting() == "OK MPD \(MPDSession.protocolVersion)\n")
        #expect(send(s, "status") == ("state: play\nOK\n", false))
        #expect(send(s, #"fail "3""#) == ("ACK [50@0] {fail} No such song\n", false))
        #expect(send(s, #"add "unterminated"#).0 == "ACK [5@0] {} Missing closing '\"'\n")
        #expect(log.calls == [["status"], ["fail", "3"]])
        #expect(send(s, "Status").1, "a line not starting with a lowercase command closes the connection")
    }

    @Test func commandListsRunAtTheEnd() {
        let (s, log) = session()
        #expect(send(s, "command_list_ok_begin") == ("", false))
        #expect(send(s, "status") == ("", false))
        #expect(send(s, "ping") == ("", false))
        #expect(log.calls.isEmpty, "nothing runs before command_list_end")
        #expect(send(s, "command_list_end") == ("state: play\nlist_OK\nlist_OK\nOK\n", false))
        _ = send(s, "command_list_begin")
        _ = send(s, "ping")
        _ = send(s, "fail")
        _ = send(s, "ping")
        #expect(send(s, "command_list_end") == ("ACK [50@1] {fail} No such song\n", false))
        #expect(log.calls.filter { $0 == ["ping"] }.count == 2, "the list stops at the failure")
    }

    @Test func idleFollowsMPDsRules() {
        let (s, _) = session()
        #expect(send(s, "noidle") == ("", false), "noidle when not idling gets no reply")
        #expect(send(s, "idle player mixer") == ("", false))
        #expect(s.notify(["playlist"]) == "", "not a subsystem it waits for")
        #expect(s.notify(["mixer"]) == "changed: mixer\nOK\n")
        // Events accumulate while not idling; the next idle answers at once.
        #expect(s.notify(["player", "options"]) == "")
        // MPD's order (its idle flags' bits; the differential suite holds it against MPD).
        #expect(send(s, "idle") == ("changed: playlist\nchanged: player\nchanged: options\nOK\n", false))
        #expect(send(s, "idle") == ("", false))
        #expect(send(s, "noidle") == ("OK\n", false))
        #expect(send(s, "idle database") == ("", false))
        #expect(send(s, "status").1, "any other command during idle closes the connection")
        let (t, _) = session()
        #expect(send(t, "idle bogus").0.hasPrefix("ACK [2@0] {idle}"))
    }

    /// A command that waits for work off the control thread parks the session: the
    /// lines a list has answered so far go out, nothing else; resumed, the same command
    /// runs again and the list goes on from it (a single command answers as one).
    @Test func aPendingCommandParksAndRunsAgainWhenResumed() {
        let log = Log()
        final class Gate: @unchecked Sendable { var open = false }
        let gate = Gate()
        let s = MPDSession(password: nil) { command, args, _ throws(MPDSession.Failure) in
            log.calls.append([command] + args)
            if command == "add" && !gate.open { throw .workPending }
            return command == "status" ? ["state: play"] : []
        }
        #expect(s.handle(Array(#"add "folder""#.utf8)) == SessionOutput(parked: true))
        gate.open = true
        #expect(s.resume() == SessionOutput("OK\n"))
        gate.open = false
        _ = s.handle(Array("command_list_ok_begin".utf8))
        for line in ["status", #"add "folder""#, "ping"] { _ = s.handle(Array(line.utf8)) }
        #expect(s.handle(Array("command_list_end".utf8)) == SessionOutput("state: play\nlist_OK\n", parked: true))
        gate.open = true
        #expect(s.resume() == SessionOutput("list_OK\nlist_OK\nOK\n"))
        #expect(log.calls == [["add", "folder"], ["add", "folder"], ["status"], ["add", "folder"], ["add", "folder"], ["ping"]])
    }

    @Test func passwordGuardsCommands() {
        let (s, _) = session(password: "secret")
        #expect(send(s, "status").0 == "ACK [4@0] {status} you don't have permission for \"status\"\n")
        #expect(send(s, "ping").0 == "OK\n")
        #expect(send(s, #"password "wrong""#).0 == "ACK [3@0] {password} incorrect password\n")
        #expect(send(s, #"password "secret""#).0 == "OK\n")
        #expect(send(s, "status").0 == "state: play\nOK\n")
    }
}

/// Real MPD clients against a real daemon: mpc, and python-mpd2 used the way Home
/// Assistant uses it.
@Suite("MPD clients against playd", .checksSomething, .serialized)
struct MPDClientTests {
    /// 90 s of tone with tags, made once; a failure to make it fails the test.
    static func long() throws -> String {
        let path = NSTemporaryDirectory() + "playd-mpd-long-\(getpid()).flac"
        if !FileManager.default.fileExists(atPath: path) {
            try Shell.ffmpeg(["-f", "lavfi", "-i", "sine=f=440:r=44100:d=90", "-ac", "2",
                              "-metadata", "title=Ninety", "-metadata", "artist=Tone", "-metadata", "album=Tests", path])
        }
        return path
    }

    func mpc(_ h: DaemonHarness, _ args: String...) throws -> (Int32, String) {
        let r = try Shell.run(["mpc", "-h", h.dir + "/mpd.sock"] + args)
        return (r.status, String(decoding: r.stdout, as: UTF8.self) + r.stderr)
    }

    @Test func mpcDrivesPlayd() throws {
        let h = try DaemonHarness()
        try h.start()
        let short = Fixtures.named("flac-44100-2.flac").path
        #expect(try mpc(h, "add", try Self.long()).0 == 0)
        #expect(try mpc(h, "add", short).0 == 0)
        var (st, out) = try mpc(h, "play")
        #expect(st == 0 && out.contains("Tone - Ninety") && out.contains("[playing] #1/2"), "\(out)")
        (st, out) = try mpc(h, "seek", "1:00")
        #expect(out.contains("1:00/1:30"), "\(out)")
        (st, out) = try mpc(h, "seek", "+10")
        #expect(out.contains("1:10/1:30"), "\(out)")
        (st, out) = try mpc(h, "volume", "40")
        #expect(out.contains("volume: 40%"), "\(out)")
        #expect(h.request("status")?["volume"]?.numberValue == 40, "the JSON side sees the MPD change")
        (st, out) = try mpc(h, "pause")
        #expect(out.contains("[paused]"), "\(out)")
        (st, out) = try mpc(h, "toggle")
        #expect(out.contains("[playing]"), "\(out)")
        (st, out) = try mpc(h, "playlist")
        #expect(out == "Tone - Ninety\n\(short)\n", "\(out)")
        (st, out) = try mpc(h, "next")
        #expect(out.contains("[playing] #2/2") && out.contains("0:03"), "\(out)")
        (st, out) = try mpc(h, "prev")
        #expect(out.contains("#1/2"), "\(out)")
        (st, out) = try mpc(h, "status")
        #expect(out.contains("repeat: off") && out.contains("random: off"))

        // `mpc idle` wakes on a change made through playctl.
        let idle = Process()
        idle.executableURL = URL(fileURLWithPath: "/usr/bin/mpc")
        idle.arguments = ["-h", h.dir + "/mpd.sock", "idle"]
        let pipe = Pipe()
        idle.standardOutput = pipe
        try idle.run()
        // Once its connection is counted, a change is kept for it even if its `idle`
        // has not arrived yet (MPD's rule: the next idle answers at once). The status
        // request's own connection is the other one.
        #expect(h.waitFor { h.request("status")?["clients_connected"]?.numberValue == 2 })
        _ = try h.playctl("volume", "55")
        #expect(h.waitFor { !idle.isRunning }, "mpc idle did not wake on the volume change")
        if idle.isRunning { idle.terminate() }
        idle.waitUntilExit()
        #expect(String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self) == "mixer\n")
        (st, out) = try mpc(h, "bogus-command")
        #expect(st != 0)
        #expect(h.terminate().status == 0)
    }

    /// python-mpd2 (Debian's python3-mpd), as Home Assistant uses it: the asyncio client,
    /// a new connection per poll, status + currentsong, pause, setvol, seekcur, with its
    /// automatic idle/noidle; then the synchronous client with a command list.
    @Test func pythonMPD2LikeHomeAssistant() throws {
        let python = try Self.pythonWithMPD2()
        let h = try DaemonHarness()
        try h.start()
        #expect(h.request("add", ("path", .string(try Self.long())))?["ok"]?.boolValue == true)
        #expect(h.request("play", ("index", .number(0)))?["ok"]?.boolValue == true)
        let script = """
        import asyncio, sys
        from mpd.asyncio import MPDClient
        from mpd import MPDClient as SyncClient, CommandError
        SOCK = sys.argv[1]
        async def poll():
            c = MPDClient()
            await c.connect(SOCK)
            s = await c.status(); song = await c.currentsong(); cmds = await c.commands()
            c.disconnect()
            return s, song, cmds
        async def main():
            s, song, cmds = await poll()
            assert s["state"] == "play", s
            assert "volume" in s and "elapsed" in s and ":" in s["time"], s
            assert song["file"].endswith(".flac") and song["title"] == "Ninety" and song["artist"] == "Tone", song
            assert "idle" in cmds and "seekcur" in cmds
            c = MPDClient()
            await c.connect(SOCK)
            await asyncio.sleep(0.3)          # the client idles by itself meanwhile
            await c.pause(1)
            await asyncio.sleep(0.3)
            assert (await c.status())["state"] == "pause"
            await c.setvol(30)
            await c.seekcur(12.5)
            await asyncio.sleep(0.3)
            s = await c.status()
            assert s["volume"] == "30" and abs(float(s["elapsed"]) - 12.5) < 0.1, s
            await c.pause(0)
            c.disconnect()
        asyncio.run(main())
        c = SyncClient()
        c.connect(SOCK)
        c.command_list_ok_begin()
        c.status(); c.currentsong(); c.setvol(45)
        r = c.command_list_end()
        assert len(r) == 3 and r[0]["volume"] == "30" and r[1]["title"] == "Ninety", r
        try:
            c.playid(999)
            raise SystemExit("no error for a missing song id")
        except CommandError as e:
            assert "No such song" in str(e), e
        print("ok", c.status()["volume"])
        c.close(); c.disconnect()
        """
        let path = h.dir + "/client.py"
        try script.write(toFile: path, atomically: true, encoding: .utf8)
        let r = try Shell.run([python, path, h.dir + "/mpd.sock"])
        let out = String(decoding: r.stdout, as: UTF8.self)
        #expect(r.status == 0 && out == "ok 45\n", "\(out) \(r.stderr)")
        #expect(h.terminate().status == 0)
    }

    /// Debian's python3-mpd lives under /usr/bin/python3 (scripts/install-deps --test).
    static func pythonWithMPD2() throws -> String {
        let python = "/usr/bin/python3"
        try #require((try? Shell.run([python, "-c", "import mpd"]))?.status == 0,
                     "python3-mpd is missing: scripts/install-deps --test installs it")
        return python
    }

    /// Repeat and single as Home Assistant's mpd integration sets and reads them through
    /// python-mpd2 (off: repeat 0 single 0; all: repeat 1 single 0; one: repeat 1
    /// single 1), the four toggles in a row leaving both off, `single oneshot`, and
    /// single without repeat stopping after the song (waited for with `idle player`).
    @Test func repeatAndSingleThroughPythonMPD2() throws {
        let python = try Self.pythonWithMPD2()
        let h = try DaemonHarness()
        try h.start()
        let script = """
        import sys
        from mpd import MPDClient
        c = MPDClient()
        c.connect(sys.argv[1])
        def mode():
            s = c.status()
            if s["repeat"] == "1":
                return "one" if s["single"] == "1" else "all"
            return "off"
        for repeat, single, want in [(1, 0, "all"), (1, 1, "one"), (0, 0, "off")]:
            c.repeat(repeat); c.single(single)
            assert mode() == want, (want, c.status())
        c.repeat(1); c.single(1); c.repeat(0); c.single(0)
        s = c.status()
        assert s["repeat"] == "0" and s["single"] == "0", s
        c.single("oneshot")
        assert c.status()["single"] == "oneshot", c.status()
        c.single(0)
        c.consume(1); c.random(1)
        s = c.status()
        assert s["consume"] == "1" and s["random"] == "1", s
        c.consume(0); c.random(0)
        c.add(sys.argv[2]); c.add(sys.argv[3])
        c.single(1)
        c.play(0)
        while c.status()["state"] == "play":
            c.idle("player")
        s = c.status()
        assert s["state"] == "stop" and s["song"] == "0" and s["single"] == "1", s
        print("ok")
        c.close(); c.disconnect()
        """
        let path = h.dir + "/modes.py"
        try script.write(toFile: path, atomically: true, encoding: .utf8)
        let r = try Shell.run([python, path, h.dir + "/mpd.sock", Fixtures.named("flac-44100-2.flac").path, try Self.long()])
        #expect(r.status == 0 && String(decoding: r.stdout, as: UTF8.self) == "ok\n",
                "\(String(decoding: r.stdout, as: UTF8.self)) \(r.stderr)")
        #expect(h.terminate().status == 0)
    }

    /// MPD's repeat and single, through mpc: independent options (`repeat on, single
    /// on, repeat off, single off` leaves both off; it said `repeat: on` before), and
    /// single without repeat stops after the song, which stays current.
    @Test func repeatAndSingleAreMPDs() throws {
        let h = try DaemonHarness()
        try h.start()
        for args in [["repeat", "on"], ["single", "on"], ["repeat", "off"], ["single", "off"]] {
            #expect(try mpc(h, args[0], args[1]).0 == 0)
        }
        var (st, out) = try mpc(h, "status")
        #expect(st == 0 && out.contains("repeat: off") && out.contains("single: off"), "\(out)")
        let short = Fixtures.named("flac-44100-2.flac").path
        #expect(try mpc(h, "add", short).0 == 0)
        #expect(try mpc(h, "add", try Self.long()).0 == 0)
        #expect(try mpc(h, "single", "on").0 == 0)
        (st, out) = try mpc(h, "play")
        #expect(st == 0)
        // The short song ends; playback stops there instead of going on to the long one.
        #expect(h.waitFor(seconds: 30) { (try? mpc(h, "status"))?.1.contains("[playing]") == false })
        (st, out) = try mpc(h, "status")
        #expect(!out.contains("[playing]") && !out.contains("Ninety"), "\(out)")
        let raw = try LineClient(path: h.dir + "/mpd.sock")
        _ = raw.readLine(timeoutMillis: 10_000)
        #expect(raw.send("status"))
        var lines: [String] = []
        while let l = raw.readLine(timeoutMillis: 10_000), l != "OK" { lines.append(l) }
        #expect(lines.contains("state: stop") && lines.contains("song: 0") && lines.contains("single: 1") && lines.contains("repeat: 0"),
                "\(lines)")
        // oneshot: MPD 0.21's third value, shown as such.
        #expect(raw.send("single oneshot"))
        #expect(raw.readLine(timeoutMillis: 10_000) == "OK")
        #expect(raw.send("status"))
        lines = []
        while let l = raw.readLine(timeoutMillis: 10_000), l != "OK" { lines.append(l) }
        #expect(lines.contains("single: oneshot"))
        #expect(h.terminate().status == 0)
    }

    /// The TCP listener, when configured, speaks as the Unix socket does (whose replies
    /// MPDDifferentialTests compares with real MPD's); an overlong line closes that
    /// connection only, never the daemon.
    @Test func tcpSpeaksAsTheSocketAndOverlongLinesCloseOnlyTheirConnection() throws {
        let port = ServerProcess.stablePorts()
        let h = try DaemonHarness(extraConfig: "[mpd]\ntcp = \"127.0.0.1:\(port)\"\npassword = \"\"")
        try h.start()
        let tcp = try Shell.run(["mpc", "-h", "127.0.0.1", "-p", "\(port)", "status"])
        #expect(tcp.status == 0 && String(decoding: tcp.stdout, as: UTF8.self).contains("volume:"), "TCP: \(tcp.stderr)")
        let session = MPDDifferentialTests.Session("frobnicate", #"setvol "abc""#, #"playid "77""#, "status", "ping")
        let overTCP = try MPDDifferentialTests.replies(tcpPort: UInt16(port), session)
        #expect(overTCP == (try MPDDifferentialTests.replies(h.dir + "/mpd.sock", session)))
        #expect(overTCP.count == 7, "\(overTCP)")
        let c = try LineClient(path: h.dir + "/mpd.sock")
        #expect(c.readLine(timeoutMillis: 2000)?.hasPrefix("OK MPD 0.23") == true)
        // An overlong line closes that connection only.
        let big = try LineClient(path: h.dir + "/mpd.sock")
        _ = big.readLine(timeoutMillis: 2000)
        _ = big.send(String(repeating: "a", count: 100_000))
        #expect(big.readLine(timeoutMillis: 2000) == nil)
        #expect(c.send("ping") && c.readLine(timeoutMillis: 2000) == "OK", "other connections are fine")
        #expect(h.request("ping")?["ok"]?.boolValue == true)
        #expect(h.terminate().status == 0)
    }
}
