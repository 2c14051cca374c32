import Foundation
import Testing
import CoreStream
import CoreStreamTestSupport

/// Pause, resume, seek and stop while playing, checked frame by frame in what the
/// paced `wav:` output captured, against the ffmpeg CLI's decode.
@Suite("Transport while playing, checked in the capture", .checksSomething, .serialized, .tags(.threadSanitizer))
struct TransportCaptureTests {
    let fixture = Fixtures.named("flac-44100-2.flac")

    func firstMismatch(_ capture: [Float], _ reference: [Float], channels: Int, from: Int = 0) -> Int? {
        Reference.firstMismatch(capture, reference, channels: channels, from: from)
    }

    /// The capture is the reference up to `cut`, then the source from `target` to the
    /// end (after a 5 ms ramp-in), frame for frame. Returns `cut`.
    @discardableResult
    func expectCutThenTail(_ capture: WAVFile, _ reference: [Float], from target: Int) throws -> Int {
        let ch = fixture.channels
        let total = reference.count / ch
        let cut = try #require(firstMismatch(capture.samples, reference, channels: ch))
        #expect(capture.frames == cut + (total - target))
        let ramp = fixture.sampleRate / 200
        guard capture.frames > cut + ramp + 1 else { return cut }
        let after = capture.samples[((cut + ramp + 1) * ch)...]
        let expected = reference[((target + ramp + 1) * ch)...]
        #expect(after.count == expected.count)
        #expect(after.elementsEqual(expected), "capture after the cut differs from the source from \(target)")
        return cut
    }

    @Test func pauseAndResumeLoseAndRepeatNothing() throws {
        let h = EngineHarness(paced: true)
        try h.engine.play(path: fixture.path)
        usleep(600_000)  // hold: 0.6 s played before the pause
        h.engine.pause()
        #expect(h.wait(seconds: 2) { h.engine.status().state == .paused })
        usleep(100_000)  // hold: 100 ms into the pause before its position is read
        let pausedAt = h.engine.status().positionFrames
        usleep(300_000)  // hold: the pause held 300 ms (the position must not move)
        #expect(h.engine.status().positionFrames == pausedAt, "position moves while paused")
        h.engine.resume()
        #expect(h.waitForEnd())
        let capture = try h.finishCapture()
        let reference = try Reference.decode(fixture.path)
        let ch = fixture.channels
        // Nothing lost, nothing repeated: the capture has exactly the track's frames.
        #expect(capture.frames == reference.count / ch)
        // It equals the reference except one ramp-out (5 ms) followed by one ramp-in.
        let ramp = fixture.sampleRate / 200
        let p = try #require(firstMismatch(capture.samples, reference, channels: ch))
        #expect(abs(Int64(p) - pausedAt) <= Int64(ramp) + 2, "pause point \(p) vs reported position \(pausedAt)")
        let resumeEnd = p + 2 * ramp + 2
        #expect(firstMismatch(capture.samples, reference, channels: ch, from: resumeEnd) == nil,
                "capture differs from the reference after the resume ramp")
        // Inside the ramps the signal is attenuated, never louder, never sign-flipped.
        for i in (p * ch)..<(resumeEnd * ch) {
            #expect(abs(capture.samples[i]) <= abs(reference[i]) + 1e-7)
            #expect(capture.samples[i] * reference[i] >= 0)
        }
        #expect(h.engine.status().underruns == 0)
    }

    @Test func seekWhilePlayingLandsOnTheExactFrame() throws {
        let h = EngineHarness(paced: true)
        try h.engine.play(path: fixture.path)
        usleep(500_000)  // hold: 0.5 s played before the seek
        let target: Int64 = 100_003
        try h.engine.seek(to: target)
        #expect(h.wait(seconds: 2) { h.engine.status().positionFrames >= target })
        #expect(h.waitForEnd())
        let capture = try h.finishCapture()
        try expectCutThenTail(capture, try Reference.decode(fixture.path), from: Int(target))
    }

    /// Shutting the engine down mid-track (what SIGTERM and Ctrl-C do) fades out: the
    /// capture is the source up to the cut, then exactly one 5 ms ramp of the next
    /// frames, attenuated and never sign-flipped, then nothing. Before, the render thread
    /// dropped the device's queue on its way out: 3 of 4 shutdowns here kept none of the
    /// ramp (a cut at full level).
    @Test(arguments: [400_000, 537_000, 674_000, 811_000])
    func shutdownFadesOutWhole(afterMicroseconds: Int) throws {
        let h = EngineHarness(paced: true, name: "shutdown-\(afterMicroseconds)")
        try h.engine.play(path: fixture.path)
        #expect(h.wait(seconds: 10) { h.engine.status().positionFrames > Int64(afterMicroseconds) * 44_100 / 1_000_000 })
        let capture = try h.finishCapture()
        let reference = try Reference.decode(fixture.path)
        let ramp = fixture.sampleRate / 200
        let cut = try #require(firstMismatch(capture.samples, reference, channels: 2), "no fade: the source cut short")
        #expect(capture.frames == cut + ramp, "\(capture.frames - cut) frames after the cut; the ramp is \(ramp)")
        for i in (cut * 2)..<min(capture.samples.count, (cut + ramp) * 2) {
            #expect(abs(capture.samples[i]) <= abs(reference[i]) + 1e-7 && capture.samples[i] * reference[i] >= 0)
        }
    }

    @Test func stopRampsOutWholeAndAllowsReplay() throws {
        let h = EngineHarness(paced: true)
        try h.engine.play(path: fixture.path)
        usleep(400_000)  // hold: 0.4 s played before the stop
        h.engine.stop()
        #expect(h.engine.status().state == .stopped)
        #expect(h.engine.status().track == nil)
        usleep(300_000)  // hold: 0.3 s stopped before the replay
        try h.engine.play(path: fixture.path, from: 120_000)
        #expect(h.waitForEnd())
        let capture = try h.finishCapture()
        let reference = try Reference.decode(fixture.path)
        let ch = fixture.channels
        let total = reference.count / ch
        let ramp = fixture.sampleRate / 200
        // Part of the first play, then the stop's whole 5 ms ramp-out (never cut short,
        // whichever thread runs first), then exactly the tail from 120000 after its ramp-in.
        let cut = try #require(firstMismatch(capture.samples, reference, channels: ch))
        #expect(cut > 0 && cut < 44_100)
        try #require(capture.frames == cut + ramp + (total - 120_000))
        for i in (cut * ch)..<((cut + ramp) * ch) {
            #expect(abs(capture.samples[i]) <= abs(reference[i]) + 1e-7)
            #expect(capture.samples[i] * reference[i] >= 0)
        }
        let tail = Array(capture.samples[((cut + ramp) * ch)...])
        #expect(firstMismatch(tail, Array(reference[(120_000 * ch)...]), channels: ch, from: ramp + 1) == nil,
                "the replay differs from the source after its ramp-in")
    }

    @Test func aBadFileKeepsTheCurrentTrackPlaying() throws {
        let h = EngineHarness(paced: true)
        try h.engine.play(path: fixture.path)
        usleep(200_000)  // hold: 0.2 s played before the bad file
        #expect(throws: StreamError.self) { try h.engine.play(path: "/nonexistent/x.flac") }
        #expect(throws: StreamError.self) { try h.engine.seek(to: -5) }
        #expect(h.engine.status().state == .playing)
        #expect(h.engine.status().track?.path == fixture.path)
        #expect(h.waitForEnd())
        let capture = try h.finishCapture()
        let reference = try Reference.decode(fixture.path)
        #expect(capture.samples.count == reference.count)
        #expect(capture.samples.elementsEqual(reference), "capture differs from the reference")
    }

    /// The position reported is the frame being heard, not decoded: with a 400 ms
    /// device buffer the decoded position runs 17,640 frames ahead; the reported one
    /// matches what the device has played, which is what the `wav:` capture holds at
    /// that moment (it is written as frames are played, a period at a time).
    @Test func positionIsTheFrameBeingHeard() throws {
        let h = EngineHarness(paced: true, bufferMillis: 400, periodMillis: 100)
        try h.engine.play(path: fixture.path)
        #expect(h.wait(seconds: 10) { h.engine.status().positionFrames > 44_100 })
        let before = h.engine.status().positionFrames
        let played = try Self.framesWritten(h.capturePath)
        let after = h.engine.status().positionFrames
        let period = 4_410
        #expect(played >= Int(before) - 2 * period && played <= Int(after) + period,
                "reported \(before)…\(after), the device had played \(played) (the buffer is 17,640)")
        h.engine.stop()
        _ = try h.finishCapture()
    }

    /// Frames in a float stereo WAV that is still being written (its header's sizes
    /// are not final yet): the bytes after the `data` chunk's header.
    static func framesWritten(_ path: String) throws -> Int {
        let bytes = try Data(contentsOf: URL(fileURLWithPath: path))
        let header = bytes.prefix(256)
        let tag = try #require(header.firstRange(of: Data("data".utf8)), "no data chunk yet")
        return (bytes.count - (tag.upperBound + 4)) / 8
    }

    /// A start's time in parts (status: the decode, the device's reset; issue 25), once
    /// its first frame is written.
    func startParts(_ h: EngineHarness) -> (total: UInt64, decode: UInt64, reset: UInt64)? {
        var parts: (UInt64, UInt64, UInt64)?
        h.wait(seconds: 10) {
            let s = h.engine.status()
            guard let t = s.lastStartLatencyNanoseconds, let d = s.lastStartDecodeNanoseconds,
                  let r = s.lastStartDeviceResetNanoseconds else { return false }
            parts = (t, d, r)
            return true
        }
        return parts
    }

    /// A seek while playing drops what the device holds and prepares it (a new
    /// PulseAudio stream through ALSA's pulse plugin); a play after a stop finds it
    /// dropped already and does not reset it a second time. The decode is part of the
    /// whole, before the first frame is written.
    @Test func aPlayAfterAStopDoesNotResetTheDeviceAgain() throws {
        let h = EngineHarness(paced: true)
        try h.engine.play(path: fixture.path)
        let first = try #require(startParts(h))
        #expect(first.decode <= first.total)
        try h.engine.seek(to: Int64(fixture.sampleRate))
        let seek = try #require(startParts(h))
        #expect(seek.reset > 0, "a seek while playing drops what the device holds")
        #expect(seek.decode <= seek.total)
        h.engine.stop()
        #expect(h.wait(seconds: 2) { h.engine.status().state == .stopped })
        try h.engine.play(path: fixture.path)
        let again = try #require(startParts(h))
        #expect(again.reset == 0, "the stop dropped what the device held: reset again for \(again.reset) ns")
        #expect(again.decode <= again.total)
        _ = try h.finishCapture()
    }
}
