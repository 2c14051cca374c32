import Foundation
#if canImport(Glibc)
import Glibc
#endif
import CoreStream

/// Independent references: what the `ffmpeg` CLI decodes from a file.
public enum Reference {
    /// The ffmpeg CLI's straight decode of `path` as interleaved 32-bit float at the
    /// file's own rate and channel count.
    ///
    /// Kept for the process, keyed by the file's identity (device, inode, size and
    /// modification time) and the arguments: the exactness matrix alone asks for the same
    /// ten decodes 70 times (about 35 s of the test run on 2 cores). A file rewritten in
    /// place changes its size or time, and is decoded again.
    public static func decode(_ path: String, extraArguments: [String] = []) throws -> [Float] {
        let key = identity(path).map { "\($0)|\(path)|\(extraArguments.joined(separator: "\u{1}"))" }
        if let key, let hit = cache.get(key) { return hit }
        let out = try Shell.run(["ffmpeg", "-nostdin", "-v", "error", "-i", path]
                                + extraArguments + ["-f", "f32le", "-c:a", "pcm_f32le", "-"])
        guard out.status == 0 else { throw FixtureError("ffmpeg decode of \(path) failed: \(out.stderr)") }
        let samples = out.stdout.withUnsafeBytes { Array($0.bindMemory(to: Float.self)) }
        // Checked again after the decode: a file changed while ffmpeg read it is not kept.
        if let key, identity(path).map({ key.hasPrefix("\($0)|") }) == true { cache.put(key, samples) }
        return samples
    }

    /// device:inode:size:mtime (ns) of a regular file, or nil.
    private static func identity(_ path: String) -> String? {
        var st = stat()
        guard stat(path, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG else { return nil }
        return "\(st.st_dev):\(st.st_ino):\(st.st_size):\(st.st_mtim.tv_sec).\(st.st_mtim.tv_nsec)"
    }

    /// The decodes kept, up to 512 MB of samples; the oldest go first.
    private final class Cache: @unchecked Sendable {
        private let lock = NSLock()
        private var entries: [String: [Float]] = [:]   // guarded by lock
        private var order: [String] = []               // guarded by lock: oldest first
        private var samples = 0                        // guarded by lock
        private let limit = 128 << 20                  // Float samples: 512 MB
        func get(_ key: String) -> [Float]? { lock.lock(); defer { lock.unlock() }; return entries[key] }
        func put(_ key: String, _ value: [Float]) {
            guard value.count <= limit / 4 else { return }
            lock.lock(); defer { lock.unlock() }
            if let old = entries[key] { samples -= old.count; order.removeAll { $0 == key } }
            entries[key] = value; order.append(key); samples += value.count
            while samples > limit, let first = order.first {
                order.removeFirst(); samples -= entries.removeValue(forKey: first)?.count ?? 0
            }
        }
    }
    private static let cache = Cache()

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
