/// Exact time arithmetic on frame counts.
///
/// Positions are `Int64` frame counts at a stated rate, like Core Media's
/// `CMTime(value:timescale:)`. Conversions between rates, and to and from an FFmpeg
/// time base, are done in integer arithmetic with one rounding at the end; floats
/// appear only at the edges (seconds shown to a person or sent as JSON).
public enum FrameTime {
    /// A frame position as people write times, for messages: `2:30`, `1:23.5`,
    /// `1:02:03.25` (to the millisecond, trailing zeros dropped). A negative one has
    /// a minus sign; out of any sane range, the frame count with `f`.
    public static func clock(_ frames: Int64, rate: Int) -> String {
        guard rate > 0, frames.magnitude < UInt64(Int64.max / 1000) else { return "\(frames)f" }
        let ms = (frames.magnitude * 1000 + UInt64(rate) / 2) / UInt64(rate)
        let (h, m, s, f) = (ms / 3_600_000, ms / 60_000 % 60, ms / 1000 % 60, ms % 1000)
        func two(_ v: UInt64) -> String { v < 10 ? "0\(v)" : "\(v)" }
        var text = h > 0 ? "\(h):\(two(m)):\(two(s))" : "\(m):\(two(s))"
        if f > 0 {
            var frac = String(String(1000 + f).dropFirst())
            while frac.hasSuffix("0") { frac.removeLast() }
            text += "." + frac
        }
        return (frames < 0 ? "-" : "") + text
    }

    /// `value × numerator / denominator` rounded to nearest (ties away from zero),
    /// computed in 128 bits so no intermediate overflows.
    ///
    /// Thread: any. Real-time safe: yes.
    @inlinable
    public static func rescale(_ value: Int64, _ numerator: Int64, _ denominator: Int64) -> Int64 {
        precondition(denominator > 0 && numerator >= 0, "rescale needs a positive ratio")
        let negative = value < 0
        let magnitude = value.magnitude
        let product = magnitude.multipliedFullWidth(by: UInt64(numerator))
        // Add half the denominator for round-to-nearest.
        let half = UInt64(denominator) / 2
        let (low, carry) = product.low.addingReportingOverflow(half)
        let high = product.high &+ (carry ? 1 : 0)
        precondition(high < UInt64(denominator), "rescale overflows Int64")
        let (q, _) = UInt64(denominator).dividingFullWidth((high: high, low: low))
        precondition(q <= UInt64(Int64.max), "rescale overflows Int64")
        return negative ? -Int64(q) : Int64(q)
    }

    /// `value × numerator / denominator` rounded toward negative infinity.
    ///
    /// Thread: any. Real-time safe: yes.
    @inlinable
    public static func rescaleFloor(_ value: Int64, _ numerator: Int64, _ denominator: Int64) -> Int64 {
        precondition(denominator > 0 && numerator >= 0, "rescale needs a positive ratio")
        let negative = value < 0
        let product = value.magnitude.multipliedFullWidth(by: UInt64(numerator))
        precondition(product.high < UInt64(denominator), "rescale overflows Int64")
        let (q, r) = UInt64(denominator).dividingFullWidth(product)
        precondition(q < UInt64(Int64.max), "rescale overflows Int64")
        if negative { return -Int64(q) - (r != 0 ? 1 : 0) }
        return Int64(q)
    }

    /// Converts a frame count from one sample rate to another, rounding to nearest.
    @inlinable
    public static func convert(_ frames: Int64, from sourceRate: Int, to targetRate: Int) -> Int64 {
        if sourceRate == targetRate { return frames }
        return rescale(frames, Int64(targetRate), Int64(sourceRate))
    }

    /// Seconds as a `Double`, for display and JSON only.
    @inlinable
    public static func seconds(_ frames: Int64, rate: Int) -> Double {
        // Split into whole seconds and remainder so large positions keep full precision.
        let whole = frames / Int64(rate)
        let rest = frames % Int64(rate)
        return Double(whole) + Double(rest) / Double(rate)
    }

    /// The frame at `seconds`, rounded to nearest. For values the program computed
    /// itself; anything from outside goes through ``checkedFrames(seconds:rate:)``.
    public static func frames(seconds: Double, rate: Int) -> Int64 {
        precondition(seconds.isFinite, "seconds must be finite")
        return Int64((seconds * Double(rate)).rounded())
    }

    /// The largest frame count taken from outside (a client, a file, a header):
    /// 2^53, where a `Double` still holds every integer — 6,500 years at 44.1 kHz.
    /// Keeping every position below it means `position + position` never overflows.
    public static let maxFrames: Int64 = 1 << 53

    /// The frame at `seconds`, or nil when `seconds` is NaN, infinite, or so large
    /// that the frame count leaves ±``maxFrames`` (`seek 1e300` must be an error, not
    /// a trap: `Int64(Double)` traps out of range).
    ///
    /// Thread: any. Real-time safe: yes.
    public static func checkedFrames(seconds: Double, rate: Int) -> Int64? {
        guard seconds.isFinite, rate > 0 else { return nil }
        let f = (seconds * Double(rate)).rounded()
        guard f.isFinite, abs(f) <= Double(maxFrames) else { return nil }
        return Int64(f)
    }

    /// `value × numerator / denominator` rounded to nearest, or nil when the ratio is not
    /// positive or the result does not fit in an `Int64`: for timestamps and durations
    /// read from a media file's headers, which can hold anything.
    ///
    /// Thread: any. Real-time safe: yes.
    @inlinable
    public static func checkedRescale(_ value: Int64, _ numerator: Int64, _ denominator: Int64) -> Int64? {
        guard denominator > 0, numerator >= 0 else { return nil }
        let product = value.magnitude.multipliedFullWidth(by: UInt64(numerator))
        let (low, carry) = product.low.addingReportingOverflow(UInt64(denominator) / 2)
        let high = product.high &+ (carry ? 1 : 0)
        guard high < UInt64(denominator) else { return nil }
        let (q, _) = UInt64(denominator).dividingFullWidth((high: high, low: low))
        guard q <= UInt64(Int64.max) else { return nil }
        return value < 0 ? -Int64(q) : Int64(q)
    }
}
