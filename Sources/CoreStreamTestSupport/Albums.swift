import Foundation

/// An "album" made by cutting the stereo fixture source into tracks with the ffmpeg CLI.
public enum Albums {
    /// Where the 3-second 44.1 kHz stereo source is cut: off packet boundaries of
    /// every codec.
    public static let cuts = [0, 40_000, 90_001, 132_300]

    /// The source split at `cuts` into `dir/prefix-N.ext` files, encoded with `codec`
    /// arguments (and any `extra` arguments, e.g. tags, per track index).
    public static func split(_ prefix: String, _ ext: String, _ codec: [String], into dir: String? = nil,
                             extra: (Int) -> [String] = { _ in [] }) throws -> [String] {
        let dir = dir ?? NSTemporaryDirectory() + "playd-gapless-\(getpid())"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        var paths: [String] = []
        for i in 0..<(cuts.count - 1) {
            let out = "\(dir)/\(prefix)-\(i + 1).\(ext)"
            let r = try Shell.run(["ffmpeg", "-nostdin", "-v", "error", "-y", "-i", Fixtures.stereoSource,
                                   "-af", "atrim=start_sample=\(cuts[i]):end_sample=\(cuts[i + 1]),asetpts=PTS-STARTPTS"]
                                  + codec + extra(i) + [out])
            guard r.status == 0 else { throw FixtureError("ffmpeg split failed: \(r.stderr)") }
            paths.append(out)
        }
        return paths
    }
}
