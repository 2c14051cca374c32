#if canImport(Glibc)
import Glibc
#endif

/// File names on Linux are bytes; playd's text (JSON, the MPD protocol, the state file,
/// logs) is UTF-8. A path that is not valid UTF-8 travels as text with each byte that is
/// not part of a valid UTF-8 sequence written `\xHH` (lower-case hex), and a backslash
/// that would read as such an escape written `\x5c`. The mapping is lossless both ways,
/// and leaves every valid UTF-8 name without `\x` in it as it is:
///
/// | bytes on disk         | text                 |
/// |-----------------------|----------------------|
/// | `café.flac` (UTF-8)   | `café.flac`          |
/// | `caf\xE9.flac` (Latin-1) | `caf\xe9.flac`    |
/// | `a\x41` (a backslash) | `a\x5cx41`           |
///
/// Every file-system call on a path that came in as text goes through ``withCPath(_:_:)``;
/// every name read from the file system (a directory listing, `realpath`) through
/// ``text(_:)``. Before, `String(decoding:as:)` turned the bytes into U+FFFD: such
/// files could not be played, and directory adds dropped them.
public enum PathBytes {
    /// The text for the bytes of a name or path (no NUL among them).
    public static func text<C: Collection>(_ bytes: C) -> String where C.Element == UInt8 {
        let b = Array(bytes)
        if !b.contains(0x5C), let s = String(validating: b, as: UTF8.self) { return s }
        var out: [UInt8] = []
        out.reserveCapacity(b.count + 8)
        var i = 0
        while i < b.count {
            if b[i] == 0x5C && isEscape(b, at: i) {
                out += Array("\\x5c".utf8)
                i += 1
                continue
            }
            let n = sequenceLength(b, at: i)
            if n == 0 {
                out += Array("\\x".utf8) + hex(b[i])
                i += 1
            } else {
                out += b[i..<(i + n)]
                i += n
            }
        }
        return String(decoding: out, as: UTF8.self)  // valid by construction
    }

    /// The bytes `text` names: the inverse of ``text(_:)``. Never contains a NUL that
    /// `text` did not (a text with one is refused by ``LocalFile``).
    public static func bytes(_ text: String) -> [UInt8] {
        let u = Array(text.utf8)
        guard u.contains(0x5C) else { return u }
        var out: [UInt8] = []
        out.reserveCapacity(u.count)
        var i = 0
        while i < u.count {
            // Only the escapes `text` writes: a stray byte (0x80 and up) or a backslash.
            // Any other `\xHH` is literal text, so a client cannot spell a NUL or a "/"
            // that way (`\x00` would have cut the C path short).
            if u[i] == 0x5C && isEscape(u, at: i),
               case let v = UInt8(hexValue(u[i + 2]) << 4 | hexValue(u[i + 3])), v >= 0x80 || v == 0x5C {
                out.append(v)
                i += 4
            } else {
                out.append(u[i])
                i += 1
            }
        }
        return out
    }

    /// Calls `body` with the NUL-terminated C path `text` names.
    public static func withCPath<R>(_ text: String, _ body: (UnsafePointer<CChar>) throws -> R) rethrows -> R {
        guard text.utf8.contains(0x5C) else { return try text.withCString(body) }
        var b = bytes(text)
        b.append(0)
        return try b.withUnsafeBufferPointer { p in
            try p.withMemoryRebound(to: CChar.self) { try body($0.baseAddress!) }
        }
    }

    /// The text of a NUL-terminated C string from the file system (`readdir`, `realpath`).
    public static func text(cString p: UnsafePointer<CChar>) -> String {
        text(UnsafeRawBufferPointer(start: p, count: strlen(p)))
    }

    /// Whether `b[i...]` is `\xHH` (two hex digits, either case).
    private static func isEscape(_ b: [UInt8], at i: Int) -> Bool {
        i + 3 < b.count && b[i + 1] == UInt8(ascii: "x") && isHex(b[i + 2]) && isHex(b[i + 3])
    }

    private static func isHex(_ c: UInt8) -> Bool {
        (0x30...0x39).contains(c) || (0x61...0x66).contains(c) || (0x41...0x46).contains(c)
    }

    private static func hexValue(_ c: UInt8) -> Int {
        switch c {
        case 0x30...0x39: Int(c - 0x30)
        case 0x61...0x66: Int(c - 0x61 + 10)
        default: Int(c - 0x41 + 10)
        }
    }

    private static func hex(_ v: UInt8) -> [UInt8] {
        let digits = Array("0123456789abcdef".utf8)
        return [digits[Int(v >> 4)], digits[Int(v & 15)]]
    }

    /// The length of the valid UTF-8 sequence at `b[i]` (Unicode's table 3-7: no
    /// overlong forms, no surrogates, nothing above U+10FFFF), or 0.
    private static func sequenceLength(_ b: [UInt8], at i: Int) -> Int {
        let c = b[i]
        func cont(_ k: Int, _ range: ClosedRange<UInt8> = 0x80...0xBF) -> Bool { i + k < b.count && range.contains(b[i + k]) }
        switch c {
        case 0x00...0x7F: return 1
        case 0xC2...0xDF: return cont(1) ? 2 : 0
        case 0xE0: return cont(1, 0xA0...0xBF) && cont(2) ? 3 : 0
        case 0xE1...0xEC, 0xEE...0xEF: return cont(1) && cont(2) ? 3 : 0
        case 0xED: return cont(1, 0x80...0x9F) && cont(2) ? 3 : 0
        case 0xF0: return cont(1, 0x90...0xBF) && cont(2) && cont(3) ? 4 : 0
        case 0xF1...0xF3: return cont(1) && cont(2) && cont(3) ? 4 : 0
        case 0xF4: return cont(1, 0x80...0x8F) && cont(2) && cont(3) ? 4 : 0
        default: return 0
        }
    }
}

// The file-system calls playd makes on paths given as text.
extension PathBytes {
    public static func stat(_ path: String, _ st: inout Glibc.stat) -> Int32 {
        withCPath(path) { cStat($0, &st) }
    }

    public static func lstat(_ path: String, _ st: inout Glibc.stat) -> Int32 {
        withCPath(path) { cLstat($0, &st) }
    }

    public static func opendir(_ path: String) -> OpaquePointer? {
        withCPath(path) { Glibc.opendir($0) }
    }

    /// `realpath(3)` as text; nil (errno set) when it fails.
    public static func realPath(_ path: String) -> String? {
        guard let p = withCPath(path, { Glibc.realpath($0, nil) }) else { return nil }
        defer { free(p) }
        return text(cString: p)
    }

    /// The name of a directory entry as text.
    public static func name(of entry: UnsafeMutablePointer<dirent>) -> String {
        withUnsafeBytes(of: entry.pointee.d_name) { text($0.prefix { $0 != 0 }) }
    }
}

// At file scope `stat(…)` is the function; inside `PathBytes` it named the method.
private func cStat(_ path: UnsafePointer<CChar>, _ st: inout stat) -> Int32 { stat(path, &st) }
private func cLstat(_ path: UnsafePointer<CChar>, _ st: inout stat) -> Int32 { lstat(path, &st) }
