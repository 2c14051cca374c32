import Foundation

/// Reads the float WAV files the `wav:` output writes (and 16-bit PCM for sources).
public struct WAVFile {
    public var sampleRate: Int
    public var channels: Int
    public var samples: [Float]
    public var frames: Int { samples.count / max(channels, 1) }

    public init(path: String) throws {
        let d = try Data(contentsOf: URL(fileURLWithPath: path))
        guard d.count >= 12, d.prefix(4) == Data("RIFF".utf8) else { throw FixtureError("\(path): not RIFF") }
        func u16(_ o: Int) -> Int { Int(d[o]) | Int(d[o + 1]) << 8 }
        func u32(_ o: Int) -> Int { u16(o) | u16(o + 2) << 16 }
        var o = 12
        var fmtTag = 0, bits = 0
        sampleRate = 0; channels = 0; samples = []
        while o + 8 <= d.count {
            let id = String(decoding: d[o..<o + 4], as: UTF8.self)
            var size = u32(o + 4)
            if id == "fmt " {
                fmtTag = u16(o + 8); channels = u16(o + 10); sampleRate = u32(o + 12); bits = u16(o + 22)
            } else if id == "data" {
                size = min(size, d.count - o - 8)
                let body = d[(o + 8)..<(o + 8 + size)]
                if fmtTag == 3 && bits == 32 {
                    samples = body.withUnsafeBytes { Array($0.bindMemory(to: Float.self)) }
                } else if fmtTag == 1 && bits == 16 {
                    samples = body.withUnsafeBytes { $0.bindMemory(to: Int16.self).map { Float($0) / 32768 } }
                } else {
                    throw FixtureError("\(path): unsupported WAV format \(fmtTag)/\(bits)")
                }
                return
            }
            o += 8 + size + (size & 1)
        }
        throw FixtureError("\(path): no data chunk")
    }
}
