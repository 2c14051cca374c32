import Foundation
import Logging
import Testing
@testable import CoreStream
import CoreStreamTestSupport

/// The second voice, captured: what the render thread wrote against a model computed
/// from the ffmpeg CLI's decodes of the music and the clip (music × envelope + clip ×
/// gain, with the envelope of Voice.swift's table), within float rounding.
///
/// The music is 44.1 kHz stereo float (so the device is float and the capture holds the
/// mix unrounded); the clip a 16 kHz mono MP3, as a text-to-speech service sends, which
/// playd converts to the device format (the reference: the CLI's resample and mono to
/// both channels at full level, as playd upmixes).
@Suite("Announcements over the music, captured", .checksSomething, .serialized)
struct AnnouncementCaptureTests {
    static let rate = 44100

    static func directory(_ name: String = #function) throws -> String {
        try freshTestDirectory("playd-announce", name)
    }

    static func started(_ events: [PlaybackEngine.Event]) -> Int64?? {
        for case .announcementStarted(_, _, let frame) in events { return .some(frame) }
        return nil
    }

    static func ended(_ events: [PlaybackEngine.Event]) -> (cancelled: Bool, error: StreamError?)? {
        for case .announcementEnded(_, _, let cancelled, let error) in events { return (cancelled, error) }
        return nil
    }

    /// Duck mode: the music goes on under the clip, ramped down 150 ms before it and up
    /// 500 ms after it; the capture matches the model to 1e-6 from the first frame to
    /// the last, and holds every music frame once (nothing skipped, nothing repeated).
    @Test(.tags(.threadSanitizer)) func duckedMusicAndClipMatchTheModel() throws {
        let dir = try Self.directory()
        let (musicPath, clipPath) = (try AnnouncementModel.music(in: dir), try AnnouncementModel.ttsClip(in: dir))
        let h = EngineHarness(paced: true, name: "duck")
        try h.engine.play(path: musicPath)
        #expect(h.wait(seconds: 10) { h.engine.status().positionFrames > 20_000 })
        var mix = PlaybackEngine.Announcement()
        mix.duckDB = -18
        mix.gainDB = -3
        try h.engine.announce([.init(path: clipPath)], label: "clip", options: mix)
        #expect(h.wait(seconds: 20) { Self.ended(h.recordedEvents) != nil })
        #expect(h.waitForEnd(seconds: 20))
        let events = h.recordedEvents
        let capture = try h.finishCapture()
        #expect(h.engine.status().underruns == 0)
        #expect(h.engine.voiceUnderruns == 0)
        let end = try #require(Self.ended(events))
        #expect(end.cancelled == false && end.error == nil)
        let reported = try #require(Self.started(events), "the start is reported")
        let start = try #require(reported, "the music was playing: the start frame is reported")

        let music = try Reference.decode(musicPath)
        let clip = try AnnouncementModel.clip(clipPath, rate: Self.rate)
        #expect(capture.samples.count == music.count, "every music frame once: \(capture.samples.count / 2) frames, the music has \(music.count / 2)")
        #expect(Int(start) + Self.rate * 650 / 1000 + clip.count / 2 < music.count / 2, "the model needs the music to outlast the announcement")
        let d = AnnouncementModel.duckDifference(capture: capture.samples, music: music, clip: clip, start: Int(start),
                                                 duckDB: -18, gainDB: -3, rate: Self.rate)
        #expect(d.worst <= 1e-6, "largest difference \(d.worst) at frame \(d.frame) (the announcement began at \(start))")
    }

    /// While paused the clip plays alone, at once; resumed, the music goes on from the
    /// frame it paused at: the capture is the music up to the pause (its 5 ms ramp out),
    /// the clip exactly, silence, then the music from that same frame.
    @Test func whilePausedTheClipPlaysAloneAndTheMusicResumesWhereItWas() throws {
        let dir = try Self.directory()
        let (musicPath, clipPath) = (try AnnouncementModel.music(in: dir), try AnnouncementModel.ttsClip(in: dir))
        let h = EngineHarness(paced: true, name: "paused")
        try h.engine.play(path: musicPath)
        #expect(h.wait(seconds: 10) { h.engine.status().positionFrames > 20_000 })
        h.engine.pause()
        #expect(h.wait(seconds: 10) { h.engine.status().state == .paused })
        var mix = PlaybackEngine.Announcement()
        mix.gainDB = 0
        try h.engine.announce([.init(path: clipPath)], label: "clip", options: mix)
        #expect(h.wait(seconds: 20) { Self.ended(h.recordedEvents) != nil })
        #expect(h.engine.status().state == .paused, "the state is as it was")
        h.engine.resume()
        #expect(h.waitForEnd(seconds: 20))
        let events = h.recordedEvents
        let capture = try h.finishCapture().samples
        let start = try #require(Self.started(events))
        #expect(start == nil, "no music was playing at the start")
        #expect(h.engine.status().underruns == 0)

        let music = try Reference.decode(musicPath)
        let clip = try AnnouncementModel.clip(clipPath, rate: Self.rate)
        let check = AnnouncementModel.clipBetweenMusic(capture: capture, music: music, clip: clip, rate: Self.rate)
        #expect(check.failures.isEmpty, "\(check.failures)")
    }

    /// Under a loop and in reverse the music is ducked as it plays (its frames in the
    /// order the loop or the reverse gives them), the clip forward. The music's order
    /// comes from the CLI's decode; where the announcement began is the first frame
    /// that differs from it (frame 1 of the ramp down; frame 0 is at full level).
    @Test(arguments: ["loop", "reverse"])
    func loopsAndReverseAreDuckedTheClipPlaysForward(_ mode: String) throws {
        let dir = try Self.directory(mode)
        let (musicPath, clipPath) = (try AnnouncementModel.music(in: dir), try AnnouncementModel.ttsClip(in: dir))
        let h = EngineHarness(paced: true, name: mode)
        let decoded = try Reference.decode(musicPath)
        let n = decoded.count / 2
        func frames(_ r: Range<Int>) -> [Float] { Array(decoded[(r.lowerBound * 2)..<(r.upperBound * 2)]) }
        let expectedMusic: [Float]
        if mode == "reverse" {
            h.engine.setDirection(.reverse)
            try h.engine.play(path: musicPath)
            var r: [Float] = []
            r.reserveCapacity(decoded.count)
            for f in stride(from: n - 1, through: 0, by: -1) { r.append(decoded[f * 2]); r.append(decoded[f * 2 + 1]) }
            expectedMusic = r
        } else {
            // 0 … 3 s, then 1 s … 3 s twice more, then on to the end.
            try h.engine.play(path: musicPath, paused: true)
            try h.engine.setLoop(LoopRegion(start: 44_100, end: 132_300, count: 2))
            h.engine.waitUntilApplied()
            h.engine.resume()
            expectedMusic = frames(0..<132_300) + frames(44_100..<132_300) + frames(44_100..<132_300) + frames(132_300..<n)
        }
        #expect(h.wait(seconds: 10) { h.engine.status().state == .playing && abs(h.engine.status().positionFrames - (mode == "reverse" ? Int64(n) : 0)) > 60_000 })
        var mix = PlaybackEngine.Announcement()
        mix.duckDB = -18
        try h.engine.announce([.init(path: clipPath)], label: "clip", options: mix)
        #expect(h.wait(seconds: 20) { Self.ended(h.recordedEvents) != nil })
        #expect(h.waitForEnd(seconds: 30))
        let capture = try h.finishCapture().samples
        #expect(capture.count == expectedMusic.count, "every music frame once, in the loop's or the reverse's order")
        // Reverse starts from the end, mid-stream: with the 5 ms ramp in, as a resume does.
        let rampIn = mode == "reverse" ? 2 * max(16, Self.rate / 200) : 0
        let firstDifference = try #require((rampIn..<min(capture.count, expectedMusic.count)).first { abs(capture[$0] - expectedMusic[$0]) > 1e-6 })
        let start = firstDifference / 2 - 1
        if mode == "reverse", let reported = Self.started(h.recordedEvents), let frame = reported {
            #expect(Int(frame) == n - 1 - start, "the reported music frame \(frame) is the one at capture frame \(start)")
        }
        let d = AnnouncementModel.duckDifference(capture: Array(capture[rampIn...]), music: Array(expectedMusic[rampIn...]),
                                                 clip: try AnnouncementModel.clip(clipPath, rate: Self.rate),
                                                 start: start - rampIn / 2, duckDB: -18, gainDB: 0, rate: Self.rate)
        #expect(d.worst <= 1e-6, "largest difference \(d.worst) at frame \(d.frame) (began at \(start))")
    }

    /// A Snapcast feed carries what the local output plays, the announcement with it:
    /// a 32-bit feed at the music's rate holds the capture's samples, converted (the
    /// duck and the clip are in the capture: the other tests check it against the model).
    @Test func feedsCarryTheAnnouncementToo() throws {
        let dir = try Self.directory()
        let (musicPath, clipPath) = (try AnnouncementModel.music(in: dir), try AnnouncementModel.ttsClip(in: dir))
        let fifo = dir + "/snapfifo"
        let reader = try FIFOReader(path: fifo)
        reader.start()
        let h = try EngineHarness(paced: true, feeds: ["fifo:\(fifo)?format=44100:32:2"], name: "feed")
        try h.engine.play(path: musicPath)
        #expect(h.wait(seconds: 10) { h.engine.status().positionFrames > 20_000 })
        try h.engine.announce([.init(path: clipPath)], label: "clip", options: PlaybackEngine.Announcement())
        #expect(h.wait(seconds: 20) { Self.ended(h.recordedEvents) != nil })
        #expect(h.waitForEnd(seconds: 20))
        let written = h.engine.outputs().first { $0.kind == "fifo" }?.framesWritten ?? 0
        #expect(h.wait(seconds: 10) { reader.byteCount >= written * 8 })
        let capture = try h.finishCapture().samples
        reader.close()
        #expect(capture != (try Reference.decode(musicPath)), "the announcement is in what was played")
        var expected = [Int32](repeating: 0, count: capture.count)
        capture.withUnsafeBufferPointer { src in expected.withUnsafeMutableBufferPointer { SampleConversion.toInt32(src.baseAddress!, $0.baseAddress!, count: capture.count) } }
        let got = reader.bytes.withUnsafeBytes { Array($0.bindMemory(to: Int32.self)) }
        let lead = 44100 * FeedOutput.leadMillis / 1000 * 2
        #expect(got.count == lead + expected.count, "the feed has \((got.count - lead) / 2) frames after its lead-in, the output \(expected.count / 2)")
        let fed = Array(got.dropFirst(lead))
        // Within one step of 2⁻³¹: the feed converts with swresample, which rounds, the
        // reference here truncates.
        let worst = zip(fed, expected).map { abs(Int64($0) - Int64($1)) }.max() ?? 0
        #expect(worst <= 1, "the feed is what the output played: largest difference \(worst) steps of 2⁻³¹")
    }

    /// A seek during the clip drops what the device held (of the music and the clip):
    /// the voice steps back by as much, and the clip is heard whole and exact. The music
    /// is digital silence here, so what the capture holds is the clip alone.
    @Test(.tags(.threadSanitizer)) func aSeekDuringTheClipLosesNoneOfIt() throws {
        let dir = try Self.directory()
        let silence = dir + "/silence.wav"
        try Shell.ffmpeg(["-f", "lavfi", "-i", "anullsrc=r=44100:cl=stereo", "-t", "6", "-c:a", "pcm_f32le", silence])
        let clipPath = try AnnouncementModel.ttsClip(in: dir)
        let h = EngineHarness(paced: true, name: "seek")
        try h.engine.play(path: silence)
        #expect(h.wait(seconds: 10) { h.engine.status().positionFrames > 10_000 })
        try h.engine.announce([.init(path: clipPath)], label: "clip", options: PlaybackEngine.Announcement())
        #expect(h.wait(seconds: 10) { Self.started(h.recordedEvents) != nil })
        let reported = try #require(Self.started(h.recordedEvents))
        let start = try #require(reported, "over the music: its frame")
        // Half a second into the clip as heard (after the 150 ms ramp down): the device
        // holds the next ~200 ms of it when the seek drops its queue.
        #expect(h.wait(seconds: 10) { h.engine.status().positionFrames > start + 6615 + 22_050 })
        #expect(Self.ended(h.recordedEvents) == nil)
        try h.engine.seek(to: 88_200)
        #expect(h.wait(seconds: 20) { Self.ended(h.recordedEvents) != nil })
        #expect(Self.ended(h.recordedEvents)?.cancelled == false)
        #expect(h.waitForEnd(seconds: 20))
        let capture = try h.finishCapture().samples
        let found = AnnouncementModel.clipAlone(capture: capture, clip: try AnnouncementModel.clip(clipPath, rate: Self.rate))
        #expect(found.frame != nil && found.problem == nil, "\(found.problem ?? "")")
    }

    /// The music ends under the clip: the clip plays out (with the music's ramp up, over
    /// silence), and only then is the track's end reported.
    @Test func aTrackThatEndsUnderTheClipEndsAfterIt() throws {
        let dir = try Self.directory()
        let musicPath = try AnnouncementModel.music(in: dir, seconds: 1)
        let clipPath = try AnnouncementModel.ttsClip(in: dir)
        let h = EngineHarness(paced: true, name: "ends")
        try h.engine.play(path: musicPath)
        #expect(h.wait(seconds: 10) { h.engine.status().positionFrames > 10_000 })
        try h.engine.announce([.init(path: clipPath)], label: "clip", options: PlaybackEngine.Announcement())
        #expect(h.wait(seconds: 20) { Self.ended(h.recordedEvents) != nil })
        #expect(h.waitForEnd(seconds: 20))
        let events = h.recordedEvents
        let capture = try h.finishCapture().samples
        let announced = try #require(events.firstIndex { if case .announcementEnded = $0 { return true }; return false })
        let trackEnd = try #require(events.firstIndex { if case .trackEnded = $0 { return true }; return false })
        #expect(announced < trackEnd, "the track's end is reported after the announcement's")
        let reported = try #require(Self.started(events))
        let start = try #require(reported, "over the music: its frame")
        let music = try Reference.decode(musicPath)
        let clip = try AnnouncementModel.clip(clipPath, rate: Self.rate)
        #expect(capture.count >= (Int(start) + Self.rate * 150 / 1000) * 2 + clip.count, "the clip was heard to its end")
        // The music, then silence, under the envelope; the clip over both.
        let padded = music + [Float](repeating: 0, count: max(0, capture.count - music.count))
        let d = AnnouncementModel.duckDifference(capture: capture, music: padded, clip: clip, start: Int(start),
                                                 duckDB: -18, gainDB: 0, rate: Self.rate)
        #expect(d.worst <= 1e-6, "largest difference \(d.worst) at frame \(d.frame) (began at \(start))")
    }

    /// A track in another format reopens the output: the announcement ends (cancelled)
    /// and the new track plays.
    @Test func anOutputReopenEndsTheAnnouncement() throws {
        let dir = try Self.directory()
        let (musicPath, clipPath) = (try AnnouncementModel.music(in: dir), try AnnouncementModel.ttsClip(in: dir))
        let other = dir + "/other48k.flac"
        try Shell.ffmpeg(["-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000:duration=2", "-ac", "2", "-c:a", "flac", other])
        let h = EngineHarness(paced: true, name: "reopen")
        try h.engine.play(path: musicPath)
        #expect(h.wait(seconds: 10) { h.engine.status().positionFrames > 10_000 })
        try h.engine.announce([.init(path: clipPath)], label: "clip", options: PlaybackEngine.Announcement())
        #expect(h.wait(seconds: 10) { Self.started(h.recordedEvents) != nil })
        try h.engine.play(path: other)
        #expect(h.wait(seconds: 10) { Self.ended(h.recordedEvents) != nil })
        #expect(Self.ended(h.recordedEvents)?.cancelled == true)
        #expect(h.engine.status().output?.pcm.sampleRate == 48000)
        #expect(h.waitForEnd(seconds: 20))
        // The next one plays in the new format.
        try h.engine.play(path: other)
        try h.engine.announce([.init(path: clipPath)], label: "again", options: PlaybackEngine.Announcement())
        func ends() -> [Bool] { h.recordedEvents.compactMap { if case .announcementEnded(_, _, let c, _) = $0 { return c }; return nil } }
        #expect(h.wait(seconds: 20) { ends().count == 2 })
        #expect(ends() == [true, false], "\(ends())")
        _ = try h.finishCapture()
    }

    /// A clip longer than `maxSeconds` (a live stream given as one) is cut there.
    @Test func aClipIsCutAtItsLimit() throws {
        let dir = try Self.directory()
        let (musicPath, clipPath) = (try AnnouncementModel.music(in: dir), try AnnouncementModel.ttsClip(in: dir))
        let h = EngineHarness(paced: true, name: "cut")
        try h.engine.play(path: musicPath, paused: true)
        h.engine.waitUntilApplied()
        var mix = PlaybackEngine.Announcement()
        mix.maxSeconds = 1
        try h.engine.announce([.init(path: clipPath)], label: "clip", options: mix)
        #expect(h.wait(seconds: 20) { Self.ended(h.recordedEvents) != nil })
        #expect(Self.ended(h.recordedEvents)?.cancelled == false)
        h.engine.resume()
        #expect(h.waitForEnd(seconds: 20))
        let capture = try h.finishCapture().samples
        let clip = try AnnouncementModel.clip(clipPath, rate: Self.rate)
        let found = AnnouncementModel.clipAlone(capture: capture, clip: Array(clip.prefix(Self.rate * 2)))
        let at = try #require(found.frame, "\(found.problem ?? "")")
        #expect(found.problem == nil, "\(found.problem ?? "")")
        // Then silence where the rest of the clip would have been.
        #expect(capture[((at + Self.rate) * 2)..<((at + Self.rate + 100) * 2)].allSatisfy { $0 == 0 }, "the clip went on past its limit")
    }

    /// A cancel fades the clip out over 20 ms and ramps the music back up; the music is
    /// never interrupted.
    @Test(.tags(.threadSanitizer)) func aCancelRampsBackToTheMusic() throws {
        let dir = try Self.directory()
        let (musicPath, clipPath) = (try AnnouncementModel.music(in: dir), try AnnouncementModel.ttsClip(in: dir))
        let h = EngineHarness(paced: true, name: "cancel")
        try h.engine.play(path: musicPath)
        #expect(h.wait(seconds: 10) { h.engine.status().positionFrames > 20_000 })
        try h.engine.announce([.init(path: clipPath)], label: "clip", options: PlaybackEngine.Announcement())
        #expect(h.wait(seconds: 10) { Self.started(h.recordedEvents) != nil })
        #expect(h.engine.cancelAnnouncement())
        #expect(h.wait(seconds: 10) { Self.ended(h.recordedEvents) != nil })
        #expect(Self.ended(h.recordedEvents)?.cancelled == true)
        #expect(h.waitForEnd(seconds: 20))
        let capture = try h.finishCapture().samples
        let music = try Reference.decode(musicPath)
        #expect(capture.count == music.count, "every music frame once")
        #expect(h.engine.status().underruns == 0)
        // The last two seconds are the music itself again.
        let tail = (music.count - 2 * Self.rate * 2)..<music.count
        #expect(tail.allSatisfy { capture[$0] == music[$0] })
    }

    /// A clip that cannot be opened is an error event; the music plays on untouched.
    @Test func aBadClipLeavesTheMusicAlone() throws {
        let dir = try Self.directory()
        let musicPath = try AnnouncementModel.music(in: dir)
        let bad = dir + "/bad.mp3"
        try Data(repeating: 0x41, count: 5000).write(to: URL(fileURLWithPath: bad))
        let h = EngineHarness(paced: false, name: "bad")
        try h.engine.play(path: musicPath, paused: true)
        h.engine.waitUntilApplied()
        try h.engine.announce([.init(path: bad)], label: "bad", options: PlaybackEngine.Announcement())
        #expect(h.wait(seconds: 10) { Self.ended(h.recordedEvents) != nil })
        let end = try #require(Self.ended(h.recordedEvents))
        #expect(end.error?.code == .notAudio, "\(String(describing: end.error))")
        #expect(Self.started(h.recordedEvents) == nil)
        h.engine.resume()
        #expect(h.waitForEnd(seconds: 20))
        #expect(try h.finishCapture().samples == Reference.decode(musicPath))
    }

    /// Over a real PulseAudio sink (ALSA's pulse plugin into the headless null sink):
    /// no underrun of the music, of the clip's ring or of the device, and the recording
    /// shows the duck: the music's level falls by the duck under the clip and comes back.
    @Test func overPulseAudioWithNoUnderruns() throws {
        try #require(PulseEnvironment.server != nil, PulseEnvironment.missing)
        let dir = try Self.directory()
        // 48 kHz music: the sink's own rate, so the recording is not resampled.
        let music = dir + "/music48.flac"
        try Shell.ffmpeg(["-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000:duration=6", "-af", "volume=4", "-ac", "2", "-c:a", "flac", music])
        let clip = try AnnouncementModel.ttsClip(in: dir)
        let recorder = try PulseRecorder.started(path: dir + "/capture.raw")
        defer { recorder.stop() }
        let events = EventBox()
        let engine = PulseRecorder.pulseEngine { e in events.append(e) }
        try engine.play(path: music)
        #expect(PulseRecorder.wait(10) { engine.status().positionFrames > 48_000 })
        var mix = PlaybackEngine.Announcement()
        mix.duckDB = -20
        mix.gainDB = -30  // quiet, so the recording's level is the music's
        try engine.announce([.init(path: clip)], label: "clip", options: mix)
        #expect(PulseRecorder.wait(20) { Self.ended(events.all) != nil })
        #expect(PulseRecorder.wait(20) { engine.status().state == .stopped })
        let status = engine.status()
        engine.shutdown()
        let samples = try recorder.finish()
        #expect(status.underruns == 0 && status.deviceXruns == 0, "underruns \(status.underruns), device xruns \(status.deviceXruns)")
        #expect(engine.voiceUnderruns == 0)
        #expect(Self.ended(events.all)?.cancelled == false)
        // The level in 10 ms windows: the music's before and after (a sine at 0.5),
        // 20 dB lower under the clip (which is at −30 dB, below it).
        let window = 480
        let rms = PulseRecorder.levels(samples, window: window)
        let (full, first, last) = try #require(PulseRecorder.loudSpan(rms), "the music was recorded")
        #expect(full > 0.1, "the music was recorded (peak window RMS \(full))")
        let ducked = rms[first...last].filter { $0 < full * 0.5 }.count
        #expect(ducked >= 100, "\(ducked) windows of 10 ms were ducked")
    }
}

/// Engine events, collected from the reader and voice threads.
final class EventBox: @unchecked Sendable {
    // @unchecked Sendable: `events` only under `lock`.
    private let lock = NSLock()
    private var events: [PlaybackEngine.Event] = []
    func append(_ e: PlaybackEngine.Event) { lock.lock(); events.append(e); lock.unlock() }
    var all: [PlaybackEngine.Event] { lock.lock(); defer { lock.unlock() }; return events }
}


