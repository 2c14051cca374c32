import Foundation
import CoreStream

/// Independent references: what the `ffmpeg` CLI decodes from a file.
public enum Reference {
    /// The ffmpeg CLI's straight decode of `path` as interleaved 32-bit float at the
    /// file's own rate and channel count.
    public static func decode(_ path: String, extraArguments: [String] = []) throws -> [Float] {
        let out = try Shell.run(["ffmpeg", "-nostdin", "-v", "error", "-i", path]
                                + extraArguments + ["-f", "f32le", "-c:a", "pcm_f32le", "-"])
        guard out.status == 0 else { throw FixtureError("ffmpeg decode of \(path) failed: \(out.stderr)") }
        return out.stdout.withUnsafeBytes { Array($0.bindMemory(to: Float.self)) }
    }

    /// Decodes everything `decoder` delivers from its current position.
    public static func drain(_ decoder: AudioDecoder, chunk: Int = 4096) throws -> [Float] {
        let ch = decoder.outputFormat.channels
        var all: [Float] = []
        let buffer = UnsafeMutablePointer<Float>.allocate(capacity: chunk * ch)
        defer { buffer.deallocate() }
        while true {
            let n = try decoder.read(into: buffer, capacity: chunk)
            if n == 0 { break }
            all.append(contentsOf: UnsafeBufferPointer(start: buffer, count: n * ch))
        }
        return all
    }

    /// Reads up to `frames` frames from `decoder`.
    public static func read(_ decoder: AudioDecoder, frames: Int) throws -> [Float] {
        let ch = decoder.outputFormat.channels
        var all: [Float] = []
        let buffer = UnsafeMutablePointer<Float>.allocate(capacity: 4096 * ch)
        defer { buffer.deallocate() }
        while all.count < frames * ch {
            let n = try decoder.read(into: buffer, capacity: min(4096, frames - all.count / ch))
            if n == 0 { break }
            all.append(contentsOf: UnsafeBufferPointer(start: buffer, count: n * ch))
        }
        return all
    }

    /// Largest absolute difference between two equally long sample arrays.
    /// Index of the first frame where `capture` differs from `reference` (from frame
    /// `from`); nil when they agree over their common length.
    public static func firstMismatch(_ capture: [Float], _ reference: [Float], channels: Int, from: Int = 0) -> Int? {
        var f = from
        while (f + 1) * channels <= min(capture.count, reference.count) {
            for c in 0..<channels where capture[f * channels + c] != reference[f * channels + c] { return f }
            f += 1
        }
        return nil
    }

    public static func maxDifference(_ a: ArraySlice<Float>, _ b: ArraySlice<Float>) -> Float {
        precondition(a.count == b.count)
        var m: Float = 0
        for (x, y) in zip(a, b) { m = max(m, abs(x - y)) }
        return m
    }
}
