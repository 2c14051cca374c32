import CoreStream
import PlaydProtocol
import PlaydSessions

/// One command, once, for every protocol (as MPD's AllCommands.cxx row and mpv's
/// `mp_cmds[]`): its name on each protocol, who may run it, its typed arguments with
/// their ranges, what it does to the player, and which reply it gives. The protocols
/// are projections of these: MPD's table (MPDCommands) and JSON's (JSONCommands) take
/// their rows from ``CommandTable``, read the arguments through the specs' kinds
/// (Arguments.swift) and encode the reply; neither parses these commands by hand.
///
/// Adding a command: a spec here (or, for a test, in ``CommandTable/init(extra:)``),
/// a `Player` method it calls, and only if its reply is new a case of ``Reply`` and its
/// encoding in each protocol. CONTRIBUTING.md has the recipe, and
/// `CommandSpecTests` proves it with a command defined only in the test target.
public struct CommandSpec: Sendable {
    /// The names it is spelled with: nil where a protocol does not have it.
    public var json: String?
    public var mpd: String?
    /// MPD's permission (the JSON socket's access is by peer credentials).
    public var permission: MPDSession.Permission
    /// In order: MPD takes them by position, JSON by name.
    public var arguments: [ArgumentSpec]
    /// The reply, encoded by each protocol.
    public var reply: Reply
    /// What it does, with its arguments read and range-checked, and what it made for
    /// its reply. Control thread.
    public var run: @Sendable (Player, Arguments) throws(PlayerError) -> Output

    /// What a command made for its reply (most replies read the player instead).
    public struct Output: Sendable {
        /// The reply of a command only MPD spells, whose reply exists only in MPD's
        /// words (a library listing, `updating_db:`): its lines, made by MPDEncoding.
        public var lines: [String]
        /// The same for a command only JSON spells (``Reply/jsonMembers``).
        public var members: [(String, JSON)]
        /// The bytes sent after the lines (``Reply/mpdBinary``): a chunk of a picture.
        public var binary: [UInt8]?
        public init(lines: [String] = [], members: [(String, JSON)] = [], binary: [UInt8]? = nil) {
            self.lines = lines
            self.members = members
            self.binary = binary
        }
    }

    /// What a command answers with, beyond "done". Each protocol encodes each case
    /// (MPD's control commands answer only `OK`, as MPD's).
    public enum Reply: Sendable {
        case done
        /// JSON: the entry playing after the command (`next`, `prev`).
        case current
        /// JSON: the four play options (`repeat`, `single`, `shuffle`, `consume`).
        case options
        /// JSON: volume and mute.
        case level
        /// JSON: crossfade and MixRamp.
        case crossfade
        /// JSON: the play direction.
        case direction
        /// JSON: the queue's length; the whole queue.
        case length, queue
        /// JSON: the `name` argument back (a stored playlist saved).
        case name
        /// JSON `pong`; `version` and the protocol's.
        case pong, version
        /// Both: the outputs; JSON: the one named by the `name` argument.
        case outputs, output
        /// MPD's reads: `currentsong`, `stats`, `getvol`, `replay_gain_status`,
        /// `urlhandlers`, `decoders`.
        case currentSong, stats, volume, replayGainStatus, urlHandlers, decoders
        /// JSON: the schedule now, and the plan of the `day` argument's day.
        case schedule
        /// MPD's `status`.
        case status
        /// MPD: the lines in the command's ``Output`` (a command only MPD spells).
        case mpdLines
        /// JSON: the members in the command's ``Output`` (a command only JSON spells).
        case jsonMembers
        /// MPD: the lines and then the bytes in the command's ``Output`` (`albumart`,
        /// `readpicture`: `binary: N` and N bytes, N at most the client's `binarylimit`,
        /// which reaches the command as ``Arguments/binaryLimit``).
        case mpdBinary
    }

    public init(json: String? = nil, mpd: String? = nil, _ permission: MPDSession.Permission,
                _ arguments: [ArgumentSpec] = [], reply: Reply = .done,
                run: @escaping @Sendable (Player, Arguments) throws(PlayerError) -> Void) {
        self.json = json
        self.mpd = mpd
        self.permission = permission
        self.arguments = arguments
        self.reply = reply
        self.run = { p, a throws(PlayerError) in
            try run(p, a)
            return Output()
        }
    }

    /// A command only MPD spells whose reply exists only in MPD's words: `lines` makes
    /// them (with MPDEncoding's helpers), after the arguments are read.
    public static func mpdLines(_ name: String, _ permission: MPDSession.Permission, _ arguments: [ArgumentSpec] = [],
                                lines: @escaping @Sendable (Player, Arguments) throws(PlayerError) -> [String]) -> CommandSpec {
        var spec = CommandSpec(mpd: name, permission, arguments, reply: .mpdLines) { _, _ throws(PlayerError) in }
        spec.run = { p, a throws(PlayerError) in Output(lines: try lines(p, a)) }
        return spec
    }

    /// A command only MPD spells whose reply ends in bytes: `output` makes its lines
    /// and the chunk, after the arguments are read.
    public static func mpdBinary(_ name: String, _ permission: MPDSession.Permission, _ arguments: [ArgumentSpec] = [],
                                 output: @escaping @Sendable (Player, Arguments) throws(PlayerError) -> Output) -> CommandSpec {
        var spec = CommandSpec(mpd: name, permission, arguments, reply: .mpdBinary) { _, _ throws(PlayerError) in }
        spec.run = output
        return spec
    }

    /// A command only JSON spells whose reply is its own: `members` makes them (with
    /// JSONEncoding's helpers), after the arguments are read.
    public static func jsonMembers(_ name: String, _ permission: MPDSession.Permission, _ arguments: [ArgumentSpec] = [],
                                   members: @escaping @Sendable (Player, Arguments) throws(PlayerError) -> [(String, JSON)]) -> CommandSpec {
        var spec = CommandSpec(json: name, permission, arguments, reply: .jsonMembers) { _, _ throws(PlayerError) in }
        spec.run = { p, a throws(PlayerError) in Output(members: try members(p, a)) }
        return spec
    }

    /// How many words MPD takes: the required arguments, up to all of them (any number
    /// when the last takes the words left).
    var mpdArgumentCount: ClosedRange<Int> {
        arguments.filter { !$0.optional }.count...(arguments.last?.kind.takesTheRest == true ? Int.max : arguments.count)
    }

    /// MPD words read into arguments (the session has checked their count).
    func read(mpd words: [String]) throws(PlayerError) -> Arguments {
        var out = Arguments()
        for (i, spec) in arguments.enumerated() where i < words.count {
            if spec.kind.takesTheRest {
                out.values[spec.name] = try spec.read(mpd: Array(words[i...]))
                break
            }
            out.values[spec.name] = try spec.read(mpd: words[i])
        }
        return out
    }

    /// JSON members read into arguments; a missing one that is required is a bad
    /// request naming it. JSON null is "not given" unless the kind gives it a meaning.
    func read(json request: JSON) throws(PlayerError) -> Arguments {
        var out = Arguments()
        for spec in arguments {
            guard let v = request[spec.name], !(v.isNull && !spec.acceptsNull) else {
                guard spec.optional else {
                    throw PlayerError(.badRequest, "\(json ?? "") needs \"\(spec.name)\": \(spec.jsonExpectation)")
                }
                continue
            }
            out.values[spec.name] = try spec.read(json: v)
        }
        return out
    }
}

extension ArgumentSpec {
    var acceptsNull: Bool { if case .number(_, true) = kind { return true }; return false }
}

/// The commands the protocols serve from specs: playd's own (``CommandSpecs/all``) and,
/// in tests, extra ones. Built once per player; the sessions read it.
public struct CommandTable: Sendable {
    public let specs: [CommandSpec]
    let byJSON: [String: CommandSpec]
    let byMPD: [String: CommandSpec]

    public init(extra: [CommandSpec] = []) {
        specs = CommandSpecs.all + extra
        byJSON = Dictionary(specs.compactMap { s in s.json.map { ($0, s) } }, uniquingKeysWith: { _, new in new })
        byMPD = Dictionary(specs.compactMap { s in s.mpd.map { ($0, s) } }, uniquingKeysWith: { _, new in new })
    }
}
