/// How the end of one track and the start of the next overlap (MPD's `crossfade`, and
/// its MixRamp), decided by the caller per join and done by the reader thread.
///
/// With an overlap of N device frames, the last N frames of track A and the first N of
/// track B are mixed, frame i of the overlap (0 ≤ i < N) being
///
///     equal power:  A[L − N + i] · cos(π/2 · i/N)  +  B[i] · sin(π/2 · i/N)
///     sum:          A[L − N + i]                   +  B[i]              (MixRamp)
///
/// (L: A's exact length), and B goes on from frame N. The mix is written into the ring as
/// A's frames: status shows A until its last frame is heard, then B from N (MPD's order).
/// Each voice keeps its own ReplayGain: B's frames are scaled by B's over A's, and the
/// render thread takes B's level at once where B's own frames begin.
///
/// The engine overlaps only what it can do exactly; anything else joins gaplessly:
/// - both tracks at the running rate and channel count, unresampled (MPD: "we can't
///   crossfade when the audio formats are different");
/// - A's length exact (not a bit-rate estimate), both tracks at least
///   ``minimumTrackSeconds`` long and longer than the overlap (MPD's rule);
/// - A playing forward with no loop when its overlap begins, and reaching that frame
///   in order: a seek into the last N frames, a loop or a direction change there, or a
///   next track replaced during the overlap leaves the rest of A to end on its own, and
///   B follows from its start.
public struct Crossfade: Sendable, Equatable {
    public enum Curve: String, Sendable, Equatable {
        /// cos/sin: the sum keeps its power where the two are uncorrelated.
        case equalPower
        /// Both at full level: MixRamp, whose tags say where each is quiet enough.
        case sum
    }

    public var seconds: Double
    public var curve: Curve

    public init(seconds: Double, curve: Curve = .equalPower) {
        self.seconds = seconds
        self.curve = curve
    }

    /// Tracks shorter than this never overlap (MPD's `MIN_TOTAL_TIME`): a jingle or an
    /// interlude would be mostly fade.
    public static let minimumTrackSeconds = 20

    /// The overlap in device frames for `current` followed by `next`, or nil when the
    /// join must stay gapless. Values are range-checked before any conversion.
    static func overlapFrames(_ x: Crossfade, current: TrackInfo?, next: TrackInfo, device: PCMFormat) -> Int? {
        guard let current, x.seconds.isFinite, x.seconds > 0, x.seconds <= 3600 else { return nil }
        let frames = Int((x.seconds * Double(device.sampleRate)).rounded())
        guard frames >= 1 else { return nil }
        let minimum = Int64(minimumTrackSeconds) * Int64(device.sampleRate)
        for t in [current, next] {
            guard t.sampleRate == device.sampleRate, t.channels == device.channels,
                  let length = t.durationFrames, length >= minimum, length > Int64(frames) else { return nil }
        }
        // B's length may be an estimate (it is only read from its start); A's end is
        // where the overlap is placed, so A's must be exact.
        guard !current.durationIsEstimate else { return nil }
        return frames
    }
}

/// A join's overlap as the reader thread does it.
struct ReaderOverlap {
    var frames: Int
    var curve: Crossfade.Curve
}
