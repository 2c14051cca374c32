import Foundation
import Testing
import CoreStream
import CoreStreamTestSupport

@Suite("Volume and ReplayGain arithmetic", .checksSomething)
struct LoudnessTests {
    @Test(arguments: [(100, 1.0), (0, 0.0), (50, 0.125), (40, 0.064), (150, 1.0), (-5, 0.0)])
    func volumeIsCubic(_ volume: Int, _ expected: Double) {
        #expect(abs(Loudness.volumeGain(volume) - expected) < 1e-12)
    }

    static let tagged = ReplayGainInfo(trackGainDB: -6, trackPeak: 0.5, albumGainDB: -3, albumPeak: 0.9)

    /// (mode, preamp, limit, info, expected dB). Expected values worked out by hand:
    /// the limit is −20·log10(peak): 6.0206 dB for 0.5, 0.9151 dB for 0.9.
    static let cases: [(ReplayGainMode, Double, Bool, ReplayGainInfo, Double?)] = [
        (.off, 0, true, tagged, nil),
        (.track, 0, true, tagged, -6),
        (.album, 0, true, tagged, -3),
        (.auto, 0, true, tagged, -3),
        (.track, 3, true, tagged, -3),
        (.album, 6, true, tagged, 0.915149811),          // +3 dB limited by the album peak 0.9
        (.album, 6, false, tagged, 3),
        (.track, 15, true, tagged, 6.020599913),         // +9 dB limited by the track peak 0.5
        (.track, 0, true, ReplayGainInfo(albumGainDB: -4), -4),   // no track gain: the album's
        (.album, 0, true, ReplayGainInfo(trackGainDB: -2), -2),
        (.track, 0, true, ReplayGainInfo(), -1.5),       // untagged: the missing preamp
    ]

    @Test(arguments: cases)
    func replayGainChoosesAndLimits(_ mode: ReplayGainMode, _ preamp: Double, _ limit: Bool,
                                    _ info: ReplayGainInfo, _ expected: Double?) {
        var s = LevelSettings()
        s.replayGain = mode
        s.preampDB = preamp
        s.preventClipping = limit
        s.missingPreampDB = -1.5
        let (factor, db) = Loudness.replayGain(info, s)
        if let e = expected {
            #expect(abs(db! - e) < 1e-6, "dB \(String(describing: db)) vs \(e)")
            #expect(abs(factor - pow(10, e / 20)) < 1e-9)
        } else {
            #expect(db == nil && factor == 1)
        }
    }

    @Test func tagsParseWithAndWithoutUnits() {
        let info = ReplayGainInfo(tags: ["replaygain_track_gain": "-7.89 dB", "replaygain_track_peak": "0.988",
                                         "replaygain_album_gain": "+1.5dB", "replaygain_album_peak": "junk"])
        var want = ReplayGainInfo(trackGainDB: -7.89, trackPeak: 0.988, albumGainDB: 1.5, albumPeak: nil)
        want.source = "tags"
        #expect(info == want)
    }

    /// `[replaygain] source` (issue 43): a measured track's gain is the reference minus
    /// its loudness, lowered so its true peak stays under the ceiling; `auto` takes
    /// tags where there are some. Figures worked by hand.
    @Test(arguments: [
        // source, tagged, integrated, true peak → gain applied, where from
        (ReplayGainSource.tags, false, -24.0, -10.0, nil as Double?, nil as String?),
        (.measured, false, -24.0, -10.0, 6.0, "measured"),   // −18 − (−24)
        (.measured, false, -24.0, -4.0, 3.0, "measured"),    // the ceiling: −1 − (−4)
        (.measured, true, -12.0, -0.5, -6.0, "measured"),    // tags ignored
        (.auto, true, -12.0, -0.5, -7.0, "tags"),            // the tag's −7
        (.auto, false, -12.0, -0.5, -6.0, "measured"),
    ])
    func measuredGainFollowsTheSource(_ source: ReplayGainSource, _ tagged: Bool, _ lufs: Double, _ truePeak: Double,
                                      _ gain: Double?, _ from: String?) {
        var s = LevelSettings()
        s.replayGain = .track
        s.source = source
        let figures = LoudnessFigures(integratedLUFS: lufs, rangeLU: 3, truePeakDBTP: truePeak, samplePeakDBFS: truePeak, seconds: 60)
        let info = ReplayGainInfo(tags: tagged ? ["replaygain_track_gain": "-7 dB"] : [:], measured: figures, settings: s)
        #expect(info.source == from)
        let applied = Loudness.replayGain(info, s).db
        if let gain {
            #expect(applied.map { abs($0 - gain) < 1e-9 } == true, "applied \(applied ?? .nan) dB, want \(gain)")
        } else {
            #expect(applied == 0, "untagged and not measured: the missing preamp (0 dB), got \(applied ?? .nan)")
        }
    }

    @Test func muteIsSilenceAndKeepsTheVolume() {
        var s = LevelSettings()
        s.volume = 70
        s.muted = true
        #expect(Loudness.level(s, replayGain: ReplayGainInfo()) == 0)
        s.muted = false
        #expect(Loudness.level(s, replayGain: ReplayGainInfo()) == Float(0.343))
    }
}

/// The level as it comes out of the engine, and tags as FFmpeg reads them, against
/// files and gains made with the ffmpeg CLI.
@Suite("Volume, ReplayGain and metadata through the engine", .checksSomething, .serialized)
struct LevelCaptureTests {
    let fixture = Fixtures.named("flac-44100-2.flac")

    /// A copy of `source` with `metadata` written by the ffmpeg CLI.
    static func tagged(_ source: String, _ name: String, _ arguments: [String]) throws -> String {
        let dir = NSTemporaryDirectory() + "playd-tagged-\(getpid())"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        let out = dir + "/" + name
        let r = try Shell.run(["ffmpeg", "-nostdin", "-v", "error", "-y"] + arguments.map { $0 == "SRC" ? source : $0 } + [out])
        guard r.status == 0 else { throw FixtureError("ffmpeg tagging failed: \(r.stderr)") }
        return out
    }

    func playUnpaced(_ path: String, _ level: LevelSettings) throws -> WAVFile {
        let h = EngineHarness(paced: false)
        h.engine.setLevel(level)
        try h.engine.play(path: path)
        #expect(h.waitForEnd())
        return try h.finishCapture()
    }

    @Test(arguments: [40, 73, 0])
    func volumeIsTheExactGain(_ volume: Int) throws {
        var level = LevelSettings()
        level.volume = volume
        let cap = try playUnpaced(fixture.path, level)
        let reference = try Reference.decode(fixture.path)
        let g = Float(pow(Double(volume) / 100, 3))
        #expect(cap.samples.count == reference.count)
        #expect(cap.samples.elementsEqual(reference.map { $0 * g }), "capture is not the source × \(g)")
    }

    /// ReplayGain from each container's own tag form, as the ffmpeg CLI writes it:
    /// Vorbis comments (FLAC, Ogg), ID3v2 TXXX (MP3), APEv2 (WavPack) and MP4 metadata
    /// (M4A, ALAC). The capture is the CLI's decode × 10^(−6/20) × 0.5³.
    @Test(arguments: [("flac-44100-2.flac", "rg.flac", [String]()), ("vorbis-44100-2.ogg", "rg.ogg", []),
                      ("mp3cbr-44100-2.mp3", "rg.mp3", ["-id3v2_version", "3"]), ("wav16-44100-2.wav", "rg.wv", ["-c:a", "wavpack"]),
                      ("alac-44100-2.m4a", "rg.m4a", ["-movflags", "use_metadata_tags"])])
    func replayGainIsReadFromEveryTagForm(_ source: String, _ name: String, _ extra: [String]) throws {
        let codec = extra.contains("-c:a") ? [] : ["-c", "copy"]
        let path = try Self.tagged(Fixtures.named(source).path, name, ["-i", "SRC"] + codec + extra + [
            "-metadata", "REPLAYGAIN_TRACK_GAIN=-6.00 dB", "-metadata", "REPLAYGAIN_TRACK_PEAK=0.5"])
        var level = LevelSettings()
        level.replayGain = .track
        level.volume = 50
        let cap = try playUnpaced(path, level)
        let reference = try Reference.decode(path)
        let g = pow(10, -6.0 / 20) * 0.125
        #expect(cap.samples.count == reference.count)
        let worst = zip(cap.samples, reference).map { abs(Double($0) - Double($1) * g) }.max() ?? 1
        #expect(worst < 1e-6, "\(name): capture differs from source × \(g) by \(worst)")
    }

    /// Two tracks with different ReplayGain joined gaplessly: the first is its decode ×
    /// its gain to its last frame. A lower gain is the second's from its first frame (a
    /// loud track after a quiet one never starts at the quiet one's gain: ramping down
    /// from the boundary, it was measured at +2.3 dBFS in issue 43);
    /// a higher one ramps up over the 20 ms level ramp from the boundary frame. Then it
    /// stays there exactly.
    @Test(arguments: [(-6.0, -12.0), (-12.0, -6.0)])
    func replayGainSwitchesAtTheBoundary(_ gainA: Double, _ gainB: Double) throws {
        func tagged(_ name: String, _ gain: Double) throws -> String {
            try Self.tagged(fixture.path, name, ["-i", "SRC", "-c", "copy", "-metadata", "REPLAYGAIN_TRACK_GAIN=\(gain) dB"])
        }
        let a = try tagged("rg-a\(gainA).flac", gainA), b = try tagged("rg-b\(gainB).flac", gainB)
        let h = EngineHarness(paced: false)
        var level = LevelSettings()
        level.replayGain = .track
        h.engine.setLevel(level)
        try h.engine.play(path: a, from: nil, paused: true)
        #expect(try h.engine.setNext(path: b))
        h.engine.waitUntilApplied()
        h.engine.resume()
        #expect(h.waitForEnd())
        let cap = try h.finishCapture()
        let refA = try Reference.decode(a), refB = try Reference.decode(b)
        let (gA, gB) = (pow(10, gainA / 20), pow(10, gainB / 20))
        let boundary = refA.count / 2, ramp = 44_100 / 50
        try #require(cap.samples.count == refA.count + refB.count)
        func gainError(_ frame: Int, _ want: Double) -> Double {
            let r = frame < boundary ? refA : refB, i = 2 * (frame < boundary ? frame : frame - boundary)
            return max(abs(Double(cap.samples[2 * frame]) - Double(r[i]) * want), abs(Double(cap.samples[2 * frame + 1]) - Double(r[i + 1]) * want))
        }
        let beforeBad = (0..<boundary).first { gainError($0, gA) > 1e-6 }
        #expect(beforeBad == nil, "the first track left its gain at frame \(beforeBad ?? -1), before the boundary \(boundary)")
        if gB < gA {
            let bad = (boundary..<(cap.samples.count / 2)).first { gainError($0, gB) > 1e-6 }
            #expect(bad == nil, "the second track is not at its lower gain from its first frame: frame \(bad ?? -1) (boundary \(boundary))")
        } else {
            let afterBad = ((boundary + ramp + 1)..<(cap.samples.count / 2)).first { gainError($0, gB) > 1e-6 }
            #expect(afterBad == nil, "the second track is not at its gain by frame \(afterBad ?? -1) (boundary \(boundary), ramp \(ramp))")
            let startedAt = (boundary..<(boundary + ramp + 1)).first { gainError($0, gA) > 1e-6 }
            #expect(startedAt == boundary || startedAt == boundary + 1, "the ramp began at \(startedAt ?? -1), the boundary is \(boundary)")
            // Rising, never past its own gain.
            let over = (boundary..<(boundary + ramp + 1)).first { f in
                let i = 2 * (f - boundary)
                return abs(Double(cap.samples[2 * f])) > abs(Double(refB[i])) * gB + 1e-6
            }
            #expect(over == nil, "frame \(over ?? -1) is over the second track's gain")
        }
    }

    /// A volume change while playing ramps over 20 ms: no per-frame step larger than the
    /// ramp allows, and exactly the new gain after it.
    @Test func volumeChangesRampWithoutSteps() throws {
        let h = EngineHarness(paced: true)
        try h.engine.play(path: fixture.path)
        usleep(800_000)  // hold: 0.8 s at the first volume
        var level = LevelSettings()
        level.volume = 20
        h.engine.setLevel(level)
        #expect(h.waitForEnd())
        let cap = try h.finishCapture()
        let reference = try Reference.decode(fixture.path)
        #expect(cap.samples.count == reference.count)
        // Per-frame gain on the right (chirp, amplitude 0.5) channel, where the signal
        // is big enough for the ratio to be exact.
        var gains: [(frame: Int, gain: Double)] = []
        for f in 0..<cap.frames where abs(reference[2 * f + 1]) > 0.1 {
            gains.append((f, Double(cap.samples[2 * f + 1]) / Double(reference[2 * f + 1])))
        }
        let target = 0.008
        let start = try #require(gains.firstIndex { abs($0.gain - 1) > 1e-6 }, "the volume never changed")
        let end = try #require(gains.firstIndex { abs($0.gain - target) < 1e-6 }, "never reached 0.2³")
        let rampFrames = 44100 / 50
        #expect(gains[end].frame - gains[start].frame <= rampFrames + 1, "ramp took \(gains[end].frame - gains[start].frame) frames")
        let maxStep = (1 - target) / Double(rampFrames)
        for i in (start + 1)..<end {
            let slope = (gains[i - 1].gain - gains[i].gain) / Double(gains[i].frame - gains[i - 1].frame)
            #expect(slope <= maxStep * 1.001 + 1e-6, "gain fell \(slope) per frame at \(gains[i].frame)")
        }
        #expect(gains[end...].allSatisfy { abs($0.gain - target) < 1e-6 }, "gain after the ramp is not 0.2³")
    }

    @Test func tagsAndCoverArt() throws {
        let dir = NSTemporaryDirectory() + "playd-tagged-\(getpid())"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        let png = dir + "/cover.png"
        let made = try Shell.run(["ffmpeg", "-nostdin", "-v", "error", "-y", "-f", "lavfi", "-i", "color=c=red:s=32x32:d=1",
                                  "-frames:v", "1", png])
        try #require(made.status == 0)
        let mp3 = try Self.tagged(Fixtures.named("mp3cbr-44100-2.mp3").path, "tagged.mp3", [
            "-i", "SRC", "-i", png, "-map", "0:a", "-map", "1", "-c", "copy", "-id3v2_version", "3",
            "-disposition:v", "attached_pic",
            "-metadata", "title=Song", "-metadata", "artist=Band", "-metadata", "album=Record",
            "-metadata", "album_artist=Various", "-metadata", "track=3/12", "-metadata", "disc=2/2",
            "-metadata", "date=1999", "-metadata", "genre=Ambient"])
        let info = try AudioDecoder(path: mp3).info
        #expect(info.title == "Song" && info.artist == "Band" && info.album == "Record")
        #expect(info.albumArtist == "Various")
        #expect(info.trackNumber == 3 && info.discNumber == 2)
        #expect(info.date == "1999" && info.genre == "Ambient")
        #expect(info.bitRate == 192_000)
        let pngBytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: png)))
        #expect(info.cover == CoverArt(mime: "image/png", size: pngBytes.count))
        let art = try #require(try AudioDecoder.coverArt(path: mp3))
        #expect(art.mime == "image/png" && art.bytes == pngBytes)
        #expect(try AudioDecoder.coverArt(path: fixture.path) == nil)
        let flacInfo = try AudioDecoder(path: fixture.path).info
        #expect(flacInfo.bitsPerSample == 16 && flacInfo.cover == nil)
    }
}
