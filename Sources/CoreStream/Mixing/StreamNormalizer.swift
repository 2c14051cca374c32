import CEBUR128
#if canImport(Glibc)
import Glibc
#endif

/// A slow automatic gain for network streams (`[streams] normalize`, issue 43): a
/// station mastered 10 dB hotter or quieter than the local music is brought toward
/// the ReplayGain reference (−18 LUFS) over seconds, so it never jumps against the
/// music around it, and it never clips.
///
/// On the reader thread, on each decoded step before it goes into the ring:
/// - the step is measured (libebur128, short-term loudness: the last 3 s);
/// - the wanted gain is the reference minus that loudness, within −18…+12 dB, and held
///   while the station is quieter than −50 LUFS (silence, a pause between items is
///   not boosted);
/// - the gain moves toward it at most 1 dB a second up and 2 dB a second down,
///   linearly across the step;
/// - no sample goes past −1 dBFS: a step's own peak caps where its gain ends (the ring
///   holds what is decoded ahead, so this is a look-ahead of one step), and while the
///   gain comes down into a loud step a frame that would pass it is held at it.
///
/// Thread: the reader's, one per stream. Allocates only in `init` (a stream's start).
final class StreamNormalizer {
    /// The decoder it belongs to (a new stream gets a new one).
    let owner: ObjectIdentifier
    private var state: UnsafeMutablePointer<ebur128_state>?
    private let channels: Int
    private let rate: Double
    private let targetLUFS: Double
    /// The gain applied at the end of the last step, dB.
    private(set) var gainDB = 0.0
    private var measuredFrames = 0

    static let maxBoostDB = 12.0
    static let maxCutDB = 18.0
    static let upDBPerSecond = 1.0
    static let downDBPerSecond = 2.0
    static let quietLUFS = -50.0
    /// −1 dBFS.
    static let ceiling = Float(0.891_250_938)

    init?(owner: ObjectIdentifier, format: PCMFormat, targetLUFS: Double) {
        guard LoudnessMeter.channels.contains(format.channels), LoudnessMeter.sampleRates.contains(format.sampleRate),
              targetLUFS.isFinite,
              let s = ebur128_init(UInt32(format.channels), UInt(format.sampleRate), Int32(EBUR128_MODE_S.rawValue)) else { return nil }
        self.owner = owner
        state = s
        channels = format.channels
        rate = Double(format.sampleRate)
        self.targetLUFS = targetLUFS
    }

    deinit { ebur128_destroy(&state) }

    /// Applies the gain to `frames` interleaved frames in place.
    func process(_ samples: UnsafeMutablePointer<Float>, frames: Int) {
        guard frames > 0 else { return }
        ebur128_add_frames_float(state, samples, frames)
        measuredFrames += frames
        var wanted = gainDB
        var shortTerm = -Double.infinity
        if measuredFrames >= Int(3 * rate), ebur128_loudness_shortterm(state, &shortTerm) == 0,
           shortTerm.isFinite, shortTerm > Self.quietLUFS {
            wanted = min(Self.maxBoostDB, max(-Self.maxCutDB, targetLUFS - shortTerm))
        }
        let seconds = Double(frames) / rate
        let next = wanted > gainDB ? min(wanted, gainDB + Self.upDBPerSecond * seconds)
                                   : max(wanted, gainDB - Self.downDBPerSecond * seconds)
        // The step's own peak caps where the gain may end (the ring holds what is
        // decoded ahead of the device: this is a look-ahead of one step).
        var stepPeak: Float = 0
        for i in 0..<(frames * channels) { stepPeak = max(stepPeak, abs(samples[i])) }
        let from = Float(Loudness.linear(db: gainDB))
        var to = Float(Loudness.linear(db: next))
        if stepPeak * to > Self.ceiling { to = Self.ceiling / stepPeak }
        let step = (to - from) / Float(frames)
        for f in 0..<frames {
            var g = from + step * Float(f + 1)
            let base = samples + f * channels
            // Coming down from a higher gain into a loud step: the frames before the
            // ramp has come down are held at the ceiling.
            if g > to {
                var peak: Float = 0
                for c in 0..<channels { peak = max(peak, abs(base[c])) }
                if peak * g > Self.ceiling { g = Self.ceiling / peak }
            }
            for c in 0..<channels { base[c] *= g }
        }
        gainDB = 20 * log10(Double(max(to, 1e-6)))
    }
}
