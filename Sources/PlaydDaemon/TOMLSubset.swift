/// A strict reader for the subset of TOML that playd's config uses: `[table]` headers,
/// `key = value` with basic "strings", 'literal strings', integers, floats, booleans
/// and arrays of those (over several lines too, with a trailing comma), and `#`
/// comments. Every value remembers its line so
/// errors can name it. Anything outside the subset is an error, never ignored.
struct TOMLSubset {
    enum Value: Equatable {
        case string(String)
        case integer(Int)
        case float(Double)
        case bool(Bool)
        case array([Value])

        var typeName: String {
            switch self {
            case .string: return "string"
            case .integer: return "integer"
            case .float: return "float"
            case .bool: return "boolean"
            case .array: return "array"
            }
        }
    }

    struct Entry {
        var value: Value
        var line: Int
    }

    struct ParseError: Error, CustomStringConvertible {
        var line: Int
        var message: String
        var description: String { "line \(line): \(message)" }
    }

    /// "table.key" → entry; top-level keys have no table prefix.
    private(set) var entries: [String: Entry] = [:]
    private(set) var order: [String] = []

    init(parsing text: String) throws(ParseError) {
        var table = ""
        var seenTables: Set<String> = []
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        var n = 0
        func clean(_ raw: Substring) -> Substring {
            var line = raw
            if line.hasSuffix("\r") { line = line.dropLast() }
            return Self.trim(Self.stripComment(line))
        }
        while n < lines.count {
            let lineNo = n + 1
            var line = clean(lines[n])
            n += 1
            // An array may go on over the next lines (TOML allows newlines, comments
            // and a trailing comma inside one): joined up to its closing bracket.
            if let eq = line.firstIndex(of: "="), Self.trim(line[line.index(after: eq)...]).hasPrefix("[") {
                var joined = String(line)
                while Self.openBrackets(Substring(joined)) > 0 && n < lines.count {
                    joined += " " + clean(lines[n])
                    n += 1
                }
                line = Substring(joined)
            }
            if line.isEmpty { continue }
            if line.hasPrefix("[") {
                guard line.hasSuffix("]"), !line.hasPrefix("[[") else {
                    throw ParseError(line: lineNo, message: "malformed table header '\(line)'")
                }
                let name = String(Self.trim(line.dropFirst().dropLast()))
                guard !name.isEmpty, name.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "_" || $0 == "-" }) else {
                    throw ParseError(line: lineNo, message: "bad table name '\(name)'")
                }
                guard seenTables.insert(name).inserted else {
                    throw ParseError(line: lineNo, message: "table [\(name)] defined twice")
                }
                table = name
                continue
            }
            guard let eq = line.firstIndex(of: "=") else {
                throw ParseError(line: lineNo, message: "expected 'key = value', got '\(line)'")
            }
            let key = String(Self.trim(line[..<eq]))
            guard !key.isEmpty, key.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "_" || $0 == "-" }) else {
                throw ParseError(line: lineNo, message: "bad key '\(key)'")
            }
            var rest = Self.trim(line[line.index(after: eq)...])
            let value = try Self.value(&rest, line: lineNo)
            guard Self.trim(rest).isEmpty else {
                throw ParseError(line: lineNo, message: "unexpected text after the value of '\(key)'")
            }
            let full = table.isEmpty ? key : "\(table).\(key)"
            guard entries[full] == nil else { throw ParseError(line: lineNo, message: "key '\(full)' set twice") }
            entries[full] = Entry(value: value, line: lineNo)
            order.append(full)
        }
    }

    private static func trim(_ s: Substring) -> Substring {
        var s = s
        while s.first == " " || s.first == "\t" { s = s.dropFirst() }
        while s.last == " " || s.last == "\t" { s = s.dropLast() }
        return s
    }

    /// `[` minus `]` outside strings.
    private static func openBrackets(_ s: Substring) -> Int {
        var depth = 0, inBasic = false, inLiteral = false, escaped = false
        for c in s {
            if inBasic {
                if escaped { escaped = false } else if c == "\\" { escaped = true } else if c == "\"" { inBasic = false }
            } else if inLiteral {
                if c == "'" { inLiteral = false }
            } else if c == "\"" { inBasic = true } else if c == "'" { inLiteral = true } else if c == "[" { depth += 1 } else if c == "]" { depth -= 1 }
        }
        return depth
    }

    /// Drops a `#` comment that is not inside a string.
    private static func stripComment(_ s: Substring) -> Substring {
        var inBasic = false, inLiteral = false, escaped = false
        for i in s.indices {
            let c = s[i]
            if inBasic {
                if escaped { escaped = false } else if c == "\\" { escaped = true } else if c == "\"" { inBasic = false }
            } else if inLiteral {
                if c == "'" { inLiteral = false }
            } else if c == "\"" { inBasic = true } else if c == "'" { inLiteral = true } else if c == "#" { return s[..<i] }
        }
        return s
    }

    private static func value(_ s: inout Substring, line: Int) throws(ParseError) -> Value {
        s = trim(s)
        guard let c = s.first else { throw ParseError(line: line, message: "missing value") }
        if c == "\"" {
            s = s.dropFirst()
            var out = ""
            while let ch = s.first {
                s = s.dropFirst()
                if ch == "\"" { return .string(out) }
                if ch == "\\" {
                    guard let e = s.first else { break }
                    s = s.dropFirst()
                    switch e {
                    case "n": out.append("\n")
                    case "t": out.append("\t")
                    case "\\": out.append("\\")
                    case "\"": out.append("\"")
                    default: throw ParseError(line: line, message: "unsupported escape \\\(e)")
                    }
                } else {
                    out.append(ch)
                }
            }
            throw ParseError(line: line, message: "unterminated string")
        }
        if c == "'" {
            s = s.dropFirst()
            guard let end = s.firstIndex(of: "'") else { throw ParseError(line: line, message: "unterminated string") }
            let v = String(s[..<end])
            s = s[s.index(after: end)...]
            return .string(v)
        }
        if c == "[" {
            s = s.dropFirst()
            var items: [Value] = []
            while true {
                s = trim(s)
                if s.first == "]" { s = s.dropFirst(); return .array(items) }
                items.append(try value(&s, line: line))
                s = trim(s)
                if s.first == "," { s = s.dropFirst(); continue }
                if s.first == "]" { s = s.dropFirst(); return .array(items) }
                throw ParseError(line: line, message: "expected ',' or ']' in array")
            }
        }
        // A bare token: boolean or number.
        var token = Substring("")
        while let ch = s.first, ch != ",", ch != "]", ch != " ", ch != "\t" { token.append(ch); s = s.dropFirst() }
        if token == "true" { return .bool(true) }
        if token == "false" { return .bool(false) }
        let digits = token.replacingUnderscores
        if let i = Int(digits) { return .integer(i) }
        if let d = Double(digits), d.isFinite, token.contains(where: { $0 == "." || $0 == "e" || $0 == "E" }) { return .float(d) }
        throw ParseError(line: line, message: "'\(token)' is not a value (strings need quotes)")
    }
}

private extension Substring {
    var replacingUnderscores: String { String(filter { $0 != "_" }) }
}
