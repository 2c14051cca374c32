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
        /// Not a failure: the command waits for work off the control thread (a folder
        /// walk). The session parks and runs the same command again when resumed.
        public var pending = false
        public init(_ code: Code, _ message: String) { self.code = code; self.message = message }
        /// The command waits for work running elsewhere; run it again when resumed.
        public static var workPending: Failure {
            var f = Failure(.system, "work pending")
            f.pending = true
            return f
        }
    }

    /// Runs one command; returns its response lines (`key: value`), or throws.
    /// `binaryLimit`: the most bytes of a binary reply the client takes at once
    /// (`binarylimit`, 8192 by default as MPD's).
    public typealias Execute = (_ command: String, _ arguments: [String], _ binaryLimit: Int) throws(Failure) -> Reply

    /// MPD's default and smallest `binarylimit`; playd's largest is what one client
    /// may have unsent (1 MiB, less the reply's lines).
    public static let defaultBinaryLimit = 8192
    public static let binaryLimits = 64...(1 << 20) - 4096

    /// A command's answer: `key: value` lines, and for `albumart`/`readpicture` a chunk
    /// of bytes sent after them as MPD does (`binary: N`, the N bytes, a newline).
    public struct Reply: ExpressibleByArrayLiteral, Sendable {
        public var lines: [String]
        public var binary: [UInt8]?
        public init(lines: [String], binary: [UInt8]? = nil) { self.lines = lines; self.binary = binary }
        public init(arrayLiteral lines: String...) { self.lines = lines }

        /// The bytes on the wire, before the closing `OK`/`list_OK`. Every line is
        /// outside text somewhere (tags, file names, ICY titles, error messages naming
        /// them): a control character in it is sent as a space, as MPD blanks them in
        /// values. A newline in a radio's title or a file's name went out as is, and the
        /// `OK` after it ended the reply early for every client (issue 39). Bytes, not
        /// characters: UTF-8 never puts a byte under 0x80 inside a multi-byte character.
        var bytes: [UInt8] {
            var out: [UInt8] = []
            out.reserveCapacity(lines.reduce(0) { $0 + $1.utf8.count + 1 })
            for line in lines {
                for b in line.utf8 { out.append(b < 0x20 || b == 0x7F ? 0x20 : b) }
                out.append(0x0A)
            }
            if let b = binary {
                out += Array("binary: \(b.count)\n".utf8)
                out += b
                out.append(0x0A)
            }
            return out
        }
    }

    public static let protocolVersion = "0.23.5"
    /// The order MPD lists `changed:` lines in: its idle flags' bit order (IdleFlags:
    /// database first, partition last). Sorted by name they came out as `options,
    /// player, playlist` where MPD says `playlist, player, options` (issue 42).
    static let idleOrder = ["database", "stored_playlist", "playlist", "player", "mixer", "output", "options", "update",
                            "sticker", "subscription", "message", "neighbor", "mount", "partition"]

    /// The subsystems `idle` knows.
    public static let subsystems: Set<String> = ["database", "update", "stored_playlist", "playlist", "player", "mixer",
                                                 "output", "options", "partition", "sticker", "subscription", "message"]

    /// MPD's `max_command_list_size` default: 2048 KiB. A list that grows past it is
    /// refused and the connection closed (MPD closes it too), so an unterminated
    /// `command_list_begin` cannot grow memory without bound (it grew 396 MB in 8 s).
    public static let defaultMaxCommandListBytes = 2048 * 1024
    /// Commands of a list run per turn (``resume()``): between turns the server
    /// serves other clients, so a 100,000-command list does not stall them all.
    public static let commandsPerTurn = 64

    /// Who may run a command: `none` before the password too (MPD's PERMISSION_NONE),
    /// the others once authorized (playd has one password, so one level).
    public enum Permission: Sendable { case none, read, add, control, admin }

    /// One row of a command table (MPD's AllCommands.cxx): the session checks the
    /// permission and the argument count before it runs the command, and answers
    /// `commands`/`notcommands` from the table.
    public struct CommandInfo: Sendable {
        public var permission: Permission
        public var arguments: ClosedRange<Int>
        public init(_ permission: Permission, _ arguments: ClosedRange<Int>) {
            self.permission = permission
            self.arguments = arguments
        }
    }

    /// The session's own commands, rows of the table like every other (MPD's
    /// AllCommands.cxx has them too), with MPD 0.23's permissions: before the password a
    /// client may `binarylimit`, `close`, `commands`, `notcommands` and `password`, not
    /// `idle`. `noidle` and the `command_list_*` lines are not commands (MPD lists
    /// neither); the session reads them itself.
    public static let sessionCommands: [String: CommandInfo] = [
        "binarylimit": CommandInfo(.none, 1...1), "close": CommandInfo(.none, 0...0),
        "commands": CommandInfo(.none, 0...0), "notcommands": CommandInfo(.none, 0...0),
        "password": CommandInfo(.none, 1...1), "idle": CommandInfo(.read, 0...Int.max),
    ]

    private let execute: Execute
    /// The commands and their rules; nil: every command goes to `execute`, and a fixed
    /// few are allowed before the password.
    private let table: [String: CommandInfo]?
    private let password: String?
    private let maxCommandListBytes: Int
    private var authorized: Bool
    /// Bytes in `list` so far.
    private var listBytes = 0
    /// A command list being run turn by turn: its lines, the next to run, its index
    /// offset (always 0 here) and whether `list_OK` is wanted.
    private var running: (lines: [String], next: Int, listOK: Bool)?
    /// Changes since the last `idle` answer.
    private var pending: Set<String> = []
    /// While idling: the subsystems waited for (empty: all).
    private var idling: Set<String>?
    /// Inside `command_list_begin`: the lines so far, and whether `list_OK` is wanted.
    private var list: [String]?
    private var listOK = false
    /// The client's `binarylimit`.
    private var binaryLimit = MPDSession.defaultBinaryLimit
    /// Client-to-client messages: the registry all sessions share, and this client's
    /// subscriptions and unread messages (made on first use).
    private let channels: MessageChannels?
    private var mailbox: MessageChannels.Mailbox?

    public init(password: String?, maxCommandListBytes: Int = MPDSession.defaultMaxCommandListBytes,
                table: [String: CommandInfo]? = nil, channels: MessageChannels? = nil, execute: @escaping Execute) {
        self.execute = execute
        self.channels = channels
        // The commands' rows and the session's own: one table.
        self.table = table.map { $0.merging(Self.sessionCommands) { _, session in session } }
        self.password = password
        self.maxCommandListBytes = maxCommandListBytes
        authorized = password == nil
    }

    public func greeting() -> String? { "OK MPD \(Self.protocolVersion)\n" }

    /// While idling, the client waits for events: no idle timeout applies.
    public var waitsForEvents: Bool { idling != nil }

    /// One line, with every turn of a command list run at once (tests and the fuzzer).
    public func receive(_ bytes: [UInt8]) -> (reply: String, close: Bool) {
        var out = handle(bytes)
        var reply = out.bytes
        while out.more && !out.close {
            out = resume()
            reply += out.bytes
        }
        return (String(decoding: reply, as: UTF8.self), out.close)
    }

    public func resume() -> SessionOutput {
        guard var r = running else { return SessionOutput() }
        var out: [UInt8] = []
        let end = min(r.lines.count, r.next + Self.commandsPerTurn)
        while r.next < end {
            let i = r.next
            r.next += 1
            let line = r.lines[i]
            let words: [String]
            do { words = try Self.split(line) } catch { running = nil; return SessionOutput(bytes: out + ack(error, index: i, command: "").utf8) }
            guard let command = words.first else {
                running = nil
                return SessionOutput(bytes: out + ack(Failure(.unknown, "No command given"), index: i, command: "").utf8)
            }
            if command == "idle" || command.hasPrefix("command_list") {
                running = nil
                return SessionOutput(bytes: out + ack(Failure(.notList, "\(command) not allowed in a command list"), index: i, command: command).utf8)
            }
            let wasAuthorized = authorized
            switch run(words) {
            case .success(let reply): out += reply + (r.listOK ? Array("list_OK\n".utf8) : [])
            case .failure(let f) where f.pending:
                // Parked: this command runs again from the start when the work is done.
                r.next = i
                running = r
                return SessionOutput(bytes: out, parked: true)
            case .failure(let f):
                running = nil
                return SessionOutput(bytes: out + ack(f, index: i, command: command).utf8,
                                     authFailed: command == "password" && !wasAuthorized && f.code == .password)
            }
        }
        if r.next == r.lines.count {
            running = nil
            return SessionOutput(bytes: out + "OK\n".utf8)
        }
        running = r
        return SessionOutput(bytes: out, more: true)
    }

    public func handle(_ bytes: [UInt8]) -> SessionOutput {
        var line = String(decoding: bytes, as: UTF8.self)
        if line.hasSuffix("\r") { line.removeLast() }
        if idling != nil {
            // During idle only `noidle` is allowed; anything else ends the connection.
            guard line == "noidle" else { return SessionOutput(close: true) }
            let changed = take(idling!)
            idling = nil
            return SessionOutput(changed + "OK\n")
        }
        if let count = list?.count {
            if line == "command_list_end" {
                running = (list!, 0, listOK)
                list = nil
                listBytes = 0
                return resume()
            }
            listBytes += bytes.count + 1
            guard listBytes <= maxCommandListBytes else {
                list = nil
                listBytes = 0
                return SessionOutput("ACK [\(Code.arg.rawValue)@\(count)] {} command list larger than max_command_list_size (\(maxCommandListBytes / 1024) KiB)\n",
                                     close: true)
            }
            // Appended in place: a copy per line made a long list quadratic (a
            // 100,000-command list took 88 s, all on the control thread).
            list!.append(line)
            return SessionOutput()
        }
        switch line {
        case "command_list_begin", "command_list_ok_begin":
            list = []
            listBytes = 0
            listOK = line == "command_list_ok_begin"
            return SessionOutput()
        case "noidle":
            return SessionOutput()  // not idling: no reply at all
        case "close":
            return SessionOutput(close: true)
        default:
            break
        }
        let words: [String]
        do { words = try Self.split(line) } catch {
            return SessionOutput(ack(error, index: 0, command: ""))
        }
        guard let command = words.first else {
            return SessionOutput(ack(Failure(.unknown, "No command given"), index: 0, command: ""))
        }
        guard command.utf8.allSatisfy({ ($0 >= 97 && $0 <= 122) || $0 == 95 }) else {
            return SessionOutput(close: true)  // MPD drops a connection whose line does not start with a command
        }
        if command == "idle" {
            // The first unknown name in the client's order, as MPD names it (a Set's
            // order named a different one in each process).
            if let bad = words.dropFirst().first(where: { !Self.subsystems.contains($0) }) {
                return SessionOutput(ack(Failure(.arg, "Unrecognized idle event: \(bad)"), index: 0, command: "idle"))
            }
            if !authorized { return SessionOutput(ack(Failure(.permission, "you don't have permission for \"idle\""), index: 0, command: "idle")) }
            var wanted = Set(words.dropFirst())
            if wanted.isEmpty { wanted = Self.subsystems }
            let ready = pending.intersection(wanted)
            if !ready.isEmpty { return SessionOutput(take(wanted) + "OK\n") }
            idling = wanted
            return SessionOutput()
        }
        let wasAuthorized = authorized
        switch run(words) {
        case .success(let reply): return SessionOutput(bytes: reply + "OK\n".utf8)
        case .failure(let f) where f.pending:
            // Parked: a one-command list runs it again when resumed, and answers as a
            // single command would (no list_OK, "OK" or ACK at index 0).
            running = ([line], 0, false)
            return SessionOutput(parked: true)
        case .failure(let f):
            return SessionOutput(ack(f, index: 0, command: command),
                                 authFailed: command == "password" && !wasAuthorized && f.code == .password)
        }
    }

    /// The line a refused connection gets: MPD's ACK with `permission` (4) or
    /// `system` (52) for a limit.
    public static func refusal(_ r: Refusal) -> String {
        "ACK [\((r.tooMany ? Code.system : Code.permission).rawValue)@0] {} \(r.reason)\n"
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
        return Self.idleOrder.filter(ready.contains).map { "changed: \($0)\n" }.joined()
    }

    private func run(_ words: [String]) -> Result<[UInt8], Failure> {
        let command = words[0]
        if let table {
            // Every command is a row: its permission and argument count are checked
            // here, from the row, before anything runs.
            guard let info = table[command] else { return .failure(Failure(.unknown, "unknown command \"\(command)\"")) }
            if !authorized && info.permission != .none {
                return .failure(Failure(.permission, "you don't have permission for \"\(command)\""))
            }
            let args = words.count - 1
            guard info.arguments.contains(args) else {
                // MPD's three wordings (command_check_request).
                let r = info.arguments
                let how = r.lowerBound == r.upperBound ? "wrong number of" : args < r.lowerBound ? "too few" : "too many"
                return .failure(Failure(.arg, "\(how) arguments for \"\(command)\""))
            }
            if command == "commands" || command == "notcommands" {
                let allowed = Set(table.filter { authorized || $0.value.permission == .none }.keys)
                let list = command == "commands" ? allowed : Set(table.keys).subtracting(allowed)
                return .success(Array(list.sorted().map { "command: \($0)\n" }.joined().utf8))
            }
        } else if !authorized && !["password", "ping", "commands", "notcommands", "tagtypes", "urlhandlers", "decoders"].contains(command) {
            // A bare session (tests, the fuzzer): a fixed few before the password.
            return .failure(Failure(.permission, "you don't have permission for \"\(command)\""))
        }
        switch command {
        case "password":
            guard words.count == 2 else { return .failure(Failure(.arg, "wrong number of arguments for \"password\"")) }
            guard let p = password, words[1] == p else { return .failure(Failure(.password, "incorrect password")) }
            authorized = true
            return .success([])
        case "binarylimit":
            guard words.count == 2 else { return .failure(Failure(.arg, "wrong number of arguments for \"binarylimit\"")) }
            guard let n = Int(words[1]) else { return .failure(Failure(.arg, "Integer expected: \(words[1])")) }
            guard n >= Self.binaryLimits.lowerBound else { return .failure(Failure(.arg, "Value too small")) }
            binaryLimit = min(n, Self.binaryLimits.upperBound)
            return .success([])
        case "close":
            return .success([])  // a `close` with arguments; the bare line closes in `handle`
        default:
            break
        }
        if let channels, Self.channelCommands.contains(command) {
            return message(channels, command, Array(words.dropFirst()))
        }
        do throws(Failure) {
            return .success(try execute(command, Array(words.dropFirst()), binaryLimit).bytes)
        } catch {
            return .failure(error)
        }
    }

    static let channelCommands: Set<String> = ["subscribe", "unsubscribe", "channels", "readmessages", "sendmessage"]

    /// The channel commands, with MPD's replies and errors (MessageCommands.cxx).
    private func message(_ channels: MessageChannels, _ command: String, _ args: [String]) -> Result<[UInt8], Failure> {
        // The table checks the counts; without one (a bare session) they are checked here.
        let wanted = command == "sendmessage" ? 2 : command == "channels" || command == "readmessages" ? 0 : 1
        guard args.count == wanted else { return .failure(Failure(.arg, "wrong number of arguments for \"\(command)\"")) }
        let box: MessageChannels.Mailbox
        if let m = mailbox { box = m } else { box = channels.register(owner: self); mailbox = box }
        switch command {
        case "subscribe":
            switch channels.subscribe(box, to: args[0]) {
            case .ok: return .success([])
            case .invalid: return .failure(Failure(.arg, "invalid channel name"))
            case .already: return .failure(Failure(.exist, "already subscribed to this channel"))
            case .full: return .failure(Failure(.exist, "subscription list is full"))
            }
        case "unsubscribe":
            return channels.unsubscribe(box, from: args[0]) ? .success([]) : .failure(Failure(.noExist, "not subscribed to this channel"))
        case "channels":
            return .success(Array(channels.channels().map { "channel: \($0)\n" }.joined().utf8))
        case "readmessages":
            return .success(Array(channels.take(box).map { "channel: \($0.channel)\nmessage: \($0.text)\n" }.joined().utf8))
        default:   // sendmessage
            guard MessageChannels.validName(args[0]) else { return .failure(Failure(.arg, "invalid channel name")) }
            return channels.send(args[1], to: args[0]) ? .success([]) : .failure(Failure(.noExist, "nobody is subscribed to this channel"))
        }
    }

    /// MPD names the command only once it has found it: an unknown command, or a line
    /// that does not split into words, is `{}` (code 5, `unknown`).
    private func ack(_ f: Failure, index: Int, command: String) -> String {
        "ACK [\(f.code.rawValue)@\(index)] {\(f.code == .unknown ? "" : command)} \(f.message)\n"
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
                // Code 5, as MPD: a line that does not split is no command at all.
                guard closed else { throw Failure(.unknown, "Missing closing '\"'") }
                if let n = chars.first, n != " " && n != "\t" { throw Failure(.unknown, "Space expected after closing '\"'") }
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

/// What a session gives the server after a line or a turn.
public struct SessionOutput: Equatable, Sendable {
    /// Bytes to send: whole lines, and for MPD's binary replies the bytes between them.
    public var bytes: [UInt8]
    /// ``bytes`` as text (the line protocols' replies are text but for binary chunks).
    public var text: String { String(decoding: bytes, as: UTF8.self) }
    /// Close the connection once `text` is sent.
    public var close: Bool
    /// More work is pending: the server calls ``LineSession/resume()`` on a later turn,
    /// after serving the other clients, and reads no new line from this one meanwhile.
    public var more: Bool
    /// The line was a wrong password: the server holds this connection back for a
    /// while before its next line and counts the failure against the peer.
    public var authFailed: Bool
    /// The request waits for work running off the control thread (a folder walk):
    /// the server reads no line from this connection and does not resume it until
    /// ``ControlServer/resumeParked()``; then it calls ``LineSession/resume()``.
    public var parked: Bool

    public init(_ text: String = "", close: Bool = false, more: Bool = false, authFailed: Bool = false,
                parked: Bool = false) {
        self.init(bytes: Array(text.utf8), close: close, more: more, authFailed: authFailed, parked: parked)
    }

    public init(bytes: [UInt8], close: Bool = false, more: Bool = false, authFailed: Bool = false, parked: Bool = false) {
        self.bytes = bytes
        self.close = close
        self.more = more
        self.authFailed = authFailed
        self.parked = parked
    }
}

/// A connection's protocol, for listeners other than the JSON one (see ``ControlServer``).
public protocol LineSession: AnyObject {
    /// Sent on connect.
    func greeting() -> String?
    /// One line in (no newline).
    func handle(_ line: [UInt8]) -> SessionOutput
    /// The next turn of work a previous output said was pending (`more`), or the
    /// parked request again (`parked`).
    func resume() -> SessionOutput
    /// The client is waiting for events (MPD `idle`, a JSON subscriber): the idle
    /// timeout does not apply.
    var waitsForEvents: Bool { get }
    /// When ``tick(now:)`` is next due (monotonic ns), if ever.
    var nextTickDue: UInt64? { get }
    /// Periodic output (JSON position ticks); sets the next due time.
    func tick(now: UInt64) -> String
    /// A line longer than `maxBytes` arrived; its bytes are discarded.
    func lineTooLong(maxBytes: Int) -> SessionOutput
}

extension LineSession {
    public var nextTickDue: UInt64? { nil }
    public func tick(now: UInt64) -> String { "" }
    /// A line over the server's limit arrived (the rest of it is discarded): MPD closes
    /// the connection.
    public func lineTooLong(maxBytes: Int) -> SessionOutput { SessionOutput(close: true) }
}

/// Why a connection is refused: the server asks the listener's protocol for the line
/// that says so.
public struct Refusal: Sendable {
    public var reason: String
    /// A limit (connections, descriptors) rather than `control.allowed_users`/`groups`.
    public var tooMany: Bool
    public init(reason: String, tooMany: Bool) { self.reason = reason; self.tooMany = tooMany }
}
