/// The properties the MPD fuzzer checks, callable from tests too.
///
/// `scripts/fuzz mpd` links these into a libFuzzer entry point (`Fuzz/MPDLines.swift`,
/// built with `-sanitize=fuzzer,address` inside this module); `FuzzCorpusTests` runs
/// every committed seed and regression input in `Fuzz/corpus/mpd` through the same
/// function on each `swift test`. A violated property traps (precondition), which is
/// what libFuzzer reports as a crash.
public enum SessionFuzzChecks {
    /// The MPD protocol parser: the bytes after the first, split at newlines, go to one
    /// `MPDSession` as a client's lines (argument quoting, command lists, idle/noidle,
    /// password, the ACK format). Bit 0 of the first byte sets a password. Commands are
    /// answered by a stand-in that echoes its arguments, fails for `fail` and answers
    /// `big` with many lines, so every path of the session is reachable. Checks that
    /// every reply is empty or whole lines and that nothing is accepted after `close`.
    public static func mpdLines(_ bytes: UnsafeBufferPointer<UInt8>) {
        let session = MPDSession(password: (bytes.first ?? 0) & 1 == 1 ? "secret" : nil) {
            command, arguments, _ throws(MPDSession.Failure) in
            switch command {
            case "fail": throw MPDSession.Failure(.noExist, "No such song: \(arguments.first ?? "")")
            case "big": return MPDSession.Reply(lines: (0..<min(arguments.count * 50, 2000)).map { "line: \($0)" })
            default: return MPDSession.Reply(lines: arguments.enumerated().map { "arg\($0.offset): \($0.element.count)" })
            }
        }
        // Bytes, not Characters: "\r\n" is one Character, so hasSuffix("\n") is false for it.
        func wholeLines(_ s: String) -> Bool { s.isEmpty || s.utf8.last == 0x0A }
        if let hello = session.greeting() { precondition(wholeLines(hello)) }
        for (i, line) in bytes.dropFirst().split(separator: 0x0A, omittingEmptySubsequences: false).enumerated() {
            let (reply, close) = session.receive(Array(line))
            precondition(wholeLines(reply), "reply is not whole lines: \(reply.debugDescription)")
            if close { return }  // the server closes here; nothing more is read
            if i % 3 == 2 { precondition(wholeLines(session.notify(["player", "playlist"]))) }
        }
    }
}
