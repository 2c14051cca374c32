/// The properties the JSON fuzzer checks, callable from tests too (the MPD session's
/// are in PlaydSessions' SessionFuzzChecks).
///
/// `scripts/fuzz` links these into libFuzzer entry points (`Fuzz/*.swift`, built with
/// `-sanitize=fuzzer,address`); `FuzzCorpusTests` runs every committed seed and
/// regression input in `Fuzz/corpus` through the same functions on each `swift test`.
/// A violated property traps (precondition), which is what libFuzzer reports as a crash.
public enum FuzzChecks {
    /// The JSON control parser on arbitrary bytes:
    /// - `JSON.parse` returns or throws a ParseError; never traps, recurses without
    ///   bound (depth is capped) or reads out of bounds (ASan);
    /// - what parses survives a round trip through `JSON.text` unchanged;
    /// - every string in it also goes through the time-argument parser (`seek`'s
    ///   "1:23.5", "+10", "50%"), which must return or throw.
    public static func jsonRequest(_ bytes: UnsafeBufferPointer<UInt8>) {
        // The control server rejects invalid UTF-8 before parsing; so do we.
        guard let text = String(validating: bytes, as: UTF8.self) else { return }
        guard let value = try? JSON.parse(text) else { return }
        let again: JSON
        do { again = try JSON.parse(value.text) } catch {
            preconditionFailure("written JSON does not parse again: \(value.text): \(error)")
        }
        precondition(again == value, "round trip changed the value: \(value.text) -> \(again.text)")
        visitStrings(value) { _ = try? TimeArgument(parsing: $0) }
    }

    private static func visitStrings(_ v: JSON, _ body: (String) -> Void) {
        switch v {
        case .string(let s): body(s)
        case .array(let a): for e in a { visitStrings(e, body) }
        case .object(let members): for (_, e) in members { visitStrings(e, body) }
        default: break
        }
    }
}
