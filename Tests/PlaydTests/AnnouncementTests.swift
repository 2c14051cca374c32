import Foundation
import Testing
import PlaydProtocol
@testable import PlaydDaemon
import CoreStreamTestSupport

/// Announcements through the daemon, the three ways in: `playctl announce`, the JSON
/// `announce` command, and MPD's `sendmessage announce …` (how an MPD-only client such
/// as Home Assistant's integration gets one). What the output captured is checked
/// against the model from the ffmpeg CLI's decodes (AnnouncementModel).
@Suite("Announcements through the daemon", .checksSomething, .serialized)
struct AnnouncementTests {
    static let rate = 44100

    /// A daemon with the music and a clip in its folder, and a client subscribed to events.
    func setUp(name: String = #function) throws -> (DaemonHarness, LineClient, music: String, clip: String) {
        let h = try DaemonHarness(extraConfig: "[mpd]\nsocket = \"$DIR/mpd.sock\"", name: name)
        let music = try AnnouncementModel.music(in: h.dir)
        let clip = try AnnouncementModel.ttsClip(in: h.dir)
        try h.start()
        let events = try LineClient(path: h.socket)
        #expect(events.request(.obj(("id", .int(1)), ("cmd", .string("subscribe"))))?["ok"]?.boolValue == true)
        return (h, events, music, clip)
    }

    /// Events up to and including the first named `last` (or all that came in `seconds`).
    func events(_ c: LineClient, until last: String, seconds: Double = 20) -> [JSON] {
        var seen: [JSON] = []
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            guard let line = c.readLine(timeoutMillis: 500), let e = try? JSON.parse(line) else { continue }
            seen.append(e)
            if e["event"]?.stringValue == last { break }
        }
        return seen
    }

    func named(_ events: [JSON], _ name: String) -> [JSON] { events.filter { $0["event"]?.stringValue == name } }

    func playing(_ h: DaemonHarness, beyond frames: Double = 20_000) -> Bool {
        h.waitFor { (h.request("status")?["position_frames"]?.numberValue ?? 0) > frames }
    }

    /// `playctl announce --pause`: the music pauses at an exact frame, the clip plays
    /// alone, and the music resumes from that frame: nothing skipped or repeated.
    @Test func playctlPausesTheMusicAndItResumesWhereItWas() throws {
        let (h, events, music, clip) = try setUp()
        var (st, out, err) = try h.playctl("play", music)
        #expect(st == 0, "\(err)")
        #expect(playing(h))
        (st, out, err) = try h.playctl("announce", "--pause", clip)
        #expect(st == 0 && out.contains("announcing \(clip)"), "\(out) \(err)")
        (st, out, _) = try h.playctl("status")
        #expect(out.contains("announcing: \(clip) (pause)"), "\(out)")
        let seen = self.events(events, until: "announcement_ended")
        let started = try #require(named(seen, "announcement_started").first)
        #expect(started["music_frame"]?.isNull == true, "paused first: the clip plays alone")
        let ended = try #require(named(seen, "announcement_ended").first)
        #expect(ended["cancelled"]?.boolValue == false && ended["error"] == nil, "\(ended.text)")
        #expect(h.waitFor { h.request("status")?["state"]?.stringValue == "playing" }, "the music resumed")
        #expect(h.request("status")?["announcing"]?.isNull == true)
        #expect(h.waitFor(seconds: 20) { h.request("status")?["state"]?.stringValue == "stopped" })
        #expect(h.request("status")?["underruns"]?.numberValue == 0)
        try expectClipBetweenMusic(h, music: music, clip: clip)
    }

    /// Stops playd and checks its capture: the music to the pause, the clip alone, the
    /// music again from the frame it paused at.
    func expectClipBetweenMusic(_ h: DaemonHarness, music: String, clip: String) throws {
        #expect(h.terminate().status == 0)
        let capture = try WAVFile(path: h.capture).samples
        let check = AnnouncementModel.clipBetweenMusic(capture: capture, music: try Reference.decode(music),
                                                       clip: try AnnouncementModel.clip(clip, rate: Self.rate), rate: Self.rate)
        #expect(check.failures.isEmpty, "\(check.failures)")
    }

    /// The JSON `announce` with a duck and a gain: the music goes on under the clip, and
    /// the capture is music × envelope + clip × gain from the reported frame.
    @Test func jsonAnnounceDucksTheMusicUnderTheClip() throws {
        let (h, events, music, clip) = try setUp()
        #expect(h.request("play", ("path", .string(music)))?["ok"]?.boolValue == true)
        #expect(playing(h))
        let r = try #require(h.request("announce", ("path", .string(clip)), ("duck", .number(-12)), ("gain", .number(-6))))
        #expect(r["ok"]?.boolValue == true && r["waiting"]?.numberValue == 0, "\(r.text)")
        let status = try #require(h.request("status"))
        #expect(status["announcing"]?["mode"]?.stringValue == "duck" && status["announcing"]?["duck_db"]?.numberValue == -12, "\(status.text)")
        let seen = self.events(events, until: "announcement_ended")
        let start = try #require(named(seen, "announcement_started").first?["music_frame"]?.numberValue, "over the music: its frame")
        #expect(h.waitFor(seconds: 20) { h.request("status")?["state"]?.stringValue == "stopped" })
        #expect(h.terminate().status == 0)
        let capture = try WAVFile(path: h.capture).samples
        let reference = try Reference.decode(music)
        #expect(capture.count == reference.count, "every music frame once")
        let d = AnnouncementModel.duckDifference(capture: capture, music: reference, clip: try AnnouncementModel.clip(clip, rate: Self.rate),
                                                 start: Int(start), duckDB: -12, gainDB: -6, rate: Self.rate)
        #expect(d.worst <= 1e-6, "largest difference \(d.worst) at frame \(d.frame) (began at \(Int(start)))")
    }

    /// Home Assistant's way: its text-to-speech gives an HTTP URL of an MP3, and its mpd
    /// integration speaks only MPD. python-mpd2 sends it as a message on the `announce`
    /// channel (playd is subscribed to it, so `channels` lists it); the music pauses for
    /// it and resumes where it was.
    @Test func homeAssistantTTSOverHTTPThroughMPD() throws {
        let (h, events, music, _) = try setUp()
        let web = h.dir + "/web"
        try FileManager.default.createDirectory(atPath: web, withIntermediateDirectories: true)
        let tts = try AnnouncementModel.ttsClip(in: web, name: "tts.mp3")
        let server = try TestHTTPServer.start(serving: web)
        defer { server.kill() }
        let url = "http://127.0.0.1:\(server.port)/tts.mp3"
        #expect(h.request("play", ("path", .string(music)))?["ok"]?.boolValue == true)
        #expect(playing(h))
        let script = """
        import mpd, sys
        c = mpd.MPDClient()
        c.connect(sys.argv[1])
        print(c.channels())
        c.sendmessage("announce", "--pause " + sys.argv[2])
        c.disconnect()
        """
        let r = try Shell.run(["/usr/bin/python3", "-c", script, h.dir + "/mpd.sock", url])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(String(decoding: r.stdout, as: UTF8.self).contains("'announce'"), "channels: \(String(decoding: r.stdout, as: UTF8.self))")
        let seen = self.events(events, until: "announcement_ended")
        let ended = try #require(named(seen, "announcement_ended").first)
        #expect(ended["source"]?.stringValue == url && ended["error"] == nil && ended["cancelled"]?.boolValue == false, "\(ended.text)")
        #expect(h.waitFor { h.request("status")?["state"]?.stringValue == "playing" }, "the music resumed")
        #expect(h.waitFor(seconds: 20) { h.request("status")?["state"]?.stringValue == "stopped" })
        try expectClipBetweenMusic(h, music: music, clip: tts)
    }

    /// Home Assistant's own TTS path (issue 42): its mpd integration's `play_media` is
    /// `clear`, `add URL`, `play` on one connection (python-mpd2's asyncio client, as HA
    /// uses). The URL is under HA's TTS proxy (`/api/tts_proxy/`, the default of
    /// `announce.tts_urls`), so playd plays the clip as an announcement and puts back the
    /// queue, the current entry and its ids, the position and the state: the capture is
    /// the music to the `clear`, the clip alone, and the music again from where it was
    /// cut (pause mode).
    @Test func homeAssistantsOwnTTSSequenceKeepsTheQueue() throws {
        let (h, events, music, _) = try setUp()
        let web = h.dir + "/web/api/tts_proxy"
        try FileManager.default.createDirectory(atPath: web, withIntermediateDirectories: true)
        let tts = try AnnouncementModel.ttsClip(in: web, name: "0123abcd_en_-_tts.mp3")
        let server = try TestHTTPServer.start(serving: h.dir + "/web")
        defer { server.kill() }
        let url = "http://127.0.0.1:\(server.port)/api/tts_proxy/0123abcd_en_-_tts.mp3"
        let other = Fixtures.named("flac-44100-2.flac").path
        #expect(h.request("add", ("paths", .array([.string(music), .string(other)])))?["ok"]?.boolValue == true)
        #expect(h.request("play", ("index", .int(0)))?["ok"]?.boolValue == true)
        #expect(playing(h))
        let before = try #require(h.request("queue"))
        let r = try Shell.run(["/usr/bin/python3", "-c", Self.homeAssistantPlayMedia, h.dir + "/mpd.sock", url])
        #expect(r.status == 0, "\(r.stderr)")
        let seen = self.events(events, until: "announcement_ended")
        let started = try #require(named(seen, "announcement_started").first, "the clip plays as an announcement")
        #expect(started["source"]?.stringValue == url)
        let during = try #require(h.request("status"))
        #expect(during["queue"]?["length"]?.numberValue == 2 && during["queue"]?["current"]?.numberValue == 0, "\(during.text)")
        let ended = try #require(named(seen, "announcement_ended").first)
        #expect(ended["cancelled"]?.boolValue == false && ended["error"] == nil, "\(ended.text)")
        #expect(h.waitFor { h.request("status")?["state"]?.stringValue == "playing" }, "the music resumed")
        let after = try #require(h.request("status"))
        #expect(after["file"]?.stringValue == music, "\(after.text)")
        #expect(h.request("queue")?["queue"] == before["queue"], "the queue is back, ids and all")
        // The music is the last entry again, so the capture ends with it.
        #expect(h.request("remove", ("index", .int(1)))?["ok"]?.boolValue == true)
        #expect(h.waitFor(seconds: 20) { h.request("status")?["state"]?.stringValue == "stopped" })
        try expectClipBetweenMusic(h, music: music, clip: tts)
    }

    /// `tts_mode = "duck"`: the same sequence, and the music plays on under the clip
    /// (the announcement ducks it), from where it would have been; the queue is back.
    /// Paused before: it stays paused, the clip plays alone.
    @Test func homeAssistantsTTSInDuckModeKeepsTheMusicPlaying() throws {
        let h = try DaemonHarness(extraConfig: "[mpd]\nsocket = \"$DIR/mpd.sock\"\n[announce]\ntts_mode = \"duck\"\ntts_duck_db = -12")
        let music = try AnnouncementModel.music(in: h.dir, seconds: 30)
        let web = h.dir + "/web/api/tts_proxy"
        try FileManager.default.createDirectory(atPath: web, withIntermediateDirectories: true)
        _ = try AnnouncementModel.ttsClip(in: web, name: "clip.mp3")
        try h.start()
        let events = try LineClient(path: h.socket)
        #expect(events.request(.obj(("id", .int(1)), ("cmd", .string("subscribe"))))?["ok"]?.boolValue == true)
        let server = try TestHTTPServer.start(serving: h.dir + "/web")
        defer { server.kill() }
        let url = "http://127.0.0.1:\(server.port)/api/tts_proxy/clip.mp3"
        #expect(h.request("add", ("paths", .array([.string(music)])))?["ok"]?.boolValue == true)
        #expect(h.request("play", ("index", .int(0)))?["ok"]?.boolValue == true)
        #expect(playing(h))
        let before = try #require(h.request("status")?["position_frames"]?.numberValue)
        let r = try Shell.run(["/usr/bin/python3", "-c", Self.homeAssistantPlayMedia, h.dir + "/mpd.sock", url])
        #expect(r.status == 0, "\(r.stderr)")
        let seen = self.events(events, until: "announcement_started")
        let started = try #require(named(seen, "announcement_started").first, "the clip plays as an announcement")
        #expect(started["music_frame"]?.numberValue ?? 0 >= before, "over the music, not before where it was: \(started.text)")
        let during = try #require(h.request("status"))
        #expect(during["state"]?.stringValue == "playing" && during["file"]?.stringValue == music, "\(during.text)")
        #expect(during["announcing"]?["mode"]?.stringValue == "duck" && during["announcing"]?["duck_db"]?.numberValue == -12, "\(during.text)")
        #expect(during["queue"]?["length"]?.numberValue == 1 && during["queue"]?["current"]?.numberValue == 0)
        let ended = self.events(events, until: "announcement_ended")
        #expect(named(ended, "announcement_ended").first?["error"] == nil)
        #expect(h.request("status")?["state"]?.stringValue == "playing")

        // Paused before: the clip plays alone and the music stays paused, queue back.
        #expect(h.request("pause")?["ok"]?.boolValue == true)
        #expect(h.waitFor { h.request("status")?["state"]?.stringValue == "paused" })
        let r2 = try Shell.run(["/usr/bin/python3", "-c", Self.homeAssistantPlayMedia, h.dir + "/mpd.sock", url])
        #expect(r2.status == 0, "\(r2.stderr)")
        #expect(named(self.events(events, until: "announcement_ended"), "announcement_ended").first?["error"] == nil)
        let after = try #require(h.request("status"))
        #expect(after["state"]?.stringValue == "paused" && after["file"]?.stringValue == music && after["queue"]?["length"]?.numberValue == 1,
                "\(after.text)")
        _ = h.terminate()
    }

    /// What is not HA's TTS sequence is MPD's: a URL outside `tts_urls` replaces the
    /// queue, and a TTS URL added without the `clear` just before is queued.
    @Test func otherSequencesReplaceTheQueueAsMPDDoes() throws {
        let (h, _, music, _) = try setUp()
        let web = h.dir + "/web"
        try FileManager.default.createDirectory(atPath: web + "/api/tts_proxy", withIntermediateDirectories: true)
        _ = try AnnouncementModel.ttsClip(in: web, name: "song.mp3")
        _ = try AnnouncementModel.ttsClip(in: web + "/api/tts_proxy", name: "clip.mp3")
        let server = try TestHTTPServer.start(serving: web)
        defer { server.kill() }
        let song = "http://127.0.0.1:\(server.port)/song.mp3"
        let clip = "http://127.0.0.1:\(server.port)/api/tts_proxy/clip.mp3"
        #expect(h.request("add", ("paths", .array([.string(music)])))?["ok"]?.boolValue == true)
        #expect(h.request("play", ("index", .int(0)))?["ok"]?.boolValue == true)
        #expect(playing(h))
        let r = try Shell.run(["/usr/bin/python3", "-c", Self.homeAssistantPlayMedia, h.dir + "/mpd.sock", song])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(h.waitFor { h.request("status")?["file"]?.stringValue == song }, "the song plays")
        #expect(h.request("status")?["queue"]?["length"]?.numberValue == 1, "the queue was replaced")
        // add and play without the clear: an ordinary entry of the queue.
        let mpd = try LineClient(path: h.dir + "/mpd.sock")
        #expect(mpd.readLine(timeoutMillis: 10_000)?.hasPrefix("OK MPD") == true)
        for c in ["add \"\(clip)\"", "play 1"] {
            #expect(mpd.send(c))
            #expect(mpd.readLine(timeoutMillis: 10_000) == "OK", "\(c)")
        }
        #expect(h.waitFor { h.request("status")?["file"]?.stringValue == clip }, "the clip plays as a queue entry")
        #expect(h.request("status")?["queue"]?["length"]?.numberValue == 2)
    }

    /// Home Assistant's `async_play_media` for a URL, as its mpd integration sends it.
    static let homeAssistantPlayMedia = """
        import asyncio, sys
        from mpd.asyncio import MPDClient
        async def main():
            c = MPDClient()
            await c.connect(sys.argv[1])
            await c.clear()
            await c.add(sys.argv[2])
            await c.play()
            c.disconnect()
        asyncio.run(main())
        """

    /// A clip that cannot play is refused with the code of what is wrong (at once for a
    /// file, in `announcement_ended` for a URL, whose connect is not awaited); the music
    /// is never interrupted: the capture is the music, every frame, untouched.
    @Test func badClipsAreTypedErrorsAndTheMusicPlaysOn() throws {
        let (h, events, music, clip) = try setUp()
        let notAudio = h.dir + "/notes.mp3"
        try Data(repeating: 0x41, count: 4000).write(to: URL(fileURLWithPath: notAudio))
        let web = h.dir + "/web"
        try FileManager.default.createDirectory(atPath: web, withIntermediateDirectories: true)
        let server = try TestHTTPServer.start(serving: web)
        defer { server.kill() }
        #expect(h.request("play", ("path", .string(music)))?["ok"]?.boolValue == true)
        #expect(playing(h))
        let refused: [([(String, JSON)], String)] = [
            ([("path", .string(h.dir + "/missing.mp3"))], "file_not_found"),
            ([("path", .string(notAudio))], "not_audio"),
            ([("path", .string(h.dir))], "is_directory"),
            ([("path", .string(clip)), ("duck", .number(6))], "invalid_argument"),
            ([("path", .string(clip)), ("gain", .number(-400))], "invalid_argument"),
            ([("path", .string(clip)), ("chime", .string(h.dir + "/missing.wav"))], "file_not_found"),
            ([("duck", .number(-6))], "bad_request"),
            ([("path", .string(clip)), ("pause", .string("yes"))], "bad_request"),
        ]
        for (fields, code) in refused {
            let r = h.request("announce", fields: fields)
            #expect(r?["error"]?["code"]?.stringValue == code, "\(fields.map(\.0)): \(r?.text ?? "no reply")")
        }
        let (st, _, err) = try h.playctl("announce", h.dir + "/missing.mp3")
        #expect(st != 0 && err.contains("file_not_found"), "\(err)")
        #expect(h.request("announce", ("cancel", .bool(true)))?["error"]?["code"]?.stringValue == "not_playing")
        // URLs: opened by the voice thread; the answer comes as an event.
        for (url, code) in [("http://127.0.0.1:\(server.port)/status/404", "http_not_found"),
                            ("http://127.0.0.1:\(ServerProcess.freePort())/tts.mp3", "unreachable")] {
            #expect(h.request("announce", ("path", .string(url)))?["ok"]?.boolValue == true)
            let ended = try #require(named(self.events(events, until: "announcement_ended"), "announcement_ended").first)
            #expect(ended["error"]?["code"]?.stringValue == code, "\(url): \(ended.text)")
        }
        // Over MPD: `sendmessage` has replied OK; the refusal comes as the event, with
        // the same codes.
        for (message, code) in [(h.dir + "/missing.mp3", "file_not_found"), ("--loud " + clip, "bad_request"),
                                ("--duck=9 " + clip, "invalid_argument")] {
            let r = try Shell.run(["mpc", "-h", h.dir + "/mpd.sock", "sendmessage", "announce", message])
            #expect(r.status == 0, "\(r.stderr)")
            let ended = try #require(named(self.events(events, until: "announcement_ended"), "announcement_ended").first)
            #expect(ended["error"]?["code"]?.stringValue == code, "\(message): \(ended.text)")
        }
        #expect(h.request("status")?["state"]?.stringValue == "playing")
        #expect(h.waitFor(seconds: 20) { h.request("status")?["state"]?.stringValue == "stopped" })
        #expect(h.terminate().status == 0)
        #expect(try WAVFile(path: h.capture).samples == Reference.decode(music), "the music, untouched")
    }

    /// A second announcement waits for the first; a cancel ends the first (with its
    /// ramps) and the second follows; while stopped the clip plays alone and the player
    /// stays stopped.
    @Test func announcementsWaitTheirTurnAndACancelMovesOn() throws {
        let (h, events, music, clip) = try setUp()
        let second = try AnnouncementModel.ttsClip(in: h.dir, name: "second.mp3")
        #expect(h.request("play", ("path", .string(music)))?["ok"]?.boolValue == true)
        #expect(playing(h))
        #expect(h.request("announce", ("path", .string(clip)))?["waiting"]?.numberValue == 0)
        let r = try #require(h.request("announce", ("path", .string(second))))
        #expect(r["queued"]?.boolValue == true && r["waiting"]?.numberValue == 1, "\(r.text)")
        #expect(h.request("status")?["announcing"]?["waiting"]?.numberValue == 1)
        #expect(named(self.events(events, until: "announcement_started"), "announcement_started").first?["source"]?.stringValue == clip)
        #expect(try h.playctl("announce", "--cancel").0 == 0)
        var seen = self.events(events, until: "announcement_ended")
        #expect(named(seen, "announcement_ended").first.map { $0["source"]?.stringValue == clip && $0["cancelled"]?.boolValue == true } == true,
                "\(seen.map(\.text))")
        seen = self.events(events, until: "announcement_ended")
        #expect(named(seen, "announcement_started").first?["source"]?.stringValue == second, "\(seen.map(\.text))")
        #expect(named(seen, "announcement_ended").first?["cancelled"]?.boolValue == false, "\(seen.map(\.text))")
        #expect(h.request("status")?["state"]?.stringValue == "playing")
        // Stopped: the clip alone, and still stopped after it.
        #expect(try h.playctl("stop").0 == 0)
        #expect(try h.playctl("announce", clip).0 == 0)
        seen = self.events(events, until: "announcement_ended")
        #expect(named(seen, "announcement_started").first?["music_frame"]?.isNull == true, "\(seen.map(\.text))")
        #expect(named(seen, "announcement_ended").first?["cancelled"]?.boolValue == false)
        #expect(h.request("status")?["state"]?.stringValue == "stopped")
        #expect(h.request("status")?["underruns"]?.numberValue == 0)
        _ = h.terminate()
    }

    /// Two announcements that both pause the music: it stays paused between them (no
    /// blip of music) and resumes once, after the second.
    @Test func twoPausingAnnouncementsPauseTheMusicOnce() throws {
        let (h, events, music, clip) = try setUp()
        #expect(h.request("play", ("path", .string(music)))?["ok"]?.boolValue == true)
        #expect(playing(h))
        #expect(h.request("announce", ("path", .string(clip)), ("pause", .bool(true)))?["waiting"]?.numberValue == 0)
        #expect(h.request("announce", ("path", .string(clip)), ("pause", .bool(true)))?["waiting"]?.numberValue == 1)
        var seen = self.events(events, until: "announcement_ended")
        seen += self.events(events, until: "announcement_ended")
        #expect(named(seen, "announcement_ended").count == 2, "\(seen.map(\.text))")
        // Paused once for the first (the `paused` event comes when the sound has stopped,
        // which may be just before or just after the first clip's start), and no state
        // change after that until the second one has ended.
        let paused = try #require(seen.firstIndex { $0["event"]?.stringValue == "state" && $0["state"]?.stringValue == "paused" },
                                  "paused for the first: \(seen.map(\.text))")
        let secondEnd = try #require(seen.lastIndex { $0["event"]?.stringValue == "announcement_ended" })
        #expect(paused < secondEnd)
        let states = named(Array(seen[(paused + 1)..<secondEnd]), "state").compactMap { $0["state"]?.stringValue }
        #expect(states.isEmpty, "state events between: \(states)")
        let first = try #require(seen.firstIndex { $0["event"]?.stringValue == "announcement_started" })
        #expect(named(Array(seen[..<first]), "state").allSatisfy { $0["state"]?.stringValue != "stopped" })
        #expect(h.waitFor { h.request("status")?["state"]?.stringValue == "playing" }, "resumed after the second")
        _ = h.terminate()
    }

    /// A cancel while the clip's URL is still connecting (a server that accepts and
    /// never answers; `streams.timeout` is 60 s) ends it at once: cancelled, not timed out.
    @Test func aCancelDoesNotWaitForAConnect() throws {
        let h = try DaemonHarness(extraConfig: "[streams]\ntimeout = 60")
        try h.start()
        let events = try LineClient(path: h.socket)
        #expect(events.request(.obj(("id", .int(1)), ("cmd", .string("subscribe"))))?["ok"]?.boolValue == true)
        let silent = SilentServer()
        let url = "http://127.0.0.1:\(silent.port)/tts.mp3"
        #expect(h.request("announce", ("path", .string(url)))?["ok"]?.boolValue == true)
        #expect(h.request("status")?["announcing"]?["source"]?.stringValue == url)
        #expect(h.request("announce", ("cancel", .bool(true)))?["ok"]?.boolValue == true)
        let ended = try #require(named(self.events(events, until: "announcement_ended"), "announcement_ended").first)
        #expect(ended["cancelled"]?.boolValue == true && ended["error"] == nil, "\(ended.text)")
        #expect(h.request("status")?["announcing"]?.isNull == true)
        _ = h.terminate()
    }

    /// The MPD message's words, as `sendmessage announce TEXT` takes them.
    @Test(arguments: [
        ("/m/clip.mp3", "/m/clip.mp3", -18.0, 0.0, false, nil),
        ("--duck=-6 --gain=2.5 --pause /m/a b.mp3", "/m/a b.mp3", -6, 2.5, true, nil),
        ("--chime=/m/ding.wav http://tts/x.mp3", "http://tts/x.mp3", -18, 0, false, "/m/ding.wav"),
    ] as [(String, String, Double, Double, Bool, String?)])
    func mpdMessagesParse(_ text: String, _ source: String, _ duck: Double, _ gain: Double, _ pause: Bool, _ chime: String?) throws {
        let r = try #require(try MPDCommands.parseAnnounceMessage(text))
        #expect(r.source == source && r.duckDB == duck && r.gainDB == gain && r.pause == pause && r.chime == chime)
    }

    @Test(arguments: ["--loud /m/x.mp3", "--duck=x /m/x.mp3", "--duck=nan /m/x.mp3"])
    func badMPDMessagesAreRefused(_ text: String) {
        #expect(throws: (any Error).self) { try MPDCommands.parseAnnounceMessage(text) }
    }

    @Test func cancelIsAMessageToo() throws {
        #expect(try MPDCommands.parseAnnounceMessage("--cancel") == nil)
    }
}
