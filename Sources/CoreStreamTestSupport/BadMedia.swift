import CoreStream
import Foundation

/// Builds the bad-input cases for the engine's error tests in a fresh directory,
/// using the ffmpeg CLI where real media is needed.
public enum BadMedia {
    public struct Case: Sendable, CustomStringConvertible {
        public var name: String
        public var path: String
        /// The expected `StreamError.Code` wire name.
        public var expectedCode: String
        /// The case shows only to a reader without privileges (root reads a file with
        /// mode 0): a test running as root reads it as nobody (setpriv), never skips it.
        public var needsUnprivilegedReader = false
        public var description: String { name }
    }

    /// Creates every case under `directory` and returns them.
    public static func make(in directory: String) throws -> [Case] {
        let fm = FileManager.default
        try fm.createDirectory(atPath: directory, withIntermediateDirectories: true)
        func path(_ n: String) -> String { directory + "/" + n }
        func ffmpeg(_ args: [String]) throws { try Shell.ffmpeg(args) }
        var cases: [Case] = []
        cases.append(Case(name: "nonexistent path", path: path("does-not-exist.flac"), expectedCode: "file_not_found"))

        try fm.createDirectory(atPath: path("a-directory.mp3"), withIntermediateDirectories: true)
        cases.append(Case(name: "a directory", path: path("a-directory.mp3"), expectedCode: "is_directory"))

        let source = Fixtures.stereoSource
        _ = Fixtures.all  // make sure the fixtures exist
        try? fm.removeItem(atPath: path("unreadable.flac"))
        try fm.copyItem(atPath: Fixtures.named("flac-44100-2.flac").path, toPath: path("unreadable.flac"))
        chmod(path("unreadable.flac"), 0)
        // root reads anything: a test running as root checks this one as another user.
        cases.append(Case(name: "no read permission", path: path("unreadable.flac"), expectedCode: "permission_denied",
                          needsUnprivilegedReader: true))

        fm.createFile(atPath: path("empty.mp3"), contents: Data())
        cases.append(Case(name: "zero-length file", path: path("empty.mp3"), expectedCode: "empty_file"))

        fm.createFile(atPath: path("text.mp3"), contents: Data("This is a shopping list, not a song.\nmilk\neggs\n".utf8))
        cases.append(Case(name: "text named .mp3", path: path("text.mp3"), expectedCode: "not_audio"))

        try ffmpeg(["-f", "lavfi", "-i", "color=red:s=32x32", "-frames:v", "1", "-f", "image2", "-c:v", "png", path("image.mp3")])
        cases.append(Case(name: "PNG named .mp3", path: path("image.mp3"), expectedCode: "not_audio"))

        let flac = try Data(contentsOf: URL(fileURLWithPath: Fixtures.named("flac-44100-2.flac").path))
        fm.createFile(atPath: path("truncated.flac"), contents: flac.prefix(flac.count / 3))
        cases.append(Case(name: "truncated FLAC", path: path("truncated.flac"), expectedCode: "truncated"))

        let wav = try Data(contentsOf: URL(fileURLWithPath: source))
        fm.createFile(atPath: path("truncated.wav"), contents: wav.prefix(wav.count / 2))
        cases.append(Case(name: "truncated WAV", path: path("truncated.wav"), expectedCode: "truncated"))

        try ffmpeg(["-i", source, "-c:a", "aac", "-movflags", "+faststart", path("full.m4a")])
        let m4a = try Data(contentsOf: URL(fileURLWithPath: path("full.m4a")))
        fm.createFile(atPath: path("truncated.m4a"), contents: m4a.prefix(m4a.count / 2))
        cases.append(Case(name: "truncated M4A", path: path("truncated.m4a"), expectedCode: "truncated"))

        try ffmpeg(["-i", source, "-c:a", "aac", "-encryption_scheme", "cenc-aes-ctr",
                    "-encryption_key", "76a6c65c5ea762046bd749a2e632ccbb",
                    "-encryption_kid", "a7e61c373e219033c21091fa607bf3b8", path("encrypted.m4a")])
        cases.append(Case(name: "encrypted (CENC) M4A", path: path("encrypted.m4a"), expectedCode: "encrypted"))

        try ffmpeg(["-f", "lavfi", "-i", "testsrc=d=1:s=64x48", "-c:v", "mpeg4", path("video-only.mp4")])
        cases.append(Case(name: "video with no audio stream", path: path("video-only.mp4"), expectedCode: "no_audio_stream"))

        var garbage = Data(count: 64 * 1024)
        var seed: UInt32 = 12345
        for i in 0..<garbage.count { seed = seed &* 1103515245 &+ 12345; garbage[i] = UInt8(truncatingIfNeeded: seed >> 16) }
        fm.createFile(atPath: path("random.flac"), contents: garbage)
        cases.append(Case(name: "random bytes named .flac", path: path("random.flac"), expectedCode: "not_audio"))

        // Files that make FFmpeg open other files by itself (found by content, so the
        // names do not help): an HLS playlist, an ffconcat list, a concat: protocol name
        // inside an HLS playlist. Each points at a real, playable WAV; none may be opened.
        let target = Fixtures.named("wav16-44100-2.wav").path
        fm.createFile(atPath: path("playlist.m3u8"), contents: Data("#EXTM3U\n#EXT-X-TARGETDURATION:10\n#EXTINF:10,\nfile://\(target)\n#EXT-X-ENDLIST\n".utf8))
        cases.append(Case(name: "HLS playlist (.m3u8)", path: path("playlist.m3u8"), expectedCode: "unsupported_format"))
        try fm.copyItem(atPath: path("playlist.m3u8"), toPath: path("hls-named.mp3"))
        cases.append(Case(name: "HLS playlist named .mp3", path: path("hls-named.mp3"), expectedCode: "unsupported_format"))
        fm.createFile(atPath: path("ffconcat-list.flac"), contents: Data("ffconcat version 1.0\nfile '\(target)'\n".utf8))
        cases.append(Case(name: "ffconcat list named .flac", path: path("ffconcat-list.flac"), expectedCode: "unsupported_format"))
        fm.createFile(atPath: path("subfile.m3u8"), contents: Data("#EXTM3U\n#EXT-X-TARGETDURATION:10\n#EXTINF:10,\nsubfile,,start,0,end,0,,:\(target)\n#EXT-X-ENDLIST\n".utf8))
        cases.append(Case(name: "HLS with a subfile: entry", path: path("subfile.m3u8"), expectedCode: "unsupported_format"))

        _ = mkfifo(path("a-fifo.mp3"), 0o600)
        cases.append(Case(name: "a FIFO", path: path("a-fifo.mp3"), expectedCode: "not_regular_file"))
        return cases
    }
}

/// The hardening corpus (issue 11): every fixture damaged many ways, for running
/// through the real daemon's queue.
public enum BadMediaCorpus {
    public enum Damage: Sendable, Equatable {
        /// Cut to this fraction of its length.
        case truncated(Double)
        /// This fraction of its bytes XORed with a random non-zero byte, from `seed`.
        case flipped(rate: Double, seed: UInt64)
        /// The first 1 KiB zeroed.
        case headerZeroed
    }

    public static let truncationPoints: [Double] = [0.001, 0.01, 0.05, 0.1, 0.25, 0.4, 0.5, 0.75, 0.9, 0.99]
    public static let flipRates: [Double] = [0.01, 0.001, 0.0001]

    public struct Entry: Sendable {
        public var path: String
        public var fixture: String
        public var damage: Damage
    }

    /// Writes `fixtures` × (10 truncations + 3 flip rates × `seeds` + zeroed header) into
    /// `directory`; returns them in a stable order.
    public static func make(in directory: String, fixtures: [Fixture], seeds: Int) throws -> [Entry] {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        var out: [Entry] = []
        for f in fixtures {
            let data = try Data(contentsOf: URL(fileURLWithPath: f.path))
            let ext = (f.name as NSString).pathExtension
            let base = (f.name as NSString).deletingPathExtension
            func write(_ d: Data, _ tag: String, _ damage: Damage) {
                let p = "\(directory)/\(base)-\(tag).\(ext)"
                FileManager.default.createFile(atPath: p, contents: d)
                out.append(Entry(path: p, fixture: f.name, damage: damage))
            }
            for (i, point) in truncationPoints.enumerated() {
                write(data.prefix(Int(Double(data.count) * point)), "trunc\(i)", .truncated(point))
            }
            for (r, rate) in flipRates.enumerated() {
                for seed in 1...UInt64(seeds) {
                    var rng = SplitMix64(seed: seed &* 1_000_003 &+ UInt64(r))
                    var d = data
                    let flips = max(1, Int(Double(d.count) * rate))
                    d.withUnsafeMutableBytes { b in
                        for _ in 0..<flips {
                            let at = Int(rng.next() % UInt64(b.count))
                            b[at] ^= UInt8(truncatingIfNeeded: rng.next() % 255 + 1)
                        }
                    }
                    write(d, "flip\(r)-\(seed)", .flipped(rate: rate, seed: seed))
                }
            }
            var z = data
            z.replaceSubrange(0..<min(1024, z.count), with: Data(count: min(1024, z.count)))
            write(z, "zeroed", .headerZeroed)
        }
        return out
    }
}
