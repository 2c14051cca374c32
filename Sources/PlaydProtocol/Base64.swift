/// Standard Base64 (RFC 4648, with padding), for binary data in JSON (cover art).
public enum Base64 {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

    public static func encode(_ bytes: [UInt8]) -> String {
        var out: [UInt8] = []
        out.reserveCapacity((bytes.count + 2) / 3 * 4)
        var i = 0
        while i < bytes.count {
            let b0 = Int(bytes[i])
            let b1 = i + 1 < bytes.count ? Int(bytes[i + 1]) : 0
            let b2 = i + 2 < bytes.count ? Int(bytes[i + 2]) : 0
            out.append(alphabet[b0 >> 2])
            out.append(alphabet[(b0 & 3) << 4 | b1 >> 4])
            out.append(i + 1 < bytes.count ? alphabet[(b1 & 15) << 2 | b2 >> 6] : UInt8(ascii: "="))
            out.append(i + 2 < bytes.count ? alphabet[b2 & 63] : UInt8(ascii: "="))
            i += 3
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// nil when `text` is not Base64.
    public static func decode(_ text: String) -> [UInt8]? {
        var values: [UInt8] = []
        var padding = 0
        for c in text.utf8 {
            switch c {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"): values.append(c - UInt8(ascii: "A"))
            case UInt8(ascii: "a")...UInt8(ascii: "z"): values.append(c - UInt8(ascii: "a") + 26)
            case UInt8(ascii: "0")...UInt8(ascii: "9"): values.append(c - UInt8(ascii: "0") + 52)
            case UInt8(ascii: "+"): values.append(62)
            case UInt8(ascii: "/"): values.append(63)
            case UInt8(ascii: "="): padding += 1; values.append(0)
            default: return nil
            }
        }
        guard values.count % 4 == 0, padding <= 2 else { return nil }
        var out: [UInt8] = []
        var i = 0
        while i < values.count {
            let n = Int(values[i]) << 18 | Int(values[i + 1]) << 12 | Int(values[i + 2]) << 6 | Int(values[i + 3])
            out.append(UInt8(n >> 16))
            out.append(UInt8(n >> 8 & 255))
            out.append(UInt8(n & 255))
            i += 4
        }
        out.removeLast(padding)
        return out
    }
}
