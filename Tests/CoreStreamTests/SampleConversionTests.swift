import Testing
import CoreStream

/// The float → S16 conversion the render thread and the exporter share, against a
/// reference written the plain way (clamp, scale, round half to even with the standard
/// library): the fast version reads the rounded integer out of a float's bit pattern.
@Suite("Sample conversion")
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
}
