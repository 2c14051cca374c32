import Testing
@testable import PlaydDaemon
import PlaydProtocol
import Foundation
import CoreStreamTestSupport

/// The config reader against toml-test (github.com/toml-lang/toml-test, commit d168c2a,
/// MIT, in Tests/Fixtures/toml-test): every document its `files-toml-1.0.0` lists. A
/// valid one must give the values its `.json` twin holds (toml-test's tagged form);
/// an invalid one must be refused.
@Suite("TOML 1.0 on the toml-test corpus", .checksSomething, .tags(.addressSanitizer))
struct TOMLTests {
    static let corpus = Fixtures.repositoryRoot.appendingPathComponent("Tests/Fixtures/toml-test")

    static func listed(_ prefix: String) throws -> [String] {
        let list = try String(contentsOf: corpus.appendingPathComponent("files-toml-1.0.0"), encoding: .utf8)
        return list.split(separator: "\n").map(String.init).filter { $0.hasPrefix(prefix) && $0.hasSuffix(".toml") }
    }

    static func bytes(_ name: String) throws -> [UInt8] {
        Array(try Data(contentsOf: corpus.appendingPathComponent(name)))
    }

    @Test func validDocumentsGiveTheExpectedValues() throws {
        let names = try Self.listed("valid/")
        #expect(names.count == 210, "the corpus lists \(names.count) valid documents")
        var failures: [String] = []
        for name in names {
            let expectedText = try String(contentsOf: Self.corpus.appendingPathComponent(name.dropLast(5) + ".json"), encoding: .utf8)
            let expected = try Self.canonical(JSON.parse(expectedText, maxDepth: 1000))
            do {
                let doc = try TOML(bytes: try Self.bytes(name))
                let got = Self.canonical(doc.root)
                if got != expected { failures.append("\(name):\n  got      \(got)\n  expected \(expected)") }
            } catch {
                failures.append("\(name): refused: \(error)")
            }
        }
        #expect(failures.isEmpty, "\(failures.count) of \(names.count):\n\(failures.joined(separator: "\n"))")
    }

    @Test func invalidDocumentsAreRefused() throws {
        let names = try Self.listed("invalid/")
        #expect(names.count == 499, "the corpus lists \(names.count) invalid documents")
        var accepted: [String] = []
        for name in names {
            if let doc = try? TOML(bytes: try Self.bytes(name)) { accepted.append("\(name) → \(Self.canonical(doc.root))") }
        }
        #expect(accepted.isEmpty, "\(accepted.count) of \(names.count) accepted:\n\(accepted.joined(separator: "\n"))")
    }

    /// Errors name the line where the problem is, and say what it is.
    @Test(arguments: [
        ("a = 1\nb = \"x\nc = 2", "line 2: the string is not closed on its line"),
        ("a = 1\n[t]\nx = 1\n[t]", "line 4: table [t] defined twice"),
        ("a = 1\na = 2", "line 2: key 'a' defined twice"),
        ("a = {x = 1}\n[a]", "line 2: table [a] defined twice"),
        ("a = {x = 1}\na.y = 2", "line 2: 'a.y': 'a' is a table defined elsewhere"),
        ("\n\nx = 0x_1", "line 3: '0x_1': an underscore must be between digits"),
        ("x = 9223372036854775808", "line 1: '9223372036854775808' does not fit in a 64-bit integer"),
        ("x = 012", "line 1: '012': leading zeros are not allowed"),
        ("x = 2026-02-30", "line 1: '2026-02-30' is not a value"),
        ("x = \"\\q\"", "line 1: unknown escape \\q"),
        ("x = [\n1,\n2", "line 1: expected ',' or ']': the array is not closed"),
        ("x = 1 y = 2", "line 1: unexpected 'y' after a value"),
        ("x = \"a\"\r\ny = \u{01}", "line 2: '\u{01}' is not a value"),
        ("x = { a = 1,\n b = 2 }", "line 1: an inline table must be on one line"),
        (String(repeating: "x = [", count: 1) + String(repeating: "[", count: 200), "nest deeper than 128"),
        (String(repeating: "a.", count: 500_000) + "b = 1", "line 1: a key of more than 128 parts"),
        ("[" + String(repeating: "t.", count: 200) + "u]", "line 1: a key of more than 128 parts"),
    ])
    func errorsNameTheLine(_ text: String, _ expected: String) {
        do {
            _ = try TOML(parsing: text)
            Issue.record("accepted: \(text)")
        } catch {
            #expect(error.description.contains(expected), "\(error.description)")
        }
    }

    @Test func notUTF8IsRefusedNotReplaced() {
        #expect(throws: TOML.ParseError.self) { try TOML(bytes: Array("x = \"".utf8) + [0xC3, 0x28] + Array("\"".utf8)) }
    }

    // MARK: Canonical forms: keys sorted, date-times with fractions trimmed.

    static func canonical(_ v: TOML.Value) -> String {
        switch v {
        case .string(let s): return "s:" + JSON.string(s).text
        case .integer(let i): return "i:\(i)"
        case .float(let d): return d.isNaN ? "f:nan" : "f:\(d)"
        case .bool(let b): return "b:\(b)"
        case .dateTime(let kind, let text): return "\(kind):" + trimFraction(text)
        case .array(let a): return "[" + a.map(canonical).joined(separator: ",") + "]"
        case .table(let t): return "{" + t.map { JSON.string($0.key).text + "=" + canonical($0.value) }.sorted().joined(separator: ",") + "}"
        }
    }

    struct BadExpectation: Error { var text: String }

    /// toml-test's tagged JSON: `{"type": T, "value": TEXT}` for each value.
    static func canonical(_ j: JSON) throws -> String {
        switch j {
        case .array(let a): return "[" + (try a.map(canonical)).joined(separator: ",") + "]"
        case .object(let members):
            if members.count == 2, let type = j["type"]?.stringValue, let text = j["value"]?.stringValue {
                switch type {
                case "string": return "s:" + JSON.string(text).text
                case "integer":
                    guard let i = Int(text) else { throw BadExpectation(text: j.text) }
                    return "i:\(i)"
                case "float":
                    let t = text.hasPrefix("+") ? String(text.dropFirst()) : text
                    if t.hasSuffix("nan") { return "f:nan" }
                    guard let d = t == "inf" ? Double.infinity : t == "-inf" ? -Double.infinity : Double(t) else { throw BadExpectation(text: j.text) }
                    return "f:\(d)"
                case "bool": return "b:\(text)"
                case "datetime": return "offsetDateTime:" + trimFraction(text.uppercased().replacingOccurrences(of: " ", with: "T"))
                case "datetime-local": return "localDateTime:" + trimFraction(text.uppercased().replacingOccurrences(of: " ", with: "T"))
                case "date-local": return "localDate:" + text
                case "time-local": return "localTime:" + trimFraction(text)
                default: throw BadExpectation(text: j.text)
                }
            }
            return "{" + (try members.map { JSON.string($0.0).text + "=" + (try canonical($0.1)) }).sorted().joined(separator: ",") + "}"
        default: throw BadExpectation(text: j.text)
        }
    }

    /// `07:32:00.500` and `07:32:00.5` are the same time.
    static func trimFraction(_ s: String) -> String {
        guard let dot = s.firstIndex(of: ".") else { return s }
        var end = s.index(after: dot)
        while end < s.endIndex, s[end].isNumber { end = s.index(after: end) }
        var digits = s[s.index(after: dot)..<end]
        while digits.last == "0" { digits = digits.dropLast() }
        return String(s[..<dot]) + (digits.isEmpty ? "" : "." + digits) + s[end...]
    }
}
