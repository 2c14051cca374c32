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
@Suite("Announcements over the music, captured", .serialized)
struct AnnouncementCaptureTests {
    static let rate = 44100

    static func directory(_ name: String = #function) throws -> String {
        let dir = NSTemporaryDirectory() + "playd-announce-\(getpid())-\(name.filter { $0.isLetter })"
        try? FileManager.default.removeItem(atPath: dir)
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        return dir
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
    @Test func duckedMusicAndClipMatchTheModel() throws {
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

    /// A cancel fades the clip out over 20 ms and ramps the music back up; the music is
    /// never interrupted.
    @Test func aCancelRampsBackToTheMusic() throws {
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
        let recorder = try PulseRecorder(path: dir + "/capture.raw")
        defer { recorder.stop() }
        let deadline = Date().addingTimeInterval(10)
        while recorder.bytesWritten == 0 && Date() < deadline { usleep(5_000) }
        var config = PlaybackEngine.Configuration()
        config.output = "alsa:pulse"
        var logger = Logger(label: "test")
        logger.logLevel = .warning
        let events = EventBox()
        let engine = PlaybackEngine(configuration: config, logger: logger) { e in events.append(e) }
        try engine.play(path: music)
        func wait(_ seconds: Double, _ condition: () -> Bool) -> Bool {
            let end = Date().addingTimeInterval(seconds)
            while Date() < end { if condition() { return true }; usleep(5_000) }
            return condition()
        }
        #expect(wait(10) { engine.status().positionFrames > 48_000 })
        var mix = PlaybackEngine.Announcement()
        mix.duckDB = -20
        mix.gainDB = -30  // quiet, so the recording's level is the music's
        try engine.announce([.init(path: clip)], label: "clip", options: mix)
        #expect(wait(20) { Self.ended(events.all) != nil })
        #expect(wait(20) { engine.status().state == .stopped })
        let status = engine.status()
        engine.shutdown()
        let samples = try recorder.finish()
        #expect(status.underruns == 0 && status.deviceXruns == 0, "underruns \(status.underruns), device xruns \(status.deviceXruns)")
        #expect(engine.voiceUnderruns == 0)
        #expect(Self.ended(events.all)?.cancelled == false)
        // The level in 10 ms windows: the music's before and after (a sine at 0.5),
        // 20 dB lower under the clip (which is at −30 dB, below it).
        let window = 480
        let rms = (0..<(samples.count / 2 / window)).map { w in
            var sum: Float = 0
            for f in (w * window)..<((w + 1) * window) { sum += samples[2 * f] * samples[2 * f] }
            return (sum / Float(window)).squareRoot()
        }
        let full = rms.max() ?? 0
        #expect(full > 0.1, "the music was recorded (peak window RMS \(full))")
        let loud = rms.indices.filter { rms[$0] > full * 0.9 }
        let first = try #require(loud.first), last = try #require(loud.last)
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
