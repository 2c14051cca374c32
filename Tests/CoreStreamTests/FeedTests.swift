import Foundation
import Testing
import CoreStream
import CoreStreamTestSupport

/// The `fifo:` feed (Snapcast's pipe source) on the real engine: what arrives in the FIFO
/// against the ffmpeg CLI's decode, with no reader, a stalled reader, pause and disable.
@Suite("Feeds: fifo outputs next to the local one", .checksSomething, .serialized)
struct FeedTests {
    func fifoPath(_ name: String = #function) -> String {
        NSTemporaryDirectory() + "playd-feed-\(getpid())-\(name.filter { $0.isLetter })-\(UInt16.random(in: 0...UInt16.max))"
    }

    /// The ffmpeg CLI's decode as 16-bit samples at `rate` with `channels`.
    func referenceInt16(_ path: String, rate: Int? = nil, channels: Int, monoSource: Bool = true) throws -> [Int16] {
        var args = ["ffmpeg", "-nostdin", "-v", "error", "-i", path, "-ac", "\(channels)"]
        if let rate { args += ["-ar", "\(rate)"] }
        // Mono to stereo at full level on both channels, as playd (and MPD) do.
        if channels == 2 && monoSource { args += ["-af", "pan=stereo|c0=c0|c1=c0"] }
        let out = try Shell.run(args + ["-f", "s16le", "-c:a", "pcm_s16le", "-"])
        guard out.status == 0 else { throw FixtureError("ffmpeg: \(out.stderr)") }
        return out.stdout.withUnsafeBytes { Array($0.bindMemory(to: Int16.self)) }
    }

    /// A FIFO with a reader (started unless `startReader` is false) and a paced engine
    /// feeding it with `options` (`?format=…&name=…`). The FIFO goes with the reader.
    func feed(_ options: String = "", startReader: Bool = true, name: String = #function) throws -> (FIFOReader, EngineHarness) {
        let fifo = fifoPath(name)
        let reader = try FIFOReader(path: fifo)
        if startReader { reader.start() }
        return (reader, try EngineHarness(paced: true, feeds: ["fifo:\(fifo)\(options)"], name: name))
    }

    /// Samples of silence a feed writes before the audio each time it starts.
    func leadSamples(rate: Int = 48000, channels: Int = 2) -> Int { rate * FeedOutput.leadMillis / 1000 * channels }

    /// `samples` without the silence written before the audio; records an issue when it
    /// is not there.
    func droppingLead(_ samples: [Int16], channels: Int = 2) -> [Int16] {
        let lead = leadSamples(channels: channels)
        #expect(samples.count >= lead && samples.prefix(lead).allSatisfy { $0 == 0 }, "no silent lead-in")
        return Array(samples.dropFirst(lead))
    }

    @Test("format strings", arguments: [
        ("48000:16:2", "48000:16:2"), ("44100:32:2", "44100:32:2"), ("96000:16:1", "96000:16:1"),
        ("48000:24:2", nil), ("48000:16", nil), ("x:16:2", nil), ("1000:16:2", nil), ("48000:16:9", nil),
    ] as [(String, String?)])
    func formatParsing(text: String, parsed: String?) {
        let f = try? FeedFormat(parsing: text)
        #expect(f?.description == parsed)
    }

    @Test("specs", arguments: [
        ("fifo:/tmp/snapfifo", "fifo", "48000:16:2"),
        ("fifo:/tmp/snapfifo?name=kitchen&format=44100:16:2", "kitchen", "44100:16:2"),
        ("fifo:relative/path", nil, nil),
        ("fifo:/tmp/x?bogus=1", nil, nil),
        ("fifo:/tmp/x?name=no spaces", nil, nil),
        ("tcp://host:4953", nil, nil),
        ("alsa:default", nil, nil),  // a local kind is not a feed
        ("fifo:/etc/passwd", nil, nil),  // exists and is not a FIFO
    ] as [(String, String?, String?)])
    func specParsing(spec: String, name: String?, format: String?) {
        let p = try? FeedOutput.parse(spec: spec)
        #expect(p?.name == name)
        #expect(p?.format.description == format)
    }

    /// A mono 48 kHz FLAC through a 48000:16:2 feed: the FIFO carries the track exactly,
    /// on both channels, as the ffmpeg CLI decodes it; the local capture is untouched.
    @Test func feedCarriesExactlyTheTrack() throws {
        let fixture = Fixtures.named("flac-48000-1.flac")
        let (reader, h) = try feed("")
        try h.engine.play(path: fixture.path)
        #expect(h.waitForEnd())
        let capture = try h.finishCapture()
        reader.close()
        let outputs = h.engine.outputs()
        let expected = try referenceInt16(fixture.path, channels: 2)
        let got = droppingLead(reader.int16Samples)
        #expect(got.count == expected.count, "feed has \(got.count / 2) frames, the track \(expected.count / 2)")
        let firstDiff = zip(got, expected).enumerated().first { $0.element.0 != $0.element.1 }?.offset
        #expect(firstDiff == nil, "feed differs from the reference at sample \(firstDiff ?? -1)")
        #expect(capture.samples == (try Reference.decode(fixture.path)))
        let feed = try #require(outputs.first { $0.kind == "fifo" })
        #expect(feed.framesDropped == 0)
        #expect(feed.framesWritten == expected.count / 2)
        #expect(outputs.first?.name == PlaybackEngine.localOutputName)
    }

    /// A 44.1 kHz track into a 48 kHz feed: resampled to the right length and within a
    /// few LSB of the ffmpeg CLI's own resampling.
    @Test func feedResamplesToItsOwnRate() throws {
        let fixture = Fixtures.named("flac-44100-2.flac")
        let (reader, h) = try feed("?format=48000:16:2")
        try h.engine.play(path: fixture.path)
        #expect(h.waitForEnd())
        #expect(h.wait(seconds: 3) { reader.bytesArrived(from: reader.secondsSinceStart - 0.1, to: reader.secondsSinceStart) == 0 }, "the feed went quiet")
        _ = try h.finishCapture()
        reader.close()
        let expected = try referenceInt16(fixture.path, rate: 48000, channels: 2, monoSource: false)
        let got = droppingLead(reader.int16Samples)
        // The resampler's filter keeps a few frames back until more audio comes.
        #expect(abs(got.count - expected.count) / 2 <= 64, "feed \(got.count / 2) frames, ffmpeg \(expected.count / 2)")
        let n = min(got.count, expected.count) - 128
        var worst = 0
        for i in 0..<n { worst = max(worst, abs(Int(got[i]) - Int(expected[i]))) }
        #expect(worst <= 8, "largest difference from ffmpeg's resampling: \(worst) LSB")
    }

    /// Nobody reads: the local output plays on untouched (no underrun, nothing blocks),
    /// the feed counts what it drops; a reader that comes later gets at most one pipe of
    /// older audio and then the track from then on, whole frames with no gap. The silent
    /// lead-in and every frame of the track are either delivered or counted as dropped.
    @Test func noReaderDropsAndCountsThenResumes() throws {
        let fixture = Fixtures.named("flac-48000-1.flac")
        let (reader, h) = try feed("?name=snap", startReader: false)
        try h.engine.play(path: fixture.path)
        usleep(1_000_000)  // hold: 1 s played into a FIFO nobody reads yet (frames dropped)
        let before = try #require(h.engine.outputs().first { $0.name == "snap" })
        #expect(before.state == "no_reader")
        #expect((before.framesDropped ?? 0) > 0)
        reader.start()
        #expect(h.waitForEnd())
        #expect(h.wait(seconds: 3) { reader.bytesArrived(from: reader.secondsSinceStart - 0.1, to: reader.secondsSinceStart) == 0 }, "the feed went quiet")
        let after = try #require(h.engine.outputs().first { $0.name == "snap" })
        let capture = try h.finishCapture()
        reader.close()
        #expect(capture.samples == (try Reference.decode(fixture.path)), "the local output lost or changed audio")
        #expect(h.engine.status().underruns == 0)
        let expected = try referenceInt16(fixture.path, channels: 2)
        let got = reader.int16Samples
        #expect(after.state == "writing")
        #expect(got.count > 0)
        // The end of what arrived is the end of the track, unbroken; before it, at most
        // one pipe (64 KiB) of older audio, itself a piece of the track.
        var k = 0
        while k < got.count && got[got.count - 1 - k] == expected[expected.count - 1 - k] { k += 1 }
        #expect(got.count - k <= 65536 / 2, "\(got.count - k) samples before the clean tail of \(k)")
        #expect(k >= 48000, "clean tail of only \(k) samples")
        let total = expected.count / 2 + leadSamples() / 2
        #expect((after.framesDropped ?? 0) + got.count / 2 == total,
                "dropped \(after.framesDropped ?? 0) + delivered \(got.count / 2) ≠ \(total)")
    }

    /// A reader that stops reading with the FIFO open: the pipe fills, the excess is
    /// dropped in whole frames, the local output does not notice, and reading again
    /// continues with whole frames.
    @Test(.tags(.threadSanitizer)) func stalledReaderNeverBlocksPlayback() throws {
        let fixture = Fixtures.named("flac-48000-1.flac")
        let (reader, h) = try feed()
        reader.stall(true)
        try h.engine.play(path: fixture.path)
        usleep(1_500_000)  // hold: 1.5 s against a stalled reader
        let stalled = try #require(h.engine.outputs().first { $0.kind == "fifo" })
        #expect(stalled.state == "no_reader")
        #expect((stalled.framesDropped ?? 0) > 0)
        reader.stall(false)
        #expect(h.waitForEnd())
        #expect(h.wait(seconds: 3) { reader.bytesArrived(from: reader.secondsSinceStart - 0.1, to: reader.secondsSinceStart) == 0 }, "the feed went quiet")
        let final = try #require(h.engine.outputs().first { $0.kind == "fifo" })
        let capture = try h.finishCapture()
        reader.close()
        #expect(capture.samples == (try Reference.decode(fixture.path)))
        #expect(h.engine.status().underruns == 0)
        let got = reader.int16Samples
        #expect(got.count % 2 == 0)
        #expect(final.state == "writing")
        let total = fixture.sourceFrames.asInt + leadSamples() / 2
        #expect(got.count / 2 + (final.framesDropped ?? 0) == total,
                "delivered \(got.count / 2) + dropped \(final.framesDropped ?? 0) ≠ \(total)")
        // Every written piece is a run of the track: both channels equal (mono source).
        for i in stride(from: 0, to: got.count - 1, by: 2) where got[i] != got[i + 1] {
            Issue.record("frame \(i / 2) is torn: channels differ")
            break
        }
    }

    /// Pause writes nothing to the feed; resume goes on where it stopped, with no burst
    /// and nothing repeated: the feed is exactly the local capture in 16 bits, with a
    /// silent lead-in at the start and at the resume.
    @Test func pauseWritesNothingAndResumeHasNoBurst() throws {
        let fixture = Fixtures.named("flac-48000-1.flac")
        let (reader, h) = try feed("?format=48000:16:1")
        try h.engine.play(path: fixture.path)
        usleep(800_000)  // hold: 0.8 s of music before the pause
        h.engine.pause()
        #expect(h.wait(seconds: 2) { h.engine.status().state == .paused })
        // The device plays out its short ramp and what it had queued: wait until the
        // feed has had nothing for 100 ms (two periods).
        #expect(h.wait(seconds: 3) { reader.bytesArrived(from: reader.secondsSinceStart - 0.1, to: reader.secondsSinceStart) == 0 })
        let pauseStart = reader.secondsSinceStart
        usleep(700_000)  // hold: the pause's length
        let during = reader.bytesArrived(from: pauseStart, to: reader.secondsSinceStart)
        #expect(during == 0, "\(during) bytes reached the feed while paused")
        let resumeAt = reader.secondsSinceStart
        h.engine.resume()
        usleep(300_000)  // hold: the 300 ms after resume whose burst is measured
        // No burst: in the first 300 ms after resume, at most ~300 ms of audio (plus a period).
        let burst = reader.bytesArrived(from: resumeAt, to: reader.secondsSinceStart) / 2
        #expect(burst <= 48000 * 35 / 100 + 2400, "\(burst) frames arrived in the 300 ms after resume")
        #expect(h.waitForEnd())
        #expect(h.wait(seconds: 3) { reader.bytesArrived(from: reader.secondsSinceStart - 0.1, to: reader.secondsSinceStart) == 0 }, "the feed went quiet")
        let capture = try h.finishCapture()
        reader.close()
        var got = droppingLead(reader.int16Samples, channels: 1)
        // The second lead-in: the first run of that many zeros.
        let lead = leadSamples(channels: 1)
        var run = 0
        var second: Int?
        for (i, v) in got.enumerated() {
            run = v == 0 ? run + 1 : 0
            if run == lead { second = i + 1 - lead; break }
        }
        let at = try #require(second, "no lead-in at the resume")
        got.removeSubrange(at..<(at + lead))
        let local = capture.samples.map { Int16(clamping: Int(($0 * 32768).rounded(.toNearestOrEven))) }
        #expect(got.count == local.count, "feed \(got.count) frames, local \(local.count)")
        var worst = 0
        for (a, b) in zip(got, local) { worst = max(worst, abs(Int(a) - Int(b))) }
        #expect(worst <= 1, "the feed differs from what the local output played by \(worst) LSB")
    }

    /// A track shorter than what the feed keeps in hand before starting still reaches
    /// the FIFO, whole, without waiting for more audio or the shutdown.
    @Test func aShortTrackIsNotHeldBack() throws {
        let track = fifoPath() + ".flac"
        try Shell.ffmpeg(["-f", "lavfi", "-i", "sine=frequency=1000:sample_rate=48000:duration=0.1", "-ac", "2", track])
        defer { unlink(track) }
        let (reader, h) = try feed("")
        try h.engine.play(path: track)
        #expect(h.waitForEnd())
        #expect(h.wait(seconds: 1) { reader.byteCount == (4800 + leadSamples() / 2) * 4 },
                "\(reader.byteCount / 4) frames arrived, expected \(4800 + leadSamples() / 2)")
        _ = try h.finishCapture()
        reader.close()
    }

    /// Disabled at run time: nothing more is written and the FIFO is closed (the reader
    /// sees the end); enabled again, it writes again.
    @Test(.tags(.threadSanitizer)) func disableClosesTheFIFOAndEnableReopens() throws {
        let fixture = Fixtures.named("flac-44100-2.flac")
        let (reader, h) = try feed("?name=room2")
        try h.engine.play(path: fixture.path)
        usleep(700_000)  // hold: 0.7 s played before the feed is turned off
        try h.engine.setOutputEnabled("room2", false)
        #expect(h.wait(seconds: 1) { h.engine.outputs().first { $0.name == "room2" }?.state == "disabled" })
        let mark = reader.secondsSinceStart
        usleep(500_000)  // hold: 0.5 s with the feed off
        #expect(reader.bytesArrived(from: mark + 0.05, to: reader.secondsSinceStart) == 0)
        let off = try #require(h.engine.outputs().first { $0.name == "room2" })
        #expect(!off.enabled)
        try h.engine.setOutputEnabled("room2", true)
        let back = reader.secondsSinceStart
        usleep(500_000)  // hold: 0.5 s with it on again
        #expect(reader.bytesArrived(from: back, to: reader.secondsSinceStart) > 0)
        #expect(throws: StreamError.self) { try h.engine.setOutputEnabled("nonexistent", true) }
        // The local output disabled: silent, still the clock.
        try h.engine.setOutputEnabled(PlaybackEngine.localOutputName, false)
        #expect(h.engine.outputs().first?.enabled == false)
        #expect(h.waitForEnd())
        let capture = try h.finishCapture()
        reader.close()
        let tailStart = capture.samples.count - 4410 * 2
        #expect(capture.samples[tailStart...].allSatisfy { $0 == 0 }, "the disabled local output is not silent")
        #expect(h.engine.status().underruns == 0)
    }
}

extension Int64 {
    var asInt: Int { Int(self) }
}
