import Foundation
import Testing
import CoreStream
import CoreStreamTestSupport

/// Gapless transitions: an album split into tracks with the ffmpeg CLI plays back as one
/// continuous stream, checked in the `wav:` capture.
@Suite("Gapless transitions", .checksSomething, .serialized)
struct GaplessTests {
    static let cuts = Albums.cuts
    static func split(_ name: String, _ ext: String, _ codec: [String]) throws -> [String] {
        try Albums.split(name, ext, codec)
    }

    /// The stream duration the container declares, by ffprobe.
    static func declaredFrames(_ path: String) throws -> Int {
        let r = try Shell.run(["ffprobe", "-v", "error", "-select_streams", "a", "-show_entries", "stream=duration_ts",
                               "-of", "csv=p=0", path])
        guard r.status == 0, let n = Int(String(decoding: r.stdout, as: UTF8.self).split(separator: "\n").first ?? "") else {
            throw FixtureError("ffprobe \(path): \(r.stderr)")
        }
        return n
    }

    static let formats: [(String, String, [String], Bool)] = [
        ("wav", "wav", ["-c:a", "pcm_s16le"], true),
        ("flac", "flac", ["-c:a", "flac"], true),
        ("alac", "m4a", ["-c:a", "alac"], true),
        ("vorbis", "ogg", ["-c:a", "libvorbis", "-q:a", "5"], false),
        ("mp3", "mp3", ["-c:a", "libmp3lame", "-b:a", "192k"], false),     // LAME header: gapless info
        ("aac", "m4a", ["-c:a", "aac", "-b:a", "192k"], false),            // edit list
    ]

    /// Two tracks joined: the capture is the first track's frames then the second's,
    /// frame for frame, with nothing between them. For lossless formats that is the
    /// unsplit source itself.
    @Test(arguments: formats)
    func twoTracksJoinWithoutAGap(_ name: String, _ ext: String, _ codec: [String], _ lossless: Bool) throws {
        let parts = try Self.split("g-\(name)", ext, codec)
        let h = EngineHarness(paced: false, name: name)
        try h.engine.play(path: parts[0], paused: true)
        #expect(try h.engine.setNext(path: parts[1]))
        h.engine.waitUntilApplied()
        h.engine.resume()
        #expect(h.waitForEnd())
        let events = h.recordedEvents
        let cap = try h.finishCapture()
        // Each track as the ffmpeg CLI decodes it, to the length its file declares: the
        // CLI's own decode for all but AAC in M4A, whose end padding the CLI keeps; there
        // the container's duration (ffprobe) says where the audio ends.
        var expected: [Float] = []
        for part in parts.prefix(2) {
            var track = try Reference.decode(part)
            if name == "aac" { track = Array(track.prefix(try Self.declaredFrames(part) * 2)) }
            expected += track
        }
        if lossless {
            let lengths = [Self.cuts[1] - Self.cuts[0], Self.cuts[2] - Self.cuts[1]]
            #expect(expected.count == (lengths[0] + lengths[1]) * 2)
        }
        #expect(cap.samples.count == expected.count, "\(name): \(cap.frames) frames, want \(expected.count / 2)")
        if lossless {
            let source = try Reference.decode(Fixtures.stereoSource)
            #expect(expected.elementsEqual(source.prefix(expected.count)), "the split is not the source")
        }
        if name == "aac" {
            // AAC decodes to the right positions, not bit for bit (see the seek tests).
            #expect(cap.samples.count == expected.count)
            if cap.samples.count == expected.count {
                #expect(Reference.maxDifference(cap.samples[...], expected[...]) < 5e-3)
            }
        } else {
            #expect(cap.samples.elementsEqual(expected), "\(name): the joined capture differs from track 1 + track 2")
        }
        // The control side switched at the boundary: one end, one start, in that order.
        let names = events.compactMap { e -> String? in
            switch e {
            case .trackStarted(let t): return "start \(t.path.split(separator: "/").last!)"
            case .trackEnded(let p, _, _): return "end \(p.split(separator: "/").last!)"
            default: return nil
            }
        }
        #expect(names == ["start g-\(name)-1.\(ext)", "end g-\(name)-1.\(ext)", "start g-\(name)-2.\(ext)",
                          "end g-\(name)-2.\(ext)"], "events: \(names)")
    }

    /// Three tracks at real-time pace, the next one queued as each starts: `status`
    /// moves to each next track early in it (position under 20,000 frames when first
    /// seen), the queued next is taken, and the whole is the unsplit source. (When the
    /// switch is heard rather than decoded is not told apart here: the device's delay
    /// is under that bound.)
    @Test func statusMovesToEachNextTrackAndTheJoinIsTheSource() throws {
        let parts = try Self.split("p-flac", "flac", ["-c:a", "flac"])
        let h = EngineHarness(paced: true)
        try h.engine.play(path: parts[0])
        try h.engine.setNext(path: parts[1])
        // Until the boundary is heard, status stays on track 1, its position below the cut.
        #expect(h.wait(seconds: 3) { h.engine.status().track?.path == parts[1] })
        let s = h.engine.status()
        #expect(s.positionFrames < 20_000, "track 2 reported at \(s.positionFrames) frames in")
        #expect(h.wait(seconds: 1) { h.engine.queuedNext == nil }, "track 2 heard but still queued")
        // No request started track 2: no start latency (it counted from track 1's play).
        let latency = h.engine.status().lastStartLatencyNanoseconds
        #expect(latency == nil, "track 2's start latency \(latency ?? 0) ns")
        try h.engine.setNext(path: parts[2])
        #expect(h.wait(seconds: 3) { h.engine.status().track?.path == parts[2] })
        #expect(h.waitForEnd())
        #expect(h.engine.status().underruns == 0)
        let cap = try h.finishCapture()
        let source = try Reference.decode(Fixtures.stereoSource)
        #expect(cap.samples.count == source.count)
        #expect(cap.samples.elementsEqual(source), "three tracks joined differ from the unsplit source")
    }

    /// A next track in another format is resampled to the running one (the default).
    @Test func anotherRateIsResampledWithoutStoppingTheDevice() throws {
        let first = try Self.split("r-wav", "wav", ["-c:a", "pcm_s16le"])[0]
        let second = Fixtures.named("flac-48000-1.flac").path
        let h = EngineHarness(paced: false)
        try h.engine.play(path: first, paused: true)
        #expect(try h.engine.setNext(path: second))
        h.engine.waitUntilApplied()
        h.engine.resume()
        #expect(h.waitForEnd())
        let cap = try h.finishCapture()
        #expect(cap.sampleRate == 44100 && cap.channels == 2)
        // 40000 frames, then 3 s at 48 kHz resampled to 44.1 kHz: the right speed, plus
        // the resampling filter's tail (swresample's flush: under 1 ms).
        #expect(cap.frames >= 40_000 + 132_300 && cap.frames <= 40_000 + 132_300 + 44, "\(cap.frames) frames")
    }
}
