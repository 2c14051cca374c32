import CoreStream
import PlaydProtocol

/// The JSON protocol's command table: each `cmd` name, and how its request becomes a
/// ``Command`` (or a read of the player) and its reply (docs/protocol.md). The session
/// (JSONSession.swift) looks commands up here; nothing else knows the names.
enum JSONCommands {
    /// What a handler gets: the player, the request object, the session (for
    /// `subscribe`), and the server's counters (for `status`).
    struct Context {
        let player: Player
        let request: JSON
        let session: JSONSession
        let counters: ServerCounters
        subscript(_ key: String) -> JSON? { request[key] }
    }
    typealias Handler = @Sendable (Context) throws -> [(String, JSON)]

    /// The commands that are not specs: `status` (it reports the server's counters,
    /// which only the session has) and the session's own `subscribe`/`unsubscribe`, as
    /// MPD's table keeps its session commands.
    static let sessionRows: [String: Handler] = [
        "status": { c in JSONEncoding.status(c.player, c.counters) },
        // This connection.
        "subscribe": { c in
            var ticks = 0
            if let t = c["ticks"], !t.isNull, case .integer(let ms) = try subscribeTicks.read(json: t) { ticks = ms }
            c.session.subscribe(ticks: ticks)
            return [("subscribed", .bool(true))]
        },
        "unsubscribe": { c in c.session.unsubscribe(); return [] },
    ]

    /// `subscribe`'s position events every N ms (0, or absent: none), read as a spec's.
    static let subscribeTicks = ArgumentSpec("ticks", .integer(50...60_000), optional: true)

    /// A spec's reply in JSON members.
    static func members(_ reply: CommandSpec.Reply, _ p: Player, _ a: Arguments, _ output: CommandSpec.Output = .init()) -> [(String, JSON)] {
        switch reply {
        case .done: return []
        case .jsonMembers: return output.members
        case .current: return JSONEncoding.current(p)
        case .options: return JSONEncoding.options(p.queue)
        case .level: return level(p)
        case .crossfade: return JSONEncoding.crossfade(p.crossfade)
        case .direction: return [("direction", .string(p.snapshot().status.direction.rawValue))]
        case .length: return [("length", .int(p.queue.count))]
        case .queue:
            let q = p.queue
            return [("queue", .array(q.entries.enumerated().map { JSONEncoding.entry(p, $0.offset, $0.element) })),
                    ("current", q.current.map { JSON.int(Int64($0)) } ?? .null)]
        case .name: return [("name", a.text("name").map(JSON.string) ?? .null)]
        case .schedule: return JSONEncoding.schedule(p.scheduleView(day: a.text("day").flatMap { try? Player.scheduleDay($0) }))
        case .pong: return [("pong", .bool(true))]
        case .version: return [("version", .string(Daemon.version)), ("protocol", .int(1))]
        case .outputs: return [("outputs", .array(p.snapshot().outputs.map { .object(JSONEncoding.outputMembers($0)) }))]
        case .output:
            guard let o = p.snapshot().outputs.first(where: { $0.name == a.text("name") }) else { return [] }
            return JSONEncoding.outputMembers(o)
        // MPD's reads: no JSON command has these replies (JSON's `status` says it all).
        case .currentSong, .stats, .volume, .replayGainStatus, .urlHandlers, .decoders, .status, .mpdLines, .mpdBinary: return []
        }
    }

    // MARK: - Handlers

    static func level(_ p: Player) -> [(String, JSON)] {
        let l = p.currentLevel()
        return [("volume", .int(Int64(l.volume))), ("muted", .bool(l.muted))]
    }

    /// The songs, and with `add` the queue they were appended to.
    static func songs(_ p: Player, _ songs: [LibrarySong], add: Bool) throws(PlayerError) -> [(String, JSON)] {
        var out: [(String, JSON)] = [("count", .int(songs.count)), ("songs", .array(songs.map(JSONEncoding.song)))]
        if add {
            let o = try p.perform(.add(sources: songs.map(\.path), place: .end))
            out += [("added", .array(o.added.map { JSON.int(Int64($0)) })), ("length", .int(p.queue.count))]
        }
        return out
    }
}
