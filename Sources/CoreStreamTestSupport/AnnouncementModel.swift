import Foundation

/// What an announcement must sound like, computed from the ffmpeg CLI's decodes of the
/// music and the clip (never from playd's), for the capture tests of the engine and
/// the daemon. Stereo, interleaved float samples.
public enum AnnouncementModel {
    /// Music: 44.1 kHz stereo float (so the device is float and a capture holds the mix
    /// unrounded), a different tone on each channel (a swap shows).
    public static func music(in dir: String, seconds: Int = 8) throws -> String {
        let path = dir + "/music.wav"
        try Shell.ffmpeg(["-f", "lavfi", "-i", "sine=frequency=330:sample_rate=44100:duration=\(seconds)",
                          "-f", "lavfi", "-i", "sine=frequency=523:sample_rate=44100:duration=\(seconds)",
                          "-filter_complex", "[0][1]amerge=inputs=2,volume=2.0", "-c:a", "pcm_f32le", path])
        return path
    }

    /// A clip as a text-to-speech service sends one: 16 kHz mono MP3, a rising chirp, 1.5 s.
    public static func ttsClip(in dir: String, name: String = "clip.mp3") throws -> String {
        let path = dir + "/" + name
        try Shell.ffmpeg(["-f", "lavfi", "-i", "aevalsrc=0.4*sin(2*PI*(300+400*t)*t):s=16000:d=1.5",
                          "-c:a", "libmp3lame", "-b:a", "64k", path])
        return path
    }

    /// The clip as the device gets it: the CLI's resample to `rate`, mono to both
    /// channels at full level (as playd upmixes).
    public static func clip(_ path: String, rate: Int) throws -> [Float] {
        try Reference.decode(path, extraArguments: ["-af", "pan=stereo|c0=c0|c1=c0", "-ar", "\(rate)"])
    }

    public static func linear(_ db: Double) -> Double { pow(10, db / 20) }

    /// Duck mode from music frame `start`: the largest difference between `capture` and
    /// music × envelope + clip × gain (the envelope of Voice.swift), and where.
    public static func duckDifference(capture: [Float], music: [Float], clip: [Float], start: Int, duckDB: Double,
                                      gainDB: Double, rate: Int) -> (worst: Double, frame: Int) {
        let (g, c) = (linear(duckDB), linear(gainDB))
        let d = rate * 150 / 1000, u = rate * 500 / 1000, l = clip.count / 2
        var worst = 0.0, at = 0
        for i in 0..<min(capture.count, music.count) {
            let n = i / 2 - start
            let m = Double(music[i])
            let expected: Double
            if n < 0 { expected = m }
            else if n < d { expected = m * (1 - (1 - g) * Double(n) / Double(d)) }
            else if n < d + l { let s: Double = Double(clip[(n - d) * 2 + i % 2]); expected = m * g + s * c }
            else if n < d + l + u { expected = m * (g + (1 - g) * Double(n - d - l) / Double(u)) }
            else { expected = m }
            let diff = abs(Double(capture[i]) - expected)
            if diff > worst { worst = diff; at = i / 2 }
        }
        return (worst, at)
    }

    /// Where the clip (already at its gain) starts in `capture` (a frame), found by its
    /// first loud samples, and a problem when it is not there whole and exact (1e-6).
    public static func clipAlone(capture: [Float], clip: [Float]) -> (frame: Int?, problem: String?) {
        guard let firstLoud = clip.firstIndex(where: { abs($0) > 1e-3 }) else { return (nil, "the clip is silent") }
        func clipAt(_ i: Int) -> Bool {
            guard i % 2 == firstLoud % 2, i >= firstLoud, i + 64 <= capture.count else { return false }
            for k in 0..<64 where abs(capture[i + k] - clip[firstLoud + k]) > 1e-6 { return false }
            return true
        }
        guard capture.count > clip.count, let found = (0..<(capture.count - clip.count)).first(where: clipAt) else {
            return (nil, "the clip is not in the capture")
        }
        let o = (found - firstLoud) / 2
        var worst: Float = 0
        for j in 0..<clip.count { worst = max(worst, abs(capture[o * 2 + j] - clip[j])) }
        return (o, worst > 1e-6 ? "the clip alone: largest difference \(worst)" : nil)
    }

    /// The clip alone between two stretches of music (a pause-mode announcement, or one
    /// made while paused): the music unchanged up to the pause's 5 ms ramp, the clip
    /// exactly (times `gainDB`), silence, then the music from the very frame it paused
    /// at, ramped in over 5 ms and then exact to its end. Returns what failed (empty:
    /// all held) and the music frame where it paused.
    public static func clipBetweenMusic(capture: [Float], music: [Float], clip unscaled: [Float], gainDB: Double = 0,
                                        rate: Int) -> (failures: [String], pausedAt: Int?) {
        let gain = Float(linear(gainDB))
        let clip = unscaled.map { $0 * gain }
        var failures: [String] = []
        let (found, problem) = clipAlone(capture: capture, clip: clip)
        guard let o = found else { return ([problem ?? "the clip is not in the capture"], nil) }
        if let problem { failures.append(problem) }
        let ramp = max(16, rate / 200)
        if o < ramp || !(0..<((o - ramp) * 2)).allSatisfy({ capture[$0] == music[$0] }) {
            failures.append("the music before the pause (\(o) frames) is not the music")
        }
        guard let loud = ((o + clip.count / 2) * 2..<capture.count).first(where: { capture[$0] != 0 }) else {
            return (failures + ["no music after the clip"], o)
        }
        let resumed = loud / 2
        let span = min(rate, music.count / 2 - o - ramp)
        let exact = span > 0 && (ramp..<(ramp + span)).allSatisfy { j in
            abs(capture[(resumed + j) * 2] - music[(o + j) * 2]) <= 1e-6 && abs(capture[(resumed + j) * 2 + 1] - music[(o + j) * 2 + 1]) <= 1e-6
        }
        if !exact { failures.append("the music does not resume at frame \(o), where it paused") }
        if capture.count / 2 - resumed != music.count / 2 - o {
            failures.append("resumed at \(resumed): \(capture.count / 2 - resumed) frames follow, \(music.count / 2 - o) were left")
        }
        return (failures, o)
    }
}
