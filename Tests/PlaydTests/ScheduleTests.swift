import Foundation
import Testing
import PlaydProtocol
@testable import PlaydDaemon
import CoreStreamTestSupport

/// The schedule (issue 43): the daemon runs under libfaketime, its clock set just
/// before a boundary in Europe/Berlin, and what it plays is read from the `wav:`
/// capture and compared with the `ffmpeg` CLI's decode of each programme's file; the
/// day plans are compared with GNU date's arithmetic over the same zone.
@Suite("Schedule", .checksSomething, .serialized)
struct ScheduleTests {
    static let faketime = ClockTests.faketime

    /// libfaketime from the given UTC instant, the monotonic clock left alone (the
    /// engine's pacing and timeouts keep real time).
    static func clock(_ utc: String) -> [String: String] {
        ["LD_PRELOAD": faketime, "FAKETIME": "@" + utc, "TZ": "UTC", "FAKETIME_DISABLE_SHM": "1",
         "FAKETIME_DONT_FAKE_MONOTONIC": "1"]
    }

    /// Two programmes of one 30 s tone each (440 and 660 Hz), a short clip, and a
    /// daemon whose config has `schedule` after a library over them.
    static func daemon(_ schedule: String, name: String = #function) throws -> (DaemonHarness, a: String, b: String, clip: String) {
        let h = try DaemonHarness(extraConfig: """
            [mpd]
            enabled = false
            [library]
            music_roots = ["$DIR/music"]
            update_on_start = false
            \(schedule)
            """, name: name)
        let a = h.dir + "/music/a/a.flac", b = h.dir + "/music/b/b.flac", clip = h.dir + "/music/clip.flac"
        for (path, tone, seconds) in [(a, "440", "30"), (b, "660", "30"), (clip, "1000", "1")] {
            try FileManager.default.createDirectory(atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            let r = try Shell.run(["sox", "-n", "-r", "44100", "-c", "2", "-b", "16", path, "synth", seconds, "sine", tone, "vol", "0.5"])
            #expect(r.status == 0, "sox: \(r.stderr)")
        }
        return (h, a, b, clip)
    }

    /// Waits until `path` plays (a hang guard, not a speed bound).
    static func plays(_ h: DaemonHarness, _ path: String, seconds: Double = 20) -> Bool {
        h.waitFor(seconds: seconds) {
            let s = h.request("status")
            return s?["file"]?.stringValue == path && s?["state"]?.stringValue == "playing"
        }
    }

    static func schedule(_ h: DaemonHarness, day: String? = nil) -> JSON? {
        h.request("schedule", fields: day.map { [("day", .string($0))] } ?? [])
    }

    // MARK: - Plans

    /// A block from 01:00 to 04:00 lasts what the wall clock says: 2 hours on the night
    /// the clocks go forward, 4 on the night they go back, 3 otherwise; playctl's plan
    /// says so, as GNU date counts it over the same zone.
    @Test func aDaysPlanLastsWhatTheWallClockSaysAcrossDaylightSaving() throws {
        let (h, _, _, _) = try Self.daemon("""
            [schedule]
            timezone = "Europe/Berlin"
            [[schedule.block]]
            name = "night"
            from = "01:00"
            to = "04:00"
            folder = "a"
            [[schedule.block]]
            name = "late"
            days = ["sat", "sun"]
            from = "22:00"
            to = "02:00"
            folder = "b"
            """)
        try h.start()
        for day in ["2026-03-29", "2026-10-25", "2026-06-01", "2026-03-28"] {
            let (status, out, err) = try h.playctl("schedule", "--day", day, "--json")
            #expect(status == 0, "\(err)")
            let plan = try JSON.parse(out)
            let blocks = plan["day"]?["blocks"]?.arrayValue ?? []
            for b in blocks {
                let from = b["from"]!.stringValue!, to = b["to"]!.stringValue!
                // GNU date: the instants of the two wall times in the zone.
                func epoch(_ time: String) throws -> Int {
                    var when = "\(day) \(time)"
                    if time == "24:00" {
                        let next = try Shell.run(["date", "-d", "\(day) +1 day", "+%F"], environment: ["TZ": "UTC"])
                        when = String(decoding: next.stdout, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines) + " 00:00"
                    }
                    let r = try Shell.run(["date", "-d", when, "+%s"], environment: ["TZ": "Europe/Berlin"])
                    return Int(String(decoding: r.stdout, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines))!
                }
                let expected = try epoch(to) - epoch(from)
                #expect(Int(b["seconds"]?.numberValue ?? -1) == expected, "\(day) \(from)–\(to): \(b.text)")
            }
            let night = blocks.first { $0["block"]?.stringValue == "night" }
            #expect(night?["from"]?.stringValue == "01:00" && night?["to"]?.stringValue == "04:00", "\(day): \(plan.text)")
        }
        // Saturday 2026-03-28: "late" from 22:00 to midnight, and on into Sunday.
        let sunday = try #require(Self.schedule(h, day: "2026-03-29")?["day"]?["blocks"]?.arrayValue)
        #expect(sunday.first?["block"]?.stringValue == "late" && sunday.first?["to"]?.stringValue == "01:00", "\(sunday)")
        // Monday 2026-06-01 begins in Sunday's late block.
        let monday = try #require(Self.schedule(h, day: "2026-06-01")?["day"]?["blocks"]?.arrayValue)
        #expect(monday.first?["block"]?.stringValue == "late", "\(monday)")
        let tuesday = try #require(Self.schedule(h, day: "2026-06-02")?["day"]?["blocks"]?.arrayValue)
        #expect(tuesday.first?["block"]?.stringValue == "(no block: silence)", "\(tuesday)")
        // The human form names the blocks and their real lengths.
        let (_, text, _) = try h.playctl("schedule", "--day", "2026-03-29")
        #expect(text.contains("01:00–04:00") && text.contains("2:00:00"), "\(text)")
        let refused = try h.playctl("schedule", "--day", "2026-02-30")
        #expect(refused.0 != 0 && refused.2.contains("2026-02-30"), "\(refused)")
        #expect(h.terminate().status == 0)
    }

    // MARK: - Live

    /// Across the night the clocks go forward (02:00 CET is 03:00 CEST): the block
    /// ending at 03:00 ends at the jump, its music fades out over `schedule.fade`, and the
    /// next block's plays from its first frame, exactly; an announcement comes at its
    /// time; a restart lands in the block the clock is in (the same one goes on, another
    /// one is put in place, silence stops).
    @Test func theMusicChangesAtTheBoundaryWithAFadeAndARestartLandsInTheBlock() throws {
        let (h, aPath, bPath, clip) = try Self.daemon("""
            [schedule]
            timezone = "Europe/Berlin"
            fade = 2
            [[schedule.block]]
            name = "night"
            from = "01:00"
            to = "03:00"
            folder = "a"
            [[schedule.block]]
            name = "early"
            from = "03:00"
            to = "06:00"
            folder = "b"
            volume = 100
            [schedule.default]
            silence = true
            [[schedule.announce]]
            name = "chime"
            at = "03:00:09"
            path = "$DIR/music/clip.flac"
            """)
        // 00:59:53 UTC is 01:59:53 CET: seven seconds before the clocks jump.
        try h.start(environment: Self.clock("2026-03-29 00:59:53"))
        let before = try #require(Self.schedule(h))
        #expect(before["block"]?.stringValue == "night" && before["programme"]?.stringValue == "folder a", "\(before.text)")
        #expect(before["next"]?["at"]?.stringValue == "2026-03-29T03:00:00+02:00", "\(before.text)")
        #expect(before["next"]?["block"]?.stringValue == "early", "\(before.text)")
        #expect(h.waitFor { h.request("status")?["file"]?.stringValue == aPath }, "night's folder plays at start")
        let events = try LineClient(path: h.socket)
        #expect(events.request(.obj(("id", .int(1)), ("cmd", .string("subscribe"))))?["ok"]?.boolValue == true)

        // The boundary: status names the new block at once, and b plays after the fade.
        #expect(h.waitFor(seconds: 30) { Self.schedule(h)?["block"]?.stringValue == "early" }, "\(h.log.suffix(2000))")
        let after = try #require(Self.schedule(h))
        #expect(after["since"]?.stringValue == "2026-03-29T03:00:00+02:00" && after["override"]?.boolValue == false, "\(after.text)")
        #expect(h.waitFor(seconds: 30) {
            let s = h.request("status")
            return s?["file"]?.stringValue == bPath && (s?["position_frames"]?.numberValue ?? 0) > 3 * 44100
        }, "\(h.log.suffix(2000))")
        // The announcement at 03:00:09.
        var started: JSON?
        let deadline = Date().addingTimeInterval(30)
        while started == nil, Date() < deadline {
            guard let line = events.readLine(timeoutMillis: 500), let e = try? JSON.parse(line) else { continue }
            if e["event"]?.stringValue == "announcement_started" { started = e }
        }
        #expect(started?["source"]?.stringValue == clip, "\(String(describing: started?.text))")
        #expect(h.terminate().status == 0)

        // The capture: a from its first frame, exactly, then faded out linearly over 2 s,
        // silence, and b from its first frame, exactly.
        let capture = try WAVFile(path: h.capture).samples
        let a = try Reference.decode(aPath), b = try Reference.decode(bPath)
        let aStart = try #require(Self.find(a.prefix(4096), in: capture, from: 0), "a's start is not in the capture")
        let bStart = try #require(Self.find(b.prefix(4096), in: capture, from: aStart), "b's start is not in the capture")
        let bRun = min(3 * 44100 * 2, capture.count - bStart)
        #expect(Reference.maxDifference(capture[bStart..<(bStart + bRun)], b[0..<bRun]) < 1e-6, "b plays exactly from its start")
        // capture / a, sample by sample where a is loud enough to divide by.
        var ratios: [(frame: Int, r: Float)] = []
        for i in stride(from: aStart, to: bStart, by: 2) where i - aStart < a.count && abs(a[i - aStart]) > 0.1 {
            ratios.append(((i - aStart) / 2, capture[i] / a[i - aStart]))
        }
        let fadeStart = try #require(ratios.first { $0.frame >= 441 && $0.r < 1 - 1e-6 }, "no fade").frame
        let fadeEnd = try #require(ratios.first { $0.r < 0.001 }, "the fade never ended: cut at \(ratios.last!.r)").frame
        let seconds = Double(fadeEnd - fadeStart) / 44100
        #expect(abs(seconds - 2) < 0.02, "the fade lasted \(seconds) s")
        // (After the first 5 ms: every start ramps in over them.)
        #expect(Double(fadeStart) / 44100 > 3, "the fade began \(Double(fadeStart) / 44100) s into a: before the boundary")
        // Linear: at each point, 1 − (frame − start)/(2 s).
        var worst = 0.0
        for (frame, r) in ratios where frame >= fadeStart && frame <= fadeEnd {
            let line: Double = 1 - Double(frame - fadeStart) / 88_200
            worst = max(worst, abs(Double(r) - line))
        }
        #expect(worst < 0.002, "the fade departs from a line by \(worst)")
        #expect(ratios.filter { $0.frame > fadeEnd }.allSatisfy { abs($0.r) < 0.001 }, "a stays out after the fade")

        // A crash and a restart in the same block: b goes on (the state file's block).
        try h.start(environment: Self.clock("2026-03-29 02:30:00"))
        #expect(Self.plays(h, bPath),
                "\(String(describing: h.request("status")?.text))")
        #expect(Self.schedule(h)?["block"]?.stringValue == "early")
        h.kill9()
        // A restart the next night: that night's block (a new one) is put in place.
        try h.start(environment: Self.clock("2026-03-30 00:30:00"))
        #expect(Self.plays(h, aPath),
                "\(String(describing: h.request("status")?.text))")
        #expect(Self.schedule(h)?["since"]?.stringValue == "2026-03-30T01:00:00+02:00")
        h.kill9()
        // A restart in the hours no block covers, with a silent default: stopped.
        try h.start(environment: Self.clock("2026-03-30 05:00:00"))
        #expect(h.waitFor { h.request("status")?["state"]?.stringValue == "stopped" }, "\(String(describing: h.request("status")?.text))")
        let quiet = try #require(Self.schedule(h))
        #expect(quiet["block"]?.stringValue == "default" && quiet["programme"]?.stringValue == "silence", "\(quiet.text)")
        #expect(h.terminate().status == 0)
    }

    /// A client's stop on a Sunday evening holds (`override = "until_next_block"`): the
    /// schedule leaves the music stopped until midnight, when Monday's block plays and
    /// the override is over.
    @Test func aClientsStopHoldsUntilTheDayChanges() throws {
        let (h, aPath, bPath, _) = try Self.daemon("""
            [schedule]
            timezone = "Europe/Berlin"
            fade = 0.5
            [[schedule.block]]
            name = "sunday evening"
            days = ["sun"]
            from = "20:00"
            to = "24:00"
            folder = "a"
            [[schedule.block]]
            name = "monday"
            days = "mon"
            from = "00:00"
            to = "03:00"
            folder = "b"
            """)
        // Sunday 2026-06-07, 23:59:50 CEST.
        try h.start(environment: Self.clock("2026-06-07 21:59:50"))
        #expect(Self.plays(h, aPath))
        let (st, _, err) = try h.playctl("stop")
        #expect(st == 0, "\(err)")
        let held = try #require(Self.schedule(h))
        #expect(held["override"]?.boolValue == true && held["block"]?.stringValue == "sunday evening", "\(held.text)")
        let (_, text, _) = try h.playctl("schedule")
        #expect(text.contains("holds until the next block"), "\(text)")
        // Until midnight the music stays stopped; from it, Monday's plays.
        var stoppedUntilMidnight = true
        let changed = h.waitFor(seconds: 30) {
            let block = Self.schedule(h)?["block"]?.stringValue
            let state = h.request("status")?["state"]?.stringValue
            if block == "sunday evening" && state != "stopped" { stoppedUntilMidnight = false }
            return block == "monday"
        }
        #expect(changed && stoppedUntilMidnight, "\(h.log.suffix(2000))")
        #expect(Self.plays(h, bPath, seconds: 20))
        #expect(Self.schedule(h)?["override"]?.boolValue == false)
        #expect(Self.schedule(h)?["since"]?.stringValue == "2026-06-08T00:00:00+02:00")
        #expect(h.terminate().status == 0)
    }

    /// A block with the source of the one before changes only its settings: the track
    /// plays on (no fade, no restart) at the new volume. After a client played something
    /// else, the next such block puts its source in place again.
    @Test func theSameSourceOnlyChangesTheVolumeUnlessAClientReplacedIt() throws {
        let (h, aPath, bPath, _) = try Self.daemon("""
            [schedule]
            timezone = "Europe/Berlin"
            [[schedule.block]]
            name = "before"
            from = "09:59:00"
            to = "10:00:00"
            folder = "a"
            [[schedule.block]]
            name = "quieter"
            from = "10:00:00"
            to = "10:00:10"
            folder = "a"
            volume = 30
            [[schedule.block]]
            name = "louder"
            from = "10:00:10"
            to = "10:01:00"
            folder = "a"
            volume = 60
            """)
        // 2026-06-01 09:59:55 CEST.
        try h.start(environment: Self.clock("2026-06-01 07:59:55"))
        #expect(Self.plays(h, aPath))
        #expect(h.waitFor(seconds: 30) { Self.schedule(h)?["block"]?.stringValue == "quieter" })
        #expect(h.waitFor { h.request("status")?["volume"]?.numberValue == 30 }, "\(String(describing: h.request("status")?.text))")
        // The same track, going on: not restarted at the boundary.
        let on = try #require(h.request("status"))
        #expect(on["file"]?.stringValue == aPath && (on["position"]?.numberValue ?? 0) > 4, "\(on.text)")
        // A client plays another file: at the next block, the schedule's source again.
        #expect(h.request("play", ("path", .string(bPath)))?["ok"] == .bool(true))
        #expect(Self.plays(h, bPath))
        #expect(h.waitFor(seconds: 30) { Self.schedule(h)?["block"]?.stringValue == "louder" })
        #expect(Self.plays(h, aPath), "\(String(describing: h.request("status")?.text))")
        #expect(h.request("status")?["volume"]?.numberValue == 60)
        #expect(h.terminate().status == 0)
    }

    /// The fall-back night with a block to 03:00: after the clocks go back at 03:00 CEST
    /// the block goes on, its end an hour away (03:00 CET).
    @Test func theBlockGoesOnThroughTheRepeatedHour() throws {
        let (h, aPath, _, _) = try Self.daemon("""
            [schedule]
            timezone = "Europe/Berlin"
            [[schedule.block]]
            name = "night"
            from = "01:00"
            to = "03:00"
            folder = "a"
            """)
        try h.start(environment: Self.clock("2026-10-25 00:59:56"))
        #expect(h.waitFor { h.request("status")?["file"]?.stringValue == aPath })
        #expect(Self.schedule(h)?["next"]?["at"]?.stringValue == "2026-10-25T03:00:00+01:00")
        #expect(h.waitFor(seconds: 20) { (Self.schedule(h)?["now"]?.stringValue ?? "").hasSuffix("+01:00") })
        let s = try #require(Self.schedule(h))
        #expect(s["block"]?.stringValue == "night" && s["next"]?["at"]?.stringValue == "2026-10-25T03:00:00+01:00", "\(s.text)")
        let inSeconds = s["next"]?["in_seconds"]?.numberValue ?? 0
        #expect(inSeconds > 3500 && inSeconds <= 3600, "\(s.text)")
        #expect(h.request("status")?["state"]?.stringValue == "playing")
        #expect(h.terminate().status == 0)
    }

    /// The first index from `from` (a frame boundary) where `needle` is in `hay` exactly.
    static func find(_ needle: ArraySlice<Float>, in hay: [Float], from: Int) -> Int? {
        let n = Array(needle)
        guard n.count > 0, hay.count >= n.count else { return nil }
        var i = from - from % 2
        while i + n.count <= hay.count {
            if hay[i] == n[0] && hay[i + 1] == n[1] && Array(hay[i..<(i + n.count)]) == n { return i }
            i += 2
        }
        return nil
    }

    /// `override = "ignore"`: a client's stop does not hold; the programme plays again
    /// (and its volume is set back), and status shows no override.
    @Test func withIgnoreTheScheduleHoldsItsProgramme() throws {
        let (h, aPath, _, _) = try Self.daemon("""
            [schedule]
            override = "ignore"
            [[schedule.block]]
            from = "00:00"
            to = "24:00"
            folder = "a"
            volume = 70
            """)
        try h.start()
        #expect(Self.plays(h, aPath))
        #expect(h.request("status")?["volume"]?.numberValue == 70)
        #expect(try h.playctl("volume", "20").0 == 0)
        #expect(h.waitFor { h.request("status")?["volume"]?.numberValue == 70 }, "the block's volume is set back")
        #expect(try h.playctl("stop").0 == 0)
        #expect(h.waitFor { h.request("status")?["state"]?.stringValue == "playing" }, "the programme plays again")
        #expect(Self.schedule(h)?["override"]?.boolValue == false)
        #expect(h.terminate().status == 0)
    }

    /// A reload (SIGHUP) with another schedule puts the block the clock is in in place.
    @Test func aReloadPutsTheNewSchedulesBlockInPlace() throws {
        let (h, aPath, bPath, _) = try Self.daemon("""
            [[schedule.block]]
            from = "00:00"
            to = "24:00"
            folder = "a"
            """)
        try h.start()
        #expect(h.waitFor { h.request("status")?["file"]?.stringValue == aPath })
        let config = try String(contentsOfFile: h.configPath, encoding: .utf8)
        try config.replacingOccurrences(of: "folder = \"a\"", with: "folder = \"b\"\nname = \"all day\"")
            .write(toFile: h.configPath, atomically: true, encoding: .utf8)
        kill(h.process!.processIdentifier, SIGHUP)
        #expect(Self.plays(h, bPath, seconds: 20),
                "\(h.log.suffix(1500))")
        #expect(Self.schedule(h)?["block"]?.stringValue == "all day")
        #expect(h.terminate().status == 0)
    }

    /// A block whose programme is a stored playlist plays it (its file is read on the
    /// walker thread with the folder walks).
    @Test func aBlocksStoredPlaylistPlays() throws {
        let (h, _, bPath, _) = try Self.daemon("")
        try h.start()
        #expect(h.request("add", ("paths", .array([.string(bPath)])))?["ok"] == .bool(true))
        #expect(h.request("save", ("name", .string("Morning")))?["ok"] == .bool(true))
        #expect(h.request("clear")?["ok"] == .bool(true))
        try (try String(contentsOfFile: h.configPath, encoding: .utf8)
             + "\n[[schedule.block]]\nfrom = \"00:00\"\nto = \"24:00\"\nplaylist = \"Morning\"\n")
            .write(toFile: h.configPath, atomically: true, encoding: .utf8)
        kill(h.process!.processIdentifier, SIGHUP)
        #expect(Self.plays(h, bPath), "\(h.log.suffix(1500))")
        #expect(Self.schedule(h)?["programme"]?.stringValue == "playlist Morning")
        #expect(h.terminate().status == 0)
    }

    /// The shop guide's config (docs/shop.md) parses, and its week is the one the guide describes
    /// (hand-read from the config: a date wins over the weekday blocks; Sunday is silent).
    @Test func theShopExampleParsesAndPlansTheWeek() throws {
        let readme = try String(contentsOfFile: Fixtures.repositoryRoot.path + "/docs/shop.md", encoding: .utf8)
        let marked = try #require(readme.range(of: "<!-- shop-config:"))
        let open = try #require(readme.range(of: "```toml\n", range: marked.upperBound..<readme.endIndex))
        let close = try #require(readme.range(of: "\n```", range: open.upperBound..<readme.endIndex))
        let c = try DaemonConfig(toml: String(readme[open.upperBound..<close.lowerBound]), path: "docs/shop.md")
        #expect(c.schedule.timezone == "Europe/Berlin" && c.replayGainSource == "auto")
        func plan(_ day: String) -> [String] {
            c.schedule.plan(LocalDate(day)!).map { "\(WallClock.short($0.from))-\(WallClock.short($0.to)) \(c.schedule.name($0.occurrence))" }
        }
        // Thursday 2026-12-24: Christmas Eve's own until 14:00, then the weekday blocks.
        #expect(plan("2026-12-24") == ["00:00-08:00 default", "08:00-14:00 christmas eve", "14:00-18:00 afternoon",
                                       "18:00-20:00 evening", "20:00-24:00 default"])
        #expect(plan("2026-11-27") == ["00:00-08:00 default", "08:00-12:00 morning", "12:00-18:00 afternoon",
                                       "18:00-20:00 evening", "20:00-24:00 default"])
        #expect(plan("2026-11-28") == ["00:00-09:00 default", "09:00-16:00 saturday", "16:00-24:00 default"])
        #expect(plan("2026-11-29") == ["00:00-24:00 default"])
        #expect(c.schedule.announcements.map { WallClock.short($0.at) } == ["19:55"])
    }

    // MARK: - Config

    /// Hostile or careless schedules are refused at start, naming the line and key.
    @Test func badSchedulesAreRefusedWithTheKey() throws {
        let bad: [(String, String)] = [
            ("[schedule]\ntimezone = \"Mars/Olympus\"", "not a time zone"),
            ("[schedule]\ntimezone = \"../../etc/passwd\"", "not a time zone"),
            ("[schedule]\noverride = \"sometimes\"", "until_next_block, ignore"),
            ("[schedule]\nloud = true", "unknown key"),
            ("[[schedule.block]]\nfrom = \"08:00\"\nto = \"08:00\"\nfolder = \"a\"", "the same time"),
            ("[[schedule.block]]\nfrom = \"25:00\"\nto = \"08:00\"\nfolder = \"a\"", "'25:00' is not a time"),
            ("[[schedule.block]]\nfrom = \"08:00\"\nto = \"09:00\"", "needs one of playlist, folder, url"),
            ("[[schedule.block]]\nfrom = \"08:00\"\nto = \"09:00\"\nfolder = \"a\"\nurl = \"http://x/\"", "needs one of"),
            ("[[schedule.block]]\nfrom = \"08:00\"\nto = \"09:00\"\nfolder = \"a\"\nvolume = 101", "volume: 101 is outside 0…100"),
            ("[[schedule.block]]\nfrom = \"08:00\"\nto = \"09:00\"\nfolder = \"a\"\ndays = [\"someday\"]", "'someday' is not a day"),
            ("[[schedule.block]]\nfrom = \"08:00\"\nto = \"09:00\"\nfolder = \"a\"\ndays = [\"2026-02-30\"]", "'2026-02-30' is not a day"),
            ("[[schedule.block]]\nfrom = \"08:00\"\nto = \"09:00\"\nfolder = \"a\"\ncolour = \"red\"", "unknown key 'colour'"),
            ("[[schedule.announce]]\nat = \"19:55\"", "needs one of path or url"),
            ("[schedule.default]\nfolder = \"a\"\nshuffle = \"yes\"", "shuffle: expected true or false"),
            ("[schedule.weekend]\nfolder = \"a\"", "unknown table [schedule.weekend]"),
        ]
        for (text, message) in bad {
            do {
                _ = try DaemonConfig(toml: text, path: "bad.toml")
                Issue.record("accepted: \(text)")
            } catch {
                #expect(error.message.contains(message) && error.message.contains("bad.toml: line"), "\(text): \(error.message)")
            }
        }
        let good = try DaemonConfig(toml: """
            [schedule]
            timezone = "Europe/Berlin"
            [[schedule.block]]
            days = ["mon-fri", "2026-12-24"]
            from = 08:00:00
            to = "12:30"
            playlist = "morning"
            shuffle = true
            crossfade = 4
            """, path: "good.toml")
        let b = try #require(good.schedule.blocks.first)
        #expect(b.days.weekdays == Set(1...5) && b.days.dates.map(\.description) == ["2026-12-24"])
        #expect(b.from == 8 * 3600 && b.to == 12 * 3600 + 1800 && b.programme.source == .playlist("morning"))
    }
}
