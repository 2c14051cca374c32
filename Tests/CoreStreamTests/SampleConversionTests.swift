import Foundation
import Testing
import CoreStream
import CoreStreamTestSupport

/// The float → S16 conversion the render thread and the exporter share, against a
/// reference written the plain way (clamp, scale, round half to even with the standard
/// library): the fast version reads the rounded integer out of a float's bit pattern.
@Suite("Sample conversion", .checksSomething)
struct SampleConversionTests {
    static func reference(_ x: Float) -> Int16 {
        if x.isNaN { return -32768 }
        let v = Swift.min(Swift.max(x, -1), 1) * 32768
        return Int16(Swift.min(v, 32767).rounded(.toNearestOrEven))
    }

    static let cases: [(Float, Int16)] = [
        (0, 0), (1, 32767), (-1, -32768), (2, 32767), (-2, -32768),
        (0.5 / 32768, 0), (1.5 / 32768, 2), (2.5 / 32768, 2), (-0.5 / 32768, 0), (-1.5 / 32768, -2),
        (32767.5 / 32768, 32767), (-32767.5 / 32768, -32768), (Float.nan, -32768), (Float.infinity, 32767),
        (-Float.infinity, -32768), (0.25, 8192), (-0.25, -8192),
    ]

    @Test(arguments: cases)
    func toInt16(_ x: Float, _ expected: Int16) {
        // In a run long enough for the vector loop, at every lane and in the tail.
        for position in [0, 1, 3, 7, 16, 37] {
            var source = [Float](repeating: 0, count: 40)
            source[position] = x
            var out = [Int16](repeating: 99, count: 40)
            SampleConversion.toInt16(source, &out, count: source.count)
            #expect(out[position] == expected)
            #expect(out[position] == Self.reference(x))
        }
    }

    @Test func toInt16MatchesTheReferenceOnASweep() {
        var rng = SplitMix64(seed: 11)
        let source: [Float] = (0..<100_003).map { _ in
            Float(Double(rng.next() % 4_000_001) / 1_000_000 - 2)  // −2 … 2
        }
        var out = [Int16](repeating: 0, count: source.count)
        SampleConversion.toInt16(source, &out, count: source.count)
        let mismatches = zip(source, out).filter { Self.reference($0.0) != $0.1 }.count
        #expect(mismatches == 0)
    }

    /// The float → S32 conversion (32-bit devices, 32-bit feeds) against the `ffmpeg`
    /// CLI's on the same samples, full scale and past it included. The CLI rounds where
    /// playd truncates toward zero, which differs by at most one step of 2^-31, and only
    /// below 2^-8 of full scale (above it a float's 24 bits times 2^31 is a whole number).
    @Test func toInt32MatchesTheCLIOnASweep() throws {
        var rng = SplitMix64(seed: 12)
        var source: [Float] = (0..<100_000).map { _ in Float(Double(rng.next() % 4_000_001) / 1_000_000 - 2) }
        source += [0, 1, -1, 0.5, -0.5, 1e-9, -1e-9, 3e-7, 0.999_999_9, -0.999_999_9]
        let dir = NSTemporaryDirectory() + "playd-s32-\(getpid())"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try source.withUnsafeBytes { try Data($0).write(to: URL(fileURLWithPath: dir + "/in.f32")) }
        try Shell.ffmpeg(["-f", "f32le", "-ar", "48000", "-ac", "1", "-i", dir + "/in.f32", "-c:a", "pcm_s32le", "-f", "s32le", dir + "/out.s32"])
        let cli = try Data(contentsOf: URL(fileURLWithPath: dir + "/out.s32")).withUnsafeBytes { Array($0.bindMemory(to: Int32.self)) }
        #expect(cli.count == source.count)
        var out = [Int32](repeating: 0, count: source.count)
        source.withUnsafeBufferPointer { s in out.withUnsafeMutableBufferPointer { SampleConversion.toInt32(s.baseAddress!, $0.baseAddress!, count: s.count) } }
        let off = zip(out, cli).enumerated().filter { abs(Int64($0.element.0) - Int64($0.element.1)) > 1 }
        #expect(off.isEmpty, "\(off.count) samples differ by more than one step, the first \(off.prefix(3).map { "\(source[$0.offset]): \($0.element)" })")
    }
}
