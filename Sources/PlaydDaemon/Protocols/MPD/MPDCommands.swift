import CoreStream
import PlaydProtocol
import PlaydSessions
#if canImport(Glibc)
import Glibc
#endif

/// MPD's commands on playd's player: one table (name, permission, argument count), as
/// MPD's AllCommands.cxx, made from the command specs MPD spells and the session's own
/// rows. ``MPDSession`` checks the permission and the argument count from it and
/// answers `commands`/`notcommands` from it; the specs' kinds read the arguments.
/// Control thread.
enum MPDCommands {
    typealias Failure = MPDSession.Failure
    struct Row: Sendable {
        let name: String
        let info: MPDSession.CommandInfo
        init(_ name: String, _ permission: MPDSession.Permission, _ arguments: ClosedRange<Int>) {
            self.name = name
            self.info = MPDSession.CommandInfo(permission, arguments)
        }
    }

    /// The commands the session runs itself: rows for the session's permission and
    /// argument-count checks and `commands`, as MPD's table has rows for its
    /// client-bound commands. Every other command is a spec (CommandSpecs.swift,
    /// CommandSpecs+MPD.swift).
    static let sessionRows: [Row] = [
        // Client-to-client messages: run by the session, which owns the client's
        // mailbox (MessageChannels).
        Row("subscribe", .read, 1...1),
        Row("unsubscribe", .read, 1...1),
        Row("channels", .read, 0...0),
        Row("readmessages", .read, 0...0),
        Row("sendmessage", .control, 2...2),
    ]

    /// The session's table: every spec MPD spells, and the session's rows.
    static func info(_ commands: CommandTable) -> [String: MPDSession.CommandInfo] {
        var info = Dictionary(uniqueKeysWithValues: sessionRows.map { ($0.name, $0.info) })
        for (name, spec) in commands.byMPD { info[name] = MPDSession.CommandInfo(spec.permission, spec.mpdArgumentCount) }
        return info
    }

    /// A session on `player` speaking MPD (the daemon's listeners and the in-process
    /// server make them here).
    static func session(_ player: Player, password: String?, maxCommandListBytes: Int = MPDSession.defaultMaxCommandListBytes,
                        channels: MessageChannels) -> MPDSession {
        MPDSession(password: password, maxCommandListBytes: maxCommandListBytes, table: info(player.commands), channels: channels) {
            command, args, limit throws(MPDSession.Failure) in try execute(player, command, args, binaryLimit: limit)
        }
    }

    /// Runs a command the session has checked against ``info``.
    static func execute(_ player: Player, _ command: String, _ args: [String],
                        binaryLimit: Int = MPDSession.defaultBinaryLimit) throws(Failure) -> MPDSession.Reply {
        do {
            guard let spec = player.commands.byMPD[command] else { throw Failure(.unknown, "unknown command \"\(command)\"") }
            var arguments = try spec.read(mpd: args)
            arguments.binaryLimit = binaryLimit
            let output = try spec.run(player, arguments)
            return MPDSession.Reply(lines: lines(spec.reply, player, output), binary: spec.reply == .mpdBinary ? output.binary : nil)
        } catch let f as Failure {
            throw f
        } catch {
            throw PlayerError(any: error).mpdFailure
        }
    }

    /// MPD's ACK code for a player error (ErrorVocabulary.swift).
    static func failure(_ e: PlayerError) -> Failure { e.mpdFailure }

    // MARK: - Arguments

    /// A range read by the `range` kind, as queue positions: START past the end, or an
    /// END past it or before START, is "Bad song index" (`playlistinfo`, which cuts
    /// nothing).
    static func range(_ p: Player, _ r: (start: Int, end: Int?, isRange: Bool)) throws(PlayerError) -> Range<Int> {
        let count = p.queue.count
        // `lo < count` before `lo + 1`: a range of Int.max overflowed here.
        guard r.start < count else { throw PlayerError(.badIndex, "Bad song index") }
        let hi = r.isRange ? (r.end ?? count) : r.start + 1
        guard hi > r.start, hi <= count else { throw PlayerError(.badIndex, "Bad song index") }
        return r.start..<hi
    }

    /// `prio`/`prioid`: the marked positions take the priority (one queue edit, one
    /// state save however many arguments), then the argument that failed, if one did.
    static func setPriority(_ p: Player, _ priority: Bounded<Priority>, _ chosen: [Bool], _ failure: PlayerError?) throws(PlayerError) {
        let indices = chosen.indices.filter { chosen[$0] }
        if !indices.isEmpty { try p.perform(.priority(priority, indices: indices)) }
        if let failure { throw failure }
    }

    static func update(_ p: Player, _ uri: String?) throws(PlayerError) -> [String] {
        guard p.library != nil else { throw PlayerError(.noLibrary, "No database") }
        // A scan already running (the one at start, say) answers for this request too:
        // its job, as MPD queues an update rather than refusing it (`mpc update --wait`
        // right after start failed otherwise).
        let target = uri.map { path(p, $0) }
        do {
            let job = try p.perform(.update(path: target)).job ?? 0
            return ["updating_db: \(job)"]
        } catch {
            guard error.code == .updateRunning, let job = p.library?.scanningJobID, job != 0 else { throw error }
            return ["updating_db: \(job)"]
        }
    }

    // MARK: - URIs

    /// The music directory MPD URIs are relative to: the first `library.music_roots`.
    static func root(_ p: Player) -> String? { p.firstMusicRoot }

    static func path(_ p: Player, _ uri: String) -> String {
        if uri.hasPrefix("/") { return uri }
        if uri.hasPrefix("file://") { return String(uri.dropFirst(7)) }
        // Any other URL (a radio, Home Assistant's TTS) is a URL, not a file under the root.
        if NetworkInput.hasScheme(uri) { return uri }
        return (root(p) ?? "") + "/" + uri
    }

    static func uri(_ p: Player, _ path: String) -> String {
        if let root = root(p), path.hasPrefix(root + "/") { return String(path.dropFirst(root.count + 1)) }
        return path
    }
}
