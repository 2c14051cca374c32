/// A JSON value, with a strict parser and a compact serializer.
///
/// playd's control protocol is one JSON object per line. The parser is written here
/// (no Foundation) so the daemon controls its limits: depth, size, and precise errors
/// for a bad line. Numbers are `Double` (integers up to 2^53 are exact: 3 hours at
/// 192 kHz is 2^31 frames).
public enum JSON: Equatable, Sendable {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    case array([JSON])
    case object([(String, JSON)])

    public static func == (a: JSON, b: JSON) -> Bool {
        switch (a, b) {
        case (.null, .null): return true
        case let (.bool(x), .bool(y)): return x == y
        case let (.number(x), .number(y)): return x == y
        case let (.string(x), .string(y)): return x == y
        case let (.array(x), .array(y)): return x == y
        case let (.object(x), .object(y)):
            return x.count == y.count && zip(x, y).allSatisfy { $0.0 == $1.0 && $0.1 == $1.1 }
        default: return false
        }
    }

    /// The member `key` of an object (the last one if repeated), else nil.
    public subscript(key: String) -> JSON? {
        guard case .object(let members) = self else { return nil }
        return members.last(where: { $0.0 == key })?.1
    }

    public var stringValue: String? { if case .string(let s) = self { return s }; return nil }
    public var numberValue: Double? { if case .number(let n) = self { return n }; return nil }
    public var boolValue: Bool? { if case .bool(let b) = self { return b }; return nil }
    /// The number as an integer when it is a whole number inside `range`; nil for
    /// anything else (a fraction, 1e300, a string). Every integer a client sends goes
    /// through this: `Int(1e300)` would trap and take the daemon with it.
    public func integer(in range: ClosedRange<Int64>) -> Int64? {
        guard case .number(let n) = self, n.isFinite, n == n.rounded(),
              n >= Double(range.lowerBound), n <= Double(range.upperBound),
              let i = Int64(exactly: n), range.contains(i) else { return nil }
        return i
    }
    public var arrayValue: [JSON]? { if case .array(let a) = self { return a }; return nil }
    public var isNull: Bool { if case .null = self { return true }; return false }

    // MARK: Building

    /// The members of an object, in order; nil for anything else.
    public var objectMembers: [(String, JSON)]? {
        if case .object(let m) = self { return m }
        return nil
    }
    public static func int(_ v: Int64) -> JSON { .number(Double(v)) }
    public static func int(_ v: Int) -> JSON { .number(Double(v)) }
    public static func obj(_ members: (String, JSON?)...) -> JSON {
        .object(members.compactMap { k, v in v.map { (k, $0) } })
    }

    // MARK: Serializing

    /// Compact single-line text (no newline: safe to frame by lines).
    ///
    /// Written as UTF-8 bytes into one buffer, then made a String once: appending piece by
    /// piece to a String, and a string a Unicode scalar at a time, was two thirds of the
    /// control thread's time answering `status` (13,200 answers a second to 50 clients
    /// asking back to back; perf, issue 25).
    public var text: String {
        var out: [UInt8] = []
        out.reserveCapacity(512)
        write(into: &out)
        return String(decoding: out, as: UTF8.self)
    }

    private func write(into out: inout [UInt8]) {
        switch self {
        case .null: out.append(contentsOf: "null".utf8)
        case .bool(let b): out.append(contentsOf: (b ? "true" : "false").utf8)
        case .number(let n):
            if n.isFinite && n == n.rounded() && abs(n) < 9.007_199_254_740_992e15 {
                out.append(contentsOf: String(Int64(n)).utf8)  // up to 15 characters: no allocation
            } else if n.isFinite {
                out.append(contentsOf: "\(n)".utf8)
            } else {
                out.append(contentsOf: "null".utf8)
            }
        case .string(let s): JSON.writeString(s, into: &out)
        case .array(let a):
            out.append(UInt8(ascii: "["))
            for (i, v) in a.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                v.write(into: &out)
            }
            out.append(UInt8(ascii: "]"))
        case .object(let o):
            out.append(UInt8(ascii: "{"))
            for (i, (k, v)) in o.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                JSON.writeString(k, into: &out)
                out.append(UInt8(ascii: ":"))
                v.write(into: &out)
            }
            out.append(UInt8(ascii: "}"))
        }
    }

    /// `s` quoted and escaped: the bytes between two that need escaping go in with one
    /// append (they went in a Unicode scalar at a time).
    private static func writeString(_ s: String, into out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        var s = s
        s.withUTF8 { bytes in
            var run = 0
            for i in 0..<bytes.count {
                let b = bytes[i]
                guard b < 0x20 || b == 0x22 || b == 0x5C else { continue }
                if run < i { out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[run..<i])) }
                out.append(UInt8(ascii: "\\"))
                switch b {
                case 0x22: out.append(UInt8(ascii: "\""))
                case 0x5C: out.append(UInt8(ascii: "\\"))
                case 0x0A: out.append(UInt8(ascii: "n"))
                case 0x0D: out.append(UInt8(ascii: "r"))
                case 0x09: out.append(UInt8(ascii: "t"))
                default:
                    let hex = Array("0123456789abcdef".utf8)
                    out.append(contentsOf: [UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0"), hex[Int(b >> 4)], hex[Int(b & 15)]])
                }
                run = i + 1
            }
            if run < bytes.count { out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[run..<bytes.count])) }
        }
        out.append(UInt8(ascii: "\""))
    }

    // MARK: Parsing

    public struct ParseError: Error, Equatable, CustomStringConvertible {
        public var message: String
        public var offset: Int
        public var description: String { "\(message) at byte \(offset)" }
    }

    /// Parses one JSON document (surrounding whitespace allowed, nothing else).
    public static func parse(_ text: String, maxDepth: Int = 32) throws(ParseError) -> JSON {
        var p = Parser(bytes: Array(text.utf8), maxDepth: maxDepth)
        p.skipSpace()
        let v = try p.value(depth: 0)
        p.skipSpace()
        guard p.i == p.bytes.count else { throw ParseError(message: "unexpected text after the JSON value", offset: p.i) }
        return v
    }

    private struct Parser {
        let bytes: [UInt8]
        let maxDepth: Int
        var i = 0

        mutating func skipSpace() {
            while i < bytes.count, [0x20, 0x09, 0x0A, 0x0D].contains(bytes[i]) { i += 1 }
        }

        func fail(_ m: String) -> ParseError { ParseError(message: m, offset: i) }

        mutating func value(depth: Int) throws(ParseError) -> JSON {
            guard depth <= maxDepth else { throw fail("nesting deeper than \(maxDepth)") }
            guard i < bytes.count else { throw fail("unexpected end of input") }
            switch bytes[i] {
            case UInt8(ascii: "{"): return try object(depth: depth)
            case UInt8(ascii: "["): return try array(depth: depth)
            case UInt8(ascii: "\""): return .string(try string())
            case UInt8(ascii: "t"): try literal("true"); return .bool(true)
            case UInt8(ascii: "f"): try literal("false"); return .bool(false)
            case UInt8(ascii: "n"): try literal("null"); return .null
            default: return .number(try number())
            }
        }

        mutating func literal(_ word: String) throws(ParseError) {
            let w = Array(word.utf8)
            guard i + w.count <= bytes.count, Array(bytes[i..<(i + w.count)]) == w else { throw fail("invalid literal") }
            i += w.count
        }

        mutating func object(depth: Int) throws(ParseError) -> JSON {
            i += 1
            var members: [(String, JSON)] = []
            // A key given twice is refused: `{"cmd":"status","cmd":"clear"}` would mean
            // whatever the reader's lookup order makes it mean.
            var keys: Set<String> = []
            skipSpace()
            if i < bytes.count && bytes[i] == UInt8(ascii: "}") { i += 1; return .object(members) }
            while true {
                skipSpace()
                guard i < bytes.count, bytes[i] == UInt8(ascii: "\"") else { throw fail("expected a string key") }
                let keyOffset = i
                let key = try string()
                guard keys.insert(key).inserted else {
                    throw ParseError(message: "duplicate key \"\(key)\"", offset: keyOffset)
                }
                skipSpace()
                guard i < bytes.count, bytes[i] == UInt8(ascii: ":") else { throw fail("expected ':'") }
                i += 1
                skipSpace()
                members.append((key, try value(depth: depth + 1)))
                skipSpace()
                guard i < bytes.count else { throw fail("unterminated object") }
                if bytes[i] == UInt8(ascii: ",") { i += 1; continue }
                if bytes[i] == UInt8(ascii: "}") { i += 1; return .object(members) }
                throw fail("expected ',' or '}'")
            }
        }

        mutating func array(depth: Int) throws(ParseError) -> JSON {
            i += 1
            var items: [JSON] = []
            skipSpace()
            if i < bytes.count && bytes[i] == UInt8(ascii: "]") { i += 1; return .array(items) }
            while true {
                skipSpace()
                items.append(try value(depth: depth + 1))
                skipSpace()
                guard i < bytes.count else { throw fail("unterminated array") }
                if bytes[i] == UInt8(ascii: ",") { i += 1; continue }
                if bytes[i] == UInt8(ascii: "]") { i += 1; return .array(items) }
                throw fail("expected ',' or ']'")
            }
        }

        mutating func hex4() throws(ParseError) -> UInt32 {
            guard i + 4 <= bytes.count else { throw fail("short \\u escape") }
            var v: UInt32 = 0
            for _ in 0..<4 {
                let c = bytes[i]
                let d: UInt32
                switch c {
                case 0x30...0x39: d = UInt32(c - 0x30)
                case 0x41...0x46: d = UInt32(c - 0x41 + 10)
                case 0x61...0x66: d = UInt32(c - 0x61 + 10)
                default: throw fail("bad hex digit in \\u escape")
                }
                v = v * 16 + d
                i += 1
            }
            return v
        }

        mutating func string() throws(ParseError) -> String {
            i += 1
            var scalars = String.UnicodeScalarView()
            var start = i
            func flush(_ s: inout String.UnicodeScalarView, _ a: Int, _ b: Int) throws(ParseError) {
                guard a < b else { return }
                guard let chunk = String(validating: bytes[a..<b], as: UTF8.self) else { throw ParseError(message: "invalid UTF-8 in string", offset: a) }
                s.append(contentsOf: chunk.unicodeScalars)
            }
            while true {
                guard i < bytes.count else { throw fail("unterminated string") }
                let c = bytes[i]
                if c == UInt8(ascii: "\"") {
                    try flush(&scalars, start, i)
                    i += 1
                    return String(scalars)
                }
                if c < 0x20 { throw fail("control character in string") }
                if c == UInt8(ascii: "\\") {
                    try flush(&scalars, start, i)
                    i += 1
                    guard i < bytes.count else { throw fail("unterminated escape") }
                    let e = bytes[i]
                    i += 1
                    switch e {
                    case UInt8(ascii: "\""): scalars.append("\"")
                    case UInt8(ascii: "\\"): scalars.append("\\")
                    case UInt8(ascii: "/"): scalars.append("/")
                    case UInt8(ascii: "b"): scalars.append("\u{08}")
                    case UInt8(ascii: "f"): scalars.append("\u{0C}")
                    case UInt8(ascii: "n"): scalars.append("\n")
                    case UInt8(ascii: "r"): scalars.append("\r")
                    case UInt8(ascii: "t"): scalars.append("\t")
                    case UInt8(ascii: "u"):
                        var v = try hex4()
                        if (0xD800...0xDBFF).contains(v) {
                            guard i + 6 <= bytes.count, bytes[i] == UInt8(ascii: "\\"), bytes[i + 1] == UInt8(ascii: "u") else { throw fail("lone surrogate") }
                            i += 2
                            let lo = try hex4()
                            guard (0xDC00...0xDFFF).contains(lo) else { throw fail("bad surrogate pair") }
                            v = 0x10000 + ((v - 0xD800) << 10) + (lo - 0xDC00)
                        } else if (0xDC00...0xDFFF).contains(v) {
                            throw fail("lone surrogate")
                        }
                        guard let u = Unicode.Scalar(v) else { throw fail("bad \\u escape") }
                        scalars.append(u)
                    default: throw fail("bad escape")
                    }
                    start = i
                    continue
                }
                i += 1
            }
        }

        mutating func number() throws(ParseError) -> Double {
            let start = i
            if i < bytes.count && bytes[i] == UInt8(ascii: "-") { i += 1 }
            guard i < bytes.count, (0x30...0x39).contains(bytes[i]) else { throw fail("unexpected character") }
            if bytes[i] == 0x30 { i += 1 } else { while i < bytes.count, (0x30...0x39).contains(bytes[i]) { i += 1 } }
            if i < bytes.count && bytes[i] == UInt8(ascii: ".") {
                i += 1
                guard i < bytes.count, (0x30...0x39).contains(bytes[i]) else { throw fail("digit expected after '.'") }
                while i < bytes.count, (0x30...0x39).contains(bytes[i]) { i += 1 }
            }
            if i < bytes.count && (bytes[i] == UInt8(ascii: "e") || bytes[i] == UInt8(ascii: "E")) {
                i += 1
                if i < bytes.count && (bytes[i] == UInt8(ascii: "+") || bytes[i] == UInt8(ascii: "-")) { i += 1 }
                guard i < bytes.count, (0x30...0x39).contains(bytes[i]) else { throw fail("digit expected in exponent") }
                while i < bytes.count, (0x30...0x39).contains(bytes[i]) { i += 1 }
            }
            guard let d = Double(String(decoding: bytes[start..<i], as: UTF8.self)), d.isFinite else { throw fail("number out of range") }
            return d
        }
    }
}
