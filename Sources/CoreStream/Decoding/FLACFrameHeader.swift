/// A FLAC frame's header read from raw bytes (RFC 9639, section 9.1): where a frame
/// starts and which sample it starts at, without FFmpeg's parser, which hands out a
/// frame only after it has seen about ten more (54 KB of a 415 kbit/s FLAC). The byte
/// search of an HTTP FLAC (``AudioDecoder/byteSeek(to:)``) reads a few KB after a byte
/// with this instead. Every field is checked and the header's CRC-8 must match, so
/// audio bytes that happen to hold the sync code are passed over.
struct FLACFrameHeader: Equatable {
    /// The header's offset in the bytes searched.
    let offset: Int
    /// The frame's first sample, FFmpeg's timestamp for it: a fixed-size stream's frame
    /// number times the stream's block size (STREAMINFO's largest: the last frame may
    /// be shorter), a variable-size stream's own sample number.
    let firstSample: Int64
    let blockSize: Int

    /// The first valid header at or after `from` whose bytes all lie in `bytes`;
    /// `streamBlockSize` is STREAMINFO's largest block size (nil: this frame's).
    static func first(in bytes: UnsafeRawBufferPointer, from: Int = 0, streamBlockSize: Int? = nil) -> FLACFrameHeader? {
        guard from >= 0, bytes.count >= 2 else { return nil }
        var i = from
        while i + 1 < bytes.count {
            if bytes[i] == 0xFF, bytes[i + 1] & 0xFE == 0xF8, let h = parse(bytes, at: i, streamBlockSize: streamBlockSize) { return h }
            i += 1
        }
        return nil
    }

    /// The header at `i`, or nil when the bytes there are not one (or run out first).
    static func parse(_ b: UnsafeRawBufferPointer, at i: Int, streamBlockSize: Int? = nil) -> FLACFrameHeader? {
        let n = b.count
        guard i >= 0, i + 5 <= n, b[i] == 0xFF, b[i + 1] & 0xFE == 0xF8 else { return nil }
        let variable = b[i + 1] & 1 == 1
        let sizeCode = Int(b[i + 2] >> 4), rateCode = Int(b[i + 2] & 0x0F)
        let channels = Int(b[i + 3] >> 4), depthCode = Int((b[i + 3] >> 1) & 7)
        // Reserved values: block size 0, rate 15, channel assignments 11-15, depth 3,
        // the last bit of byte 3.
        guard sizeCode != 0, rateCode != 15, channels < 11, depthCode != 3, b[i + 3] & 1 == 0 else { return nil }
        // The frame or sample number, UTF-8 style: 1 to 7 bytes.
        var j = i + 4
        let lead = b[j]
        var value: UInt64
        let extra: Int
        switch lead {
        case 0x00...0x7F: value = UInt64(lead); extra = 0
        case 0xC0...0xDF: value = UInt64(lead & 0x1F); extra = 1
        case 0xE0...0xEF: value = UInt64(lead & 0x0F); extra = 2
        case 0xF0...0xF7: value = UInt64(lead & 0x07); extra = 3
        case 0xF8...0xFB: value = UInt64(lead & 0x03); extra = 4
        case 0xFC...0xFD: value = UInt64(lead & 0x01); extra = 5
        case 0xFE: value = 0; extra = 6
        default: return nil
        }
        // A frame number has at most 31 bits (6 bytes); a sample number 36 (7 bytes).
        guard variable || extra <= 5, j + 1 + extra <= n else { return nil }
        for k in 0..<extra {
            let c = b[j + 1 + k]
            guard c & 0xC0 == 0x80 else { return nil }
            value = value << 6 | UInt64(c & 0x3F)
        }
        j += 1 + extra
        let blockSize: Int
        switch sizeCode {
        case 1: blockSize = 192
        case 2...5: blockSize = 576 << (sizeCode - 2)
        case 6:
            guard j < n else { return nil }
            blockSize = Int(b[j]) + 1; j += 1
        case 7:
            guard j + 1 < n else { return nil }
            blockSize = (Int(b[j]) << 8 | Int(b[j + 1])) + 1; j += 2
        default: blockSize = 256 << (sizeCode - 8)
        }
        switch rateCode {
        case 12: j += 1
        case 13, 14: j += 2
        default: break
        }
        guard j < n, crc8(b, i..<j) == b[j] else { return nil }
        // value < 2^36 and a block size <= 65536: the product fits.
        let size = streamBlockSize.map { min(max($0, 16), 65_535) } ?? blockSize
        let first = variable ? Int64(value) : Int64(value) * Int64(size)
        return FLACFrameHeader(offset: i, firstSample: first, blockSize: blockSize)
    }

    /// CRC-8, polynomial x^8 + x^2 + x + 1, initial value 0 (the header's check).
    static func crc8(_ b: UnsafeRawBufferPointer, _ range: Range<Int>) -> UInt8 {
        var crc: UInt8 = 0
        for k in range {
            crc ^= b[k]
            for _ in 0..<8 { crc = crc & 0x80 != 0 ? (crc << 1) ^ 0x07 : crc << 1 }
        }
        return crc
    }
}
