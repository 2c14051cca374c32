import Foundation

/// What a cross-fade must sound like, computed from the ffmpeg CLI's decodes of the two
/// tracks (never from playd's), for the engine's and the daemon's capture tests.
/// Stereo, interleaved float samples.
public enum CrossfadeModel {
    /// Two tracks at 44.1 kHz stereo float (the device is float, a capture unrounded),
    /// `seconds` long (MPD's rule: 20 s at least to cross-fade), whose samples never
    /// repeat (noise under a tone; a chirp), so a capture's offset cannot be mistaken.
    /// `tagsA`, `tagsB`: tags to write (album, track: WAV's INFO chunk keeps those).
    public static func tracks(in dir: String, seconds: Int = 20, tagsA: [String: String] = [:],
                              tagsB: [String: String] = [:]) throws -> (a: String, b: String) {
        let a = dir + "/a.wav", b = dir + "/b.wav"
        func metadata(_ t: [String: String]) -> [String] { t.sorted { $0.key < $1.key }.flatMap { ["-metadata", "\($0.key)=\($0.value)"] } }
        try Shell.ffmpeg(["-f", "lavfi", "-i", "anoisesrc=color=pink:amplitude=0.25:seed=7:sample_rate=44100:duration=\(seconds)",
                          "-f", "lavfi", "-i", "sine=frequency=220:sample_rate=44100:duration=\(seconds)",
                          "-filter_complex", "[0][1]amerge=inputs=2", "-c:a", "pcm_f32le"] + metadata(tagsA) + [a])
        try Shell.ffmpeg(["-f", "lavfi", "-i", "aevalsrc=0.4*sin(2*PI*(200+30*t)*t)|0.3*sin(2*PI*(700-20*t)*t):s=44100:d=\(seconds)",
                          "-c:a", "pcm_f32le"] + metadata(tagsB) + [b])
        return (a, b)
    }

    /// Where `capture` last holds `a`'s frames from `frame` on (1,000 frames later, past
    /// a seek's ramp in, matched over 64 frames: noise occurs once in a track, so only a
    /// replay, as after a seek back, holds them twice), as a sample index into
    /// `capture` of `a`'s frame `frame`.
    public static func locate(_ a: [Float], frame: Int, in capture: [Float]) -> Int? {
        let probe = Array(a[(frame + 1000) * 2 ..< (frame + 1064) * 2])
        var i = (capture.count - probe.count) & ~1
        while i >= 2000 {
            if capture[i] == probe[0] && Array(capture[i..<(i + probe.count)]) == probe { return i - 2000 }
            i -= 2
        }
        return nil
    }

    /// The equal-power overlap of `n` frames: A's last n frames × cos, B's first × sin,
    /// the angle π/2 · i/n at overlap frame i. `sum`: both at full level (MixRamp).
    /// `from`: A's first frame played. `gainA`, `gainB`: each track's own level.
    public static func joined(_ a: [Float], _ b: [Float], overlap n: Int, sum: Bool = false, from: Int = 0,
                              gainA: Double = 1, gainB: Double = 1) -> [Double] {
        let la = a.count / 2, lb = b.count / 2
        var out: [Double] = []
        out.reserveCapacity((la - from + lb - n) * 2)
        for f in from..<(la - n) { for c in 0..<2 { out.append(Double(a[f * 2 + c]) * gainA) } }
        for i in 0..<n {
            let theta = Double.pi / 2 * Double(i) / Double(n)
            let (wa, wb) = sum ? (1.0, 1.0) : (cos(theta), sin(theta))
            let f = la - n + i
            guard f >= from else { continue }
            for c in 0..<2 { out.append(Double(a[f * 2 + c]) * wa * gainA + Double(b[i * 2 + c]) * wb * gainB) }
        }
        for f in n..<lb { for c in 0..<2 { out.append(Double(b[f * 2 + c]) * gainB) } }
        return out
    }

    /// The largest difference between `capture` and `model` over their common length,
    /// and the frame where it is.
    public static func difference(_ capture: [Float], _ model: [Double]) -> (worst: Double, frame: Int) {
        var worst = 0.0, at = 0
        for i in 0..<min(capture.count, model.count) {
            let d = abs(Double(capture[i]) - model[i])
            if d > worst { worst = d; at = i / 2 }
        }
        return (worst, at)
    }
}
