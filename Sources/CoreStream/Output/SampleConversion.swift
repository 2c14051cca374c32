/// Float samples to the integer formats devices and files take: the one conversion
/// the render thread and the exporter share, so an export is exactly what playback
/// renders. Clamps to [−1, 1]; rounds to nearest, ties to even (16-bit) or truncates
/// toward zero after scaling by 2³¹ (32-bit, exact for 24-bit sources).
///
/// Thread: any. Real-time safe: yes.
public enum SampleConversion {
    @inline(__always)
    public static func toInt16(_ source: UnsafePointer<Float>, _ destination: UnsafeMutablePointer<Int16>, count: Int) {
        // 1.5 × 2²³: adding it to a float of magnitude < 2²² rounds it to an integer,
        // ties to even, and leaves that integer in the low bits of the sum's bit pattern
        // (0x4B400000 + n). Reading the bits instead of converting back with Int32(_:)
        // leaves no trapping conversion in the loop, so it vectorizes.
        let magic: Float = 12_582_912
        for i in 0..<count {
            let v = min(max(-1, min(source[i], 1)) * 32768.0, 32767.0)  // NaN → −1, as before
            destination[i] = Int16(truncatingIfNeeded: Int32(bitPattern: (v + magic).bitPattern) &- 0x4B40_0000)
        }
    }

    @inline(__always)
    public static func toInt32(_ source: UnsafePointer<Float>, _ destination: UnsafeMutablePointer<Int32>, count: Int) {
        for i in 0..<count {
            let v = max(-1, min(source[i], 1)) * 2147483648.0
            destination[i] = v >= 2147483647.0 ? Int32.max : Int32(v)
        }
    }
}
