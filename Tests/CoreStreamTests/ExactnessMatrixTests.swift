import Foundation
import Testing
import CoreStream
import CoreStreamTestSupport

/// Every codec × every path the engine has, on music-like material (transients, so
/// block switching and PNS happen), captured through the `wav:` output and compared
/// with the ffmpeg CLI's continuous decode of the same file, cut and laid out as the
/// path plays it. Lossless, MP3, Vorbis and AAC without PNS must be bit-exact after the
/// 5 ms ramp-in that a start away from frame 0 plays; Opus within 1e-4; AAC with PNS
/// within the energy of its noise bands (see ``MusicFixture/match``). Each comparison
/// prints its measured maximum difference (`matrix: …` lines), the figures docs/testing.md's
/// exactness table quotes.
@Suite("Exactness matrix: codec × path against the CLI's decode", .checksSomething, .serialized)
struct ExactnessMatrixTests {
    typealias Run = Runs.Run
    static let formats = ["wav16", "flac", "alac", "mp3cbr", "mp3vbr", "vorbis", "opus", "opusneg", "aaclc", "aacpns"]

    /// The CLI's continuous decode, to the length the file declares: the CLI keeps the
    /// end padding an M4A edit list trims, so there ffprobe's `duration_ts` says where
    /// the audio ends.
    static func reference(_ path: String, trimToDeclared: Bool) throws -> [Float] {
        let all = try Reference.decode(path)
        guard trimToDeclared else { return all }
        let r = try Shell.run(["ffprobe", "-v", "error", "-select_streams", "a", "-show_entries", "stream=duration_ts",
                               "-of", "csv=p=0", path])
        let text = String(decoding: r.stdout, as: UTF8.self).split(separator: "\n").first ?? ""
        guard r.status == 0, let frames = Int(text) else { throw FixtureError("ffprobe \(path): \(r.stderr)") }
        return Array(all.prefix(frames * 2))
    }

    static func reference(_ f: MusicFixture) throws -> [Float] {
        try reference(f.path, trimToDeclared: f.cliKeepsPadding)
    }

    /// The ramp-in a start away from frame 0 plays (5 ms), compared for length only.
    static func ramp(_ f: MusicFixture) -> Int { f.rate / 200 + 1 }

    /// Compares `capture` with `expected` as the fixture's codec allows, and prints the
    /// measured maximum difference.
    static func expectMatch(_ capture: [Float], _ expected: [Float], _ f: MusicFixture, _ path: String, skip: Int = 0,
                            sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(capture.count == expected.count,
                "\(f) \(path): \(capture.count / 2) frames, the CLI's decode laid out has \(expected.count / 2)",
                sourceLocation: sourceLocation)
        let n = min(capture.count, expected.count)
        guard n > skip * 2 else { return }
        let got = capture[(skip * 2)..<n], want = expected[(skip * 2)..<n]
        let diff = Reference.maxDifference(got, want)
        print("matrix: \(f.format) \(path): \(n / 2) frames, max difference \(diff)")
        switch f.match {
        case .exact:
            if let bad = zip(got, want).enumerated().first(where: { $0.element.0 != $0.element.1 }) {
                Issue.record("\(f) \(path): differs from the CLI's decode at frame \(bad.offset / 2 + skip) (max difference \(diff))",
                             sourceLocation: sourceLocation)
            }
        case .within(let tolerance):
            #expect(diff <= tolerance, "\(f) \(path): max difference \(diff)", sourceLocation: sourceLocation)
        case .noise:
            // Every 1024-frame block holds the same energy as the CLI's (within 1 dB
            // where it is not near silence): a frame misplaced by a transient's width
            // or a lost block would not.
            var worst: Double = 0
            var b = skip
            while (b + 1024) * 2 <= n {
                var e1 = 0.0, e2 = 0.0
                for i in (b * 2)..<((b + 1024) * 2) { e1 += Double(capture[i] * capture[i]); e2 += Double(expected[i] * expected[i]) }
                if e2 > 1024 * 2 * 1e-4 { worst = max(worst, abs(10 * log10(e1 / e2))) }
                b += 1024
            }
            print("matrix: \(f.format) \(path): block energy within \(worst) dB")
            #expect(worst <= 1, "\(f) \(path): a block's energy differs by \(worst) dB", sourceLocation: sourceLocation)
        }
    }

    /// Plays `f` unpaced from `from` after `setUp` (the engine is paused there), to the end.
    static func capture(_ f: MusicFixture, from: Int64 = 0, _ setUp: (PlaybackEngine) throws -> Void = { _ in }) throws -> [Float] {
        let run = try EngineHarness.playToEnd(f.path, from: from, seconds: 120, name: f.format, setUp)
        #expect(run.ended, "\(f): the track did not end")
        return run.capture.samples
    }

    @Test(arguments: formats)
    func straightThrough(_ format: String) throws {
        let f = MusicFixtures.named(format)
        let reference = try Self.reference(f)
        Self.expectMatch(try Self.capture(f), reference, f, "straight")
    }

    /// `play --at` at 1, an odd frame, past the middle and near the end: from there to
    /// the end.
    @Test(arguments: formats)
    func playAtAFrame(_ format: String) throws {
        let f = MusicFixtures.named(format)
        let reference = try Self.reference(f)
        let total = reference.count / 2
        for start in [1, 7919, total / 2 + 1, total - 1000, total - 1] {
            let cap = try Self.capture(f, from: Int64(start))
            Self.expectMatch(cap, Runs.expected(reference, channels: 2, [Run(start, total)]), f, "play at \(start)",
                             skip: min(Self.ramp(f), total - start))
        }
    }

    /// A 1-frame loop wrapped 50 times, an odd-length loop 3 times (both replayed from
    /// memory) and a loop longer than the cache twice (decoded again each pass).
    @Test(arguments: formats)
    func loops(_ format: String) throws {
        let f = MusicFixtures.named(format)
        let reference = try Self.reference(f)
        let total = reference.count / 2
        for (a, b, count) in [(100_003, 100_004, 50), (150_001, 155_000, 3), (20_001, 60_002, 2)] {
            let cap = try Self.capture(f) { e in try e.setLoop(LoopRegion(start: Int64(a), end: Int64(b), count: count)) }
            let runs = [Run(0, b)] + Array(repeating: Run(a, b), count: count) + [Run(b, total)]
            Self.expectMatch(cap, Runs.expected(reference, channels: 2, runs), f, "loop \(a)..<\(b) ×\(count)")
        }
    }

    @Test(arguments: formats)
    func pingPong(_ format: String) throws {
        let f = MusicFixtures.named(format)
        let reference = try Self.reference(f)
        let (a, b) = (40_001, 53_002)
        let cap = try Self.capture(f, from: Int64(a)) { e in
            try e.setLoop(LoopRegion(start: Int64(a), end: Int64(b), count: 3, pingPong: true))
        }
        // a…b−1, b−2↓a, a+1…b−1, b−2↓a, then (count spent) on down to 0.
        let runs = [Run(a, b), Run(a, b - 1, reverse: true), Run(a + 1, b), Run(0, b - 1, reverse: true)]
        Self.expectMatch(cap, Runs.expected(reference, channels: 2, runs), f, "ping-pong \(a)..<\(b)", skip: Self.ramp(f))
    }

    /// Reverse from the end to frame 0, and from an odd frame.
    @Test(arguments: formats)
    func reverse(_ format: String) throws {
        let f = MusicFixtures.named(format)
        let reference = try Self.reference(f)
        let total = reference.count / 2
        for start in [total, 177_777] {
            let cap = try Self.capture(f, from: Int64(start)) { $0.setDirection(.reverse) }
            Self.expectMatch(cap, Runs.expected(reference, channels: 2, [Run(0, start, reverse: true)]), f,
                             "reverse from \(start)", skip: Self.ramp(f))
        }
    }

    /// Forward, reverse and forward again while playing in real time: the capture is
    /// one forward run, one reverse run starting one below the turn, and one forward
    /// run starting one above the second turn and reaching the end; where the turns
    /// fall is read from the capture. (Not AAC with PNS: after a seek its noise bands
    /// hold other noise, so where a run ends cannot be read from the samples.)
    @Test(arguments: formats.filter { $0 != "aacpns" })
    func directionTurnsWhilePlaying(_ format: String) throws {
        let f = MusicFixtures.named(format)
        let reference = try Self.reference(f)
        let total = reference.count / 2
        let start = total - f.rate
        let h = EngineHarness(paced: true, name: f.format)
        try h.engine.play(path: f.path, from: Int64(start))
        #expect(h.wait(seconds: 10) { h.engine.status().positionFrames >= Int64(start + f.rate * 3 / 10) })
        h.engine.setDirection(.reverse)
        #expect(h.wait(seconds: 10) { h.engine.status().direction == .reverse })
        let turned = h.engine.status().positionFrames
        #expect(h.wait(seconds: 10) { h.engine.status().positionFrames <= turned - Int64(f.rate / 5) })
        h.engine.setDirection(.forward)
        #expect(h.waitForEnd(seconds: 20))
        #expect(h.engine.status().underruns == 0)
        let cap = try h.finishCapture().samples
        let tolerance: Float = { if case .within(let t) = f.match { t } else { 0 } }()
        // Follows the reference from `frame` in `step` direction while within tolerance.
        func follow(_ c: Int, _ frame: Int, _ step: Int) -> Int {
            var n = 0
            while (c + n) * 2 + 1 < cap.count, frame + n * step >= 0, frame + n * step < total {
                let r = (frame + n * step) * 2
                if abs(cap[(c + n) * 2] - reference[r]) > tolerance || abs(cap[(c + n) * 2 + 1] - reference[r + 1]) > tolerance { break }
                n += 1
            }
            return n
        }
        let ramp = Self.ramp(f)
        let forward = ramp + follow(ramp, start + ramp, 1)
        let firstTurn = start + forward                      // the frame after the last heard forward
        let back = follow(forward, firstTurn - 2, -1)
        let secondTurn = firstTurn - 2 - back + 1            // the last frame heard in reverse
        let onward = follow(forward + back, secondTurn + 1, 1)
        print("matrix: \(f.format) turns: forward \(start)…\(firstTurn - 1), reverse \(firstTurn - 2)↓\(secondTurn), forward \(secondTurn + 1)…\(secondTurn + onward)")
        #expect(back > f.rate / 10, "\(f): the reverse run is \(back) frames")
        #expect(forward + back + onward == cap.count / 2 && secondTurn + 1 + onward == total,
                "\(f): forward \(forward), reverse \(back), forward \(onward) of \(cap.count / 2) captured frames")
    }

    /// Two tracks cut from the source at an odd frame and encoded alike play back as
    /// the CLI decodes each, one after the other with nothing between them.
    @Test(arguments: formats.filter { $0 != "opusneg" })
    func gaplessJoin(_ format: String) throws {
        let f = MusicFixtures.named(format)
        let parts = try MusicFixtures.split(f, at: 176_401)
        let h = EngineHarness(paced: false, name: f.format)
        try h.engine.play(path: parts[0], paused: true)
        #expect(try h.engine.setNext(path: parts[1]))
        h.engine.waitUntilApplied()
        h.engine.resume()
        #expect(h.waitForEnd(seconds: 120))
        let cap = try h.finishCapture().samples
        var expected: [Float] = []
        for p in parts { expected += try Self.reference(p, trimToDeclared: f.cliKeepsPadding) }
        Self.expectMatch(cap, expected, f, "gapless join")
    }

    /// Export of the whole track and of an odd region to 32-bit float WAV.
    @Test(arguments: formats)
    func export(_ format: String) throws {
        let f = MusicFixtures.named(format)
        let reference = try Self.reference(f)
        let total = reference.count / 2
        let dir = NSTemporaryDirectory() + "playd-matrix-\(getpid())"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        for (from, to) in [(nil, nil), (12_345, 98_766)] as [(Int?, Int?)] {
            var o = ExportOptions(input: f.path, output: "\(dir)/\(format)-\(from ?? 0).wav", format: .wav)
            o.from = from.map(Int64.init)
            o.to = to.map(Int64.init)
            o.bits = .f32
            o.force = true
            try Exporter(o).run()
            let got = try Reference.decode(o.output)
            let expected = Runs.expected(reference, channels: 2, [Run(from ?? 0, to ?? total)])
            Self.expectMatch(got, expected, f, "export \(from ?? 0)..<\(to ?? total)")
        }
    }
}
