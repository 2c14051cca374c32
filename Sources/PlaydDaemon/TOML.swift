/// A TOML 1.0.0 reader (https://toml.io/en/v1.0.0), strict: every rule of the
/// specification is checked and anything it does not allow is a `ParseError` naming
/// the line, never ignored. It is proven on the toml-test corpus (Tests/Fixtures/
/// toml-test: the 210 valid documents parse to the expected values, the 499 invalid
/// ones are refused). No Foundation: the daemon does not link it (memory).
///
/// The document is read as UTF-8 bytes (invalid UTF-8 is an error, not replaced), and
/// parsed in one pass into a tree of tables; `root` is the result. The config reads
/// `leaves`: every value that is not a table, by its dotted path, with its line.
struct TOML {
    enum DateTimeKind: Equatable { case offsetDateTime, localDateTime, localDate, localTime }

    indirect enum Value: Equatable {
        case string(String)
        case integer(Int)
        case float(Double)
        case bool(Bool)
        /// The text as written, checked; `T` and `Z` upper case, a space separator as `T`.
        case dateTime(DateTimeKind, String)
        case array([Value])
        /// Keys in the order they were first defined.
        case table([(key: String, value: Value)])

        var typeName: String {
            switch self {
            case .string: return "string"
            case .integer: return "integer"
            case .float: return "float"
            case .bool: return "boolean"
            case .dateTime: return "date-time"
            case .array: return "array"
            case .table: return "table"
            }
        }

        static func == (a: Value, b: Value) -> Bool {
            switch (a, b) {
            case (.string(let x), .string(let y)): return x == y
            case (.integer(let x), .integer(let y)): return x == y
            case (.float(let x), .float(let y)): return x == y || (x.isNaN && y.isNaN)
            case (.bool(let x), .bool(let y)): return x == y
            case (.dateTime(let k, let x), .dateTime(let l, let y)): return k == l && x == y
            case (.array(let x), .array(let y)): return x == y
            case (.table(let x), .table(let y)):
                return x.count == y.count && zip(x, y).allSatisfy { $0.key == $1.key && $0.value == $1.value }
            default: return false
            }
        }
    }

    struct Leaf {
        /// The key's components (quoted keys may hold dots, so not one string).
        var path: [String]
        var value: Value
        /// The line of the key (of the first `[[header]]` for an array of tables).
        var line: Int
    }

    struct ParseError: Error, CustomStringConvertible {
        var line: Int
        var message: String
        var description: String { "line \(line): \(message)" }
    }

    /// A key part as it would be written: bare when it can be.
    static func showKey(_ k: String) -> String {
        !k.isEmpty && k.utf8.allSatisfy(Parser.isBareKey) ? k : "\"" + k + "\""
    }

    /// The whole document.
    private(set) var root: Value = .table([])
    /// Every non-table value, in document order.
    private(set) var leaves: [Leaf] = []
    /// Every table defined by a `[header]`, with the header's line (so an empty,
    /// misspelt section can be named).
    private(set) var headers: [(path: [String], line: Int)] = []

    init(parsing text: String) throws(ParseError) {
        try self.init(bytes: Array(text.utf8))
    }

    init(bytes: [UInt8]) throws(ParseError) {
        var p = Parser(bytes)
        try p.document()
        root = p.top.value
        headers = p.headers
        leaves = []
        Self.collect(p.top, path: [], into: &leaves)
    }

    private static func collect(_ t: Parser.Table, path: [String], into out: inout [Leaf]) {
        for k in t.keys {
            switch t.slots[k]! {
            case .value(let v, let line): out.append(Leaf(path: path + [k], value: v, line: line))
            case .table(let sub): collect(sub, path: path + [k], into: &out)
            case .tables(let aot): out.append(Leaf(path: path + [k], value: aot.value, line: aot.line))
            }
        }
    }
}

// MARK: - The parser

private struct Parser {
    /// A table while it is being built: mutable, shared by reference between the
    /// header that opened it and the keys that fill it.
    final class Table {
        enum Origin { case implicit, header, dotted, inline }
        var origin: Origin
        var keys: [String] = []
        var slots: [String: Slot] = [:]
        init(_ origin: Origin) { self.origin = origin }

        var value: TOML.Value {
            .table(keys.map { k in
                switch slots[k]! {
                case .value(let v, _): return (k, v)
                case .table(let t): return (k, t.value)
                case .tables(let a): return (k, a.value)
                }
            })
        }
    }

    final class ArrayOfTables {
        var items: [Table] = []
        let line: Int
        init(line: Int) { self.line = line }
        var value: TOML.Value { .array(items.map(\.value)) }
    }

    enum Slot {
        case value(TOML.Value, line: Int)
        case table(Table)
        case tables(ArrayOfTables)
    }

    /// A parsed value: inline tables stay `Table`s until they are placed.
    enum Parsed {
        case value(TOML.Value)
        case inline(Table)
        var value: TOML.Value {
            switch self {
            case .value(let v): return v
            case .inline(let t): return t.value
            }
        }
    }

    let b: [UInt8]
    var i = 0
    var line = 1
    let top = Table(.header)
    var current: Table
    var headers: [(path: [String], line: Int)] = []
    /// Arrays and inline tables nest; a hostile file of 100,000 `[` must not
    /// overflow the stack (each level is a few hundred bytes of it).
    var depth = 0
    static let maxDepth = 128

    init(_ bytes: [UInt8]) {
        b = bytes
        current = top
    }

    func fail(_ m: String) -> TOML.ParseError { TOML.ParseError(line: line, message: m) }

    var peek: UInt8? { i < b.count ? b[i] : nil }
    func peek(_ k: Int) -> UInt8? { i + k < b.count ? b[i + k] : nil }

    // MARK: Document

    mutating func document() throws(TOML.ParseError) {
        try validateUTF8()
        if b.count >= 3 && b[0] == 0xEF && b[1] == 0xBB && b[2] == 0xBF { i = 3 }
        while i < b.count {
            skipWhitespace()
            guard let c = peek else { break }
            if c == UInt8(ascii: "#") || c == 0x0A || c == 0x0D {
                try endOfLine()
            } else if c == UInt8(ascii: "[") {
                try header()
                try endOfLine()
            } else {
                try keyValue(into: current)
                try endOfLine()
            }
        }
    }

    /// Whitespace, an optional comment, then a newline or the end.
    mutating func endOfLine() throws(TOML.ParseError) {
        skipWhitespace()
        if peek == UInt8(ascii: "#") { try comment() }
        guard let c = peek else { return }
        if c == 0x0A { i += 1; line += 1; return }
        if c == 0x0D && peek(1) == 0x0A { i += 2; line += 1; return }
        if c == 0x0D { throw fail("a carriage return must be followed by a line feed") }
        throw fail("unexpected '\(Self.show(c))' after a value or header (one key or header per line)")
    }

    mutating func skipWhitespace() {
        while let c = peek, c == 0x20 || c == 0x09 { i += 1 }
    }

    mutating func comment() throws(TOML.ParseError) {
        i += 1
        while let c = peek, c != 0x0A {
            if c == 0x0D && peek(1) == 0x0A { break }
            if Self.isControl(c) { throw fail("a control character (0x\(Self.hex(c))) in a comment") }
            i += 1
        }
    }

    /// Whitespace, comments and newlines, as allowed inside an array.
    mutating func skipBlank() throws(TOML.ParseError) {
        while true {
            skipWhitespace()
            guard let c = peek else { return }
            if c == UInt8(ascii: "#") { try comment(); continue }
            if c == 0x0A { i += 1; line += 1; continue }
            if c == 0x0D && peek(1) == 0x0A { i += 2; line += 1; continue }
            return
        }
    }

    // MARK: Tables

    mutating func header() throws(TOML.ParseError) {
        let headerLine = line
        i += 1
        let array = peek == UInt8(ascii: "[")
        if array { i += 1 }
        skipWhitespace()
        let path = try key()
        skipWhitespace()
        guard peek == UInt8(ascii: "]") else { throw fail("expected ']' to close the table header") }
        i += 1
        if array {
            guard peek == UInt8(ascii: "]") else { throw fail("expected ']]' to close the array-of-tables header") }
            i += 1
        }
        let shown = path.map(TOML.showKey).joined(separator: ".")
        var t = top
        for k in path.dropLast() {
            switch t.slots[k] {
            case nil:
                let n = Table(.implicit)
                t.keys.append(k); t.slots[k] = .table(n); t = n
            case .table(let n):
                guard n.origin != .inline else { throw fail("[\(shown)]: '\(k)' is an inline table, which cannot be extended") }
                t = n
            case .tables(let a): t = a.items[a.items.count - 1]
            case .value:
                throw fail("[\(shown)]: '\(k)' is already a value, not a table")
            }
        }
        let last = path[path.count - 1]
        if array {
            switch t.slots[last] {
            case nil:
                let a = ArrayOfTables(line: headerLine)
                let n = Table(.header)
                a.items.append(n)
                t.keys.append(last); t.slots[last] = .tables(a)
                current = n
            case .tables(let a):
                let n = Table(.header)
                a.items.append(n)
                current = n
            case .table:
                throw fail("[[\(shown)]]: '\(last)' is already a table, not an array of tables")
            case .value:
                throw fail("[[\(shown)]]: '\(last)' is already a value (a static array cannot be extended)")
            }
        } else {
            switch t.slots[last] {
            case nil:
                let n = Table(.header)
                t.keys.append(last); t.slots[last] = .table(n)
                current = n
            case .table(let n):
                guard n.origin == .implicit else { throw fail("table [\(shown)] defined twice") }
                n.origin = .header
                current = n
            case .tables:
                throw fail("[\(shown)]: '\(last)' is already an array of tables")
            case .value:
                throw fail("[\(shown)]: '\(last)' is already a value")
            }
            headers.append((path, headerLine))
        }
    }

    /// `key = value` into `table` (the current one, or an inline table being read).
    mutating func keyValue(into table: Table) throws(TOML.ParseError) {
        let keyLine = line
        let path = try key()
        skipWhitespace()
        guard peek == UInt8(ascii: "=") else {
            throw fail("expected '=' after the key '\(path.map(TOML.showKey).joined(separator: "."))'")
        }
        i += 1
        skipWhitespace()
        let parsed = try value()
        var t = table
        let shown = path.map(TOML.showKey).joined(separator: ".")
        for k in path.dropLast() {
            switch t.slots[k] {
            case nil:
                let n = Table(.dotted)
                t.keys.append(k); t.slots[k] = .table(n); t = n
            case .table(let n):
                // Dotted keys may only add to tables they made themselves: not to one
                // a [header] defined or implied, nor to an inline table (frozen once read).
                guard n.origin == .dotted else {
                    throw fail("'\(shown)': '\(k)' is a table defined elsewhere, which dotted keys cannot extend")
                }
                t = n
            case .tables, .value:
                throw fail("'\(shown)': '\(k)' is already a value, not a table")
            }
        }
        let last = path[path.count - 1]
        guard t.slots[last] == nil else { throw fail("key '\(shown)' defined twice") }
        t.keys.append(last)
        switch parsed {
        case .value(let v): t.slots[last] = .value(v, line: keyLine)
        case .inline(let n): t.slots[last] = .table(n)
        }
    }

    /// A key: bare or quoted parts joined by dots (whitespace around the dots allowed).
    mutating func key() throws(TOML.ParseError) -> [String] {
        var parts: [String] = []
        while true {
            skipWhitespace()
            guard let c = peek else { throw fail("a key is missing") }
            if c == UInt8(ascii: "\"") {
                if peek(1) == UInt8(ascii: "\"") && peek(2) == UInt8(ascii: "\"") { throw fail("a multi-line string cannot be a key") }
                parts.append(try basicString())
            } else if c == UInt8(ascii: "'") {
                if peek(1) == UInt8(ascii: "'") && peek(2) == UInt8(ascii: "'") { throw fail("a multi-line string cannot be a key") }
                parts.append(try literalString())
            } else {
                let start = i
                while let d = peek, Self.isBareKey(d) { i += 1 }
                guard i > start else { throw fail("expected a key, found '\(Self.show(c))'") }
                parts.append(String(decoding: b[start..<i], as: UTF8.self))
            }
            skipWhitespace()
            // Each part is a table level (built and walked recursively): a 16 MiB file
            // of `a.a.a…` would nest millions deep. Counted with the arrays and inline
            // tables around it.
            guard parts.count + depth <= Self.maxDepth else {
                throw fail("a key of more than \(Self.maxDepth) parts (with the arrays and inline tables around it)")
            }
            if peek == UInt8(ascii: ".") { i += 1; continue }
            return parts
        }
    }

    // MARK: Values

    mutating func value() throws(TOML.ParseError) -> Parsed {
        guard let c = peek else { throw fail("a value is missing") }
        switch c {
        case UInt8(ascii: "\""):
            if peek(1) == c && peek(2) == c { return .value(.string(try multilineString(c))) }
            return .value(.string(try basicString()))
        case UInt8(ascii: "'"):
            if peek(1) == c && peek(2) == c { return .value(.string(try multilineString(c))) }
            return .value(.string(try literalString()))
        case UInt8(ascii: "["):
            return .value(try array())
        case UInt8(ascii: "{"):
            return .inline(try inlineTable())
        default:
            return .value(try scalar())
        }
    }

    mutating func nest() throws(TOML.ParseError) {
        depth += 1
        guard depth <= Self.maxDepth else { throw fail("arrays and inline tables nest deeper than \(Self.maxDepth)") }
    }

    mutating func array() throws(TOML.ParseError) -> TOML.Value {
        let open = line
        try nest()
        i += 1
        var items: [TOML.Value] = []
        while true {
            try skipBlank()
            guard let c = peek else { throw TOML.ParseError(line: open, message: "expected ',' or ']': the array is not closed") }
            if c == UInt8(ascii: "]") { i += 1; break }
            items.append(try value().value)
            try skipBlank()
            guard let d = peek else { throw TOML.ParseError(line: open, message: "expected ',' or ']': the array is not closed") }
            if d == UInt8(ascii: ",") { i += 1; continue }
            if d == UInt8(ascii: "]") { i += 1; break }
            throw fail("expected ',' or ']' in the array, found '\(Self.show(d))'")
        }
        depth -= 1
        return .array(items)
    }

    /// `{ k = v, … }` on one line, no trailing comma (TOML 1.0); it cannot be
    /// extended afterwards.
    mutating func inlineTable() throws(TOML.ParseError) -> Table {
        try nest()
        i += 1
        let t = Table(.dotted)
        skipWhitespace()
        if peek == UInt8(ascii: "}") { i += 1; depth -= 1; Self.freeze(t); return t }
        while true {
            skipWhitespace()
            if let c = peek, c == 0x0A || c == 0x0D { throw fail("an inline table must be on one line") }
            try keyValue(into: t)
            skipWhitespace()
            guard let c = peek else { throw fail("the inline table is not closed") }
            if c == UInt8(ascii: ",") {
                i += 1
                skipWhitespace()
                if peek == UInt8(ascii: "}") { throw fail("a trailing comma in an inline table") }
                continue
            }
            if c == UInt8(ascii: "}") { i += 1; break }
            if c == 0x0A || c == 0x0D { throw fail("an inline table must be on one line") }
            throw fail("expected ',' or '}' in the inline table, found '\(Self.show(c))'")
        }
        depth -= 1
        Self.freeze(t)
        return t
    }

    /// An inline table and the tables its dotted keys made are complete once read.
    static func freeze(_ t: Table) {
        t.origin = .inline
        for case .table(let n) in t.slots.values { freeze(n) }
    }

    /// Numbers, booleans and date-times: a token up to a delimiter.
    mutating func scalar() throws(TOML.ParseError) -> TOML.Value {
        let start = i
        while let c = peek, !(c == 0x20 && !Self.isDateSpace(b, start: start, at: i)), c != 0x09, c != 0x0A, c != 0x0D,
              c != UInt8(ascii: ","), c != UInt8(ascii: "]"), c != UInt8(ascii: "}"), c != UInt8(ascii: "#") { i += 1 }
        let token = Array(b[start..<i])
        let text = String(decoding: token, as: UTF8.self)
        guard !token.isEmpty else { throw fail("a value is missing") }
        if text == "true" { return .bool(true) }
        if text == "false" { return .bool(false) }
        if let dt = Self.dateTime(token) { return dt }
        if let n = try number(token, text) { return n }
        throw fail("'\(text)' is not a value (strings need quotes)")
    }

    /// A space inside a date-time (`1979-05-27 07:32:00`) is its separator, not the
    /// end of the token: a full date just before and a digit just after.
    static func isDateSpace(_ b: [UInt8], start: Int, at i: Int) -> Bool {
        guard i - start == 10, i + 1 < b.count, isDigit(b[i + 1]) else { return false }
        let d = b[start..<i]
        return d.enumerated().allSatisfy { n, c in n == 4 || n == 7 ? c == UInt8(ascii: "-") : isDigit(c) }
    }

    mutating func number(_ t: [UInt8], _ text: String) throws(TOML.ParseError) -> TOML.Value? {
        var s = t[...]
        var negative = false
        if let c = s.first, c == UInt8(ascii: "+") || c == UInt8(ascii: "-") {
            negative = c == UInt8(ascii: "-")
            s = s.dropFirst()
            // A sign is allowed on decimal numbers, inf and nan only.
            if s.starts(with: Array("0x".utf8)) || s.starts(with: Array("0o".utf8)) || s.starts(with: Array("0b".utf8)) {
                throw fail("'\(text)': a sign is not allowed on a hexadecimal, octal or binary integer")
            }
        }
        if s.elementsEqual("inf".utf8) { return .float(negative ? -.infinity : .infinity) }
        if s.elementsEqual("nan".utf8) { return .float(.nan) }
        if t.count > 2 && t[0] == UInt8(ascii: "0"), let radix = [UInt8(ascii: "x"): 16, UInt8(ascii: "o"): 8, UInt8(ascii: "b"): 2][t[1]] {
            let digits = try Self.digits(t[2...], text, line: line) { Self.digitValue($0).map { $0 < radix } ?? false }
            guard let v = Int(digits, radix: radix) else { throw fail("'\(text)' does not fit in a 64-bit integer") }
            return .integer(v)
        }
        guard let first = s.first, Self.isDigit(first) else { return nil }
        // Split into integer part, fraction and exponent; each a run of digits.
        var intEnd = s.startIndex
        while intEnd < s.endIndex, Self.isDigit(s[intEnd]) || s[intEnd] == UInt8(ascii: "_") { intEnd += 1 }
        let intPart = try Self.digits(s[s.startIndex..<intEnd], text, line: line, Self.isDigit)
        guard intPart.count == 1 || intPart.first != "0" else { throw fail("'\(text)': leading zeros are not allowed") }
        var rest = s[intEnd...]
        if rest.isEmpty {
            guard let v = Int((negative ? "-" : "") + intPart) else { throw fail("'\(text)' does not fit in a 64-bit integer") }
            return .integer(v)
        }
        var literal = (negative ? "-" : "") + intPart
        if rest.first == UInt8(ascii: ".") {
            rest = rest.dropFirst()
            var end = rest.startIndex
            while end < rest.endIndex, Self.isDigit(rest[end]) || rest[end] == UInt8(ascii: "_") { end += 1 }
            guard end > rest.startIndex else { throw fail("'\(text)': a decimal point must be followed by a digit") }
            literal += "." + (try Self.digits(rest[rest.startIndex..<end], text, line: line, Self.isDigit))
            rest = rest[end...]
        }
        if let e = rest.first, e == UInt8(ascii: "e") || e == UInt8(ascii: "E") {
            rest = rest.dropFirst()
            var sign = ""
            if let c = rest.first, c == UInt8(ascii: "+") || c == UInt8(ascii: "-") { sign = c == UInt8(ascii: "-") ? "-" : "+"; rest = rest.dropFirst() }
            guard !rest.isEmpty else { throw fail("'\(text)': an exponent needs digits") }
            literal += "e" + sign + (try Self.digits(rest, text, line: line, Self.isDigit))
            rest = rest[rest.endIndex...]
        }
        guard rest.isEmpty, let d = Double(literal) else { return nil }
        return .float(d)
    }

    /// Digits with single underscores between them (not first, last or doubled).
    static func digits(_ s: ArraySlice<UInt8>, _ text: String, line: Int, _ ok: (UInt8) -> Bool) throws(TOML.ParseError) -> String {
        var out = ""
        var lastWasDigit = false
        for c in s {
            if c == UInt8(ascii: "_") {
                guard lastWasDigit else { throw TOML.ParseError(line: line, message: "'\(text)': an underscore must be between digits") }
                lastWasDigit = false
            } else {
                guard ok(c) else { throw TOML.ParseError(line: line, message: "'\(text)' is not a number") }
                out.append(Character(Unicode.Scalar(c)))
                lastWasDigit = true
            }
        }
        guard lastWasDigit else { throw TOML.ParseError(line: line, message: "'\(text)': an underscore must be between digits") }
        return out
    }

    static func digitValue(_ c: UInt8) -> Int? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return Int(c - UInt8(ascii: "0"))
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return Int(c - UInt8(ascii: "a")) + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return Int(c - UInt8(ascii: "A")) + 10
        default: return nil
        }
    }

    // MARK: Date-times (RFC 3339, with the seconds TOML 1.0 requires)

    static func dateTime(_ t: [UInt8]) -> TOML.Value? {
        func num(_ at: Int, _ n: Int) -> Int? {
            guard at + n <= t.count else { return nil }
            var v = 0
            for k in at..<(at + n) { guard isDigit(t[k]) else { return nil }; v = v * 10 + Int(t[k] - 48) }
            return v
        }
        func time(_ at: Int) -> (end: Int, text: String)? {
            guard let h = num(at, 2), t.count > at + 2, t[at + 2] == UInt8(ascii: ":"), let m = num(at + 3, 2),
                  t.count > at + 5, t[at + 5] == UInt8(ascii: ":"), let s = num(at + 6, 2),
                  h <= 23, m <= 59, s <= 60 else { return nil }
            var end = at + 8
            if end < t.count && t[end] == UInt8(ascii: ".") {
                var k = end + 1
                while k < t.count && isDigit(t[k]) { k += 1 }
                guard k > end + 1 else { return nil }
                end = k
            }
            return (end, String(decoding: t[at..<end], as: UTF8.self))
        }
        if t.count >= 10, let y = num(0, 4), t[4] == UInt8(ascii: "-"), let mo = num(5, 2), t[7] == UInt8(ascii: "-"), let d = num(8, 2) {
            _ = y
            let leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0
            let days = [31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]
            guard (1...12).contains(mo), d >= 1, d <= days[mo - 1] else { return nil }
            let date = String(decoding: t[0..<10], as: UTF8.self)
            if t.count == 10 { return .dateTime(.localDate, date) }
            guard [UInt8(ascii: "T"), UInt8(ascii: "t"), 0x20].contains(t[10]), let tm = time(11) else { return nil }
            let local = date + "T" + tm.text
            if tm.end == t.count { return .dateTime(.localDateTime, local) }
            let z = t[tm.end]
            if (z == UInt8(ascii: "Z") || z == UInt8(ascii: "z")) && tm.end + 1 == t.count { return .dateTime(.offsetDateTime, local + "Z") }
            guard z == UInt8(ascii: "+") || z == UInt8(ascii: "-"), tm.end + 6 == t.count, let oh = num(tm.end + 1, 2),
                  t[tm.end + 3] == UInt8(ascii: ":"), let om = num(tm.end + 4, 2), oh <= 23, om <= 59 else { return nil }
            return .dateTime(.offsetDateTime, local + String(decoding: t[tm.end...], as: UTF8.self))
        }
        if let tm = time(0), tm.end == t.count { return .dateTime(.localTime, tm.text) }
        return nil
    }

    // MARK: Strings

    mutating func basicString() throws(TOML.ParseError) -> String {
        i += 1
        var out: [UInt8] = []
        while true {
            guard let c = peek else { throw fail("the string is not closed") }
            if c == UInt8(ascii: "\"") { i += 1; return String(decoding: out, as: UTF8.self) }
            if c == 0x0A || c == 0x0D { throw fail("the string is not closed on its line") }
            if c == UInt8(ascii: "\\") { try escape(into: &out); continue }
            if Self.isControl(c) { throw fail("a control character (0x\(Self.hex(c))) in a string: escape it") }
            out.append(c); i += 1
        }
    }

    mutating func literalString() throws(TOML.ParseError) -> String {
        i += 1
        let start = i
        while true {
            guard let c = peek else { throw fail("the string is not closed") }
            if c == UInt8(ascii: "'") { i += 1; return String(decoding: b[start..<(i - 1)], as: UTF8.self) }
            if c == 0x0A || c == 0x0D { throw fail("the string is not closed on its line") }
            if Self.isControl(c) { throw fail("a control character (0x\(Self.hex(c))) in a string") }
            i += 1
        }
    }

    /// `"""…"""` (escapes, and a backslash at a line's end) or `'''…'''` (neither).
    mutating func multilineString(_ q: UInt8) throws(TOML.ParseError) -> String {
        let escapes = q == UInt8(ascii: "\"")
        i += 3
        try skipNewline()
        var out: [UInt8] = []
        while true {
            guard let c = peek else { throw fail("the multi-line string is not closed") }
            if c == q && peek(1) == q && peek(2) == q {
                // Up to two more quotes belong to the string: """a""""" is a"".
                var extra = 0
                while extra < 2 && peek(3 + extra) == q { extra += 1 }
                out.append(contentsOf: repeatElement(q, count: extra))
                i += 3 + extra
                return String(decoding: out, as: UTF8.self)
            }
            if escapes && c == UInt8(ascii: "\\") {
                // A backslash at the end of a line trims the newline and the whitespace after it.
                var k = i + 1
                while k < b.count && (b[k] == 0x20 || b[k] == 0x09) { k += 1 }
                if k < b.count && (b[k] == 0x0A || (b[k] == 0x0D && k + 1 < b.count && b[k + 1] == 0x0A)) {
                    i = k
                    while let d = peek {
                        if d == 0x20 || d == 0x09 { i += 1 } else if try newline() {} else { break }
                    }
                    continue
                }
                try escape(into: &out)
                continue
            }
            if try newlineInto(&out) { continue }
            if Self.isControl(c) { throw fail("a control character (0x\(Self.hex(c))) in a string") }
            out.append(c); i += 1
        }
    }

    /// A newline right after the opening delimiter is not part of the string.
    mutating func skipNewline() throws(TOML.ParseError) {
        _ = try newline()
    }

    /// Consumes a newline (LF or CRLF) if one is next; a lone CR is an error.
    mutating func newline() throws(TOML.ParseError) -> Bool {
        guard let c = peek else { return false }
        if c == 0x0A { i += 1; line += 1; return true }
        if c == 0x0D {
            guard peek(1) == 0x0A else { throw fail("a carriage return must be followed by a line feed") }
            i += 2; line += 1; return true
        }
        return false
    }

    /// A newline inside a multi-line string is kept as it was written.
    mutating func newlineInto(_ out: inout [UInt8]) throws(TOML.ParseError) -> Bool {
        let start = i
        guard try newline() else { return false }
        out.append(contentsOf: b[start..<i])
        return true
    }

    mutating func escape(into out: inout [UInt8]) throws(TOML.ParseError) {
        i += 1
        guard let e = peek else { throw fail("the string is not closed") }
        i += 1
        switch e {
        case UInt8(ascii: "b"): out.append(0x08)
        case UInt8(ascii: "t"): out.append(0x09)
        case UInt8(ascii: "n"): out.append(0x0A)
        case UInt8(ascii: "f"): out.append(0x0C)
        case UInt8(ascii: "r"): out.append(0x0D)
        case UInt8(ascii: "\""): out.append(e)
        case UInt8(ascii: "\\"): out.append(e)
        case UInt8(ascii: "u"), UInt8(ascii: "U"):
            let n = e == UInt8(ascii: "u") ? 4 : 8
            var v: UInt32 = 0
            for _ in 0..<n {
                guard let c = peek, let d = Self.digitValue(c) else { throw fail("\\\(Self.show(e)) needs \(n) hexadecimal digits") }
                v = v << 4 | UInt32(d); i += 1
            }
            guard let scalar = Unicode.Scalar(v) else { throw fail("\\\(Self.show(e)): U+\(String(v, radix: 16, uppercase: true)) is not a Unicode scalar value") }
            out.append(contentsOf: Array(String(Character(scalar)).utf8))
        default:
            throw fail("unknown escape \\\(Self.show(e))")
        }
    }

    // MARK: Bytes

    /// Rejects what is not UTF-8 (overlong forms, surrogates, beyond U+10FFFF).
    func validateUTF8() throws(TOML.ParseError) {
        var k = 0
        var ln = 1
        while k < b.count {
            let c = b[k]
            if c == 0x0A { ln += 1 }
            if c < 0x80 { k += 1; continue }
            let n: Int, min: UInt32
            var v: UInt32
            switch c {
            case 0xC2...0xDF: n = 1; v = UInt32(c & 0x1F); min = 0x80
            case 0xE0...0xEF: n = 2; v = UInt32(c & 0x0F); min = 0x800
            case 0xF0...0xF4: n = 3; v = UInt32(c & 0x07); min = 0x10000
            default: throw TOML.ParseError(line: ln, message: "the file is not UTF-8 (byte 0x\(Self.hex(c)))")
            }
            guard k + n < b.count else { throw TOML.ParseError(line: ln, message: "the file is not UTF-8 (a truncated character)") }
            for j in 1...n {
                guard b[k + j] & 0xC0 == 0x80 else { throw TOML.ParseError(line: ln, message: "the file is not UTF-8 (byte 0x\(Self.hex(b[k + j])))") }
                v = v << 6 | UInt32(b[k + j] & 0x3F)
            }
            guard v >= min, v <= 0x10FFFF, !(0xD800...0xDFFF).contains(v) else {
                throw TOML.ParseError(line: ln, message: "the file is not UTF-8 (U+\(String(v, radix: 16, uppercase: true)))")
            }
            k += n + 1
        }
    }

    static func isDigit(_ c: UInt8) -> Bool { c >= 0x30 && c <= 0x39 }
    static func isBareKey(_ c: UInt8) -> Bool {
        (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A) || isDigit(c) || c == UInt8(ascii: "_") || c == UInt8(ascii: "-")
    }
    /// U+0000–U+001F except tab, and U+007F: not allowed raw in strings or comments.
    static func isControl(_ c: UInt8) -> Bool { (c < 0x20 && c != 0x09) || c == 0x7F }
    static func hex(_ c: UInt8) -> String { (c < 16 ? "0" : "") + String(c, radix: 16, uppercase: true) }
    static func show(_ c: UInt8) -> String { c >= 0x20 && c < 0x7F ? String(Character(Unicode.Scalar(c))) : "0x" + hex(c) }
}
