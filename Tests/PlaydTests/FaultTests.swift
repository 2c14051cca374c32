import Foundation
import Testing
import PlaydProtocol
import CoreStreamTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// CPU time (user + system) a process has used, in clock ticks.
func cpuTicks(_ pid: Int32) -> Int? {
    guard let s = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
          let close = s.lastIndex(of: ")") else { return nil }
    let fields = s[s.index(after: close)...].split(separator: " ")
    // After the command: state(0) ppid(1) … utime(11) stime(12).
    guard fields.count > 12, let u = Int(fields[11]), let k = Int(fields[12]) else { return nil }
    return u + k
}

/// playd playing a long file into a private PulseAudio that a test can kill and start
/// again, with an event subscription.
final class PulseOutage {
    let d: DaemonHarness
    let pulseDir: String
    let track: String
    let events: LineClient
    private(set) var pulsePid: Int32

    /// Fails the test when there is no pulseaudio here (`scripts/install-deps --test`
    /// installs it).
    /// `track`: what plays (nil: a 60 s sine made here); `extraConfig`: more lines of
    /// the daemon's config.
    static func make(name: String = #function, track: String? = nil, extraConfig: String = "") throws -> PulseOutage {
        try #require(FileManager.default.isExecutableFile(atPath: "/usr/bin/pulseaudio"),
                     "no pulseaudio: scripts/install-deps --test installs it")
        return try PulseOutage(name: name, track: track, extraConfig: extraConfig)
    }

    /// A reopen time-out short enough not to be waited out for 30 s, long enough that the
    /// play sent right after an attempt began meets it still under way.
    static let shortOpenTimeout = "[limits]\nopen_timeout = 5\n"

    private init(name: String, track given: String?, extraConfig: String) throws {
        d = try DaemonHarness(extraConfig: extraConfig, output: "alsa:pulse", name: name)
        pulseDir = d.dir + "/pulse"
        track = given ?? d.dir + "/long.flac"
        if given == nil { try Shell.ffmpeg(["-f", "lavfi", "-i", "sine=frequency=440:duration=60", "-ac", "2", track]) }
        pulsePid = try Self.launchPulse(pulseDir)
        try d.start(environment: ["PULSE_SERVER": "unix:\(pulseDir)/native"])
        events = try LineClient(path: d.socket)
        #expect(events.request(.obj(("id", .int(1)), ("cmd", .string("subscribe"))))?["ok"] == .bool(true))
        #expect(d.request("play", ("path", .string(track)))?["ok"] == .bool(true))
        // The outage comes once 1.5 s have been heard.
        #expect(d.waitFor(seconds: 20) { (d.request("status")?["position"]?.numberValue ?? 0) >= 1.5 }, "the track never played 1.5 s")
    }

    deinit { _ = try? Shell.run([Fixtures.repositoryRoot.path + "/scripts/pulse", "stop", pulseDir]) }

    /// Waits (20 s, a hang guard) until `file` plays, 0.3 s of it heard; the last status.
    @discardableResult
    func expectPlays(_ file: String, sourceLocation: SourceLocation = #_sourceLocation) -> JSON? {
        var s: JSON?
        #expect(d.waitFor(seconds: 20) {
            s = d.request("status")
            return s?["file"]?.stringValue == file && s?["state"]?.stringValue == "playing" && (s?["position"]?.numberValue ?? 0) > 0.3
        }, "the play did not play: \(s?.text ?? "no status")\n\(d.log.suffix(1500))", sourceLocation: sourceLocation)
        return s
    }

    /// A 30 s stereo tone, another track than the outage's (at 44.1 kHz: at 48 kHz its
    /// play needs the device reopened).
    func otherTrack(rate: Int = 44_100) throws -> String {
        let path = d.dir + "/other-\(rate).flac"
        try Shell.ffmpeg(["-f", "lavfi", "-i", "sine=frequency=660:duration=30:sample_rate=\(rate)", "-ac", "2", path])
        return path
    }

    /// The server killed and started again, then stopped (SIGSTOP) before the device is
    /// back: returns once an attempt to reopen has begun, and hangs in its open.
    func lossThenAServerThatHangs() throws {
        killPulse()
        try #require(waitEvent("output_lost", seconds: 10) != nil, "no output_lost event")
        try startPulse()
        try #require(kill(pulsePid, SIGSTOP) == 0)
        try awaitAnAttemptBegun()
    }

    /// The server stopped (SIGSTOP) while it plays, 20 clients polling (round 0 asked),
    /// and a client that has sent `play` of `path` (id 7).
    func stopTheServerAndPlay(_ path: String) throws -> (SlowDiskTests.Pollers, LineClient) {
        try #require(kill(pulsePid, SIGSTOP) == 0)
        let pollers = try SlowDiskTests.Pollers(d)
        pollers.poll(0)
        let player = try LineClient(path: d.socket)
        #expect(player.send(#"{"id":7,"cmd":"play","path":"\#(path)"}"#))
        return (pollers, player)
    }

    /// Waits until an attempt to reopen begins after this call. Attempts counted by now
    /// may have met the server dead or still starting; one begun after this read meets
    /// it as it is now (stopped: it hangs in the open). Each status meanwhile must be
    /// answered (a control thread in that open fails the #require); 30 s is a hang
    /// guard, the backoff's fourth attempt comes 15 s after the loss.
    func awaitAnAttemptBegun() throws {
        func attempts() throws -> Int {
            let s = try #require(d.request("status"), "status was not answered while the output was reopened")
            return Int(s["output_error"]?["attempts"]?.numberValue ?? -1)
        }
        let before = try attempts()
        try #require(before >= 0, "the output is not reported lost")
        var begun = false
        for _ in 0..<300 where !begun {
            begun = try attempts() > before
            if !begun { usleep(100_000) }
        }
        try #require(begun, "no attempt began after the server stopped: \(d.log.suffix(1500))")
    }

    /// Starts a private PulseAudio in `dir` with scripts/pulse; its pid.
    private static func launchPulse(_ dir: String) throws -> Int32 {
        let r = try Shell.run([Fixtures.repositoryRoot.path + "/scripts/pulse", "start", dir])
        guard r.status == 0 else { throw FixtureError("scripts/pulse start: \(r.stderr)") }
        let pid = try String(contentsOfFile: dir + "/pulse.pid", encoding: .utf8)
        return Int32(pid.trimmingCharacters(in: .whitespacesAndNewlines)) ?? -1
    }

    /// Starts the private PulseAudio again.
    func startPulse() throws { pulsePid = try Self.launchPulse(pulseDir) }

    func killPulse() { kill(pulsePid, SIGKILL) }

    /// The next event called `name` within `seconds`.
    func waitEvent(_ name: String, seconds: Int32) -> JSON? {
        let deadline = Date().addingTimeInterval(Double(seconds))
        while Date() < deadline {
            guard let line = events.readLine(timeoutMillis: 500), let e = try? JSON.parse(line) else { continue }
            if e["event"]?.stringValue == name { return e }
        }
        return nil
    }
}

/// The output device going away while playing: a private PulseAudio server killed
/// with SIGKILL and started again.
@Suite("Output faults", .checksSomething)
struct FaultTests {
    @Test func pulseKilledAndRestartedMidPlay() throws {
        let o = try PulseOutage.make()
        let d = o.d
        let pid = try #require(d.process?.processIdentifier)

        // The sound server dies.
        let before = d.request("status")?["position"]?.numberValue ?? -1
        o.killPulse()
        let lost = try #require(o.waitEvent("output_lost", seconds: 10), "no output_lost event")
        #expect(lost["code"]?.stringValue == "output_failed")
        let during = try #require(d.request("status"))
        #expect(during["state"]?.stringValue == "paused", "paused while the output is gone, as MPD")
        #expect(during["output_error"]?["code"] != nil && during["output_error"] != .null)
        let heardAtLoss = during["position"]?.numberValue ?? -1
        // MPD clients see it as MPD's `error:` line (mpc prints "ERROR: …").
        let mpd = try LineClient(path: d.dir + "/mpd.sock")
        _ = mpd.readLine(timeoutMillis: 2000)
        _ = mpd.send("status")
        var mpdLines: [String] = []
        while let l = mpd.readLine(timeoutMillis: 2000), l != "OK" { mpdLines.append(l) }
        #expect(mpdLines.contains { $0.hasPrefix("error: ") }, "\(mpdLines)")
        #expect(mpdLines.contains("state: pause"))
        #expect(heardAtLoss > before - 0.3 && heardAtLoss <= before + 0.6, "heard \(heardAtLoss) s at the loss, \(before) s just before")

        // The backoff, from the times playd reports: after its n-th failed attempt the
        // next is due in 1, 2, 4 s (n = 1, 2, 3), so the n-th came no sooner than 1, 3,
        // 7 s after the loss. A loaded machine can only make the attempts later. And
        // nothing spins meanwhile: CPU time over the outage (a busy loop would use a
        // whole core; CPU time cannot grow because the machine is busy).
        let ticksPerSecond = Double(sysconf(Int32(_SC_CLK_TCK)))
        let c0 = cpuTicks(pid) ?? 0, t0 = Date()
        // Asked four times a second (a request costs playd a little CPU too).
        var seen: [Int: (since: Double, next: Double)] = [:]
        let deadline = Date().addingTimeInterval(30)
        while seen[3] == nil && Date() < deadline {
            if let e = d.request("status")?["output_error"], let n = e["attempts"]?.numberValue, n >= 1, seen[Int(n)] == nil {
                seen[Int(n)] = (e["since_ms"]?.numberValue ?? -1, e["next_retry_ms"]?.numberValue ?? -1)
            }
            usleep(250_000)
        }
        #expect(seen[3] != nil, "three attempts were not made: \(seen)")
        let cpu = Double((cpuTicks(pid) ?? 0) - c0) / ticksPerSecond / Date().timeIntervalSince(t0)
        for (n, due, earliest) in [(1, 2000.0, 1000.0), (2, 4000.0, 3000.0), (3, 8000.0, 7000.0)] {
            guard let s = seen[n] else { continue }
            #expect(s.since >= earliest, "attempt \(n) \(s.since) ms after the loss, before its backoff allows (\(earliest) ms)")
            #expect(s.next > 0 && s.next <= due, "after attempt \(n) the next is due in \(s.next) ms; the backoff says \(due) ms")
        }
        #expect(cpu < 0.03, "playd used \(cpu * 100) % of a core while the output was gone")

        // It comes back: playback goes on from where it was heard, by itself.
        try o.startPulse()
        let restored = try #require(o.waitEvent("output_restored", seconds: 40), "no output_restored event")
        let restoredAt = Date()
        #expect((restored["attempts"]?.numberValue ?? 0) >= 3)
        let after = try #require(d.request("status"))
        #expect(after["state"]?.stringValue == "playing")
        #expect(after["output_error"] == .null)
        // Resumed where it was heard: no further on than the time since it came back.
        let position = after["position"]?.numberValue ?? -1
        let since = Date().timeIntervalSince(restoredAt)
        #expect(position >= heardAtLoss - 0.01 && position <= heardAtLoss + since + 0.3,
                "resumed at \(position) s, heard \(heardAtLoss) s at the loss, back \(since) s ago")
        #expect(d.waitFor { (d.request("status")?["position"]?.numberValue ?? 0) > position + 0.5 }, "it does not play on")
        #expect(d.log.contains("output lost") && d.log.contains("output back"))
        #expect(d.process?.isRunning == true)
        print("output fault: lost at \(heardAtLoss) s, CPU while gone \(String(format: "%.2f", cpu * 100)) %, " +
              "back after \(restored["after_ms"]?.numberValue ?? -1) ms and \(restored["attempts"]?.numberValue ?? -1) attempts")
    }

    /// A radio playing when the device goes comes back with the device, from where the
    /// station is now (a live stream cannot go back to the frame heard), opened off the
    /// control thread as a `play` of it is. Before, the resume asked the engine for the
    /// frame heard, which a live stream refuses (`not_seekable`): the radio stayed off
    /// ("output back, but the track cannot be resumed").
    @Test func aRadioComesBackWithTheOutput() throws {
        let dir = NSTemporaryDirectory() + "playd-radio-outage-\(getpid())"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        let ice = try Icecast(dir: dir)
        try ice.start()
        defer { ice.stop() }
        try ice.feed("live.mp3", input: StreamTests.tone)
        let radio = ice.url("live.mp3")
        let o = try PulseOutage.make(track: radio)
        o.killPulse()
        try #require(o.waitEvent("output_lost", seconds: 10) != nil, "no output_lost event")
        try o.startPulse()
        try #require(o.waitEvent("output_restored", seconds: 30) != nil, "no output_restored event")
        var s: JSON?
        #expect(o.d.waitFor(seconds: 30) {
            s = o.d.request("status")
            return s?["state"]?.stringValue == "playing" && s?["file"]?.stringValue == radio && (s?["position"]?.numberValue ?? 0) > 0.5
        }, "the radio did not come back: \(s?.text ?? "no status")\n\(o.d.log.suffix(1500))")
        #expect(!o.d.log.contains("cannot be resumed"), "\(o.d.log.suffix(1500))")
    }

    /// The sound server comes back but does not answer: a PulseAudio stopped (SIGSTOP)
    /// right after its start, so the ALSA plugin's open of the next attempt connects
    /// and waits for a handshake that does not come. The reopen runs on a worker
    /// (issue 38): 20 clients on both protocols are served meanwhile, a client's `play`
    /// waits for the attempt, and once the server answers that play is answered and
    /// plays (not the track heard at the loss). Before, the attempt's open ran on the
    /// control thread: nobody was answered until the server was.
    @Test func aSoundServerHungInTheReopenLeavesEveryoneElseServed() throws {
        let o = try PulseOutage.make()
        defer { o.d.kill9() }
        let other = try o.otherTrack()
        defer { kill(o.pulsePid, SIGCONT) }  // the server started again
        try o.lossThenAServerThatHangs()
        let pulse = o.pulsePid
        let pollers = try SlowDiskTests.Pollers(o.d)
        pollers.poll(0)
        // A play now waits for the attempt under way; the others are still served.
        let player = try LineClient(path: o.d.socket)
        #expect(player.send(#"{"id":7,"cmd":"play","path":"\#(other)"}"#))
        for round in 1..<3 { pollers.poll(round) }
        #expect(o.d.request("status")?["output_error"] != .null, "the output is back before its server answers")
        try #require(kill(pulse, SIGCONT) == 0)
        let answer = try #require(player.readLine(timeoutMillis: 60_000).flatMap { try? JSON.parse($0) },
                                  "the play was never answered: \(o.d.log.suffix(1500))")
        #expect(answer["ok"] == .bool(true), "\(answer.text)")
        try #require(o.waitEvent("output_restored", seconds: 60) != nil, "no output_restored event")
        var s: JSON?
        #expect(o.d.waitFor(seconds: 20) {
            s = o.d.request("status")
            return s?["file"]?.stringValue == other && s?["state"]?.stringValue == "playing" && (s?["position"]?.numberValue ?? 0) > 0.3
        }, "the play did not play once the output was back: \(s?.text ?? "no status")\n\(o.d.log.suffix(1500))")
        #expect(s?["output_error"] == .null)
    }

    /// A `play` of a track in another format (48 kHz after 44.1 kHz) reopens the device,
    /// and the sound server hangs (stopped with SIGSTOP while it plays): the reopen runs
    /// on a worker (issue 38), so 20 clients on both protocols are served meanwhile; the
    /// play is answered once the server answers, and the new track plays at its own
    /// rate. Before, the play's reopen ran on the control thread.
    @Test func aPlayInAnotherFormatWhileTheSoundServerHangsLeavesEveryoneElseServed() throws {
        let o = try PulseOutage.make()
        defer { o.d.kill9() }
        let other = try o.otherTrack(rate: 48_000)
        let pulse = o.pulsePid
        defer { kill(pulse, SIGCONT) }
        let (pollers, player) = try o.stopTheServerAndPlay(other)
        for round in 1..<3 { pollers.poll(round) }
        try #require(kill(pulse, SIGCONT) == 0)
        let answer = try #require(player.readLine(timeoutMillis: 60_000).flatMap { try? JSON.parse($0) },
                                  "the play was never answered: \(o.d.log.suffix(1500))")
        #expect(answer["ok"] == .bool(true), "\(answer.text)")
        let s = o.expectPlays(other)
        #expect(s?["output"]?["sample_rate"]?.numberValue == 48000, "the device was not reopened at the track's rate: \(s?.text ?? "")")
    }

    /// A sound server that never answers the device's reopen (stopped with SIGSTOP and
    /// left so): the play that waits for it is answered `timed_out` after
    /// `limits.open_timeout` (5 s here), as a file whose open hangs is, not never; a play
    /// that needs the device while the worker is still in that open is answered at once;
    /// once the server answers, the same play plays. Clients are served throughout.
    @Test func aReopenThatNeverEndsIsAnsweredTimedOut() throws {
        let o = try PulseOutage.make(extraConfig: PulseOutage.shortOpenTimeout)
        defer { o.d.kill9() }
        let other = try o.otherTrack(rate: 48_000)
        let pulse = o.pulsePid
        defer { kill(pulse, SIGCONT) }
        let (pollers, player) = try o.stopTheServerAndPlay(other)
        // 90 s: a hang guard over the 5 s timeout.
        let answer = try #require(player.readLine(timeoutMillis: 90_000).flatMap { try? JSON.parse($0) },
                                  "the play was never answered: \(o.d.log.suffix(1500))")
        #expect(answer["id"]?.numberValue == 7 && answer["error"]?["code"]?.stringValue == "timed_out", "\(answer.text)")
        #expect(answer["error"]?["message"]?.stringValue?.contains("within 5 s (limits.open_timeout") == true, "\(answer.text)")
        pollers.poll(1)
        // The worker is still in the open: another play of that format is answered now.
        let again = o.d.request("play", ("path", .string(other)))
        #expect(again?["error"]?["code"]?.stringValue == "timed_out", "\(again?.text ?? "no answer")")
        try #require(kill(pulse, SIGCONT) == 0)
        #expect(o.d.waitFor(seconds: 30) { o.d.request("play", ("path", .string(other)))?["ok"] == .bool(true) },
                "the play never went through once the server answered: \(o.d.log.suffix(1500))")
        #expect(o.expectPlays(other)?["output"]?["sample_rate"]?.numberValue == 48000)
    }

    /// SIGTERM while the reopen after a loss hangs in a sound server that never answers: playd
    /// saves and exits by itself, with status 0, instead of waiting for the open until
    /// systemd's kill (the engine's shutdown waited for the reopen's lock for ever).
    @Test func aStopWhileTheReopenHangsExits() throws {
        let o = try PulseOutage.make()
        defer { o.d.kill9() }
        defer { kill(o.pulsePid, SIGCONT) }  // the server started again
        // The attempt after the loss connects to a server that never answers: it hangs
        // in the device's open, holding the engine's reconfigure lock.
        try o.lossThenAServerThatHangs()
        // A hang guard, not a bound: SIGKILL after 120 s, which the status shows.
        let pid = try #require(o.d.process?.processIdentifier)
        DispatchQueue.global().asyncAfter(deadline: .now() + 120) { kill(pid, SIGKILL) }
        let (status, _) = o.d.terminate()
        #expect(o.d.process?.terminationReason == .exit && status == 0,
                "playd did not exit by itself (status \(status)): \(o.d.log.suffix(1500))")
        #expect(o.d.log.contains("shutting down while the output's reopen still waits for its device"), "\(o.d.log.suffix(1500))")
    }

    /// The same after an output loss: the attempt to reopen meets a server that never
    /// answers; a play waiting for it is answered `timed_out`, one made while the
    /// attempt still hangs is answered at once, and once the server answers the device
    /// is back and the track heard at the loss resumes (the plays were answered, so
    /// none of them is what plays).
    @Test func aReopenAfterALossThatNeverEndsIsAnsweredTimedOut() throws {
        let o = try PulseOutage.make(extraConfig: PulseOutage.shortOpenTimeout)
        defer { o.d.kill9() }
        let heardFile = try #require(o.d.request("status")?["file"]?.stringValue, "nothing plays before the loss")
        let other = try o.otherTrack()
        defer { kill(o.pulsePid, SIGCONT) }  // the server started again
        try o.lossThenAServerThatHangs()
        let pulse = o.pulsePid
        let player = try LineClient(path: o.d.socket)
        #expect(player.send(#"{"id":7,"cmd":"play","path":"\#(other)"}"#))
        let answer = try #require(player.readLine(timeoutMillis: 90_000).flatMap { try? JSON.parse($0) },
                                  "the play was never answered: \(o.d.log.suffix(1500))")
        #expect(answer["id"]?.numberValue == 7 && answer["error"]?["code"]?.stringValue == "timed_out", "\(answer.text)")
        let status = o.d.request("status")
        #expect(status?["output_error"]?["code"]?.stringValue == "timed_out", "\(status?.text ?? "no answer")")
        let again = o.d.request("play", ("path", .string(other)))
        #expect(again?["error"]?["code"]?.stringValue == "timed_out", "\(again?.text ?? "no answer")")
        try #require(kill(pulse, SIGCONT) == 0)
        try #require(o.waitEvent("output_restored", seconds: 60) != nil, "no output_restored event: \(o.d.log.suffix(1500))")
        var s: JSON?
        #expect(o.d.waitFor(seconds: 20) {
            s = o.d.request("status")
            return s?["file"]?.stringValue == heardFile && s?["state"]?.stringValue == "playing"
        }, "what was heard did not resume: \(s?.text ?? "no status")\n\(o.d.log.suffix(1500))")
    }

    /// A `stop` while the device is gone is kept: when it comes back nothing resumes.
    /// A `resume` is kept too: it comes back playing.
    @Test(arguments: ["stop", "pause-resume"])
    func whatTheUserDoesDuringTheOutageWins(command: String) throws {
        let o = try PulseOutage.make(name: "whatTheUserDoes-\(command)")
        o.killPulse()
        #expect(o.waitEvent("output_lost", seconds: 10) != nil)
        if command == "stop" {
            #expect(o.d.request("stop")?["ok"] == .bool(true))
        } else {
            #expect(o.d.request("pause")?["ok"] == .bool(true))
            #expect(o.d.request("resume")?["ok"] == .bool(true))
        }
        try o.startPulse()
        #expect(o.waitEvent("output_restored", seconds: 20) != nil)
        let wanted = command == "stop" ? "stopped" : "playing"
        var st = o.d.request("status")
        #expect(o.d.waitFor(seconds: 10) {
            st = o.d.request("status")
            return st?["state"]?.stringValue == wanted && st?["output_error"] == .null
        }, "after the output came back: \(st?.text ?? "no status"), not \(wanted) without an error")
    }
}

/// A slow disk: the file is served through a FUSE mirror (scripts/slowfs) whose reads
/// are throttled below the audio's byte rate for a while, then let go.
@Suite("Slow disk", .checksSomething, .serialized)
struct SlowDiskTests {
    @Test func underrunsAreCountedAndPlaybackRecovers() throws {
        // 16-bit stereo WAV at 44.1 kHz: 176,400 bytes a second to read.
        let m = try SlowMount { src in
            try Shell.ffmpeg(["-f", "lavfi", "-i", "sine=frequency=440:duration=40", "-ac", "2", src + "/t.wav"])
        }
        defer { m.stop() }
        let (mnt, rate) = (m.mnt, m.rate)

        let d = try DaemonHarness(output: "null")
        try d.start()
        let events = try LineClient(path: d.socket)
        #expect(events.request(.obj(("id", .int(1)), ("cmd", .string("subscribe"))))?["ok"] == .bool(true))
        #expect(d.request("play", ("path", .string(mnt + "/t.wav")))?["ok"] == .bool(true))
        usleep(2_000_000)  // hold: 2 s at full disk speed
        #expect(d.request("status")?["underruns"]?.numberValue == 0, "no underruns at full speed")

        // The disk slows to 30 kB/s (a sixth of what the audio needs) for 4 s.
        try "30000\n".write(toFile: rate, atomically: true, encoding: .utf8)
        usleep(4_000_000)  // hold: 4 s of the slow disk
        try "0\n".write(toFile: rate, atomically: true, encoding: .utf8)
        var underrunEvents = 0
        let until = Date().addingTimeInterval(2)
        while Date() < until {
            if let line = events.readLine(timeoutMillis: 200), let e = try? JSON.parse(line), e["event"]?.stringValue == "underrun" {
                underrunEvents += 1
            }
        }
        let a = try #require(d.request("status"))
        let underruns = a["underruns"]?.numberValue ?? 0
        #expect(underruns > 0, "a starved reader shows as underruns")
        #expect(underrunEvents > 0, "and as underrun events")

        // Recovered: two more seconds of the track are heard with the count standing
        // still (how fast they come is the machine's business, not this test's).
        let p0 = a["position"]?.numberValue ?? 0
        var b = a
        #expect(d.waitFor(seconds: 30) {
            b = d.request("status") ?? b
            return (b["position"]?.numberValue ?? 0) >= p0 + 2
        }, "the position did not move on after the disk recovered")
        #expect(b["state"]?.stringValue == "playing")
        #expect(b["underruns"]?.numberValue == underruns, "underruns went on after the disk recovered")
        d.kill9()  // before the mount goes
        print("slow disk: \(Int(underruns)) underruns (periods of silence) while reads ran at 30 kB/s for 4 s, \(underrunEvents) underrun events; then 2 s more played without one")
    }

    /// The output comes back while the file to resume is on a mount whose reads hang:
    /// the file opens off the control thread first (issue 38), so 20 clients polling
    /// `status` are answered meanwhile, and when the reads flow playback resumes where
    /// it was heard. On the old code the open ran on the control thread at the first
    /// attempt after the device was back: nobody was answered until the disk was.
    @Test func theResumeAfterAnOutputLossOnAHungDiskLeavesEveryoneElseServed() throws {
        let m = try Self.oneBytePerSecondMount()
        defer { m.stop() }
        try "0\n".write(toFile: m.rate, atomically: true, encoding: .utf8)
        let hung = m.mnt + "/t.flac"
        let o = try PulseOutage.make(track: hung)
        defer { o.d.kill9() }  // before the mount goes
        // Run first: a playd stuck in the open (the old code) answers only once it returns.
        defer { try? "0\n".write(toFile: m.rate, atomically: true, encoding: .utf8) }
        o.killPulse()
        try #require(o.waitEvent("output_lost", seconds: 10) != nil, "no output_lost event")
        let heard = try #require(o.d.request("status")?["position"]?.numberValue)
        try "1\n".write(toFile: m.rate, atomically: true, encoding: .utf8)
        try o.startPulse()
        // The first attempt (1 s after the loss) reaches the file; each status meanwhile
        // is answered (a control thread stuck in the open fails the #require).
        // (The reads hang from well before that attempt: the rate is set right after the
        // event. The log line is the attempt's own report; 30 s is a hang guard.)
        var waiting = false
        for _ in 0..<300 where !waiting {
            try #require(o.d.request("status")?["ok"] == .bool(true), "status was not answered while the output came back")
            waiting = o.d.log.contains("output recovery: the file to resume is opening first")
            if !waiting { usleep(100_000) }
        }
        try #require(waiting, "no recovery attempt reached the file within 30 s: \(o.d.log.suffix(2000))")
        let pollers = try Pollers(o.d)
        for round in 0..<3 { pollers.poll(round) }
        #expect(o.d.request("status")?["output_error"] != .null, "the output is not back before the file has opened")
        try "0\n".write(toFile: m.rate, atomically: true, encoding: .utf8)
        try #require(o.waitEvent("output_restored", seconds: 60) != nil, "no output_restored once the file opened")
        let s = try #require(o.d.request("status"))
        #expect(s["file"]?.stringValue == hung && s["state"]?.stringValue == "playing", "\(s)")
        let position = s["position"]?.numberValue ?? -1
        #expect(position >= heard - 0.01 && position < heard + 1, "resumed at \(position) s, heard \(heard) s at the loss")
    }

    /// The saved track on a mount whose reads hang when playd starts (a music NAS still
    /// booting after a power cut): playd answers at once, 20 clients are served, and
    /// the track is back, paused at its saved frame, once the reads flow (issue 38). On
    /// the old code its open ran in the start, before the first answer: playd did not
    /// answer until the disk did.
    @Test func aSavedTrackOnAHungDiskDoesNotHoldTheStart() throws {
        let m = try Self.oneBytePerSecondMount()
        defer { m.stop() }
        try "0\n".write(toFile: m.rate, atomically: true, encoding: .utf8)
        let hung = m.mnt + "/t.flac"
        let d = try DaemonHarness(output: "null")
        try d.start()
        defer { d.kill9() }  // before the mount goes
        #expect(d.request("play", ("path", .string(hung)))?["ok"] == .bool(true))
        #expect(d.waitFor(seconds: 20) { (d.request("status")?["position"]?.numberValue ?? 0) >= 1 }, "the track never played 1 s")
        #expect(d.request("pause")?["ok"] == .bool(true))
        #expect(d.terminate().status == 0)
        // Where it stopped, as the state file says (written at the exit).
        let state = try JSON.parse(try String(contentsOfFile: d.stateFile, encoding: .utf8))
        #expect(state["file"]?.stringValue == hung)
        let saved = try #require(state["position_frames"]?.numberValue)
        try "1\n".write(toFile: m.rate, atomically: true, encoding: .utf8)
        // Run first: a playd stuck in the open (the old code) ends once it returns.
        defer { try? "0\n".write(toFile: m.rate, atomically: true, encoding: .utf8) }
        // The old code: no answer to the start's ping within its 10 s.
        try d.start()
        let pollers = try Pollers(d)
        for round in 0..<3 { pollers.poll(round) }
        #expect(d.request("status")?["state"]?.stringValue == "stopped", "nothing plays while the saved track opens")
        #expect(d.log.contains("restoring: the saved track is opening"))
        try "0\n".write(toFile: m.rate, atomically: true, encoding: .utf8)
        var s: JSON?
        #expect(d.waitFor(seconds: 60) {
            s = d.request("status")
            return s?["file"]?.stringValue == hung && s?["state"]?.stringValue == "paused"
        }, "the saved track was not restored once its reads flowed: \(s?.text ?? "")")
        #expect(s?["position_frames"]?.numberValue == saved, "restored at \(String(describing: s?["position_frames"])), saved at \(saved)")
    }

    /// A FUSE mount holding a 10 s FLAC, `t.flac`, whose reads give one byte a second
    /// until its rate file says 0.
    static func oneBytePerSecondMount(name: String = #function) throws -> SlowMount {
        let m = try SlowMount(name: name) { src in
            try Shell.ffmpeg(["-f", "lavfi", "-i", "sine=frequency=440:duration=10", "-ac", "2", "-c:a", "flac", src + "/t.flac"])
        }
        try "1\n".write(toFile: m.rate, atomically: true, encoding: .utf8)
        return m
    }

    /// 20 clients on their own connections, 10 JSON and 10 MPD, asking `status`.
    struct Pollers {
        let json: [LineClient], mpd: [LineClient]
        init(_ d: DaemonHarness) throws {
            json = try (0..<10).map { _ in try LineClient(path: d.socket) }
            mpd = try (0..<10).map { _ in try LineClient(path: d.dir + "/mpd.sock") }
            for c in mpd { #expect(c.readLine(timeoutMillis: 10_000)?.hasPrefix("OK MPD") == true, "an MPD greeting") }
        }
        /// Each asks once and must be answered.
        func poll(_ round: Int) {
            for (k, c) in json.enumerated() {
                #expect(c.request(.obj(("id", .int(Int64(round))), ("cmd", .string("status"))))?["ok"] == .bool(true),
                        "JSON client \(k), round \(round)")
            }
            for (k, c) in mpd.enumerated() {
                #expect(c.send("status"), "MPD client \(k)")
                var lines: [String] = []
                while let l = c.readLine(timeoutMillis: 10_000), l != "OK" { lines.append(l) }
                #expect(lines.contains { $0.hasPrefix("state: ") }, "MPD client \(k), round \(round): \(lines)")
            }
        }
    }

    /// `play` of a file whose reads hang (its FUSE mount serves 1 byte a second): the
    /// open runs off the control thread, so while the play waits 20 clients polling
    /// `status` (10 over JSON, 10 over MPD) are each answered, and a play of another file
    /// goes through; when the reads flow again the first play is answered and plays.
    /// On the old code FFmpeg's open ran on the control thread: nobody was answered.
    @Test func aPlayOnAHungDiskLeavesEveryoneElseServed() throws {
        let m = try Self.oneBytePerSecondMount()
        defer { m.stop() }
        let d = try DaemonHarness(output: "null")
        try d.start()
        defer { d.kill9() }  // before the mount goes
        let hung = m.mnt + "/t.flac"
        let player = try LineClient(path: d.socket)
        #expect(player.send(#"{"id":7,"cmd":"play","path":"\#(hung)"}"#))
        #expect(player.readLine(timeoutMillis: 300) == nil, "the play waits for its file")
        // 20 clients poll meanwhile, each on its own connection, 5 times.
        let pollers = try Pollers(d)
        for round in 0..<5 { pollers.poll(round) }
        #expect(player.readLine(timeoutMillis: 0) == nil, "the play still waits")
        let other = Fixtures.named("flac-44100-2.flac").path
        #expect(d.request("play", ("path", .string(other)))?["ok"] == .bool(true), "a play of another file goes through")
        // The reads flow again: the waiting play is answered, and it is what plays.
        try "0\n".write(toFile: m.rate, atomically: true, encoding: .utf8)
        let reply = try JSON.parse(try #require(player.readLine(timeoutMillis: 60_000), "the play was never answered"))
        #expect(reply["id"]?.numberValue == 7 && reply["ok"] == .bool(true), "\(reply)")
        let s = try #require(d.request("status"))
        #expect(s["file"]?.stringValue == hung && s["state"]?.stringValue == "playing", "\(s)")
    }

    /// A file whose open never ends (its reads hang): the play is answered `timed_out`
    /// after `limits.open_timeout` (2 s here), naming the file and the key, while other
    /// clients are served; once the reads flow, the same play plays. (The open's thread
    /// cannot be stopped: it stays in the read until the disk answers.) Before, the
    /// time-out's answer was dropped before the play could read it, and the play started
    /// the same open again, every 2 s here: it was never answered.
    @Test func aFileWhoseOpenHangsIsAnsweredTimedOut() throws {
        let m = try Self.oneBytePerSecondMount()
        defer { m.stop() }
        let d = try DaemonHarness(extraConfig: "[limits]\nopen_timeout = 2\n", output: "null")
        try d.start()
        defer { d.kill9() }  // before the mount goes
        // First of all: the reads flow, so the open's thread returns and the kill ends
        // (a process in a FUSE read cannot die until the read does).
        defer { try? "0\n".write(toFile: m.rate, atomically: true, encoding: .utf8) }
        let hung = m.mnt + "/t.flac"
        let player = try LineClient(path: d.socket)
        #expect(player.send(#"{"id":7,"cmd":"play","path":"\#(hung)"}"#))
        let pollers = try Pollers(d)
        pollers.poll(0)
        // 60 s: a hang guard over the 2 s timeout (the 10 s file needs minutes at 1 byte/s).
        let answer = try #require(player.readLine(timeoutMillis: 60_000).flatMap { try? JSON.parse($0) },
                                  "the play was never answered: \(d.log.suffix(1500))")
        #expect(answer["id"]?.numberValue == 7 && answer["error"]?["code"]?.stringValue == "timed_out", "\(answer.text)")
        let message = answer["error"]?["message"]?.stringValue ?? ""
        #expect(message.contains(hung) && message.contains("within 2 s (limits.open_timeout"), "\(answer.text)")
        pollers.poll(1)
        #expect(d.request("status")?["state"]?.stringValue == "stopped", "a play that timed out changed what plays")
        try "0\n".write(toFile: m.rate, atomically: true, encoding: .utf8)
        #expect(d.waitFor(seconds: 30) { d.request("play", ("path", .string(hung)))?["ok"] == .bool(true) },
                "the play never went through once the reads flowed: \(d.log.suffix(1500))")
        let s = try #require(d.request("status"))
        #expect(s["file"]?.stringValue == hung && s["state"]?.stringValue == "playing", "\(s)")
    }

    /// The queue's own opens run off the control thread too (issue 38): `play 1` of an
    /// entry on a mount whose reads hang waits while 20 other clients are answered, and
    /// is answered and plays when the reads flow. On the old code the open ran on the
    /// control thread: nobody was answered, and the watchdog killed playd.
    @Test func queueOpensOnAHungDiskLeaveEveryoneElseServed() throws {
        let (m, d) = try Self.daemonWithAHungFileQueued()
        defer { m.stop() }
        defer { d.kill9() }  // before the mount goes
        let hung = m.mnt + "/t.flac"
        let good = Fixtures.named("flac-44100-2.flac").path

        // 1. `play 1`: the hung entry. The request waits; the others are served.
        let player = try LineClient(path: d.dir + "/mpd.sock")
        #expect(player.readLine(timeoutMillis: 10_000)?.hasPrefix("OK MPD") == true)
        #expect(player.send("play 1"))
        #expect(player.readLine(timeoutMillis: 300) == nil, "the play waits for its file")
        let pollers = try Pollers(d)
        for round in 0..<3 { pollers.poll(round) }
        #expect(player.readLine(timeoutMillis: 0) == nil, "the play still waits")
        #expect(d.request("status")?["state"]?.stringValue == "stopped", "nothing played meanwhile")
        try "0\n".write(toFile: m.rate, atomically: true, encoding: .utf8)
        #expect(player.readLine(timeoutMillis: 60_000) == "OK", "the play was answered when the file opened")
        let s1 = try #require(d.request("status"))
        #expect(s1["file"]?.stringValue == hung && s1["state"]?.stringValue == "playing", "\(s1)")
    }

    /// The track to follow gaplessly opens off the control thread too (issue 38):
    /// `play 0` of a good file whose successor is on a mount whose reads hang is
    /// answered, and 20 other clients are answered while that open waits; when the reads
    /// flow, the hung file plays after the good one. On the old code the engine's
    /// `setNext` opened it on the control thread right after the play: nobody was
    /// answered until the disk was.
    @Test func theTrackToFollowOnAHungDiskLeavesEveryoneElseServed() throws {
        let (m, d) = try Self.daemonWithAHungFileQueued()
        defer { m.stop() }
        defer { d.kill9() }  // before the mount goes
        // Run first: a playd stuck in the open (the old code) answers only once it returns.
        defer { try? "0\n".write(toFile: m.rate, atomically: true, encoding: .utf8) }
        let hung = m.mnt + "/t.flac"
        let player = try LineClient(path: d.dir + "/mpd.sock")
        #expect(player.readLine(timeoutMillis: 10_000)?.hasPrefix("OK MPD") == true)
        #expect(player.send("play 0"))
        #expect(player.readLine(timeoutMillis: 10_000) == "OK", "play 0 answered")
        // One client first, with a bound: a control thread stuck in the open fails here.
        try #require(d.request("status")?["ok"] == .bool(true), "status was not answered while the next track opened")
        let pollers = try Pollers(d)
        for round in 0..<3 { pollers.poll(round) }
        try "0\n".write(toFile: m.rate, atomically: true, encoding: .utf8)
        var s1: JSON?
        #expect(d.waitFor(seconds: 60) {
            s1 = d.request("status")
            return s1?["file"]?.stringValue == hung && s1?["state"]?.stringValue == "playing"
        }, "the hung file never played after the good one: \(s1?.text ?? "")")
    }

    /// Listings and covers read the disk off the control thread (issue 38): with a file
    /// on a mount whose reads hang in the queue, mpc's `playlist` (MPD `playlistinfo`)
    /// and a `readpicture` of that file wait while 20 other clients are answered. After
    /// 5 s without progress the listing is answered anyway, the other file with its
    /// tags and the hung one without (as a URL is listed), and the picture request gets
    /// an ACK; when the reads flow again the listing shows the hung file's tags too. On
    /// the old code the probe ran on the control thread: nobody was answered.
    @Test func listingsAndCoversOnAHungDiskLeaveEveryoneElseServed() throws {
        let (m, d) = try Self.daemonWithAHungFileQueued()
        defer { m.stop() }
        defer { d.kill9() }  // before the mount goes
        let hung = m.mnt + "/t.flac"
        let good = Fixtures.named("flac-44100-2.flac").path
        let mpd = d.dir + "/mpd.sock"
        let lister = Process()
        lister.executableURL = URL(fileURLWithPath: "/usr/bin/mpc")
        // `[…]`: mpc prints the group only when the song has a duration.
        lister.arguments = ["-h", mpd, "playlist", "-f", "%file%[=%time%]"]
        let out = Pipe()
        lister.standardOutput = out
        try lister.run()
        let picture = try LineClient(path: mpd)
        #expect(picture.readLine(timeoutMillis: 10_000)?.hasPrefix("OK MPD") == true)
        #expect(picture.send("readpicture \"\(hung)\" 0"))
        #expect(picture.readLine(timeoutMillis: 300) == nil, "readpicture waits for its read")
        let pollers = try Pollers(d)
        for round in 0..<3 { pollers.poll(round) }
        // After the grace: answered without the hung file's reads.
        let ack = try #require(picture.readLine(timeoutMillis: 30_000), "readpicture was never answered")
        #expect(ack.hasPrefix("ACK ") && ack.contains("no progress"), "\(ack)")
        lister.waitUntilExit()
        #expect(lister.terminationStatus == 0)
        let listed = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            .split(separator: "\n").map(String.init)
        // The other file with its duration (the `ffmpeg` CLI's probe), the hung one bare.
        let seconds = try Self.probedSeconds(good)
        #expect(listed == ["\(good)=\(seconds / 60):\(String(format: "%02d", seconds % 60))", hung], "\(listed)")
        // The reads flow: the late probe is kept, and listed (t.flac is 10 s).
        try "0\n".write(toFile: m.rate, atomically: true, encoding: .utf8)
        #expect(d.waitFor(seconds: 30) {
            let r = (try? Shell.run(["mpc", "-h", mpd, "playlist", "-f", "%file%[=%time%]"])).map { String(decoding: $0.stdout, as: UTF8.self) } ?? ""
            return r.contains(hung + "=0:10")
        }, "the hung file's duration never showed after its reads flowed")
    }

    /// `add` of one file whose lookup hangs (a dead NFS server: stat and realpath never
    /// return) runs off the control thread (issue 38): 20 clients on both protocols are
    /// answered meanwhile, the add itself is answered `timed_out` once its read made no
    /// progress for 5 s, and once the disk answers the same add goes through. On the old
    /// code the control thread sat in stat(): no greeting, no status, until the disk
    /// answered.
    @Test func aFileAddOnAHungDiskLeavesEveryoneElseServed() throws {
        let (m, d) = try Self.daemonBesideAHungLookup()
        defer { m.stop() }
        defer { d.kill9() }  // before the mount goes
        // Run first: a playd stuck in the lookup (the old code) dies only once it returns.
        defer { m.openGate() }
        let hung = m.mnt + "/hung.flac"
        let pollers = try Self.timesOutWhileOthersAreServed(m, d, "add", hung)
        pollers.poll(3)
        Self.goesThroughOnceTheDiskAnswers(m, d, "add", hung)
        let files = d.request("queue")?["queue"]?.arrayValue?.compactMap { $0["file"]?.stringValue }
        #expect(files == [hung], "\(files ?? [])")
    }

    /// An announcement whose clip is on a disk that hangs (its lookup never returns
    /// until the test lets it) is checked off the control thread (issue 38): 20 clients
    /// on both protocols are answered meanwhile, MPD messages asking for it wait too
    /// (16 at most: the 17th is refused `too_large`), the `announce` is answered
    /// `timed_out` once the check made no progress for 5 s, and once the disk answers
    /// the same announcement plays over the music. On the old code the clip was looked up and
    /// opened on the control thread: nobody was answered until the disk was.
    @Test func anAnnouncementOnAHungDiskLeavesEveryoneElseServed() throws {
        let (m, d) = try Self.daemonBesideAHungLookup()
        defer { m.stop() }
        defer { d.kill9() }  // before the mount goes
        // Run first: a playd stuck in the lookup (the old code) dies only once it returns.
        defer { m.openGate() }
        let events = try LineClient(path: d.socket)
        #expect(events.request(.obj(("id", .int(1)), ("cmd", .string("subscribe"))))?["ok"] == .bool(true))
        #expect(d.request("play", ("path", .string(Fixtures.named("flac-44100-2.flac").path)))?["ok"] == .bool(true))
        let hung = m.mnt + "/hung.flac"
        _ = try Self.timesOutWhileOthersAreServed(m, d, "announce", hung) {
            // Meanwhile an MPD client sends the same clip 17 times (each `sendmessage`
            // is answered at once): 16 wait for the check, the 17th is refused.
            let mpd = try LineClient(path: d.dir + "/mpd.sock")
            #expect(mpd.readLine(timeoutMillis: 10_000)?.hasPrefix("OK MPD") == true)
            for k in 0..<17 {
                #expect(mpd.send("sendmessage announce \"\(hung)\"") && mpd.readLine(timeoutMillis: 10_000) == "OK", "message \(k)")
            }
            var refused: JSON?
            while refused == nil, let line = events.readLine(timeoutMillis: 10_000) {
                if let e = try? JSON.parse(line), e["event"]?.stringValue == "announcement_ended" { refused = e }
            }
            #expect(refused?["error"]?["code"]?.stringValue == "too_large", "the 17th: \(refused?.text ?? "no event")")
        }
        Self.goesThroughOnceTheDiskAnswers(m, d, "announce", hung)
        var started: JSON?
        let until = Date().addingTimeInterval(30)
        while started == nil, Date() < until, let line = events.readLine(timeoutMillis: 1000) {
            if let e = try? JSON.parse(line), e["event"]?.stringValue == "announcement_started" { started = e }
        }
        #expect(started?["source"]?.stringValue == hung, "announcement_started: \(started?.text ?? "none")")
    }

    /// MPD's `load` of a playlist file whose lookup hangs reads it off the control
    /// thread, on the walker (issue 38): 20 clients are answered meanwhile, the `load`
    /// waits (as a folder `add` does: a walk has no time limit), and once the disk
    /// answers it queues the playlist's song and is answered. On the old code its stat
    /// ran on the control thread: nobody was answered until the disk was.
    @Test func anMPDLoadOnAHungDiskLeavesEveryoneElseServed() throws {
        let m = try SlowMount { src in
            try FileManager.default.copyItem(atPath: Fixtures.named("flac-44100-2.flac").path, toPath: src + "/a.flac")
            try "a.flac\n".write(toFile: src + "/hung.m3u", atomically: true, encoding: .utf8)
        }
        defer { m.stop() }
        let d = try DaemonHarness(output: "null")
        try d.start()
        defer { d.kill9() }  // before the mount goes
        // Run first: a playd stuck in the lookup (the old code) dies only once it returns.
        defer { m.openGate() }
        m.closeGate()
        let loader = try LineClient(path: d.dir + "/mpd.sock")
        #expect(loader.readLine(timeoutMillis: 10_000)?.hasPrefix("OK MPD") == true)
        #expect(loader.send("load \"\(m.mnt)/hung.m3u\""))
        #expect(loader.readLine(timeoutMillis: 300) == nil, "the load waits for the disk")
        // One client first, with a bound: a control thread stuck in stat() fails here.
        try #require(d.request("status")?["ok"] == .bool(true), "status was not answered while the load's lookup hung")
        let pollers = try Pollers(d)
        for round in 0..<3 { pollers.poll(round) }
        #expect(loader.readLine(timeoutMillis: 0) == nil, "the load still waits")
        m.openGate()
        #expect(loader.readLine(timeoutMillis: 30_000) == "OK", "the load was answered once the disk answered")
        let files = d.request("queue")?["queue"]?.arrayValue?.compactMap { $0["file"]?.stringValue }
        #expect(files == [m.mnt + "/a.flac"], "\(files ?? [])")
    }

    /// Closes the gate and sends the JSON `cmd` (id 9) of `hung`: it must wait while one
    /// client, `meanwhile` and then 20 clients (3 rounds) are answered, then be answered
    /// `timed_out` once its read made no progress for 5 s. Returns the 20 clients.
    static func timesOutWhileOthersAreServed(_ m: SlowMount, _ d: DaemonHarness, _ cmd: String, _ hung: String,
                                             meanwhile: () throws -> Void = {}) throws -> Pollers {
        m.closeGate()
        let asker = try LineClient(path: d.socket)
        #expect(asker.send(#"{"id":9,"cmd":"\#(cmd)","path":"\#(hung)"}"#))
        #expect(asker.readLine(timeoutMillis: 300) == nil, "the \(cmd) waits for the disk")
        // One client first, with a bound: a control thread stuck in stat() fails here
        // (LineClient's 10 s), not after 20 clients' worth of timeouts.
        try #require(d.request("status")?["ok"] == .bool(true), "status was not answered while the \(cmd)'s lookup hung")
        try meanwhile()
        let pollers = try Pollers(d)
        for round in 0..<3 { pollers.poll(round) }
        let reply = try JSON.parse(try #require(asker.readLine(timeoutMillis: 30_000), "the \(cmd) was never answered"))
        #expect(reply["id"]?.numberValue == 9 && reply["error"]?["code"]?.stringValue == "timed_out", "\(reply)")
        return pollers
    }

    /// Opens the gate: the stuck lookup returns; until its thread is done the path stays
    /// `timed_out`, then the same `cmd` of `hung` goes through.
    static func goesThroughOnceTheDiskAnswers(_ m: SlowMount, _ d: DaemonHarness, _ cmd: String, _ hung: String) {
        m.openGate()
        var reply: JSON?
        #expect(d.waitFor(seconds: 30) {
            reply = d.request(cmd, ("path", .string(hung)))
            return reply?["ok"] == .bool(true)
        }, "the \(cmd) never went through after the disk answered: \(reply?.text ?? "")")
    }

    /// A daemon playing to null beside a mount holding `a.flac` and `hung.flac`, whose
    /// lookup hangs once the gate is closed. `a.flac` is the one SlowMount looks up to
    /// see the mount: the kernel has not looked up (nor cached) `hung.flac` before.
    static func daemonBesideAHungLookup(name: String = #function) throws -> (SlowMount, DaemonHarness) {
        let m = try SlowMount(name: name) { src in
            for n in ["a.flac", "hung.flac"] {
                try FileManager.default.copyItem(atPath: Fixtures.named("flac-44100-2.flac").path, toPath: src + "/" + n)
            }
        }
        do {
            let d = try DaemonHarness(output: "null")
            try d.start()
            return (m, d)
        } catch {
            m.stop()
            throw error
        }
    }

    /// A daemon whose queue holds a good file, then `t.flac` on a mount whose reads
    /// give one byte a second.
    static func daemonWithAHungFileQueued(name: String = #function) throws -> (SlowMount, DaemonHarness) {
        let m = try Self.oneBytePerSecondMount(name: name)
        let d = try DaemonHarness(output: "null")
        try d.start()
        let good = Fixtures.named("flac-44100-2.flac").path
        #expect(d.request("add", ("paths", .array([.string(good), .string(m.mnt + "/t.flac")])))?["ok"] == .bool(true))
        return (m, d)
    }

    /// A file's duration in whole seconds, rounded, as `ffprobe` reads it.
    static func probedSeconds(_ path: String) throws -> Int {
        let r = try Shell.run(["ffprobe", "-v", "error", "-show_entries", "format=duration", "-of", "csv=p=0", path])
        let text = String(decoding: r.stdout, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        return Int(try #require(Double(text), "ffprobe: \(text)").rounded())
    }

    /// A folder `add` on a disk that hangs (a listing that never returns until the
    /// test lets it) runs off the control thread: while mpc's `add` waits, other
    /// clients on both protocols are answered, and a second client's `add` of a file
    /// goes through; when the disk answers, mpc's `add` completes with every file in
    /// natural order. SIGTERM during a hung walk ends playd. On the old code the walk
    /// ran on the control thread: `mpc status` never came back.
    @Test func aFolderAddOnAHungDiskLeavesEveryoneElseServed() throws {
        let names = ["1 One.flac", "2 Two.flac", "10 Ten.flac"]
        let m = try SlowMount(gated: true) { src in
            for dir in ["album", "album2"] {
                try FileManager.default.createDirectory(atPath: src + "/" + dir, withIntermediateDirectories: true)
                for n in names { try FileManager.default.copyItem(atPath: Fixtures.named("flac-44100-2.flac").path, toPath: src + "/\(dir)/\(n)") }
            }
        }
        defer { m.stop() }
        let d = try DaemonHarness(output: "null")
        try d.start()
        defer { d.kill9() }  // before the mount goes
        let mpd = d.dir + "/mpd.sock"
        func mpc(_ args: String...) throws -> Shell.Output {
            // `timeout`: a control thread stuck in the walk never answers.
            try Shell.run(["timeout", "20", "mpc", "-h", mpd] + args)
        }
        let add = Process()
        add.executableURL = URL(fileURLWithPath: "/usr/bin/mpc")
        add.arguments = ["-h", mpd, "add", m.mnt + "/album"]
        add.standardOutput = FileHandle.nullDevice
        try add.run()
        // A JSON client adds the same folder: it waits for the same walk.
        let json = try LineClient(path: d.socket)
        #expect(json.send(#"{"id":7,"cmd":"add","path":"\#(m.mnt)/album"}"#))
        // The adds are parked on the hung listing; everyone else is served.
        let status = try mpc("status")
        #expect(status.status == 0, "mpc status while a walk hangs: \(status.stderr)")
        #expect(String(decoding: status.stdout, as: UTF8.self).contains("volume:"))
        #expect(d.request("status")?["ok"] == .bool(true))
        let one = Fixtures.named("flac-44100-2.flac").path
        #expect(d.request("add", ("path", .string(one)))?["ok"] == .bool(true), "a file add does not wait for the walk")
        #expect(add.isRunning, "mpc add returned while the folder listing was still held")
        m.openGate()
        let deadline = Date().addingTimeInterval(30)
        while add.isRunning && Date() < deadline { usleep(10_000) }
        try #require(!add.isRunning, "mpc add never returned after the disk answered")
        #expect(add.terminationStatus == 0)
        let reply = try JSON.parse(try #require(json.readLine(timeoutMillis: 30_000), "the JSON add never answered"))
        #expect(reply["id"]?.numberValue == 7 && reply["ok"] == .bool(true) && reply["added"]?.arrayValue?.count == 3, "\(reply)")
        let list = try mpc("playlist", "-f", "%file%")
        let album = names.sorted { $0.compare($1, options: .numeric) == .orderedAscending }.map { m.mnt + "/album/" + $0 }
        let listed: [String] = String(decoding: list.stdout, as: UTF8.self).split(separator: "\n").map(String.init)
        let queued: [String] = [one] + album + album
        #expect(listed == queued)

        // SIGTERM while a walk hangs: playd saves and stops all the same (the walker is
        // detached, nobody joins it). The process itself ends when the listing returns:
        // a thread in a FUSE request the server has taken waits for the answer, killed
        // or not (the kernel's rule, for any program).
        m.closeGate()
        let c = try LineClient(path: d.socket)
        #expect(c.send(#"{"id":1,"cmd":"add","path":"\#(m.mnt)/album2"}"#))
        #expect(c.readLine(timeoutMillis: 200) == nil, "the add waits for the walk")
        let p = try #require(d.process)
        p.terminate()
        #expect(d.waitFor(seconds: 30) { d.log.split(separator: "\n").contains { $0.hasSuffix("stopped") } },
                "playd did not stop on SIGTERM while a folder walk hung: \(d.log)")
        m.openGate()
        let end = Date().addingTimeInterval(30)
        while p.isRunning && Date() < end { usleep(10_000) }
        #expect(!p.isRunning, "playd's process did not end once the listing returned")
    }
}
