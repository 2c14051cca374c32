import CEBUR128
#if canImport(Glibc)
import Glibc
#endif

/// EBU R128 / ITU-R BS.1770-4 figures of one track or of an album (issue 43).
public struct LoudnessFigures: Sendable, Equatable {
    /// Integrated loudness, LUFS; nil for silence (every block under the −70 LUFS gate).
    public var integratedLUFS: Double?
    /// Loudness range, LU.
    public var rangeLU: Double
    /// True peak (4× oversampled below 96 kHz, as BS.1770-4 asks), dBTP; nil for
    /// digital silence.
    public var truePeakDBTP: Double?
    /// Largest sample, dBFS; nil for digital silence.
    public var samplePeakDBFS: Double?
    /// Seconds measured.
    public var seconds: Double
    /// The album's integrated loudness and true peak, when the track was measured as one
    /// of an album (the library's measuring: the tracks of one folder with one album
    /// tag, gated as one programme).
    public var albumLUFS: Double?
    public var albumTruePeakDBTP: Double?

    public init(integratedLUFS: Double?, rangeLU: Double, truePeakDBTP: Double?, samplePeakDBFS: Double?, seconds: Double,
                albumLUFS: Double? = nil, albumTruePeakDBTP: Double? = nil) {
        self.integratedLUFS = integratedLUFS
        self.rangeLU = rangeLU
        self.truePeakDBTP = truePeakDBTP
        self.samplePeakDBFS = samplePeakDBFS
        self.seconds = seconds
        self.albumLUFS = albumLUFS
        self.albumTruePeakDBTP = albumTruePeakDBTP
    }

    /// The ReplayGain 2.0 gain for this loudness against `referenceLUFS` (−18 LUFS is
    /// ReplayGain 2.0's reference), dB; nil for silence.
    public func gainDB(referenceLUFS: Double = -18) -> Double? { integratedLUFS.map { referenceLUFS - $0 } }
}

/// Measures EBU R128 loudness with libebur128 (integrated, range, true and sample
/// peak). A track's state keeps one double per 100 ms block for the gating (about
/// 0.3 MB an hour), its filters a few KiB: a folder's states are kept for its album
/// figure and freed after it.
///
/// Thread: any, one at a time per meter. Real-time safe: no (decodes a file).
public final class LoudnessMeter {
    /// libebur128's limits on what it measures, checked before the conversion to its
    /// unsigned arguments (a header's rate or channel count is outside input).
    public static let channels = 1...64
    public static let sampleRates = 8_000...768_000

    private var state: UnsafeMutablePointer<ebur128_state>?
    private let channels: Int
    private let sampleRate: Int
    private var frames: Int64 = 0

    /// A meter for `format`; throws `unsupportedFormat` outside libebur128's limits.
    public init(format: PCMFormat) throws(StreamError) {
        guard Self.channels.contains(format.channels), Self.sampleRates.contains(format.sampleRate) else {
            throw StreamError(.unsupportedFormat, "cannot measure the loudness of \(format): 1 to 64 channels at 8 to 768 kHz")
        }
        channels = format.channels
        sampleRate = format.sampleRate
        let mode = Int32(EBUR128_MODE_I.rawValue | EBUR128_MODE_LRA.rawValue | EBUR128_MODE_TRUE_PEAK.rawValue)
        guard let s = ebur128_init(UInt32(format.channels), UInt(format.sampleRate), mode) else {
            throw StreamError(.internalError, "libebur128 could not allocate a meter for \(format)")
        }
        state = s
    }

    deinit { if state != nil { ebur128_destroy(&state) } }

    /// Adds `count` interleaved frames.
    public func add(_ samples: UnsafePointer<Float>, frames count: Int) {
        guard count > 0 else { return }
        _ = ebur128_add_frames_float(state, samples, count)
        frames += Int64(count)
    }

    /// The figures of what was added so far.
    public var figures: LoudnessFigures {
        var integrated = 0.0, range = 0.0
        _ = ebur128_loudness_global(state, &integrated)
        _ = ebur128_loudness_range(state, &range)
        var truePeak = 0.0, samplePeak = 0.0
        for c in 0..<channels {
            var t = 0.0, p = 0.0
            _ = ebur128_true_peak(state, UInt32(c), &t)
            _ = ebur128_sample_peak(state, UInt32(c), &p)
            truePeak = max(truePeak, t)
            samplePeak = max(samplePeak, p)
        }
        return LoudnessFigures(integratedLUFS: integrated.isFinite ? integrated : nil, rangeLU: range.isFinite ? range : 0,
                               truePeakDBTP: Self.decibels(truePeak), samplePeakDBFS: Self.decibels(samplePeak),
                               seconds: Double(frames) / Double(sampleRate))
    }

    /// An album's figures over its tracks' meters (the gating pooled over every block,
    /// as BS.1770 asks of a programme; the peaks the largest of any track).
    public static func album(_ meters: [LoudnessMeter]) -> LoudnessFigures? {
        guard !meters.isEmpty else { return nil }
        var states: [UnsafeMutablePointer<ebur128_state>?] = meters.map(\.state)
        var integrated = 0.0, range = 0.0
        _ = states.withUnsafeMutableBufferPointer { ebur128_loudness_global_multiple($0.baseAddress, $0.count, &integrated) }
        _ = states.withUnsafeMutableBufferPointer { ebur128_loudness_range_multiple($0.baseAddress, $0.count, &range) }
        let each = meters.map(\.figures)
        return LoudnessFigures(integratedLUFS: integrated.isFinite ? integrated : nil, rangeLU: range.isFinite ? range : 0,
                               truePeakDBTP: each.compactMap(\.truePeakDBTP).max(),
                               samplePeakDBFS: each.compactMap(\.samplePeakDBFS).max(),
                               seconds: each.reduce(0) { $0 + $1.seconds })
    }

    /// Decodes `path` whole at its own rate and channel count (FFmpeg with the
    /// engine's protocol and demuxer allow-lists, regular files only) and measures it.
    /// Returns the meter, for an album figure.
    public static func measure(path: String) throws(StreamError) -> LoudnessMeter {
        try measure(path: path, until: nil)!
    }

    /// As ``measure(path:)``, giving up (nil) when the monotonic clock passes
    /// `deadline` (nanoseconds) before the end: a file about to play is measured first
    /// only when that is quick.
    public static func measure(path: String, until deadline: UInt64?) throws(StreamError) -> LoudnessMeter? {
        let decoder = try AudioDecoder(path: path, threads: 0)
        let meter = try LoudnessMeter(format: decoder.outputFormat)
        let capacity = 4096
        let buffer = UnsafeMutablePointer<Float>.allocate(capacity: capacity * decoder.outputFormat.channels)
        defer { buffer.deallocate() }
        while true {
            if let deadline, monotonicNanoseconds() > deadline { return nil }
            let n = try decoder.read(into: buffer, capacity: capacity)
            if n == 0 { break }
            meter.add(buffer, frames: n)
        }
        return meter
    }

    private static func decibels(_ linear: Double) -> Double? {
        linear > 0 && linear.isFinite ? 20 * log10(linear) : nil
    }
}
