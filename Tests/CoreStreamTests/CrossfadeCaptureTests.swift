import Foundation
import Logging
import Testing
@testable import CoreStream
import CoreStreamTestSupport

/// Cross-fades, captured: what the render thread wrote against a model computed from
/// the ffmpeg CLI's decodes of the two tracks (A's last N frames × cos, B's first N ×
/// sin, then B from N), within float rounding. The tracks are 44.1 kHz stereo float, so
/// the device is float and the capture holds the mix unrounded.
@Suite("Cross-fades, captured", .checksSomething, .serialized)
struct CrossfadeCaptureTests {
    static let rate = 44100

    static func directory(_ name: String = #function) throws -> String {
        try freshTestDirectory("playd-xfade", name)
    }

    static func names(_ events: [PlaybackEngine.Event]) -> [String] {
        events.compactMap { e in
            switch e {
            case .trackStarted(let t): return "start \((t.path as NSString).lastPathComponent)"
            case .trackEnded(let p, _, _): return "end \((p as NSString).lastPathComponent)"
            default: return nil
            }
        }
    }

    /// The overlap is exact in length, curve and place: equal power over 3 s and 0.5 s,
    /// MixRamp's sum over 2 s; the capture is A up to N frames before its end, the mix,
    /// then B from frame N, and nothing else.
    @Test(arguments: [(3.0, Crossfade.Curve.equalPower), (0.5, .equalPower), (2.0, .sum)])
    func theOverlapMatchesTheModel(_ seconds: Double, _ curve: Crossfade.Curve) throws {
        let dir = try Self.directory("\(seconds)\(curve)")
        let (a, b) = try CrossfadeModel.tracks(in: dir)
        let run = try EngineHarness.playToEnd(a, name: "xfade\(curve)") { e in
            let queued = try e.setNext(path: b, crossfade: Crossfade(seconds: seconds, curve: curve))
            #expect(queued)
        }
        #expect(run.ended)
        let (da, db) = (try Reference.decode(a), try Reference.decode(b))
        let n = Int((seconds * Double(Self.rate)).rounded())
        let model = CrossfadeModel.joined(da, db, overlap: n, sum: curve == .sum)
        let capture = run.capture.samples
        #expect(capture.count == model.count, "\(capture.count / 2) frames captured, the model has \(model.count / 2)")
        let d = CrossfadeModel.difference(capture, model)
        #expect(d.worst <= 1e-6, "largest difference \(d.worst) at frame \(d.frame) (the overlap is \(da.count / 2 - n) ..< \(da.count / 2))")
        #expect(Self.names(run.events) == ["start a.wav", "end a.wav", "start b.wav", "end b.wav"])
    }

    /// Where the engine cannot overlap exactly the join stays gapless: a track shorter
    /// than 20 s (MPD's rule), a track at another rate (it would be resampled), and a
    /// start inside the overlap (as after a seek there).
    @Test(arguments: ["short", "otherRate", "startInside"])
    func otherwiseTheJoinIsGapless(_ reason: String) throws {
        let dir = try Self.directory(reason)
        var (a, b) = try CrossfadeModel.tracks(in: dir, seconds: reason == "short" ? 19 : 20)
        if reason == "otherRate" {
            let b48 = dir + "/b48.wav"
            try Shell.ffmpeg(["-i", b, "-ar", "48000", "-c:a", "pcm_f32le", b48])
            b = b48
        }
        let from: Int64? = reason == "startInside" ? Int64(19 * Self.rate) : nil
        let run = try EngineHarness.playToEnd(a, from: from, name: "gapless\(reason)") { e in
            let queued = try e.setNext(path: b, crossfade: Crossfade(seconds: 3))
            #expect(queued)
        }
        #expect(run.ended)
        let da = try Reference.decode(a)
        let start = Int(from ?? 0)
        let capture = run.capture.samples
        let aPart = Array(da[(start * 2)...])
        #expect(capture.count > aPart.count)
        // (A start mid-track ramps in over its first 5 ms.)
        let ramp = start > 0 ? Self.rate / 200 * 2 : 0
        #expect(Reference.maxDifference(capture[ramp..<aPart.count], aPart[ramp...]) == 0, "A plays whole, untouched")
        if reason != "otherRate" {
            let db = try Reference.decode(b)
            #expect(capture.count == aPart.count + db.count)
            #expect(Reference.maxDifference(capture[aPart.count...], db[...]) == 0, "then B whole, from its first frame")
        }
    }

    /// Status shows A until its last frame is heard, then B from frame N (MPD's order),
    /// and a seek during the overlap ends it: A goes on from the seek alone, and since
    /// that is before the overlap's start, the overlap comes again in full.
    @Test(.tags(.threadSanitizer)) func aSeekDuringTheOverlapEndsItAndItComesAgain() throws {
        let dir = try Self.directory()
        let (a, b) = try CrossfadeModel.tracks(in: dir)
        let h = EngineHarness(paced: true, name: "xfadeSeek")
        let n = 2 * Self.rate
        let la = 20 * Self.rate
        // 1 s before the overlap (see aPauseDuringTheOverlapResumesIt).
        try h.engine.play(path: a, from: Int64(la - n - Self.rate), paused: true)
        #expect(try h.engine.setNext(path: b, crossfade: Crossfade(seconds: 2)))
        h.engine.waitUntilApplied()
        h.engine.resume()
        #expect(h.wait(seconds: 10) { h.engine.status().positionFrames > Int64(la - n + Self.rate / 4) })
        let during = h.engine.status()
        #expect((during.track?.path as NSString?)?.lastPathComponent == "a.wav", "A is shown during the overlap")
        let seekTo = Int64(la - n - Self.rate / 2)
        try h.engine.seek(to: seekTo)
        #expect(h.wait(seconds: 10) { (h.engine.status().track?.path as NSString?)?.lastPathComponent == "b.wav" })
        let after = h.engine.status()
        #expect(after.positionFrames >= Int64(n), "B is shown from frame N: \(after.positionFrames)")
        #expect(h.wait(seconds: 10) { h.engine.status().positionFrames > Int64(n + Self.rate / 2) })
        h.engine.stop()
        let capture = try h.finishCapture().samples
        #expect(h.engine.status().underruns == 0)
        // From the seek on, the capture is the model from that frame.
        let (da, db) = (try Reference.decode(a), try Reference.decode(b))
        let model = CrossfadeModel.joined(da, db, overlap: n, from: Int(seekTo))
        let at = CrossfadeModel.locate(da, frame: Int(seekTo), in: capture)
        let start = try #require(at, "A from the seek frame is in the capture")
        // The first 5 ms after the seek are its ramp in; compare from there.
        let ramp = Self.rate / 200 * 2
        // The stop's ramp out ends the capture: leave its last 10 ms.
        let tail = Array(capture[(start + ramp)..<(capture.count - Self.rate / 100 * 2)])
        let d = CrossfadeModel.difference(tail, Array(model[ramp...]))
        #expect(tail.count > (n + Self.rate / 2) * 2, "the capture goes on into B")
        #expect(d.worst <= 1e-6, "largest difference \(d.worst) at frame \(d.frame) after the seek of \(tail.count / 2)")
    }

    /// A pause during the overlap and a resume: the overlap goes on from the frame it
    /// paused at. The capture is the model frame for frame (so nothing skipped or
    /// repeated) but for one 5 ms ramp out and one 5 ms ramp in, inside the overlap.
    @Test func aPauseDuringTheOverlapResumesIt() throws {
        let dir = try Self.directory()
        let (a, b) = try CrossfadeModel.tracks(in: dir)
        let h = EngineHarness(paced: true, name: "xfadePause")
        let n = 2 * Self.rate, la = 20 * Self.rate
        // 1 s before the overlap: the reader fills its ring (0.74 s) at the load, before
        // setNext, and an overlap it has passed cannot be made (docs/crossfade.md).
        let from = la - n - Self.rate
        try h.engine.play(path: a, from: Int64(from), paused: true)
        #expect(try h.engine.setNext(path: b, crossfade: Crossfade(seconds: 2)))
        h.engine.waitUntilApplied()
        h.engine.resume()
        #expect(h.wait(seconds: 10) { h.engine.status().positionFrames > Int64(la - n + Self.rate / 2) })
        h.engine.pause()
        #expect(h.wait(seconds: 10) { h.engine.status().state == .paused })
        h.engine.resume()
        #expect(h.wait(seconds: 10) {
            (h.engine.status().track?.path as NSString?)?.lastPathComponent == "b.wav" && h.engine.status().positionFrames > Int64(n + Self.rate / 4)
        })
        h.engine.stop()
        let capture = try h.finishCapture().samples
        #expect(h.engine.status().underruns == 0)
        let model = CrossfadeModel.joined(try Reference.decode(a), try Reference.decode(b), overlap: n, from: from)
        let ramp = Self.rate / 200
        // From the first frame on (a start mid-track ramps in over 5 ms), short of the
        // stop's ramp out.
        let end = capture.count / 2 - Self.rate / 100
        func differs(_ f: Int) -> Bool { abs(Double(capture[2 * f]) - model[2 * f]) > 1e-6 || abs(Double(capture[2 * f + 1]) - model[2 * f + 1]) > 1e-6 }
        // A pause the device had not played yet leaves no trace (what it held is taken
        // back, and the resume ramps only what was ramped out): then the capture is the
        // model throughout.
        #expect(end > la - from + Self.rate / 8, "the capture goes on into B")
        if let p = (ramp + 1..<end).first(where: differs) {
            #expect(p > la - n - from && p < la - from, "paused inside the overlap: frame \(p) of the capture")
            let resumed = p + 2 * ramp + 2
            #expect(!(resumed..<end).contains(where: differs), "after the resume the capture is the model, frame for frame")
        }
    }

    /// A paced engine playing A (20 s) from 1 s before a 2 s overlap into B (see
    /// aPauseDuringTheOverlapResumesIt), until `by` frames of the overlap are heard.
    static func playIntoTheOverlap(_ a: String, _ b: String, name: String, by: Int) throws
        -> (h: EngineHarness, n: Int, la: Int, from: Int) {
        let h = EngineHarness(paced: true, name: name)
        let n = 2 * rate, la = 20 * rate
        let from = la - n - rate
        try h.engine.play(path: a, from: Int64(from), paused: true)
        #expect(try h.engine.setNext(path: b, crossfade: Crossfade(seconds: 2)))
        h.engine.waitUntilApplied()
        h.engine.resume()
        #expect(h.wait(seconds: 10) { h.engine.status().positionFrames > Int64(la - n + by) }, "the overlap was not reached")
        return (h, n, la, from)
    }

    /// A new next track during the overlap (a queue edit that deletes or replaces the
    /// one fading in) ends the overlap where the reader is, as a seek does: the capture
    /// is the model (A, then A with B fading in) up to one frame, then A alone to its
    /// last frame, then the new next track whole from its first, gapless; B is never
    /// started (docs/crossfade.md).
    @Test func aNewNextTrackDuringTheOverlapEndsIt() throws {
        let dir = try Self.directory()
        let (a, b) = try CrossfadeModel.tracks(in: dir)
        let c = dir + "/c.wav"
        try Shell.ffmpeg(["-f", "lavfi", "-i", "sine=frequency=990:duration=2:sample_rate=\(Self.rate)", "-ac", "2", "-c:a", "pcm_f32le", c])
        let (h, n, la, from) = try Self.playIntoTheOverlap(a, b, name: "xfadeNewNext", by: Self.rate / 4)
        _ = try h.engine.setNext(path: c, crossfade: Crossfade(seconds: 2))
        #expect(h.waitForEnd(seconds: 30), "the engine did not stop after C")
        let names = Self.names(h.recordedEvents)
        let capture = try h.finishCapture().samples
        #expect(!names.contains("start b.wav"), "\(names)")
        #expect(names.suffix(2) == ["start c.wav", "end c.wav"], "\(names)")
        let (da, db, dc) = (try Reference.decode(a), try Reference.decode(b), try Reference.decode(c))
        let model = CrossfadeModel.joined(da, db, overlap: n, from: from)
        let ramp = Self.rate / 200
        let aFrames = la - from
        try #require(capture.count >= 2 * aFrames, "the capture is shorter than A: \(capture.count / 2) frames")
        func differs(_ f: Int) -> Bool { abs(Double(capture[2 * f]) - model[2 * f]) > 1e-6 || abs(Double(capture[2 * f + 1]) - model[2 * f + 1]) > 1e-6 }
        // From the first frame on (a start mid-track ramps in over 5 ms).
        let cut = try #require((ramp + 1..<aFrames).first(where: differs), "the overlap never ended: B was heard through")
        #expect(cut > la - n - from, "the overlap had begun before the edit: it ended at frame \(cut) of the capture, before \(la - n - from)")
        // From the cut on, allowing a 5 ms ramp there, A alone to its last frame.
        let after = cut + 2 * ramp
        let alone = CrossfadeModel.difference(Array(capture[(2 * after)..<(2 * aFrames)]), da[(2 * (from + after))..<(2 * la)].map(Double.init))
        #expect(alone.worst <= 1e-6, "after the cut at \(cut), not A alone: \(alone.worst) at frame \(alone.frame)")
        // Then C, whole, from its first frame.
        #expect(capture.count == 2 * aFrames + dc.count, "\(capture.count / 2) frames, A's part and C make \(aFrames + dc.count / 2)")
        #expect(Reference.maxDifference(capture[(2 * aFrames)...], dc[...]) == 0, "then C whole, from its first frame")
    }

    /// A stop during the overlap stops both: the capture is the model up to the stop,
    /// ends inside the overlap with the stop's ramp, and the engine reports stopped with
    /// the next track not started.
    @Test func aStopDuringTheOverlapStopsBoth() throws {
        let dir = try Self.directory()
        let (a, b) = try CrossfadeModel.tracks(in: dir)
        let (h, n, la, from) = try Self.playIntoTheOverlap(a, b, name: "xfadeStop", by: Self.rate / 2)
        h.engine.stop()
        #expect(h.wait(seconds: 10) { h.engine.status().state == .stopped })
        let names = Self.names(h.recordedEvents)
        let capture = try h.finishCapture().samples
        #expect(!names.contains("start b.wav"), "\(names)")
        let model = CrossfadeModel.joined(try Reference.decode(a), try Reference.decode(b), overlap: n, from: from)
        let frames = capture.count / 2
        #expect(frames > la - n - from && frames < la - from, "the capture ends inside the overlap: \(frames) frames")
        let ramp = Self.rate / 200
        let kept = (frames - Self.rate / 100) * 2
        let d = CrossfadeModel.difference(Array(capture[(2 * ramp)..<kept]), Array(model[(2 * ramp)..<kept]))
        #expect(d.worst <= 1e-6, "largest difference \(d.worst) at frame \(d.frame)")
    }

    /// Over a real PulseAudio sink (ALSA's pulse plugin into the headless null sink): a
    /// 2 s cross-fade between two 48 kHz tones (the sink's rate: the recording is not
    /// resampled) with no underrun, and no dip: equal power keeps the level of two
    /// uncorrelated tones, so every 10 ms window from the first loud one to the last
    /// stays within 2 dB of the tones' own level.
    @Test func overPulseAudioWithNoUnderrunsAndNoDip() throws {
        try #require(PulseEnvironment.server != nil, PulseEnvironment.missing)
        let dir = try Self.directory()
        let a = dir + "/a48.flac", b = dir + "/b48.flac"
        try Shell.ffmpeg(["-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000:duration=20", "-af", "volume=4", "-ac", "2", "-c:a", "flac", a])
        try Shell.ffmpeg(["-f", "lavfi", "-i", "sine=frequency=660:sample_rate=48000:duration=20", "-af", "volume=4", "-ac", "2", "-c:a", "flac", b])
        let recorder = try PulseRecorder.started(path: dir + "/capture.raw")
        defer { recorder.stop() }
        let engine = PulseRecorder.pulseEngine()
        // Queued before the music runs: the pulse plugin takes a large first fill, and
        // the reader would be past the overlap's start (18 s) before a later setNext.
        try engine.play(path: a, from: Int64(17 * 48_000), paused: true)
        #expect(try engine.setNext(path: b, crossfade: Crossfade(seconds: 2)))
        engine.waitUntilApplied()
        engine.resume()
        #expect(PulseRecorder.wait(20) { engine.status().track?.path == b && engine.status().positionFrames > 3 * 48_000 })
        let status = engine.status()
        engine.stop()
        engine.shutdown()
        let samples = try recorder.finish()
        #expect(status.underruns == 0 && status.deviceXruns == 0, "underruns \(status.underruns), device xruns \(status.deviceXruns)")
        let window = 480
        let rms = PulseRecorder.levels(samples, window: window)
        let (full, first, last) = try #require(PulseRecorder.loudSpan(rms), "the music was recorded")
        #expect(full > 0.1, "the music was recorded (peak window RMS \(full))")
        // Start, join and stop: about 3 s of windows between the first and last loud one.
        #expect(last - first > 250, "\(last - first) windows")
        let low = rms[(first + 1)..<last].min() ?? 0
        #expect(low > full * 0.79, "no dip: the quietest window is \(20 * log10(low / full)) dB")
        // And the tones overlapped: windows where each is above 0.3 of full (cos and sin
        // both above 0.3: 61 % of a 2 s fade, 122 windows; a tone leaks 0.085 of itself
        // into the other's bin over 10 ms).
        func amplitude(_ w: Int, _ hz: Double) -> Double {
            var re = 0.0, im = 0.0
            for f in (w * window)..<((w + 1) * window) {
                let x = Double(samples[2 * f]), t = 2 * Double.pi * hz * Double(f) / 48_000
                re += x * cos(t)
                im += x * sin(t)
            }
            return 2 * (re * re + im * im).squareRoot() / Double(window)
        }
        let tone = Double(full) * 2.0.squareRoot()  // a sine's amplitude from its RMS
        let both = (first...last).filter { amplitude($0, 440) > 0.3 * tone && amplitude($0, 660) > 0.3 * tone }.count
        #expect(both > 100 && both < 145, "\(both) windows of 10 ms hold both tracks")
    }
}
