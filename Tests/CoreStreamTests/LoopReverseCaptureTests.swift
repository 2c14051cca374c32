import Foundation
import Testing
import CoreStream
import CoreStreamTestSupport

/// Loop regions and reverse playback through the real engine, checked frame by frame in
/// what the `wav:` output captured against the ffmpeg CLI's decode, cut and
/// concatenated (loops) or reversed.
@Suite("Loops and reverse playback, checked in the capture", .checksSomething, .serialized)
struct LoopReverseCaptureTests {
    typealias Run = Runs.Run

    /// Compares a capture with the expected frames: bit-exact where the format's seeks
    /// are, within codec tolerance (AAC, Opus) otherwise. `skipStart` frames at the
    /// start are a ramp-in from silence and only checked for length.
    func expectCapture(_ capture: WAVFile, _ expected: [Float], _ fixture: Fixture, skipStart: Int = 0,
                       sourceLocation: SourceLocation = #_sourceLocation) {
        let ch = fixture.channels
        #expect(capture.frames == expected.count / ch, "capture has \(capture.frames) frames, expected \(expected.count / ch)",
                sourceLocation: sourceLocation)
        let n = min(capture.samples.count, expected.count)
        guard n > skipStart * ch else { return }
        let got = capture.samples[(skipStart * ch)..<n], want = expected[(skipStart * ch)..<n]
        if fixture.bitExactSeek {
            if !got.elementsEqual(want) {
                let firstBad = zip(got, want).enumerated().first { $0.element.0 != $0.element.1 }!.offset / ch + skipStart
                Issue.record("\(fixture.name): capture differs from the expected frames at frame \(firstBad)",
                             sourceLocation: sourceLocation)
            }
        } else {
            let diff = Reference.maxDifference(got, want)
            #expect(diff < 5e-3, "\(fixture.name): max difference \(diff)", sourceLocation: sourceLocation)
        }
    }

    /// The track's length, from outside the engine: the ffmpeg CLI's decode, except
    /// where the CLI keeps end padding the container says to drop (AAC in M4A: 441,344
    /// frames decoded for a 441,000-frame source); there, the source's frame count that
    /// make-fixtures encoded (same rate).
    func decodedLength(_ fixture: Fixture, _ reference: [Float]) throws -> Int {
        let frames = reference.count / fixture.channels
        guard fixture.format == "aacm4a" else { return frames }
        #expect(fixture.decodedRate == fixture.sampleRate && Int(fixture.sourceFrames) <= frames)
        return Int(fixture.sourceFrames)
    }

    /// Plays `fixture` unpaced after `setUp` (the engine is paused at `from`), to the end.
    func capture(_ fixture: Fixture, from: Int64? = nil, _ setUp: (PlaybackEngine) throws -> Void) throws -> (WAVFile, [PlaybackEngine.Event]) {
        let run = try EngineHarness.playToEnd(fixture.path, from: from, name: fixture.name, setUp)
        #expect(run.ended)
        return (run.capture, run.events)
    }

    /// A 10-frame loop around a packet boundary of every codec, wrapped 200 times, then
    /// a longer loop: …, B−1, A, A+1, … with nothing missing or repeated.
    @Test(arguments: Fixtures.all)
    func tinyLoopIsSeamless(_ fixture: Fixture) throws {
        let reference = try Reference.decode(fixture.path)
        let ch = fixture.channels
        let total = try decodedLength(fixture, reference)
        // 8061…8070 straddles 8064 = 7·1152 (mp3) = 8·1008 and sits inside AAC, Opus,
        // Vorbis and FLAC packets.
        let a = 8061, b = 8071
        let (cap, events) = try capture(fixture, from: 0) { e in
            try e.setLoop(LoopRegion(start: Int64(a), end: Int64(b), count: 200))
        }
        let runs = [Run(0, b)] + Array(repeating: Run(a, b), count: 200) + [Run(b, total)]
        expectCapture(cap, Runs.expected(reference, channels: ch, runs), fixture)
        let wraps = events.compactMap { if case .loopWrapped(let p, _) = $0 { p } else { nil } }
        #expect(wraps.last == 200, "wrap events: \(wraps.suffix(3))")
    }

    @Test(arguments: ["flac-44100-2.flac", "mp3vbr-48000-1.mp3", "opus-44100-2.opus", "vorbis-44100-2.ogg"])
    func longLoopAcrossManyPacketsIsSeamless(_ name: String) throws {
        let fixture = Fixtures.named(name)
        let reference = try Reference.decode(fixture.path)
        let ch = fixture.channels
        let total = try decodedLength(fixture, reference)
        // Longer than the in-memory cache: decoded again on each pass after a seek.
        let a = 20_001, b = 20_001 + 40_000
        let (cap, _) = try capture(fixture, from: 0) { e in
            try e.setLoop(LoopRegion(start: Int64(a), end: Int64(b), count: 2))
        }
        let runs = [Run(0, b), Run(a, b), Run(a, b), Run(b, total)]
        expectCapture(cap, Runs.expected(reference, channels: ch, runs), fixture)
    }

    /// A loop of the whole track is repeat-one: the track twice, joined without a gap.
    @Test(arguments: ["flac-48000-1.flac", "mp3vbr-44100-2.mp3"])
    func wholeTrackLoopIsRepeatOne(_ name: String) throws {
        let fixture = Fixtures.named(name)
        let reference = try Reference.decode(fixture.path)
        let total = try decodedLength(fixture, reference)
        let (cap, _) = try capture(fixture, from: 0) { e in
            try e.setLoop(LoopRegion(start: 0, end: Int64(total), count: 1))
        }
        expectCapture(cap, Runs.expected(reference, channels: fixture.channels, [Run(0, total), Run(0, total)]), fixture)
    }

    /// The whole track backwards, down to frame 0, block by block from disk.
    @Test(arguments: Fixtures.all)
    func reverseFromTheEndToTheStart(_ fixture: Fixture) throws {
        let reference = try Reference.decode(fixture.path)
        let ch = fixture.channels
        let h = EngineHarness(paced: false, name: fixture.name)
        h.engine.setDirection(.reverse)
        try h.engine.play(path: fixture.path)
        #expect(h.waitForEnd(seconds: 60))
        #expect(h.engine.status().positionFrames == 0)
        let cap = try h.finishCapture()
        let total = try decodedLength(fixture, reference)
        // Starting mid-waveform (the last frame) ramps in over 5 ms.
        expectCapture(cap, Runs.expected(reference, channels: ch, [Run(0, total, reverse: true)]), fixture,
                      skipStart: fixture.decodedRate / 200 + 1)
    }

    @Test(arguments: ["flac-44100-2.flac", "mp3cbr-44100-2.mp3", "aac-48000-1.m4a", "alac-44100-2.m4a"])
    func reverseInsideALoopAndAcrossTheStart(_ name: String) throws {
        let fixture = Fixtures.named(name)
        let reference = try Reference.decode(fixture.path)
        let ch = fixture.channels
        // From 30000 backwards into [0, 9000), wrapping at frame 0 twice, then on down
        // to 0 and the end.
        let (cap, _) = try capture(fixture, from: 30_000) { e in
            e.setDirection(.reverse)
            try e.setLoop(LoopRegion(start: 0, end: 9000, count: 2))
        }
        let runs = [Run(0, 30_000, reverse: true), Run(0, 9000, reverse: true), Run(0, 9000, reverse: true)]
        expectCapture(cap, Runs.expected(reference, channels: ch, runs), fixture, skipStart: fixture.decodedRate / 200 + 1)
    }

    @Test func pingPongTurnsWithoutRepeatingTheEndFrames() throws {
        let fixture = Fixtures.named("wav16-44100-2.wav")
        let reference = try Reference.decode(fixture.path)
        let (a, b) = (10_000, 13_000)
        let (cap, _) = try capture(fixture, from: Int64(a)) { e in
            try e.setLoop(LoopRegion(start: Int64(a), end: Int64(b), count: 3, pingPong: true))
        }
        // a…b−1, b−2↓a, a+1…b−1, b−2↓a, then (count spent) on down to 0.
        let runs = [Run(a, b), Run(a, b - 1, reverse: true), Run(a + 1, b), Run(0, b - 1, reverse: true)]
        expectCapture(cap, Runs.expected(reference, channels: 2, runs), fixture, skipStart: 221 + 1)
    }

    @Test(.tags(.threadSanitizer)) func seekWhileReversing() throws {
        let fixture = Fixtures.named("mp3cbr-44100-2.mp3")
        let reference = try Reference.decode(fixture.path)
        let (cap, _) = try capture(fixture) { e in
            e.setDirection(.reverse)
            try e.seek(to: 50_000)
        }
        expectCapture(cap, Runs.expected(reference, channels: 2, [Run(0, 50_000, reverse: true)]), fixture, skipStart: 221 + 1)
    }

    @Test func errorsKeepTheCurrentRegion() throws {
        let fixture = Fixtures.named("flac-44100-2.flac")
        let h = EngineHarness(paced: true)
        try h.engine.play(path: fixture.path, paused: true)
        let region = LoopRegion(start: 1000, end: 2000, count: 3)
        try h.engine.setLoop(region)
        for bad in [LoopRegion(start: 2000, end: 1000), LoopRegion(start: 5, end: 5),
                    LoopRegion(start: -3, end: 100), LoopRegion(start: 0, end: 10_000_000),
                    LoopRegion(start: 0, end: 10, count: -1)] {
            #expect(throws: StreamError.self) { try h.engine.setLoop(bad) }
            #expect(h.engine.status().loop == region)
        }
        h.engine.stop()
        #expect(throws: StreamError.self) { try h.engine.setLoop(region) }
        _ = try h.finishCapture()
    }

    // MARK: - While playing (paced)

    /// Forward, reverse mid-play, forward again: the turns continue from the frame being
    /// heard, with no gap (every frame of the capture is a source frame: no silence, no
    /// ramp) and no frame repeated at a turn.
    @Test(.tags(.threadSanitizer), arguments: ["flac-44100-2.flac", "mp3cbr-44100-2.mp3"])
    func directionChangesMidPlayAreSeamless(_ name: String) throws {
        let fixture = Fixtures.named(name)
        let reference = try Reference.decode(fixture.path)
        let total = reference.count / 2
        let h = EngineHarness(paced: true)
        try h.engine.play(path: fixture.path)
        usleep(1_200_000)  // hold: 1.2 s forward before the reverse
        h.engine.setDirection(.reverse)
        #expect(h.wait(seconds: 2) { h.engine.status().direction == .reverse })
        usleep(500_000)  // hold: 0.5 s in reverse
        h.engine.setDirection(.forward)
        #expect(h.waitForEnd(seconds: 10))
        #expect(h.engine.status().underruns == 0)
        let cap = try h.finishCapture()
        let runs = Runs.decompose(cap.samples, reference: reference, channels: 2)
        try #require(runs.count == 3, "runs: \(runs)")
        let (fwd, rev, tail) = (runs[0], runs[1], runs[2])
        #expect(fwd.start == 0 && !fwd.reverse)
        #expect(rev.reverse && rev.end == fwd.end - 1, "reverse starts one below the turn: \(runs)")
        #expect(!tail.reverse && tail.start == rev.start + 1 && tail.end == total, "forward resumes one above: \(runs)")
        #expect(rev.count > 10_000, "reverse played \(rev.count) frames")
    }

    /// Pause and resume while reversing: one 5 ms ramp out and one in at the pause
    /// point, nothing lost, nothing repeated.
    @Test func pauseWhileReversingLosesNothing() throws {
        let fixture = Fixtures.named("flac-44100-2.flac")
        let reference = try Reference.decode(fixture.path)
        let start = 110_000
        let h = EngineHarness(paced: true)
        h.engine.setDirection(.reverse)
        try h.engine.play(path: fixture.path, from: Int64(start))
        usleep(700_000)  // hold: 0.7 s in reverse before the pause
        h.engine.pause()
        #expect(h.wait(seconds: 2) { h.engine.status().state == .paused })
        usleep(300_000)  // hold: the pause's length
        let pausedAt = h.engine.status().positionFrames
        h.engine.resume()
        #expect(h.waitForEnd(seconds: 10))
        #expect(h.engine.status().underruns == 0)
        let cap = try h.finishCapture()
        let expected = Runs.expected(reference, channels: 2, [Run(0, start, reverse: true)])
        #expect(cap.frames == start, "every frame once: \(cap.frames) vs \(start)")
        let ramp = 221
        // Differences only in the first ramp-in and around the pause point.
        var bad: [Int] = []
        for f in (ramp + 1)..<min(cap.frames, start) where cap.samples[2 * f] != expected[2 * f] || cap.samples[2 * f + 1] != expected[2 * f + 1] {
            bad.append(f)
        }
        let p = try #require(bad.first, "the pause left no ramp")
        #expect(bad.last! - p <= 2 * ramp + 2, "differences from \(p) to \(bad.last!)")
        #expect(abs(Int64(start - p) - pausedAt) <= Int64(ramp) + 2, "paused at source frame \(pausedAt), ramp at capture frame \(p)")
    }

    /// Set a region, let it wrap, move it while playing, then clear it: each change takes
    /// effect at the next pass, nothing dropped, and every pass is whole.
    @Test(.tags(.threadSanitizer)) func loopChangedWhilePlaying() throws {
        let fixture = Fixtures.named("flac-44100-2.flac")
        let reference = try Reference.decode(fixture.path)
        let total = reference.count / 2
        // About 0.5–0.9 s and 1.5–1.8 s; not at round times, where tone and chirp both
        // cross zero and a frame would match two places.
        let (a1, b1) = (22_123, 39_717)
        let (a2, b2) = (66_177, 79_411)
        let h = EngineHarness(paced: true)
        try h.engine.play(path: fixture.path)
        try h.engine.setLoop(LoopRegion(start: Int64(a1), end: Int64(b1)))
        #expect(h.wait(seconds: 4) { h.engine.status().loopPasses >= 3 })
        try h.engine.setLoop(LoopRegion(start: Int64(a2), end: Int64(b2)))
        #expect(h.wait(seconds: 4) { h.engine.status().loopPasses >= 2 })
        let s = h.engine.status()
        #expect(s.loop?.start == Int64(a2) && s.positionFrames >= Int64(a2) && s.positionFrames < Int64(b2))
        try h.engine.setLoop(nil)
        #expect(h.waitForEnd(seconds: 10))
        #expect(h.engine.status().underruns == 0)
        let cap = try h.finishCapture()
        let runs = Runs.decompose(cap.samples, reference: reference, channels: 2)
        // [0, b1), [a1, b1) × k1, [a2, b2) × k2, then [a2, total) (the last pass goes on).
        try #require(runs.count >= 5, "runs: \(runs)")
        #expect(runs.first == Run(0, b1))
        #expect(runs.last == Run(a2, total))
        let middle = runs.dropFirst().dropLast()
        let firstLoop = middle.prefix { $0 == Run(a1, b1) }
        let secondLoop = middle.dropFirst(firstLoop.count)
        #expect(firstLoop.count >= 3)
        #expect(!secondLoop.isEmpty && secondLoop.allSatisfy { $0 == Run(a2, b2) }, "runs: \(runs)")
    }

    /// A region the play head is already past: it jumps to the region's start.
    @Test func settingARegionBehindThePlayheadJumpsToIt() throws {
        let fixture = Fixtures.named("wavf32-44100-2.wav")
        let reference = try Reference.decode(fixture.path)
        // A 2 s device buffer: after the splice the reader refills the ring while the
        // device plays what it holds. With 200 ms, a CI run whose reader was held off
        // the CPU for about 0.6 s (three test lanes at once) padded 26,465 frames of
        // silence (an underrun), and the capture no longer read as three runs.
        let h = EngineHarness(paced: true, bufferMillis: 2000)
        try h.engine.play(path: fixture.path)
        #expect(h.wait(seconds: 5) { h.engine.status().positionFrames > 60_000 })
        try h.engine.setLoop(LoopRegion(start: 4413, end: 8827, count: 1))
        #expect(h.waitForEnd(seconds: 12))
        let underruns = h.engine.status().underruns
        let cap = try h.finishCapture()
        let runs = Runs.decompose(cap.samples, reference: reference, channels: 2)
        try #require(runs.count == 3, "runs: \(runs.prefix(8)) (\(runs.count) in all; underruns: \(underruns))")
        #expect(runs[0].start == 0 && runs[0].end > 60_000)
        #expect(runs[1] == Run(4413, 8827))
        #expect(runs[2] == Run(4413, reference.count / 2))
    }
}
