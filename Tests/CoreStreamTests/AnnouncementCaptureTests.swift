import Foundation
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
@Suite("Announcements over the music, captured", .serialized)
struct AnnouncementCaptureTests {
    static let rate = 44100

    /// Music: a different tone on each channel (so a channel swap shows), 8 s.
    static func music(_ dir: String) throws -> String {
        let path = dir + "/music.wav"
        try Shell.ffmpeg(["-f", "lavfi", "-i", "sine=frequency=330:sample_rate=44100:duration=8",
                          "-f", "lavfi", "-i", "sine=frequency=523:sample_rate=44100:duration=8",
                          "-filter_complex", "[0][1]amerge=inputs=2,volume=2.0", "-c:a", "pcm_f32le", path])
        return path
    }

    /// Clip: a rising chirp, 16 kHz mono MP3, 1.5 s.
    static func clip(_ dir: String) throws -> String {
        let path = dir + "/clip.mp3"
        try Shell.ffmpeg(["-f", "lavfi", "-i", "aevalsrc=0.4*sin(2*PI*(300+400*t)*t):s=16000:d=1.5",
                          "-c:a", "libmp3lame", "-b:a", "64k", path])
        return path
    }

    static func directory(_ name: String = #function) throws -> String {
        let dir = NSTemporaryDirectory() + "playd-announce-\(getpid())-\(name.filter { $0.isLetter })"
        try? FileManager.default.removeItem(atPath: dir)
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        return dir
    }

    /// The clip as the device gets it, by the ffmpeg CLI.
    static func clipReference(_ path: String) throws -> [Float] {
        try Reference.decode(path, extraArguments: ["-af", "pan=stereo|c0=c0|c1=c0", "-ar", "\(rate)"])
    }

    static func started(_ events: [PlaybackEngine.Event]) -> Int64?? {
        for case .announcementStarted(_, _, let frame) in events { return .some(frame) }
        return nil
    }

    static func ended(_ events: [PlaybackEngine.Event]) -> (cancelled: Bool, error: StreamError?)? {
        for case .announcementEnded(_, _, let cancelled, let error) in events { return (cancelled, error) }
        return nil
    }

    static func linear(_ db: Double) -> Double { pow(10, db / 20) }

    /// Duck mode: the music goes on under the clip, ramped down 150 ms before it and up
    /// 500 ms after it; the capture matches the model to 1e-6 from the first frame to
    /// the last, and holds every music frame once (nothing skipped, nothing repeated).
    @Test func duckedMusicAndClipMatchTheModel() throws {
        let dir = try Self.directory()
        let (musicPath, clipPath) = (try Self.music(dir), try Self.clip(dir))
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
        let clip = try Self.clipReference(clipPath)
        #expect(capture.samples.count == music.count, "every music frame once: \(capture.samples.count / 2) frames, the music has \(music.count / 2)")
        let (g, c) = (Self.linear(-18), Self.linear(-3))
        let d = Self.rate * 150 / 1000, u = Self.rate * 500 / 1000, l = clip.count / 2
        #expect(Int(start) + d + l + u < music.count / 2, "the model needs the music to outlast the announcement")
        var worst = 0.0, worstAt = 0
        for i in 0..<min(capture.samples.count, music.count) {
            let frame = i / 2, n = frame - Int(start)
            let m = Double(music[i])
            let expected: Double
            if n < 0 { expected = m }
            else if n < d { expected = m * (1 - (1 - g) * Double(n) / Double(d)) }
            else if n < d + l { expected = m * g + Double(clip[(n - d) * 2 + i % 2]) * c }
            else if n < d + l + u { expected = m * (g + (1 - g) * Double(n - d - l) / Double(u)) }
            else { expected = m }
            let diff = abs(Double(capture.samples[i]) - expected)
            if diff > worst { worst = diff; worstAt = frame }
        }
        #expect(worst <= 1e-6, "largest difference \(worst) at frame \(worstAt) (the announcement began at \(start))")
    }

    /// While paused the clip plays alone, at once; resumed, the music goes on from the
    /// frame it paused at: the capture is the music up to the pause (its 5 ms ramp out),
    /// the clip exactly, silence, then the music from that same frame.
    @Test func whilePausedTheClipPlaysAloneAndTheMusicResumesWhereItWas() throws {
        let dir = try Self.directory()
        let (musicPath, clipPath) = (try Self.music(dir), try Self.clip(dir))
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
        let clip = try Self.clipReference(clipPath)
        // The clip: where its first sample sits, and then all of it, exactly.
        let firstLoud = try #require(clip.firstIndex { abs($0) > 1e-3 })
        func clipAt(_ i: Int) -> Bool {
            guard i % 2 == firstLoud % 2, i >= firstLoud, i + 64 <= capture.count else { return false }
            for k in 0..<64 where abs(capture[i + k] - clip[firstLoud + k]) > 1e-6 { return false }
            return true
        }
        let found = (0..<(capture.count - clip.count)).first(where: clipAt)
        let o = (try #require(found, "the clip is in the capture") - firstLoud) / 2
        var worst: Float = 0
        for j in 0..<clip.count { worst = max(worst, abs(capture[o * 2 + j] - clip[j])) }
        #expect(worst <= 1e-6, "the clip alone: largest difference \(worst)")
        // Before it: the music, unchanged up to the pause's ramp (5 ms).
        let ramp = max(16, Self.rate / 200)
        #expect((0..<((o - ramp) * 2)).allSatisfy { capture[$0] == music[$0] }, "the music before the pause")
        // After it: silence, then the music from frame `o` (the frame after the ramp
        // out), ramped in over 5 ms and then exact.
        let resumed = try #require(((o + clip.count / 2) * 2..<capture.count).first { capture[$0] != 0 }) / 2
        let exact = (ramp..<(ramp + Self.rate)).allSatisfy { j in
            abs(capture[(resumed + j) * 2] - music[(o + j) * 2]) <= 1e-6 && abs(capture[(resumed + j) * 2 + 1] - music[(o + j) * 2 + 1]) <= 1e-6
        }
        #expect(exact, "the music resumes at frame \(o), where it paused")
        // And to its end: every music frame once.
        #expect(capture.count / 2 - resumed == music.count / 2 - o, "resumed at \(resumed): \(capture.count / 2 - resumed) frames follow, \(music.count / 2 - o) were left")
    }

    /// A cancel fades the clip out over 20 ms and ramps the music back up; the music is
    /// never interrupted.
    @Test func aCancelRampsBackToTheMusic() throws {
        let dir = try Self.directory()
        let (musicPath, clipPath) = (try Self.music(dir), try Self.clip(dir))
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
        let musicPath = try Self.music(dir)
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
}

