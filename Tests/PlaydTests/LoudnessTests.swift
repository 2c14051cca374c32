import Foundation
import Testing
import PlaydProtocol
import CoreStreamTestSupport

/// `playctl loudness` against the `ffmpeg` CLI's `ebur128=peak=true` filter, an
/// implementation of BS.1770 of its own (issue 43): integrated within 0.1 LU, true peak
/// within 0.2 dB, on music-like files in every codec and on synthetic signals chosen
/// for what they stress (a true peak between samples, mono, 5.1's surround weights,
/// near-silence under the gate's threshold, a loud burst in quiet).
@Suite("Loudness measured (EBU R128)", .checksSomething, .serialized)
struct LoudnessTests {
    struct CLIFigures { var integrated: Double?; var range: Double; var truePeak: Double? }

    /// The CLI's `ebur128=peak=true` summary (`I:`, `LRA:`, `Peak:`, printed to 0.1).
    /// With `soxrPeak`, the true peak comes instead from the signal oversampled 4× by
    /// libsoxr at its highest precision (its largest sample, `astats` in doubles): for
    /// smooth high-frequency sines, where the filter's own oversampler overshoots (a
    /// 5.5 kHz sine peaking at −0.09 dBTP: the filter 0.4, soxr −0.02, libebur128
    /// −0.01). Not for music: soxr's long filter rings at a hard onset (the 3 s FLAC
    /// tone: soxr −5.6, the filter −6.0, libebur128 −6.0).
    static func reference(_ inputs: [String], filter: String = "", soxrPeak: Bool = false) throws -> CLIFigures {
        var argv = ["ffmpeg", "-nostdin", "-hide_banner", "-nostats"]
        for i in inputs { argv += ["-i", i] }
        func run(_ tail: String) throws -> String {
            let chain = inputs.count == 1 ? filter + tail
                : (0..<inputs.count).map { "[\($0):a]" }.joined() + "concat=n=\(inputs.count):v=0:a=1," + tail
            let r = try Shell.run(argv + (inputs.count == 1 ? ["-af", chain] : ["-filter_complex", chain]) + ["-f", "null", "-"])
            #expect(r.status == 0, "ffmpeg: \(r.stderr.suffix(400))")
            return r.stderr
        }
        let r128 = try run("ebur128=peak=true")
        guard let summary = r128.range(of: "Summary:") else { throw FixtureError("no ebur128 summary: \(r128.suffix(400))") }
        var ref = CLIFigures(integrated: nil, range: 0, truePeak: nil)
        for line in r128[summary.upperBound...].split(separator: "\n") {
            let parts = line.split(separator: " ", omittingEmptySubsequences: true)
            guard parts.count >= 2 else { continue }
            let value = Double(parts[1])  // "-inf" parses as -infinity
            switch parts[0] {
            case "I:": ref.integrated = value.flatMap { $0.isFinite && $0 > -70 ? $0 : nil }
            case "LRA:": ref.range = value ?? 0
            case "Peak:": ref.truePeak = value.flatMap { $0.isFinite ? $0 : nil }
            default: continue
            }
        }
        guard soxrPeak else { return ref }
        let rate = try Shell.run(["ffprobe", "-v", "error", "-select_streams", "a:0", "-show_entries", "stream=sample_rate",
                                  "-of", "csv=p=0", inputs[0]])
        let sr = Int(String(decoding: rate.stdout, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)) ?? 44_100
        let stats = try run("aformat=sample_fmts=dbl,aresample=\(4 * sr):resampler=soxr:precision=28,aformat=sample_fmts=dbl,"
                            + "astats=measure_perchannel=none:measure_overall=Peak_level")
        if let at = stats.range(of: "Peak level dB: ") {
            ref.truePeak = Double(stats[at.upperBound...].prefix { !$0.isNewline }).flatMap { $0.isFinite ? $0 : nil }
        }
        return ref
    }

    static func playctl(_ args: [String]) throws -> (Int32, JSON?, String) {
        let r = try Shell.run([DaemonHarness.playctl, "--json", "loudness"] + args)
        let out = String(decoding: r.stdout, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        return (r.status, try? JSON.parse(out), r.stderr)
    }

    static func check(_ got: JSON?, _ ref: CLIFigures, _ what: String) {
        let i = got?["integrated_lufs"]?.numberValue, tp = got?["true_peak_dbtp"]?.numberValue
        if let want = ref.integrated {
            #expect(i.map { abs($0 - want) <= 0.1 } == true, "\(what): integrated \(i.map { "\($0)" } ?? "none") LUFS, the CLI says \(want)")
        } else {
            #expect(i == nil, "\(what): integrated \(i ?? 0) LUFS, the CLI says below the gate")
        }
        if let want = ref.truePeak {
            #expect(tp.map { abs($0 - want) <= 0.2 } == true, "\(what): true peak \(tp.map { "\($0)" } ?? "none") dBTP, the CLI says \(want)")
        }
        // The loudness range is not compared: the two step their 3 s short-term blocks
        // differently, and on files of a few seconds the ranges differ (0 against 20 LU
        // on the 3 s fixtures). It is there, and not negative.
        #expect((got?["range_lu"]?.numberValue ?? -1) >= 0, "\(what): no range")
    }

    /// Synthetic signals, made by the CLI's lavfi sources.
    static let synthetic: [(name: String, source: String, codec: [String])] = [
        // A sine at a quarter of the rate, phase 45°: every sample at 0.707 of its peak,
        // so the true peak is 3 dB over the sample peak.
        ("intersample", "aevalsrc='0.99*sin(PI/2*n+PI/4)|0.99*sin(PI/2*n+PI/4)':s=44100:d=5,afade=t=in:d=0.5", ["-c:a", "pcm_f32le"]),
        // An eighth of the rate, phase 22.5°: the filter's own true peak overshoots it.
        ("high", "aevalsrc='0.99*sin(PI/4*n+PI/8)|0.99*sin(PI/4*n+PI/8)':s=44100:d=5,afade=t=in:d=0.5", ["-c:a", "pcm_f32le"]),
        ("mono", "sine=f=997:r=48000:d=6,volume=-9dB", ["-c:a", "flac"]),
        // 5.1: the surrounds weigh 1.41 (+1.5 dB) and the LFE nothing. Seeded: random
        // pink noise put one run in many 0.01 dB past the true-peak tolerance.
        ("surround", "anoisesrc=c=pink:r=48000:d=6:a=0.2:seed=1,pan=5.1|FL=c0|FR=c0|FC=c0|LFE=c0|BL=c0|BR=c0", ["-c:a", "flac"]),
        // Under −70 LUFS everywhere: no integrated loudness.
        ("near-silence", "sine=f=440:r=44100:d=4,volume=-85dB", ["-c:a", "pcm_s24le"]),
        // Quiet with one loud second: the relative gate keeps the quiet out.
        ("burst", "aevalsrc='if(between(t,3,4),0.8,0.01)*sin(2*PI*1000*t)':s=44100:d=8", ["-c:a", "pcm_s16le"]),
    ]

    @Test func tracksInEveryCodecMatchTheCLI() throws {
        let files = MusicFixtures.all.map(\.path) + ["flac-44100-2.flac", "opus-48000-1.opus", "mp3vbr-44100-2.mp3"].map { Fixtures.named($0).path }
        let (status, got, err) = try Self.playctl(files)
        #expect(status == 0, "playctl loudness: \(err)")
        let tracks = got?["tracks"]?.arrayValue ?? []
        #expect(tracks.count == files.count, "\(tracks.count) of \(files.count) measured: \(got?["errors"] ?? .null)")
        for f in files {
            let t = tracks.first { $0["path"]?.stringValue == f }
            Self.check(t, try Self.reference([f]), (f as NSString).lastPathComponent)
        }
    }

    @Test func syntheticSignalsMatchTheCLI() throws {
        let dir = NSTemporaryDirectory() + "playd-loudness-\(getpid())"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        for s in Self.synthetic {
            let path = dir + "/\(s.name)." + (s.codec.contains("flac") ? "flac" : "wav")
            try Shell.ffmpeg(["-f", "lavfi", "-i", s.source] + s.codec + [path])
            let (status, got, err) = try Self.playctl([path])
            #expect(status == 0, "\(s.name): \(err)")
            Self.check(got?["tracks"]?.arrayValue?.first, try Self.reference([path], soxrPeak: ["intersample", "high"].contains(s.name)), s.name)
        }
        // Which the intersample case is for: its true peak is above its sample peak.
        let (_, got, _) = try Self.playctl([dir + "/intersample.wav"])
        let t = got?["tracks"]?.arrayValue?.first
        #expect((t?["true_peak_dbtp"]?.numberValue ?? -99) > (t?["sample_peak_dbfs"]?.numberValue ?? 0) + 2.5, "intersample: \(t ?? .null)")
    }

    /// A folder: each track, and the album over them, gated as one programme (the
    /// CLI's reference is the tracks joined with its `concat` filter).
    @Test func aFolderGetsItsAlbumFigure() throws {
        let dir = NSTemporaryDirectory() + "playd-album-\(getpid())"
        try FileManager.default.createDirectory(atPath: dir + "/disc", withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        // Three tracks 12 LU apart at most, and a file that is not audio.
        var paths: [String] = []
        for (k, db) in [-6, -18, -12].enumerated() {
            let p = dir + "/disc/\(k + 1).flac"
            try Shell.ffmpeg(["-f", "lavfi", "-i", "anoisesrc=c=pink:r=44100:d=5:a=0.5:seed=2,volume=\(db)dB", "-ac", "2", "-c:a", "flac", p])
            paths.append(p)
        }
        try "not audio".write(toFile: dir + "/disc/notes.txt", atomically: true, encoding: .utf8)
        let (status, got, err) = try Self.playctl([dir])
        #expect(status == 0, "playctl loudness: \(err)")
        #expect(got?["tracks"]?.arrayValue?.map { $0["path"]?.stringValue ?? "" } == paths)
        #expect(got?["errors"]?.arrayValue?.map { $0["path"]?.stringValue ?? "" } == [dir + "/disc/notes.txt"])
        let album = got?["albums"]?.arrayValue?.first
        #expect(album?["folder"]?.stringValue == dir + "/disc" && album?["tracks"]?.numberValue == 3)
        Self.check(album, try Self.reference(paths), "album")
        // The text form names each track and the album.
        let r = try Shell.run([DaemonHarness.playctl, "loudness", dir + "/disc"])
        let lines = String(decoding: r.stdout, as: UTF8.self).split(separator: "\n")
        #expect(lines.count == 4 && lines.allSatisfy { $0.contains(" LUFS  LRA ") } && lines[3].contains("album: \(dir)/disc (3 tracks)"),
                "\(lines)")
        #expect(r.stderr.contains("notes.txt") && r.status == 0)
    }

    /// docs/loudness.md's command block, run as written in a folder holding the album
    /// it names; what it prints is checked against the CLI as above.
    @Test func theDocsExamplesRunAsWritten() throws {
        let doc = try String(contentsOfFile: Fixtures.repositoryRoot.path + "/docs/loudness.md", encoding: .utf8)
        let start = try #require(doc.range(of: "<!-- doc-test: run by Tests/PlaydTests/LoudnessTests.swift -->\n```sh\n"))
        let end = try #require(doc.range(of: "\n```", range: start.upperBound..<doc.endIndex))
        let lines = doc[start.upperBound..<end.lowerBound].split(separator: "\n").map(String.init)
        #expect(lines.count == 2)
        let dir = NSTemporaryDirectory() + "playd-loudness-doc-\(getpid())"
        try FileManager.default.createDirectory(atPath: dir + "/Album", withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        for (name, db) in [("01 Intro", -6), ("02 Outro", -18)] {
            try Shell.ffmpeg(["-f", "lavfi", "-i", "anoisesrc=c=pink:r=44100:d=4:a=0.5:seed=3,volume=\(db)dB", "-ac", "2", "-c:a", "flac", "\(dir)/Album/\(name).flac"])
        }
        var env = ProcessInfo.processInfo.environment
        env["PATH"] = DaemonHarness.binDir + ":" + (env["PATH"] ?? "/usr/bin:/bin")
        for line in lines {
            let r = try Shell.run(["/bin/sh", "-c", "cd '\(dir)' && " + line], environment: env)
            let out = String(decoding: r.stdout, as: UTF8.self)
            #expect(r.status == 0, "\(line): \(r.stderr)")
            if line.contains("--json") {
                let t = try JSON.parse(out.trimmingCharacters(in: .whitespacesAndNewlines))["tracks"]?.arrayValue?.first
                Self.check(t, try Self.reference([dir + "/Album/01 Intro.flac"]), line)
            } else {
                #expect(out.split(separator: "\n").count == 3 && out.contains("album: \(dir)/Album (2 tracks)"), "\(line): \(out)")
            }
        }
    }

    /// ReplayGain from playd's own measurement (issue 43): two untagged tracks 12 LU
    /// apart, played in track mode with `source = "measured"`, are each heard within
    /// 0.5 LU of the −18 LUFS reference (the capture's halves measured by the CLI), and
    /// no sample of the capture goes over the −1 dBTP true-peak ceiling.
    @Test func measuredTracksPlayAtTheReferenceLoudness() throws {
        let capture = NSTemporaryDirectory() + "playd-loudness-play-\(getpid()).wav"
        defer { try? FileManager.default.removeItem(atPath: capture) }
        let h = try DaemonHarness(extraConfig: "[volume]\nreplaygain = \"track\"\n[replaygain]\nsource = \"measured\"",
                                  output: "wav:\(capture)?pace=off")
        // Pink noise: the quiet one at about −24 LUFS (FLAC), the loud one 12 dB louder
        // (float WAV: its peaks go past full scale before its gain brings them down).
        let quiet = h.dir + "/quiet.flac", loud = h.dir + "/loud.wav"
        try Shell.ffmpeg(["-f", "lavfi", "-i", "anoisesrc=c=pink:r=44100:d=6:a=0.5:seed=7,volume=-3dB", "-ac", "2", "-c:a", "flac", quiet])
        try Shell.ffmpeg(["-f", "lavfi", "-i", "anoisesrc=c=pink:r=44100:d=6:a=0.5:seed=8,volume=9dB", "-ac", "2", "-c:a", "pcm_f32le", loud])
        let (rq, rl) = (try Self.reference([quiet]), try Self.reference([loud]))
        #expect(abs((rl.integrated ?? 0) - (rq.integrated ?? 0) - 12) <= 0.3, "the sources: \(rq) and \(rl)")
        try h.start()
        let c = try LineClient(path: h.socket)
        #expect(c.request(.obj(("cmd", .string("add")), ("paths", .array([.string(quiet), .string(loud)]))))?["ok"] == .bool(true))
        // Measured before it plays (a hang guard, not a speed bound).
        var rg: JSON?
        #expect(h.waitFor(seconds: 60) {
            rg = c.request(.obj(("cmd", .string("status"))))?["replay_gain"]
            return rg?["measured"]?.numberValue == 2 && rg?["measuring"]?.numberValue == 0
        }, "status: \(rg ?? .null)")
        var id: Int64 = 0
        try NextTrackTests.playQueueToTheEnd(h, c, id: &id)
        _ = h.terminate()
        let frames = 6 * 44_100
        let heardQuiet = try Self.reference([capture], filter: "atrim=end_sample=\(frames),")
        let heardLoud = try Self.reference([capture], filter: "atrim=start_sample=\(frames),")
        for (name, r) in [("quiet", heardQuiet), ("loud", heardLoud)] {
            #expect(r.integrated.map { abs($0 + 18) <= 0.5 } == true, "\(name): heard at \(r.integrated.map { "\($0)" } ?? "none") LUFS")
        }
        let samples = try Reference.decode(capture)
        #expect(samples.count == 2 * 2 * frames)
        let peak = samples.reduce(Float(0)) { max($0, abs($1)) }
        #expect(Double(peak) <= pow(10, -1.0 / 20), "the capture's largest sample is \(20 * log10(Double(peak))) dBFS")
    }

    /// The library is measured into its index after the scan (issue 43): each track's
    /// figure and its album's (the folder's songs with one album tag) match the CLI's,
    /// `album` mode plays at the album's gain, a restart measures nothing again, and a
    /// changed file is measured again (its folder only) after the next update.
    @Test func theLibraryIsMeasuredIntoItsIndexOnce() throws {
        let h = try DaemonHarness(extraConfig: """
            [library]
            music_roots = ["$DIR/music"]
            [volume]
            replaygain = "album"
            [replaygain]
            source = "measured"
            """)
        var tracks: [String] = []
        for (k, db) in [-6, -18].enumerated() {
            let p = h.dir + "/music/Album/\(k + 1).flac"
            try FileManager.default.createDirectory(atPath: h.dir + "/music/Album", withIntermediateDirectories: true)
            try Shell.ffmpeg(["-f", "lavfi", "-i", "anoisesrc=c=pink:r=44100:d=5:a=0.5:seed=\(k + 3),volume=\(db)dB", "-ac", "2",
                              "-metadata", "album=Measured", "-c:a", "flac", p])
            tracks.append(p)
        }
        let single = h.dir + "/music/Other/x.flac"
        try FileManager.default.createDirectory(atPath: h.dir + "/music/Other", withIntermediateDirectories: true)
        try Shell.ffmpeg(["-f", "lavfi", "-i", "anoisesrc=c=pink:r=44100:d=5:a=0.5:seed=9,volume=-12dB", "-ac", "2", "-c:a", "flac", single])
        func loudness() -> JSON? { h.request("status")?["library"]?["loudness"] }
        func settled(_ n: Int) -> Bool {
            var last: JSON?
            let ok = h.waitFor(seconds: 120) {
                last = h.request("status")?["library"]
                return last?["loudness"]?["measured"]?.numberValue == Double(n) && last?["loudness"]?["measuring"]?.boolValue == false
            }
            // CI ran out here once after the restart (2026-11-28), never here: say where it stood.
            if !ok { Issue.record("the library's measuring did not settle at \(n): \(last ?? .null)\n\(h.stuckReport())") }
            return ok
        }
        func gains(_ path: String) throws -> JSON? {
            #expect(h.request("play", ("path", .string(path)))?["ok"] == .bool(true))
            var rg: JSON?
            _ = h.waitFor { rg = h.request("status")?["replay_gain"]; return h.request("status")?["file"]?.stringValue == path && rg?["source"]?.stringValue == "measured" }
            return rg
        }
        try h.start()
        #expect(settled(3), "status: \(loudness() ?? .null)")
        #expect(loudness()?["measured_since_start"]?.numberValue == 3)
        let (album, second) = (try Self.reference(tracks), try Self.reference([tracks[1]]))
        let rg = try gains(tracks[1])
        #expect(abs((rg?["track_gain_db"]?.numberValue ?? 99) - (-18 - second.integrated!)) <= 0.1, "\(rg ?? .null) against \(second)")
        #expect(abs((rg?["album_gain_db"]?.numberValue ?? 99) - (-18 - album.integrated!)) <= 0.1, "\(rg ?? .null) against \(album)")
        #expect(abs((rg?["applied_db"]?.numberValue ?? 99) - (rg?["album_gain_db"]?.numberValue ?? 0)) <= 0.01, "album mode plays the album's gain")
        let alone = try gains(single)
        #expect(alone?["album_gain_db"]?.isNull == true, "a song with no album tag has no album figure: \(alone ?? .null)")

        // A restart: nothing measured again.
        #expect(h.terminate().status == 0)
        try h.start()
        #expect(settled(3))
        #expect(loudness()?["measured_since_start"]?.numberValue == 0, "\(loudness() ?? .null)")
        // x.flac changes (6 dB louder): the next update measures its folder again, only.
        try FileManager.default.removeItem(atPath: single)
        try Shell.ffmpeg(["-f", "lavfi", "-i", "anoisesrc=c=pink:r=44100:d=6:a=0.5:seed=9,volume=-6dB", "-ac", "2", "-c:a", "flac", single])
        let (st, out, err) = try h.playctl("update", "--wait")
        #expect(st == 0, "\(out) \(err)")
        #expect(h.waitFor(seconds: 120) { loudness()?["measured_since_start"]?.numberValue == 1 && loudness()?["measuring"]?.boolValue == false },
                "\(loudness() ?? .null)")
        let louder = try Self.reference([single])
        let again = try gains(single)
        #expect(abs((again?["track_gain_db"]?.numberValue ?? 99) - (-18 - louder.integrated!)) <= 0.1, "\(again ?? .null) against \(louder)")
        #expect(h.terminate().status == 0)
    }

    /// `play PATH` of a file no index has measured: measured before it plays (it takes
    /// well under a second), so its first frame is at its gain, and status says so from
    /// the reply on.
    @Test func aFilePlayedByPathIsMeasuredBeforeItPlays() throws {
        let h = try DaemonHarness(extraConfig: "[volume]\nreplaygain = \"track\"\n[replaygain]\nsource = \"auto\"")
        let file = h.dir + "/untagged.flac"
        try Shell.ffmpeg(["-f", "lavfi", "-i", "anoisesrc=c=pink:r=44100:d=5:a=0.5:seed=4,volume=-9dB", "-ac", "2", "-c:a", "flac", file])
        try h.start()
        let c = try LineClient(path: h.socket)
        #expect(c.request(.obj(("cmd", .string("play")), ("path", .string(file))))?["ok"] == .bool(true))
        let rg = c.request(.obj(("cmd", .string("status"))))?["replay_gain"]
        let ref = try Self.reference([file])
        #expect(rg?["source"]?.stringValue == "measured", "\(rg ?? .null)")
        #expect(abs((rg?["track_gain_db"]?.numberValue ?? 99) - (-18 - ref.integrated!)) <= 0.1, "\(rg ?? .null) against \(ref)")
        #expect(h.terminate().status == 0)
    }

    /// `[streams] normalize`: a station 10 dB under the reference is brought up to it,
    /// one 8.5 dB over it (its peaks limited at −0.3 dBFS) down to it, slowly (the level just after the jump is still far
    /// over), and no sample of the capture passes −1 dBFS; measured on the capture with
    /// the CLI's `ebur128` filter, the source's two halves checked with it first.
    @Test func aStreamIsBroughtSlowlyToTheReferenceAndNeverClips() throws {
        let capture = NSTemporaryDirectory() + "playd-normalize-\(getpid()).wav"
        defer { try? FileManager.default.removeItem(atPath: capture) }
        let h = try DaemonHarness(extraConfig: "[streams]\nnormalize = true", output: "wav:\(capture)?pace=off")
        let served = h.dir + "/www"
        try FileManager.default.createDirectory(atPath: served, withIntermediateDirectories: true)
        let station = served + "/station.flac"
        // 25 s quiet, then 25 s loud, pink noise.
        try Shell.ffmpeg(["-f", "lavfi", "-i", "anoisesrc=c=pink:r=44100:d=25:a=0.5:seed=11,volume=-7.5dB",
                          "-f", "lavfi", "-i", "anoisesrc=c=pink:r=44100:d=25:a=0.5:seed=12,volume=12.5dB,alimiter=limit=0.97:level=false",
                          "-filter_complex", "[0:a][1:a]concat=n=2:v=0:a=1", "-ac", "2", "-c:a", "flac", station])
        let quiet = try Self.reference([station], filter: "atrim=end=25,")
        let loud = try Self.reference([station], filter: "atrim=start=25,")
        #expect(abs((quiet.integrated ?? 0) + 28) <= 1.5 && abs((loud.integrated ?? 0) + 9.5) <= 1.5, "the source: \(quiet), \(loud)")
        let web = try TestHTTPServer.start(serving: served, ranges: false)
        defer { web.kill() }
        try h.start()
        let url = "http://127.0.0.1:\(web.port)/station.flac"
        #expect(h.request("play", ("path", .string(url)))?["ok"] == .bool(true))
        var gain: Double?
        #expect(h.waitFor(seconds: 60) {
            let s = h.request("status")
            if let g = s?["replay_gain"]?["stream_gain_db"]?.numberValue { gain = g }
            return gain != nil && s?["state"]?.stringValue == "stopped"
        }, "\(h.log.suffix(1500))")
        #expect(h.terminate().status == 0)
        let settledQuiet = try Self.reference([capture], filter: "atrim=start=17:end=25,")
        let settledLoud = try Self.reference([capture], filter: "atrim=start=42:end=50,")
        let justAfter = try Self.reference([capture], filter: "atrim=start=25.5:end=28.5,")
        #expect(abs((settledQuiet.integrated ?? 0) + 18) <= 1.5, "the quiet half heard at \(settledQuiet)")
        #expect(abs((settledLoud.integrated ?? 0) + 18) <= 1.5, "the loud half heard at \(settledLoud)")
        #expect((justAfter.integrated ?? -99) > -12, "the gain came down at once: \(justAfter)")
        let samples = try Reference.decode(capture)
        #expect(samples.count >= 2 * 44_100 * 49, "the capture holds \(samples.count / 2) frames")
        let peak = samples.reduce(Float(0)) { max($0, abs($1)) }
        #expect(Double(peak) <= pow(10, -1.0 / 20) + 1e-6, "the capture's largest sample is \(20 * log10(Double(peak))) dBFS")
    }

    @Test func nothingMeasurableFails() throws {
        let (status, got, _) = try Self.playctl(["/nonexistent/x.flac", "http://127.0.0.1:9/radio"])
        #expect(status == 1)
        #expect(got?["errors"]?.arrayValue?.compactMap { $0["code"]?.stringValue } == ["file_not_found", "invalid_argument"])
    }
}
