import Foundation
import Testing
import PlaydProtocol
@testable import PlaydDaemon
@testable import CoreStream
import CoreStreamTestSupport

/// Cross-fades through the daemon, set the way MPD users set them (`mpc crossfade N`)
/// and with `playctl crossfade`: what the output captured against the model from the
/// ffmpeg CLI's decodes (CrossfadeModel), and the album rule.
@Suite("Cross-fades through the daemon", .checksSomething, .serialized)
struct CrossfadeTests {
    static let rate = 44100

    func mpc(_ h: DaemonHarness, _ args: String...) throws -> (Int32, String) {
        let r = try Shell.run(["mpc", "-h", h.dir + "/mpd.sock"] + args)
        return (r.status, String(decoding: r.stdout, as: UTF8.self) + r.stderr)
    }

    /// Two 20 s tracks queued with mpc, `mpc crossfade 2`, played from 15 s into the first
    /// (a paced output: the join comes 5 s later); stopped 1 s into the second. The
    /// capture from the seek on is the model: a 2 s equal-power overlap, or A then B
    /// whole where the album rule keeps the join gapless. Status shows `xfade: 2`, and
    /// the second track from 2 s once the first has ended (MPD's order).
    @Test(arguments: [("otherAlbums", false, true), ("sameAlbumInOrder", false, false), ("sameAlbumConfigured", true, true)])
    func mpcCrossfadeOverlapsTracksButNotAnAlbumInOrder(_ name: String, _ withinAlbums: Bool, _ fades: Bool) throws {
        let h = try DaemonHarness(extraConfig: "[mpd]\nsocket = \"$DIR/mpd.sock\"",
                                  outputKeys: "crossfade_within_albums = \(withinAlbums)", name: name)
        let (a, b) = try CrossfadeModel.tracks(in: h.dir, tagsA: ["album": name == "otherAlbums" ? "One" : "Both", "track": "4"],
                                               tagsB: ["album": "Both", "track": "5"])
        try h.start()
        defer { _ = h.terminate() }
        var (st, out) = try mpc(h, "crossfade", "2")
        #expect(st == 0, "\(out)")
        (st, out) = try mpc(h, "crossfade")
        #expect(out == "crossfade: 2\n", "\(out)")
        for f in [a, b] { (st, out) = try mpc(h, "add", f); #expect(st == 0, "\(out)") }
        (st, out) = try mpc(h, "play")
        #expect(st == 0, "\(out)")
        #expect(h.waitFor { (h.request("status")?["position_frames"]?.numberValue ?? 0) > 4410 })
        (st, out) = try mpc(h, "seek", "15")
        #expect(st == 0, "\(out)")
        let status = try Shell.run(["/usr/bin/python3", "-c", """
            import socket, sys
            s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); f = s.makefile('rw')
            f.readline(); f.write('status\\n'); f.flush()
            for line in f:
                sys.stdout.write(line)
                if line.startswith('OK') or line.startswith('ACK'): break
            """, h.dir + "/mpd.sock"])
        #expect(String(decoding: status.stdout, as: UTF8.self).contains("\nxfade: 2\n"))
        #expect(h.waitFor(seconds: 20) { h.request("status")?["queue"]?["current"]?.numberValue == 1 })
        let heardB = h.request("status")?["position_frames"]?.numberValue ?? 0
        if fades {
            #expect(heardB >= Double(2 * Self.rate), "B is shown from 2 s once A has ended: \(heardB)")
        } else {
            #expect(heardB < Double(2 * Self.rate), "gapless: B is shown from its start: \(heardB)")
        }
        let stopAt = Double(fades ? 3 : 1) * Double(Self.rate)
        #expect(h.waitFor { (h.request("status")?["position_frames"]?.numberValue ?? 0) > stopAt })
        #expect(h.terminate().status == 0)

        let capture = try WAVFile(path: h.capture).samples
        let (da, db) = (try Reference.decode(a), try Reference.decode(b))
        let seekFrame = 15 * Self.rate
        let start = try #require(CrossfadeModel.locate(da, frame: seekFrame, in: capture), "A from 15 s is in the capture")
        let model = CrossfadeModel.joined(da, db, overlap: fades ? 2 * Self.rate : 0, from: seekFrame)
        // Past the seek's 5 ms ramp in; short of the stop's ramp out (the last 10 ms).
        let ramp = Self.rate / 200 * 2
        let tail = Array(capture[(start + ramp)..<(capture.count - Self.rate / 100 * 2)])
        #expect(tail.count > (5 * Self.rate + Self.rate / 2) * 2, "the capture goes on into B")
        let d = CrossfadeModel.difference(tail, Array(model[ramp...]))
        #expect(d.worst <= 1e-6, "largest difference \(d.worst) at frame \(d.frame) after the seek")
    }

    /// `mpc next` during the overlap: the track coming in plays from its start, alone
    /// (its first frames in the capture are its own, unmixed), and status shows it from
    /// its start.
    @Test func mpcNextDuringTheOverlapPlaysTheNextFromItsStart() throws {
        let h = try DaemonHarness(extraConfig: "[mpd]\nsocket = \"$DIR/mpd.sock\"")
        let (a, b) = try CrossfadeModel.tracks(in: h.dir)
        try h.start()
        defer { _ = h.terminate() }
        for args in [["crossfade", "2"], ["add", a], ["add", b], ["play"]] {
            let r = try Shell.run(["mpc", "-h", h.dir + "/mpd.sock"] + args)
            #expect(r.status == 0, "\(args): \(r.stderr)")
        }
        #expect(h.waitFor { (h.request("status")?["position_frames"]?.numberValue ?? 0) > 4410 })
        var (st, out) = try mpc(h, "seek", "17")
        #expect(st == 0, "\(out)")
        // Half a second into the overlap (18 s … 20 s): A is shown.
        #expect(h.waitFor { (h.request("status")?["position_frames"]?.numberValue ?? 0) > Double(18 * Self.rate + Self.rate / 2) })
        #expect(h.request("status")?["queue"]?["current"]?.numberValue == 0)
        (st, out) = try mpc(h, "next")
        #expect(st == 0, "\(out)")
        let s = h.request("status")
        #expect(s?["queue"]?["current"]?.numberValue == 1 && (s?["position_frames"]?.numberValue ?? .infinity) < Double(Self.rate), "\(s?.text ?? "")")
        #expect(h.waitFor { (h.request("status")?["position_frames"]?.numberValue ?? 0) > Double(Self.rate) })
        #expect(h.terminate().status == 0)
        let capture = try WAVFile(path: h.capture).samples
        let db = try Reference.decode(b)
        let start = try #require(CrossfadeModel.locate(db, frame: 0, in: capture), "B from its start, unmixed, is in the capture")
        // After its 5 ms ramp in, B exactly, for half a second.
        let ramp = Self.rate / 200 * 2
        let half = Self.rate / 2 * 2
        #expect(capture.count >= start + half)
        #expect(Array(capture[(start + ramp)..<(start + half)]) == Array(db[ramp..<half]))
    }

    /// `playctl crossfade` sets and shows all three settings, the JSON status and event
    /// carry them, a bad value is a typed error that changes nothing, and they survive
    /// a restart (the state file), as MPD's do.
    @Test func playctlSetsShowsAndKeepsTheSettings() throws {
        let h = try DaemonHarness(extraConfig: "[mpd]\nsocket = \"$DIR/mpd.sock\"")
        try h.start()
        let events = try LineClient(path: h.socket)
        #expect(events.request(.obj(("id", .int(1)), ("cmd", .string("subscribe"))))?["ok"]?.boolValue == true)
        var (st, out, err) = try h.playctl("crossfade", "5", "--mixramp-db", "-17.5", "--mixramp-delay", "2")
        #expect(st == 0, "\(err)")
        #expect(out == "crossfade 5 s, mixramp -17.5 dB, delay 2 s\n", "\(out)")
        var seen: JSON?
        for _ in 0..<20 {
            guard let line = events.readLine(timeoutMillis: 500), let e = try? JSON.parse(line) else { continue }
            if e["event"]?.stringValue == "crossfade" && e["mixramp_delay"]?.numberValue == 2 { seen = e; break }
        }
        #expect(seen?["seconds"]?.numberValue == 5 && seen?["mixramp_db"]?.numberValue == -17.5, "\(seen?.text ?? "no event")")
        let cf = h.request("status")?["crossfade"]
        #expect(cf?["seconds"]?.numberValue == 5 && cf?["mixramp_db"]?.numberValue == -17.5 && cf?["mixramp_delay"]?.numberValue == 2)
        (st, out, err) = try h.playctl("crossfade", "4000")
        #expect(st != 0 && err.contains("0…3600"), "\(err)")
        let bad = h.request("crossfade", ("seconds", .int(-1)))
        #expect(bad?["error"]?["code"]?.stringValue == "invalid_argument", "\(bad?.text ?? "")")
        (st, out) = try mpc(h, "mixrampdelay", "nan")
        #expect(st == 0, "\(out)")
        (st, out, err) = try h.playctl("crossfade")
        #expect(out == "crossfade 5 s, mixramp off (-17.5 dB)\n", "\(out)")
        #expect(h.terminate().status == 0)
        try h.start()
        (st, out, err) = try h.playctl("crossfade")
        #expect(out == "crossfade 5 s, mixramp off (-17.5 dB)\n", "kept across a restart: \(out)")
        (st, out) = try mpc(h, "crossfade")
        #expect(out == "crossfade: 5\n", "\(out)")
        _ = h.terminate()
    }
}

/// The rules the player decides a join by, as tables: the album rule and MixRamp's
/// interpolation (against MPD's documented behaviour, worked by hand).
@Suite("Cross-fade rules", .checksSomething)
struct CrossfadeRuleTests {
    static func info(_ path: String, _ tags: [String: String]) -> TrackInfo {
        TrackInfo(path: path, container: "flac", codec: "flac", sampleRate: 44100, channels: 2, durationFrames: 44100 * 60,
                  durationIsEstimate: false, bitRate: nil, bitsPerSample: 16, preferredDeviceFormat: .int16, tags: tags, cover: nil)
    }

    @Test(arguments: [
        (["album": "A", "track": "1"], ["album": "A", "track": "2"], "/m/1.flac", "/m/2.flac", true),
        (["album": "A", "track": "2"], ["album": "A", "track": "1"], "/m/2.flac", "/m/1.flac", false),  // backwards
        (["album": "A", "track": "1"], ["album": "A", "track": "3"], "/m/1.flac", "/m/3.flac", false),  // skips one
        (["album": "A", "track": "9", "disc": "1"], ["album": "A", "track": "1", "disc": "2"], "/m/9.flac", "/m/10.flac", true),
        (["album": "A", "track": "1"], ["album": "B", "track": "2"], "/m/1.flac", "/m/2.flac", false),
        (["album": "A", "track": "1", "album_artist": "X"], ["album": "A", "track": "2", "album_artist": "Y"], "/m/1.flac", "/n/2.flac", false),
        (["album": "A"], ["album": "A"], "/m/01.flac", "/m/02.flac", true),   // no numbers: folder order
        (["album": "A"], ["album": "A"], "/m/02.flac", "/m/01.flac", false),
        (["album": "A"], ["album": "A"], "/m/01.flac", "/n/02.flac", false),
        ([:], [:], "/m/01.flac", "/m/02.flac", false),                         // no album: not an album
    ] as [([String: String], [String: String], String, String, Bool)])
    func sameAlbumInOrder(_ a: [String: String], _ b: [String: String], _ pa: String, _ pb: String, _ expected: Bool) {
        #expect(Player.sameAlbumInOrder(Self.info(pa, a), Self.info(pb, b)) == expected)
    }

    /// MixRamp lists: "dB seconds;…", the dB rising. Worked by hand: −20 lies a third of
    /// the way from −30 (1 s) to 0 (4 s): 2 s.
    @Test(arguments: [
        ("-30 1;0 4", -20.0, 2.0 as Double?),
        ("-30 1;0 4", -30.0, 1.0),
        ("-30 1;0 4", -40.0, 1.0),       // quieter than the list: its first time
        ("-30 1;0 4", 3.0, nil),         // louder than the list: none
        ("-30 1;-20 2;-10 3", -15.0, 2.5),
        ("garbage", -20.0, nil),
        ("-30 1;x 4", -20.0, nil),
        ("-30 -1;0 4", -20.0, nil),      // a negative time
    ] as [(String, Double, Double?)])
    func mixRampInterpolation(_ list: String, _ db: Double, _ expected: Double?) {
        let got = Player.mixRampSeconds(list, at: db)
        if let e = expected { #expect(got.map { abs($0 - e) < 1e-9 } == true, "\(String(describing: got))") } else { #expect(got == nil) }
    }

    /// The overlap MixRamp gives: the end of A at the level plus the start of B, less the
    /// delay, both voices at full level; too short for the delay: gapless; tags
    /// missing: the plain cross-fade.
    @Test func mixRampOverlap() {
        var s = Player.CrossfadeSettings()
        s.seconds = 5
        s.mixrampDB = -20
        s.mixrampDelay = 1
        let a = Self.info("/m/a.flac", ["mixramp_end": "-30 1;0 4"])           // 2 s at −20
        let b = Self.info("/n/b.flac", ["mixramp_start": "-30 0.5;-10 1.5"])   // 1 s at −20
        let x = Player.crossfade(from: a, to: b, settings: s, withinAlbums: false, level: LevelSettings())
        #expect(x == Crossfade(seconds: 2, curve: .sum))
        s.mixrampDelay = 4
        #expect(Player.crossfade(from: a, to: b, settings: s, withinAlbums: false, level: LevelSettings()) == nil)
        s.mixrampDelay = 1
        let plain = Self.info("/n/c.flac", [:])
        #expect(Player.crossfade(from: a, to: plain, settings: s, withinAlbums: false, level: LevelSettings()) == Crossfade(seconds: 5))
        s.seconds = 0
        #expect(Player.crossfade(from: a, to: b, settings: s, withinAlbums: false, level: LevelSettings()) == nil, "MixRamp needs a crossfade set, as MPD")
    }
}
