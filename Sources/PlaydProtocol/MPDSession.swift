/// One connection speaking MPD's text protocol: the greeting, argument quoting,
/// command lists, `idle`/`noidle` and the ACK format, as the MPD project documents them
/// and mpc/libmpdclient and python-mpd2 expect. A pure state machine over lines: the
/// commands themselves are run by `execute` (the daemon).
public final class MPDSession: LineSession {
    /// MPD's error codes (`ACK [code@index]`); clients know no others.
    public enum Code: Int, Sendable {
        case notList = 1, arg = 2, password = 3, permission = 4, unknown = 5
        case noExist = 50, playlistMax = 51, system = 52, playlistLoad = 53, updateAlready = 54, playerSync = 55, exist = 56
    }

    public struct Failure: Error {
        public var code: Code
        public var message: String
        public init(_ code: Code, _ message: String) { self.code = code; self.message = message }
    }

    /// Runs one command; returns its response lines (`key: value`), or throws.
    public typealias Execute = (_ command: String, _ arguments: [String]) throws(Failure) -> [String]

    public static let protocolVersion = "0.23.5"
    /// The subsystems `idle` knows.
    public static let subsystems: Set<String> = ["database", "update", "stored_playlist", "playlist", "player", "mixer",
                                                 "output", "options", "partition", "sticker", "subscription", "message"]

    private let execute: Execute
    private let password: String?
    private var authorized: Bool
    /// Changes since the last `idle` answer.
    private var pending: Set<String> = []
    /// While idling: the subsystems waited for (empty: all).
    private var idling: Set<String>?
    /// Inside `command_list_begin`: the lines so far, and whether `list_OK` is wanted.
    private var list: [String]?
    private var listOK = false

    public init(password: String?, execute: @escaping Execute) {
        self.execute = execute
        self.password = password
        authorized = password == nil
    }

    public func greeting() -> String? { "OK MPD \(Self.protocolVersion)\n" }

    public func receive(_ bytes: [UInt8]) -> (reply: String, close: Bool) {
        var line = String(decoding: bytes, as: UTF8.self)
        if line.hasSuffix("\r") { line.removeLast() }
        if idling != nil {
            // During idle only `noidle` is allowed; anything else ends the connection.
            guard line == "noidle" else { return ("", true) }
            let changed = take(idling!)
            idling = nil
            return (changed + "OK\n", false)
        }
        if var l = list {
            if line == "command_list_end" {
                list = nil
                return (runList(l), false)
            }
            l.append(line)
            list = l
            return ("", false)
        }
        switch line {
        case "command_list_begin", "command_list_ok_begin":
            list = []
            listOK = line == "command_list_ok_begin"
            return ("", false)
        case "noidle":
            return ("", false)  // not idling: no reply at all
        case "close":
            return ("", true)
        default:
            break
        }
        let words: [String]
        do { words = try Self.split(line) } catch {
            return (ack(error, index: 0, command: ""), false)
        }
        guard let command = words.first else {
            return (ack(Failure(.unknown, "No command given"), index: 0, command: ""), false)
        }
        guard command.utf8.allSatisfy({ ($0 >= 97 && $0 <= 122) || $0 == 95 }) else {
            return ("", true)  // MPD drops a connection whose line does not start with a command
        }
        if command == "idle" {
            var wanted = Set(words.dropFirst())
            if let bad = wanted.first(where: { !Self.subsystems.contains($0) }) {
                return (ack(Failure(.arg, "Unrecognized idle event: \(bad)"), index: 0, command: "idle"), false)
            }
            if !authorized { return (ack(Failure(.permission, "you don't have permission for \"idle\""), index: 0, command: "idle"), false) }
            if wanted.isEmpty { wanted = Self.subsystems }
            let ready = pending.intersection(wanted)
            if !ready.isEmpty { return (take(wanted) + "OK\n", false) }
            idling = wanted
            return ("", false)
        }
        switch run(words) {
        case .success(let lines): return (lines + "OK\n", false)
        case .failure(let f): return (ack(f, index: 0, command: command), false)
        }
    }

    /// Something changed: complete an idle waiting for it.
    public func notify(_ changes: Set<String>) -> String {
        pending.formUnion(changes)
        guard let wanted = idling, !pending.intersection(wanted).isEmpty else { return "" }
        idling = nil
        return take(wanted) + "OK\n"
    }

    // MARK: -

    private func take(_ wanted: Set<String>) -> String {
        let ready = pending.intersection(wanted)
        pending.subtract(ready)
        return ready.sorted().map { "changed: \($0)\n" }.joined()
    }

    private func runList(_ lines: [String]) -> String {
        var out = ""
        for (i, line) in lines.enumerated() {
            let words: [String]
            do { words = try Self.split(line) } catch { return out + ack(error, index: i, command: "") }
            guard let command = words.first else { return out + ack(Failure(.unknown, "No command given"), index: i, command: "") }
            if command == "idle" || command.hasPrefix("command_list") {
                return out + ack(Failure(.notList, "\(command) not allowed in a command list"), index: i, command: command)
            }
            switch run(words) {
            case .success(let lines): out += lines + (listOK ? "list_OK\n" : "")
            case .failure(let f): return out + ack(f, index: i, command: command)
            }
        }
        return out + "OK\n"
    }

    private func run(_ words: [String]) -> Result<String, Failure> {
        let command = words[0]
        if command == "password" {
            guard words.count == 2 else { return .failure(Failure(.arg, "wrong number of arguments for \"password\"")) }
            guard let p = password, words[1] == p else { return .failure(Failure(.password, "incorrect password")) }
            authorized = true
            return .success("")
        }
        if !authorized && !["ping", "commands", "notcommands", "tagtypes", "urlhandlers", "decoders"].contains(command) {
            return .failure(Failure(.permission, "you don't have permission for \"\(command)\""))
        }
        do throws(Failure) {
            let lines = try execute(command, Array(words.dropFirst()))
            return .success(lines.map { $0 + "\n" }.joined())
        } catch {
            return .failure(error)
        }
    }

    private func ack(_ f: Failure, index: Int, command: String) -> String {
        "ACK [\(f.code.rawValue)@\(index)] {\(command)} \(f.message)\n"
    }

    /// Splits a request line into words: bare words, or double-quoted with `\"` and `\\`.
    static func split(_ line: String) throws(Failure) -> [String] {
        var words: [String] = []
        var chars = Array(line.unicodeScalars)[...]
        while true {
            while let c = chars.first, c == " " || c == "\t" { chars.removeFirst() }
            guard let c = chars.first else { break }
            var word = String.UnicodeScalarView()
            if c == "\"" {
                chars.removeFirst()
                var closed = false
                while let d = chars.popFirst() {
                    if d == "\"" { closed = true; break }
                    if d == "\\" {
                        guard let e = chars.popFirst() else { break }
                        word.append(e)
                    } else {
                        word.append(d)
                    }
                }
                guard closed else { throw Failure(.arg, "Missing closing '\"'") }
                if let n = chars.first, n != " " && n != "\t" { throw Failure(.arg, "Space expected after closing '\"'") }
            } else {
                while let d = chars.first, d != " " && d != "\t" {
                    word.append(d)
                    chars.removeFirst()
                }
            }
            words.append(String(word))
        }
        return words
    }
}

/// A connection's protocol, for listeners other than the JSON one (see ``ControlServer``).
public protocol LineSession: AnyObject {
    /// Sent on connect.
    func greeting() -> String?
    /// One line in (no newline); text to send, and whether to close after it.
    func receive(_ line: [UInt8]) -> (reply: String, close: Bool)
    /// Something changed; text to send now (completes an MPD `idle`).
    func notify(_ changes: Set<String>) -> String
}
