import Foundation
import Testing
import PlaydProtocol
import CoreStream
import CoreStreamTestSupport
#if canImport(Glibc)
import Glibc
#endif

@Suite("playd daemon, real processes", .checksSomething, .serialized)
struct DaemonTests {
    let track = Fixtures.named("flac-44100-2.flac")

    /// playctl's transport, seek and loop subcommands and their errors (ping, play
    /// --at, status, pause, toggle, seek in frames and relative, loop and its bounds,
    /// stop, and the exit status and code of each refusal).
    @Test func playctlDrivesTransportSeekAndLoop() throws {
        let h = try DaemonHarness()
        try h.start()
        var (st, out, err) = try h.playctl("ping")
        #expect(st == 0 && out == "pong\n", "\(err)")
        (st, _, err) = try h.playctl("play", track.path, "--at", "0.5")
        #expect(st == 0, "\(err)")
        (st, out, _) = try h.playctl("status")
        #expect(st == 0 && out.contains("[playing]") && out.contains("flac-44100-2.flac") && out.contains("/ 0:03"))
        (st, _, _) = try h.playctl("pause")
        #expect(st == 0)
        #expect(h.waitFor { h.request("status")?["state"]?.stringValue == "paused" })
        (st, _, _) = try h.playctl("toggle")
        #expect(h.request("status")?["state"]?.stringValue == "playing")
        (st, _, _) = try h.playctl("seek", "44100f")
        #expect(st == 0)
        let s = try #require(h.request("status"))
        #expect((s["position_frames"]?.numberValue ?? 0) >= 44100)
        (st, _, _) = try h.playctl("seek", "-0.5")
        #expect(st == 0)
        (st, _, _) = try h.playctl("loop", "0.5", "1:01.5")
        #expect(st == 1, "a loop end beyond the track is refused")
        (st, _, _) = try h.playctl("loop", "0.5", "1.5")
        #expect(st == 0)
        let looped = try #require(h.request("status"))
        #expect(looped["loop"]?["start_frames"]?.numberValue == 22050)
        #expect(looped["loop"]?["end_frames"]?.numberValue == 66150)
        (st, _, err) = try h.playctl("loop", "1.5", "0.5")
        #expect(st == 1 && err.contains("invalid_argument"))
        #expect(h.request("status")?["loop"]?["start_frames"]?.numberValue == 22050, "the region is kept")
        (st, _, _) = try h.playctl("loop", "off")
        #expect(h.request("status")?["loop"]?.isNull == true)
        (st, out, _) = try h.playctl("status", "--json")
        let j = try JSON.parse(out.trimmingCharacters(in: .whitespacesAndNewlines))
        for key in ["state", "file", "position", "duration", "position_frames", "duration_frames", "sample_rate",
                    "channels", "codec", "output", "loop", "volume", "underruns"] {
            #expect(j[key] != nil, "status lacks \(key)")
        }
        #expect(j["sample_rate"]?.numberValue == 44100 && j["duration_frames"]?.numberValue == 132300)
        (st, _, _) = try h.playctl("stop")
        #expect(h.request("status")?["state"]?.stringValue == "stopped")
        (st, _, err) = try h.playctl("seek", "1")
        #expect(st == 1 && err.contains("not_playing"))
        (st, _, err) = try h.playctl("play", "/nonexistent.flac")
        #expect(st == 1 && err.contains("file_not_found") && err.contains("/nonexistent.flac"))
        (st, _, err) = try h.playctl("seek", "1:75")
        #expect(st != 0 && (err.contains("not a time") || err.contains("below 60")), "\(err)")
        #expect(h.terminate().status == 0)
    }

    @Test func malformedRequestsGetTypedErrorsAndTheConnectionStaysUsable() throws {
        let h = try DaemonHarness()
        try h.start()
        let c = try LineClient(path: h.socket)
        // The session's own codes are CommandSpecTests' (in-process); here what only a
        // socket has: an over-long line, and a request over the real connection.
        let cases: [(String, String)] = [
            (#"{"id":6,"cmd":"seek","to":{"seconds":1}}"#, "not_playing"),
            (String(repeating: "x", count: 70_000), "line_too_long"),
        ]
        for (line, code) in cases {
            #expect(c.send(line))
            let reply = try #require(c.readLine(timeoutMillis: 5000).flatMap { try? JSON.parse($0) }, "no reply to \(line.prefix(40))")
            #expect(reply["ok"]?.boolValue == false)
            #expect(reply["error"]?["code"]?.stringValue == code, "\(line.prefix(40)): \(reply.text)")
            #expect(reply["error"]?["message"]?.stringValue?.isEmpty == false)
        }
        // Still usable, and ids are echoed.
        let pong = try #require(c.request(.obj(("id", .string("abc")), ("cmd", .string("ping")))))
        #expect(pong["id"]?.stringValue == "abc" && pong["ok"]?.boolValue == true)
        // Clients that vanish mid-request (half a line, or a request then gone before the
        // reply) cost nobody else anything.
        for _ in 0..<20 {
            let gone = try LineClient(path: h.socket)
            _ = gone.send(#"{"id":1,"cmd":"sta"#, newline: false)
        }
        for _ in 0..<20 {
            let gone = try LineClient(path: h.socket)
            _ = gone.send(#"{"id":1,"cmd":"status"}"#)
        }
        let after = try #require(c.request(.obj(("id", .int(99)), ("cmd", .string("status")))))
        #expect(after["ok"]?.boolValue == true)
        #expect(h.terminate().status == 0)
    }

    @Test func fiftyClientsWhilePlayingCauseNoUnderrun() throws {
        let h = try DaemonHarness()
        try h.start()
        #expect(h.request("play", ("path", .string(track.path)))?["ok"]?.boolValue == true)
        let failures = ManagedCounter()
        let socket = h.socket
        DispatchQueue.concurrentPerform(iterations: 50) { i in
            guard let c = try? LineClient(path: socket) else { failures.add(); return }
            for k in 0..<20 {
                let cmd = k % 5 == 4 ? "version" : "status"
                guard let r = c.request(.obj(("id", .int(k)), ("cmd", .string(cmd)))), r["ok"]?.boolValue == true,
                      r["id"]?.numberValue == Double(k) else { failures.add(); return }
            }
            _ = i
        }
        #expect(failures.value == 0)
        let s = try #require(h.request("status"))
        #expect(s["underruns"]?.numberValue == 0)
        #expect(s["state"]?.stringValue == "playing")
        #expect(h.terminate().status == 0)
    }

    @Test func aClientThatStopsReadingIsCutOffAndOthersAreFine() throws {
        let h = try DaemonHarness()
        try h.start()
        #expect(h.request("play", ("path", .string(track.path)))?["ok"]?.boolValue == true)
        // Subscribe with fast ticks and never read; also flood it with requests.
        let stuck = try LineClient(path: h.socket)
        #expect(stuck.send(#"{"id":1,"cmd":"subscribe","ticks":50}"#))
        let big = #"{"id":2,"cmd":"status"}"#
        for _ in 0..<8000 { if !stuck.send(big) { break } }
        // Others keep getting answers meanwhile (each within the client's deadline).
        for _ in 0..<20 {
            #expect(h.request("status")?["ok"]?.boolValue == true)
        }
        #expect(h.request("status")?["underruns"]?.numberValue == 0)
        // The stuck client was cut off at its buffer limit: it can read what was
        // buffered in the kernel, then end of stream, far short of 8000 replies.
        var replies = 0
        while stuck.readLine(timeoutMillis: 2000) != nil { replies += 1 }
        #expect(replies < 8000, "the stuck client got \(replies) replies: it was never cut off")
        #expect(h.request("status")?["clients_dropped"]?.numberValue == 1)
        #expect(h.terminate().status == 0)
    }

    @Test func sigtermSavesStateAndARestartResumesThere() throws {
        let h = try DaemonHarness()
        try h.start()
        #expect(h.request("play", ("path", .string(track.path)), ("at", .number(1.0)))?["ok"]?.boolValue == true)
        #expect(h.request("loop", ("start", .number(0.25)), ("end", .number(2.0)))?["ok"]?.boolValue == true)
        usleep(300_000)  // hold: 0.3 s of the loop played before SIGTERM
        let before = try #require(h.request("status")?["position_frames"]?.numberValue)
        #expect(h.terminate().status == 0)
        #expect(!FileManager.default.fileExists(atPath: h.socket), "the socket is removed")
        let saved = try JSON.parse(String(contentsOfFile: h.stateFile, encoding: .utf8))
        let savedPos = try #require(saved["position_frames"]?.numberValue)
        #expect(abs(savedPos - before) < 44100 * 0.5)
        try h.start()
        let s = try #require(h.request("status"))
        #expect(s["state"]?.stringValue == "paused")
        #expect(s["file"]?.stringValue == track.path)
        #expect(s["position_frames"]?.numberValue == savedPos)
        #expect(s["loop"]?["start_frames"]?.numberValue == 11025)
        #expect(h.terminate().status == 0)
    }

    /// Loop and direction through playctl and the protocol: the region, its count and
    /// passes in status, wrap and direction events, errors that keep the region, what
    /// the output captured, and both surviving a restart.
    @Test func loopAndReverseThroughPlayctl() throws {
        let h = try DaemonHarness()
        try h.start()
        let events = try LineClient(path: h.socket)
        #expect(events.request(.obj(("id", .int(1)), ("cmd", .string("subscribe"))))?["ok"]?.boolValue == true)
        // 0.5 s … 0.7 s (off round times, where the tone and chirp both cross zero).
        var (st, out, err) = try h.playctl("play", track.path)
        #expect(st == 0, "\(err)")
        (st, out, err) = try h.playctl("loop", "22071f", "30893f", "--count", "2")
        #expect(st == 0 && out.contains("loop 0:00.500 – 0:00.701"), "\(out) \(err)")
        (st, _, err) = try h.playctl("loop", "1", "0.5")
        #expect(st == 1 && err.contains("invalid_argument"))
        (st, _, err) = try h.playctl("loop", "0.5", "1", "--count", "-1")
        #expect(st != 0)
        var wraps: [Double] = []
        var sawEnd = false
        let deadline = Date().addingTimeInterval(8)
        while Date() < deadline && !sawEnd {
            guard let line = events.readLine(timeoutMillis: 500), let e = try? JSON.parse(line) else { continue }
            if e["event"]?.stringValue == "loop_wrapped" { wraps.append(e["passes"]?.numberValue ?? -1) }
            if e["event"]?.stringValue == "track_end" { sawEnd = true }
        }
        #expect(wraps == [1, 2], "wrap events: \(wraps)")
        #expect(sawEnd)
        // Ended on its own: stopped, and no file named (docs/protocol.md).
        let ended = try #require(h.request("status"))
        #expect(ended["state"]?.stringValue == "stopped" && ended["file"]?.isNull == true, "after the end: \(ended)")
        #expect(h.terminate().status == 0)
        // What it sounded like: 0…B−1, then A…B−1 twice more, then on to the end.
        let cap = try WAVFile(path: h.capture)
        let reference = try Reference.decode(track.path)
        let runs = Runs.decompose(cap.samples, reference: reference, channels: 2)
        #expect(runs == [Runs.Run(0, 30893), Runs.Run(22071, 30893), Runs.Run(22071, 132300)], "runs: \(runs.prefix(6))")
        try h.start()

        // Reverse with ping-pong, then restart: both come back.
        (st, _, err) = try h.playctl("play", track.path, "--at", "2")
        (st, _, err) = try h.playctl("direction", "reverse")
        #expect(st == 0, "\(err)")
        (st, _, err) = try h.playctl("loop", "0.25", "1.5", "--ping-pong")
        #expect(st == 0, "\(err)")
        #expect(h.waitFor(seconds: 5) { (h.request("status")?["loop"]?["passes"]?.numberValue ?? 0) >= 1 })
        let s = try #require(h.request("status"))
        #expect(s["direction"]?.stringValue != nil)
        #expect(s["loop"]?["ping_pong"]?.boolValue == true && s["loop"]?["count"]?.isNull == true)
        (st, out, _) = try h.playctl("status")
        #expect(out.contains("ping-pong") && out.contains("passes"), "\(out)")
        #expect(h.terminate().status == 0)
        try h.start()
        let r = try #require(h.request("status"))
        #expect(r["direction"]?.stringValue == "reverse")
        #expect(r["loop"]?["start_frames"]?.numberValue == 11025 && r["loop"]?["ping_pong"]?.boolValue == true)
        #expect(h.request("direction", ("direction", .string("sideways")))?["error"]?["code"]?.stringValue == "bad_request")
        #expect(h.terminate().status == 0)
    }

    /// Volume, mute, ReplayGain settings, metadata and cover art through playctl and the
    /// protocol, the level heard in the capture, and volume/mute surviving a restart.
    @Test func volumeMuteMetadataAndCover() throws {
        let h = try DaemonHarness(extraConfig: "[volume]\nreplaygain = \"track\"\nreplaygain_preamp = -2.5")
        try h.start()
        let events = try LineClient(path: h.socket)
        #expect(events.request(.obj(("id", .int(1)), ("cmd", .string("subscribe"))))?["ok"]?.boolValue == true)
        var (st, out, err) = try h.playctl("volume", "40")
        #expect(st == 0 && out == "volume 40\n", "\(out) \(err)")
        (st, out, _) = try h.playctl("volume", "-15")
        #expect(out == "volume 25\n")
        (st, out, _) = try h.playctl("volume", "+200")
        #expect(st != 0, "out of range is refused")
        #expect(h.request("volume", ("set", .number(101)))?["error"]?["code"]?.stringValue == "invalid_argument")
        (st, _, _) = try h.playctl("mute")
        (st, out, _) = try h.playctl("volume")
        #expect(out == "volume 25 (muted)\n")
        (st, _, _) = try h.playctl("unmute")
        var seen: [String] = []
        while let line = events.readLine(timeoutMillis: 300), let e = try? JSON.parse(line) {
            if e["event"]?.stringValue == "volume" { seen.append("\(Int(e["volume"]?.numberValue ?? -1))\(e["muted"]?.boolValue == true ? "m" : "")") }
        }
        #expect(seen == ["40", "25", "25m", "25"], "volume events: \(seen)")

        (st, _, err) = try h.playctl("play", track.path)
        #expect(st == 0, "\(err)")
        let s = try #require(h.request("status"))
        #expect(s["volume"]?.numberValue == 25 && s["muted"]?.boolValue == false)
        #expect(s["replay_gain"]?["mode"]?.stringValue == "track")
        #expect(s["replay_gain"]?["applied_db"]?.numberValue == 0, "untagged: the missing preamp (0 dB) applies, not the −2.5 dB preamp")
        #expect(s["bit_depth"]?.numberValue == 16 && s["codec"]?.stringValue == "flac" && s["cover"]?.isNull == true)
        #expect(h.request("cover")?["cover"]?.isNull == true)
        #expect(h.waitFor { h.request("status")?["state"]?.stringValue == "stopped" })
        #expect(h.terminate().status == 0)
        // The level heard: 0.25³ (ReplayGain on, but the file is untagged and the missing
        // preamp is 0 dB).
        let cap = try WAVFile(path: h.capture)
        let reference = try Reference.decode(track.path)
        let g = Float(0.015625)
        #expect(cap.samples.count == reference.count)
        #expect(cap.samples.elementsEqual(reference.map { $0 * g }), "the capture is not the source × 0.25³")

        try h.start()
        let r = try #require(h.request("status"))
        #expect(r["volume"]?.numberValue == 25 && r["muted"]?.boolValue == false)
        #expect(h.terminate().status == 0)
    }

    /// A queue from a directory and a playlist with a missing and a corrupt entry: the
    /// bad ones are reported and skipped, the good ones play gaplessly (the capture is
    /// the unsplit source), and the queue with its options survives a restart.
    @Test func queuePlaysGaplesslyAndSkipsBadEntries() throws {
        let h = try DaemonHarness()
        let album = h.dir + "/album"
        let tracks = try Albums.split("t", "flac", ["-c:a", "flac"], into: album) { ["-metadata", "title=Part \($0 + 1)"] }
        // Natural order: "t-1" < "t-2" < "t-3"; a playlist with two bad entries.
        try "not audio at all".write(toFile: h.dir + "/bad.flac", atomically: true, encoding: .utf8)
        try "\(tracks[0])\n\(h.dir)/missing.flac\nbad.flac\n\(tracks[1])\n\(tracks[2])\n"
            .write(toFile: h.dir + "/list.m3u", atomically: true, encoding: .utf8)
        try h.start()
        let events = try LineClient(path: h.socket)
        #expect(events.request(.obj(("id", .int(1)), ("cmd", .string("subscribe"))))?["ok"]?.boolValue == true)
        var (st, out, err) = try h.playctl("add", h.dir + "/list.m3u")
        #expect(st == 0 && out.contains("added 5"), "\(out) \(err)")
        (st, out, _) = try h.playctl("queue")
        #expect(out.contains("Part 1") && out.contains("Part 3") && out.contains("missing.flac"), "\(out)")
        #expect(out.split(separator: "\n").first?.hasPrefix(" 1. [1] ") == true, "the first entry is 1, as in mpc: \(out)")
        (st, out, err) = try h.playctl("play", "--index", "0")
        #expect(st == 64 && err.contains("1 is the first entry") && err.contains("Usage: playctl play"),
                "positions count from 1, and a wrong one gets play's own usage: \(out) \(err)")
        (st, _, err) = try h.playctl("play", "--index", "1")
        #expect(st == 0, "\(err)")
        var skipped: [String] = []
        var started: [String] = []
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline {
            guard let line = events.readLine(timeoutMillis: 500), let e = try? JSON.parse(line) else { continue }
            if e["event"]?.stringValue == "skipped" { skipped.append(e["code"]?.stringValue ?? "?") }
            if e["event"]?.stringValue == "track", let f = e["file"]?.stringValue { started.append(f) }
            if e["event"]?.stringValue == "state", e["state"]?.stringValue == "stopped" { break }
        }
        #expect(skipped == ["file_not_found", "not_audio"], "skipped: \(skipped)")
        #expect(started == tracks, "tracks started: \(started)")
        let s = try #require(h.request("status"))
        #expect(s["queue"]?["length"]?.numberValue == 5 && s["queue"]?["current"]?.isNull == true)
        #expect(h.request("repeat", ("mode", .string("one")))?["repeat"]?.stringValue == "one")
        (st, _, err) = try h.playctl("single", "oneshot")
        #expect(st == 0, "\(err)")
        (st, _, _) = try h.playctl("shuffle", "on")
        (st, _, _) = try h.playctl("consume", "on")
        (st, _, _) = try h.playctl("remove", "--index", "2")
        (st, _, _) = try h.playctl("move", "1", "4")
        #expect(h.request("queue")?["queue"]?.arrayValue?.map { Int($0["entry"]?.numberValue ?? 0) } == [3, 4, 5, 1])
        #expect(h.terminate().status == 0)
        let cap = try WAVFile(path: h.capture)
        let source = try Reference.decode(Fixtures.stereoSource)
        #expect(cap.samples.count == source.count, "\(cap.frames) frames")
        #expect(cap.samples.elementsEqual(source), "the three tracks did not join into the unsplit source")

        try h.start()
        let r = try #require(h.request("status"))
        #expect(r["queue"]?["length"]?.numberValue == 4)
        // Repeat on with single oneshot still reads `one`; both are kept across the restart.
        #expect(r["queue"]?["single"]?.stringValue == "oneshot")
        #expect(r["queue"]?["repeat"]?.stringValue == "one" && r["queue"]?["shuffle"]?.boolValue == true
                && r["queue"]?["consume"]?.boolValue == true)
        #expect(h.request("queue")?["queue"]?.arrayValue?.map { Int($0["entry"]?.numberValue ?? 0) } == [3, 4, 5, 1])
        #expect(h.request("remove", ("entry", .number(99)))?["error"]?["code"]?.stringValue == "invalid_argument")
        #expect(h.request("add", ("path", .string(h.dir + "/nope")))?["error"]?["code"]?.stringValue == "file_not_found")
        #expect(h.terminate().status == 0)
    }

    /// `output.format_change = "reopen"`: a next entry in another format is not resampled;
    /// the device reopens in its own format when the current one ends.
    @Test func formatChangeReopenPlaysTheNextInItsOwnFormat() throws {
        let h = try DaemonHarness()
        let config = try String(contentsOfFile: h.configPath, encoding: .utf8)
        try config.replacingOccurrences(of: "[output]\n", with: "[output]\nformat_change = \"reopen\"\n")
            .write(toFile: h.configPath, atomically: true, encoding: .utf8)
        try h.start()
        let second = Fixtures.named("flac-48000-1.flac").path
        #expect(h.request("add", ("paths", .array([.string(track.path), .string(second)])))?["ok"]?.boolValue == true)
        #expect(h.request("play", ("index", .number(0)))?["ok"]?.boolValue == true)
        #expect(h.request("status")?["output"]?["sample_rate"]?.numberValue == 44100)
        #expect(h.waitFor(seconds: 8) { h.request("status")?["file"]?.stringValue == second })
        let s = try #require(h.request("status"))
        #expect(s["output"]?["sample_rate"]?.numberValue == 48000 && s["output"]?["channels"]?.numberValue == 1,
                "the device did not reopen in the next track's format: \(s["output"]?.text ?? "")")
        #expect(s["queue"]?["current"]?.numberValue == 1)
        #expect(h.terminate().status == 0)
    }

    /// `playctl export` as a process: `--current` takes the daemon's track and loop
    /// region, an existing output is refused without `--force`, and SIGINT mid-run
    /// leaves neither the output nor a temporary file.
    @Test func exportThroughPlayctl() throws {
        let h = try DaemonHarness()
        try h.start()
        #expect(h.request("play", ("path", .string(track.path)))?["ok"]?.boolValue == true)
        #expect(h.request("loop", ("start", .object([("frames", .number(22_071))])), ("end", .object([("frames", .number(30_893))])))?["ok"]?.boolValue == true)
        let out = h.dir + "/region.wav"
        var (st, stdout, err) = try h.playctl("export", "--current", out)
        #expect(st == 0, "\(err)")
        #expect(stdout.contains("100%") && stdout.contains("8822 frames"), "\(stdout)")
        let got = try Reference.decode(out)
        let want = try Reference.decode(track.path, extraArguments: ["-af", "atrim=start_sample=22071:end_sample=30893"])
        #expect(got.elementsEqual(want), "the exported loop region is not the CLI's decode of it")
        (st, _, err) = try h.playctl("export", track.path, out)
        #expect(st == 1 && err.contains("--force"), "\(err)")
        (st, _, err) = try h.playctl("export", track.path, out, "--force", "--from", "1", "--to", "2")
        #expect(st == 0, "\(err)")
        #expect(try Reference.decode(out).count == 44_100 * 2)
        (st, _, err) = try h.playctl("export", track.path, h.dir + "/x.ogg")
        #expect(st == 2 && err.contains("--format"))
        #expect(h.terminate().status == 0)

        // A long export interrupted by SIGINT.
        let long = h.dir + "/long.flac"
        let made = try Shell.run(["ffmpeg", "-nostdin", "-v", "error", "-f", "lavfi", "-i", "sine=f=440:r=44100:d=240", "-ac", "2", long])
        try #require(made.status == 0)
        let p = Process()
        p.executableURL = URL(fileURLWithPath: DaemonHarness.playctl)
        p.arguments = ["export", long, h.dir + "/long.m4a"]
        p.standardOutput = FileHandle.nullDevice
        p.standardError = FileHandle.nullDevice
        try p.run()
        // Interrupted once it is writing its output (the partial file exists).
        #expect(h.waitFor(seconds: 30) {
            ((try? FileManager.default.contentsOfDirectory(atPath: h.dir)) ?? []).contains { $0.hasPrefix("long.m4a.playd-") }
        }, "the export never began writing")
        kill(p.processIdentifier, SIGINT)
        p.waitUntilExit()
        #expect(p.terminationStatus == 130)
        let left = try FileManager.default.contentsOfDirectory(atPath: h.dir).filter { $0.hasPrefix("long.m4a") }
        #expect(left.isEmpty, "left behind: \(left)")
    }

    /// `volume.mixer = "hardware"` sets an ALSA mixer control: the PulseAudio plugin's
    /// `Master`, checked with pactl. A control that does not exist falls back to software.
    @Test func hardwareMixerSetsTheALSAControl() throws {
        try #require(ProcessInfo.processInfo.environment["PULSE_SERVER"] != nil,
                     "PULSE_SERVER is not set: run scripts/test, or start scripts/pulse and export what it prints")
        let h = try DaemonHarness(extraConfig: "[volume]\nmixer = \"hardware\"\nmixer_device = \"pulse\"\nmixer_control = \"Master\"")
        try h.start()
        #expect(h.request("status")?["mixer"]?.stringValue == "hardware")
        var (st, out, err) = try h.playctl("volume", "40")
        #expect(st == 0 && out == "volume 40\n", "\(out) \(err)")
        let sink = try Shell.run(["pactl", "get-sink-volume", "@DEFAULT_SINK@"])
        #expect(String(decoding: sink.stdout, as: UTF8.self).contains("40%"), "\(String(decoding: sink.stdout, as: UTF8.self))")
        (st, out, _) = try h.playctl("volume", "-10")
        #expect(out == "volume 30\n")
        _ = try Shell.run(["pactl", "set-sink-volume", "@DEFAULT_SINK@", "100%"])
        #expect(h.terminate().status == 0)

        let bad = try DaemonHarness(extraConfig: "[volume]\nmixer = \"hardware\"\nmixer_device = \"pulse\"\nmixer_control = \"Nope\"")
        try bad.start()
        #expect(bad.request("status")?["mixer"]?.stringValue == "software")
        #expect(bad.terminate().status == 0)
        #expect(bad.log.contains("hardware mixer unavailable") && bad.log.contains("Nope"), "\(bad.log)")
        let fixed = try DaemonHarness(extraConfig: "[volume]\nmixer = \"none\"")
        try fixed.start()
        (st, _, err) = try fixed.playctl("volume", "50")
        #expect(st != 0 && err.contains("fixed"))
        #expect(fixed.terminate().status == 0)
    }

    @Test func aCorruptStateFileIsReportedAndIgnored() throws {
        let h = try DaemonHarness()
        try "{ not json".write(toFile: h.stateFile, atomically: true, encoding: .utf8)
        try h.start()
        #expect(h.request("status")?["state"]?.stringValue == "stopped")
        #expect(h.log.contains("corrupt state file"))
        #expect(h.terminate().status == 0)
    }

    @Test func aStaleSocketIsReplacedAndALiveOneIsNotTakenOver() throws {
        let h = try DaemonHarness()
        try h.start()
        h.kill9()
        #expect(FileManager.default.fileExists(atPath: h.socket), "kill -9 leaves the socket behind")
        try h.start()  // replaces the stale socket
        #expect(h.request("ping")?["ok"]?.boolValue == true)
        // A second playd on the same socket is refused and the first keeps serving.
        let second = Process()
        second.executableURL = URL(fileURLWithPath: DaemonHarness.playd)
        second.arguments = ["--config", h.configPath]
        let errPipe = Pipe()
        second.standardError = errPipe
        second.standardOutput = FileHandle.nullDevice
        try second.run()
        second.waitUntilExit()
        let err = String(decoding: errPipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(second.terminationStatus != 0)
        #expect(err.contains("another playd is already listening"))
        #expect(h.request("ping")?["ok"]?.boolValue == true)
        #expect(h.terminate().status == 0)
    }

    @Test func socketModeAndBadConfigAtStart() throws {
        let h = try DaemonHarness(extraConfig: "")
        try h.start()
        var st = stat()
        #expect(stat(h.socket, &st) == 0)
        #expect(st.st_mode & 0o777 == 0o660)
        #expect(h.terminate().status == 0)
        try "[output]\nbuffer_time = \"long\"\n".write(toFile: h.configPath, atomically: true, encoding: .utf8)
        let r = try Shell.run([DaemonHarness.playd, "--config", h.configPath])
        // EX_CONFIG, the file, line and key, and no usage text: it is not a usage error.
        #expect(r.status == 78)
        #expect(r.stderr.contains("line 2") && r.stderr.contains("output.buffer_time"))
        #expect(!r.stderr.contains("Usage:"), "\(r.stderr)")
    }

    @Test func playctlReportsAMissingDaemonClearly() throws {
        let r = try Shell.run([DaemonHarness.playctl, "status"], environment: ["PLAYD_SOCKET": "/tmp/no-such-playd.sock"])
        #expect(r.status == 3)
        #expect(r.stderr.contains("no playd listening on /tmp/no-such-playd.sock"))
        // Without $PLAYD_SOCKET: the user's runtime folder, then the system service's.
        let dir = NSTemporaryDirectory() + "playd-xdg-\(getpid())"
        let looked = try Shell.run([DaemonHarness.playctl, "status"], environment: ["PLAYD_SOCKET": "", "XDG_RUNTIME_DIR": dir])
        #expect(looked.status == 3)
        #expect(looked.stderr.contains("looked for \(dir)/playd/control.sock and /run/playd/control.sock"), "\(looked.stderr)")
    }

    /// A shop's volume: every start at `volume.start`, whatever was saved; no client
    /// above `volume.max` (JSON, mpc, a relative change), each request set to the cap.
    @Test func volumeStartsAtItsLevelAndStaysUnderItsCap() throws {
        let h = try DaemonHarness(extraConfig: "[volume]\nstart = 40\nmax = 60")
        try h.start()
        func volume() -> Double? { h.request("status")?["volume"]?.numberValue }
        #expect(volume() == 40)
        #expect(h.request("volume", ("set", .int(100)))?["ok"] == .bool(true))
        #expect(volume() == 60)
        #expect(h.request("volume", ("set", .int(30)))?["ok"] == .bool(true))
        #expect(volume() == 30)
        let mpc = try Shell.run(["mpc", "-h", h.dir + "/mpd.sock", "volume", "+50"])
        #expect(mpc.status == 0, "\(mpc.stderr)")
        #expect(volume() == 60)
        let setvol = try Shell.run(["mpc", "-h", h.dir + "/mpd.sock", "volume", "95"])
        #expect(setvol.status == 0 && volume() == 60)
        #expect(h.terminate().status == 0)
        // The saved 60 is not what the next start plays at.
        try h.start()
        #expect(volume() == 40)
        #expect(h.terminate().status == 0)
    }

    /// `playctl current` prints what `mpc current` prints for the same song and format
    /// (mpc formats it itself from playd's MPD replies: the independent reference).
    @Test(arguments: [nil, "%artist% - %title%", "[%album% ]#%track%", "[[%name%: ]%artist% - ]%title% (%time%)",
                      "%genre%|%date%|unknown", "[%composer%]|none"])
    func currentPrintsWhatMPCPrints(format: String?) throws {
        let h = try DaemonHarness(extraConfig: "[library]\nmusic_roots = [\"$DIR/music\"]")
        try FileManager.default.createDirectory(atPath: h.dir + "/music", withIntermediateDirectories: true)
        let song = h.dir + "/music/song.flac"
        try Shell.ffmpeg(["-i", Fixtures.named("flac-44100-2.flac").path, "-metadata", "artist=Daft Punk", "-metadata", "title=One More Time",
                          "-metadata", "album=Discovery", "-metadata", "track=1", "-metadata", "date=2001", "-c", "copy", song])
        try h.start()
        let f = format.map { ["-f", $0] } ?? []
        func both() throws -> (String, String) {
            let mine = try h.playctl(["current"] + f)
            let mpc = try Shell.run(["mpc", "-h", h.dir + "/mpd.sock", "current"] + f)
            #expect(mine.0 == 0 && mpc.status == 0, "\(mine.2) \(mpc.stderr)")
            return (mine.1, String(decoding: mpc.stdout, as: UTF8.self))
        }
        let stopped = try both()
        #expect(stopped.0 == stopped.1 && stopped.0.isEmpty, "stopped: playctl \(stopped.0) mpc \(stopped.1)")
        #expect(h.request("play", ("path", .string(song)))?["ok"] == .bool(true))
        #expect(h.request("pause")?["ok"] == .bool(true))
        let (mine, mpc) = try both()
        #expect(mine == mpc && !mine.isEmpty, "playctl \(mine) mpc \(mpc)")
        #expect(h.terminate().status == 0)
    }

    /// `playctl play DIR` queues the folder and plays its first file; what was queued
    /// before stays.
    @Test func playAFolderQueuesIt() throws {
        let h = try DaemonHarness()
        let album = h.dir + "/album"
        try FileManager.default.createDirectory(atPath: album, withIntermediateDirectories: true)
        for (i, name) in ["flac-44100-2.flac", "flac-48000-1.flac"].enumerated() {
            try FileManager.default.copyItem(atPath: Fixtures.named(name).path, toPath: album + "/0\(i + 1) \(name)")
        }
        try h.start()
        #expect(try h.playctl("add", Fixtures.named("mp3cbr-44100-2.mp3").path).0 == 0)
        let (st, out, err) = try h.playctl("play", album)
        #expect(st == 0, "\(out) \(err)")
        let s = try #require(h.request("status"))
        #expect(s["queue"]?["length"]?.numberValue == 3)
        #expect(s["queue"]?["current"]?.numberValue == 1)
        #expect(s["file"]?.stringValue == album + "/01 flac-44100-2.flac")
        #expect(try h.playctl("play", h.dir + "/empty-nothing").0 != 0)
        #expect(h.terminate().status == 0)
    }

    /// Stopped with a queue, `playctl status` says where the queue stands: what `play`
    /// starts (the first entry, or the one that was playing).
    @Test func stoppedStatusShowsTheQueue() throws {
        let h = try DaemonHarness()
        try h.start()
        #expect(try h.playctl("status").1 == "stopped\n")
        #expect(try h.playctl("add", Fixtures.named("flac-44100-2.flac").path, Fixtures.named("flac-48000-1.flac").path).0 == 0)
        #expect(try h.playctl("status").1 == "stopped\nqueue: 2 entries; next: 1. flac-44100-2.flac\n")
        #expect(try h.playctl("play", "--index", "2").0 == 0)
        #expect(try h.playctl("stop").0 == 0)
        #expect(try h.playctl("status").1 == "stopped\nqueue: 2 entries; next: 2. flac-48000-1.flac\n")
        #expect(h.terminate().status == 0)
    }

    /// Errors give positions in the user's units, not frames.
    @Test func positionErrorsAreInMinutesAndSeconds() throws {
        let h = try DaemonHarness()
        try h.start()
        let song = Fixtures.named("flac-44100-2.flac").path  // 3 s
        #expect(h.request("play", ("path", .string(song)))?["ok"] == .bool(true))
        #expect(h.request("pause")?["ok"] == .bool(true))
        let (st, _, err) = try h.playctl("loop", "1", "6:00")
        #expect(st == 1 && err.contains("loop end 6:00 is past the end of the track (0:03)"), "\(err)")
        let order = try h.playctl("loop", "2.5", "1")
        #expect(order.2.contains("loop start 0:02.5 must be before its end 0:01"), "\(order.2)")
        #expect(h.terminate().status == 0)
    }

    /// Under systemd (`$JOURNAL_STREAM` set) every line starts with its syslog priority,
    /// so `journalctl -p err` works; a client's connection is a debug line, not info.
    @Test func journalLinesCarryTheirPriority() throws {
        let h = try DaemonHarness()
        try h.start(environment: ["JOURNAL_STREAM": "8:12345"])
        #expect(h.request("play", ("path", .string("/nonexistent/x.flac")))?["ok"] == .bool(false))
        #expect(h.terminate().status == 0)
        let lines = h.log.split(separator: "\n")
        #expect(!lines.isEmpty)
        for l in lines { #expect(l.range(of: #"^<[2-7]>"#, options: .regularExpression) != nil, "\(l)") }
        #expect(lines.contains { $0.hasPrefix("<6>") && $0.contains("starting") }, "\(h.log)")
        #expect(!h.log.contains("client connected"), "connections are logged at info: \(h.log)")
    }

    /// mpc's habits: `--socket` before or after the subcommand, a bare `playctl` is
    /// `status`, and a socket the user may not open names its group.
    @Test func playctlTakesMPCsHabits() throws {
        let h = try DaemonHarness()
        try h.start()
        let before = try Shell.run([DaemonHarness.playctl, "--socket", h.socket, "status"], environment: ["PLAYD_SOCKET": ""])
        let after = try Shell.run([DaemonHarness.playctl, "status", "--socket", h.socket], environment: ["PLAYD_SOCKET": ""])
        let bare = try Shell.run([DaemonHarness.playctl], environment: ["PLAYD_SOCKET": h.socket])
        let equals = try Shell.run([DaemonHarness.playctl, "--socket=\(h.socket)", "--json"], environment: ["PLAYD_SOCKET": ""])
        #expect(before.status == 0 && after.status == 0 && bare.status == 0 && equals.status == 0, "\(before.stderr) \(after.stderr) \(bare.stderr)")
        let out = String(decoding: before.stdout, as: UTF8.self)
        #expect(out.contains("stopped"), "\(out)")
        #expect(String(decoding: after.stdout, as: UTF8.self) == out)
        #expect(String(decoding: bare.stdout, as: UTF8.self) == out)
        #expect((try? JSON.parse(String(decoding: equals.stdout, as: UTF8.self)))?["state"]?.stringValue == "stopped")
        // As nobody, a socket of mode 0660 owned by root's group is refused, and the
        // message says which group to join.
        let group = String(cString: getgrgid(0)!.pointee.gr_name)
        let denied = try Shell.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", DaemonHarness.playctl,
                                    "--socket", h.socket, "status"])
        #expect(denied.status == 4, "\(denied.stderr)")
        #expect(denied.stderr.contains("group '\(group)'") && denied.stderr.contains("usermod -aG \(group)"), "\(denied.stderr)")
        #expect(h.terminate().status == 0)
    }

    /// `playctl watch` itself: it subscribes (its position ticks start), then prints the
    /// track, the state and the end of a track played through another client, in its
    /// human format.
    @Test func watchPrintsEvents() throws {
        let h = try DaemonHarness()
        try h.start()
        let watch = Process()
        watch.executableURL = URL(fileURLWithPath: DaemonHarness.playctl)
        watch.arguments = ["watch", "--ticks", "100"]
        watch.environment = ProcessInfo.processInfo.environment.merging(["PLAYD_SOCKET": h.socket]) { $1 }
        let pipe = Pipe()
        watch.standardOutput = pipe
        try watch.run()
        defer { watch.terminate(); watch.waitUntilExit() }
        let lines = Locked<[String]>([])
        let reader = pipe.fileHandleForReading
        Thread.detachNewThread {
            var pending = Data()
            while true {
                let chunk = reader.availableData
                if chunk.isEmpty { return }
                pending.append(chunk)
                while let nl = pending.firstIndex(of: 0x0A) {
                    let line = String(decoding: pending[pending.startIndex..<nl], as: UTF8.self)
                    pending.removeSubrange(pending.startIndex...nl)
                    lines.withLock { $0.append(line) }
                }
            }
        }
        func printed(_ prefix: String) -> Bool { h.waitFor(seconds: 10) { lines.withLock { $0.contains { $0.hasPrefix(prefix) } } } }
        #expect(printed("position: "), "watch prints position ticks once subscribed")
        #expect(h.request("play", ("path", .string(track.path)))?["ok"]?.boolValue == true)
        #expect(printed("track: \(track.path)"), "\(lines.withLock { $0 })")
        #expect(printed("state: playing"), "\(lines.withLock { $0 })")
        #expect(printed("ended: \(track.path)"), "\(lines.withLock { $0 })")
        #expect(h.terminate().status == 0)
    }
}

final class ManagedCounter: @unchecked Sendable {
    // @unchecked Sendable: guarded by `lock`.
    private let lock = NSLock()
    private var n = 0
    func add() { lock.lock(); n += 1; lock.unlock() }
    var value: Int { lock.lock(); defer { lock.unlock() }; return n }
}
