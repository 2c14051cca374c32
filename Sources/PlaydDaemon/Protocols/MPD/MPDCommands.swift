import CoreStream
import PlaydProtocol
import PlaydSessions
#if canImport(Glibc)
import Glibc
#endif

/// MPD's commands on playd's player: one table (name, permission, argument count,
/// handler), as MPD's AllCommands.cxx. ``MPDSession`` checks the permission and the
/// argument count from it and answers `commands`/`notcommands` from it; the handlers
/// parse and range-check the arguments into ``Command``s. Control thread.
enum MPDCommands {
    typealias Failure = MPDSession.Failure
    typealias Handler = @Sendable (Player, [String]) throws -> [String]
    struct Row: Sendable {
        let name: String
        let info: MPDSession.CommandInfo
        let run: Handler
        init(_ name: String, _ permission: MPDSession.Permission, _ arguments: ClosedRange<Int>, _ run: @escaping Handler) {
            self.name = name
            self.info = MPDSession.CommandInfo(permission, arguments)
            self.run = run
        }
    }

    /// The commands not yet specs (CommandSpecs.swift), as MPD's rows.
    static let legacyRows: [Row] = [
        Row("status", .read, 0...0) { p, _ in status(p) },
        Row("update", .admin, 0...1) { p, a in try update(p, a) },
        Row("rescan", .admin, 0...1) { p, a in try update(p, a) },
        Row("find", .read, 1...Int.max) { p, a in try find(p, a, command: "find") },
        Row("search", .read, 1...Int.max) { p, a in try find(p, a, command: "search") },
        Row("findadd", .add, 1...Int.max) { p, a in try find(p, a, command: "findadd") },
        Row("searchadd", .add, 1...Int.max) { p, a in try find(p, a, command: "searchadd") },
        Row("list", .read, 1...Int.max) { p, a in try list(p, a) },
        Row("lsinfo", .read, 0...1) { p, a in try lsinfo(p, a.first ?? "") },
        Row("listall", .read, 0...1) { p, a in try listAll(p, a.first ?? "", info: false) },
        Row("listallinfo", .read, 0...1) { p, a in try listAll(p, a.first ?? "", info: true) },
        Row("count", .read, 1...Int.max) { p, a in try count(p, a) },
        // The queue.
        Row("add", .add, 1...2) { p, a in
            let place: Command.Place = a.count == 2 ? .index(try int(a[1])) : .end
            try p.perform(.add(sources: [path(p, a[0])], place: place)); return []
        },
        Row("addid", .add, 1...2) { p, a in
            let place: Command.Place = a.count == 2 ? .index(try int(a[1])) : .end
            if case .index(let at) = place, !(0...p.queue.count).contains(at) { throw Failure(.arg, "Bad song index") }
            return try p.perform(.add(sources: [path(p, a[0])], place: place)).added.prefix(1).map { "Id: \($0)" }
        },
        // A stored playlist, else a playlist file under the music folder (or a radio's
        // playlist URL), as MPD looks for both.
        Row("load", .add, 1...2) { p, a in
            let r = try a.count == 2 ? loadRange(a[1]) : nil
            if p.storedPlaylists.exists(a[0]) {
                try p.perform(.loadPlaylist(a[0], range: r, place: .end)); return []
            }
            // The add looks the file up off the control thread (issue 38: a realpath or
            // stat on a hung mount never returns) and checks it against the roots before
            // anything looks at it: outside them the answer is the same whether or not it
            // exists (it told which files exist in, say, /root: issue 39); inside them a
            // missing file is MPD's "No such playlist".
            do {
                try p.perform(.add(sources: [path(p, a[0])], place: .end)); return []
            } catch where PlayerError(any: error).code == .stream(.fileNotFound) {
                throw Failure(.noExist, "No such playlist")
            }
        },
        Row("listplaylists", .read, 0...0) { p, _ in
            p.storedPlaylists.list().flatMap { ["playlist: \($0.name)", "Last-Modified: \(isoTime($0.modified))"] }
        },
        Row("listplaylist", .read, 1...1) { p, a in try storedEntries(p, a[0]).map { "file: \(uri(p, $0))" } },
        Row("listplaylistinfo", .read, 1...1) { p, a in
            let entries = try storedEntries(p, a[0])
            try p.probeForListing(entries)
            return entries.flatMap { e in
                NetworkInput.hasScheme(e) ? ["file: \(e)"] : songLines(p, e, p.songInfo(e))
            }
        },
        Row("playlistadd", .control, 2...3) { p, a in
            let at = try a.count == 3 ? int(a[2]) : nil
            do {
                try p.perform(.playlistAdd(a[0], sources: [path(p, a[1])], at: at))
            } catch let e as PlayerError where e.code.stream == .fileNotFound {
                throw Failure(.noExist, "No such directory")
            }
            return []
        },
        Row("playlistdelete", .control, 2...2) { p, a in
            let arg = try rangeArgument(a[1])
            let count = try storedEntries(p, a[0]).count
            let hi = arg.isRange ? arg.end ?? count : arg.start + 1
            guard arg.start < count, hi > arg.start, hi <= count else { throw Failure(.arg, "Bad song index") }
            try p.perform(.playlistDelete(a[0], arg.start..<hi)); return []
        },
        Row("playlistmove", .control, 3...3) { p, a in
            let (from, to) = (try int(a[1]), try int(a[2]))
            try p.perform(.playlistMove(a[0], from: from, to: to)); return []
        },
        // A range past the end is cut at the end (as MPD); one starting past it is a bad
        // index, one ending before it starts malformed.
        // The id is looked up before `TO` is read (MPD 0.23 reads `TO` relative to the
        // song: `moveid 999 abc` is "No such song"), so this one is not a spec yet.
        Row("moveid", .control, 2...2) { p, a in
            let i = try p.index(ofID: try int(a[0]))
            try p.perform(.move(i..<(i + 1), to: try int(a[1]))); return []
        },
        Row("shuffle", .control, 0...1) { p, a in
            var r = 0..<p.queue.count
            if let text = a.first {
                let arg = try rangeArgument(text)
                if let end = arg.end, end < arg.start { throw Failure(.arg, "Malformed range: \(text)") }
                guard arg.start <= p.queue.count else { throw Failure(.arg, "Bad song index") }
                let end = min(arg.isRange ? arg.end ?? p.queue.count : arg.start + 1, p.queue.count)
                r = min(arg.start, end)..<end
            }
            if r.count > 1 { try p.perform(.shuffle(r)) }
            return []
        },
        // Priorities, for random mode. Ranges past the end are cut at the end (as MPD).
        Row("prio", .control, 2...Int.max) { p, a in
            let prio = try priority(a[0])
            var indices: [Int] = []
            for text in a.dropFirst() {
                let r = try rangeArgument(text)
                let hi = min(r.isRange ? r.end ?? p.queue.count : r.start + 1, p.queue.count)
                if r.start < hi { indices += Array(r.start..<hi) }
            }
            if !indices.isEmpty { try p.perform(.priority(prio, indices: indices)) }
            return []
        },
        Row("prioid", .control, 2...Int.max) { p, a in
            let prio = try priority(a[0])
            let indices = try a.dropFirst().map { try p.index(ofID: try int($0)) }
            try p.perform(.priority(prio, indices: indices)); return []
        },
        Row("playlistfind", .read, 1...Int.max) { p, a in try queueFind(p, a, exact: true) },
        Row("playlistsearch", .read, 1...Int.max) { p, a in try queueFind(p, a, exact: false) },
        Row("playlistinfo", .read, 0...1) { p, a in
            let r = try a.first.map { try range(p, $0) } ?? 0..<p.queue.count
            try p.probeForListing(r.lazy.map { p.queue.entries[$0].path })
            return r.flatMap { song(p, $0, path: nil) }
        },
        Row("playlistid", .read, 0...1) { p, a in
            if let first = a.first {
                let i = try p.index(ofID: try int(first))
                try p.probeForListing([p.queue.entries[i].path])
                return song(p, i, path: nil)
            }
            try p.probeForListing(p.queue.entries.lazy.map(\.path))
            return (0..<p.queue.count).flatMap { song(p, $0, path: nil) }
        },
        Row("plchanges", .read, 1...2) { p, a in
            guard try int(a[0]) != p.playlistVersion else { return [] }
            try p.probeForListing(p.queue.entries.lazy.map(\.path))
            return (0..<p.queue.count).flatMap { song(p, $0, path: nil) }
        },
        // Reflection.
        Row("tagtypes", .none, 0...Int.max) { _, _ in tagTypes.map { "tagtype: \($0.name)" } },
        // Cover art, in chunks (`picture`, run by `execute`: its reply is binary).
        Row("albumart", .read, 2...2) { _, _ in [] },
        Row("readpicture", .read, 2...2) { _, _ in [] },
        // Client-to-client messages: run by the session, which owns the client's
        // mailbox (MessageChannels); the rows give permission and argument counts.
        Row("subscribe", .read, 1...1) { _, _ in [] },
        Row("unsubscribe", .read, 1...1) { _, _ in [] },
        Row("channels", .read, 0...0) { _, _ in [] },
        Row("readmessages", .read, 0...0) { _, _ in [] },
        Row("sendmessage", .control, 2...2) { _, _ in [] },
    ]

    static let handlers: [String: Handler] = Dictionary(uniqueKeysWithValues: legacyRows.map { ($0.name, $0.run) })

    /// The session's table: every spec MPD spells, and the legacy rows.
    static func info(_ commands: CommandTable) -> [String: MPDSession.CommandInfo] {
        var info = Dictionary(uniqueKeysWithValues: legacyRows.map { ($0.name, $0.info) })
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
            if command == "albumart" || command == "readpicture" {
                return try picture(player, args, embedded: command == "readpicture", limit: binaryLimit)
            }
            if let spec = player.commands.byMPD[command] {
                try spec.run(player, try spec.read(mpd: args))
                return MPDSession.Reply(lines: lines(spec.reply, player))
            }
            guard let run = handlers[command] else { throw Failure(.unknown, "unknown command \"\(command)\"") }
            return MPDSession.Reply(lines: try run(player, args))
        } catch let f as Failure {
            throw f
        } catch {
            throw PlayerError(any: error).mpdFailure
        }
    }

    /// MPD's ACK code for a player error (ErrorVocabulary.swift).
    static func failure(_ e: PlayerError) -> Failure { e.mpdFailure }

    // MARK: - Arguments

    /// An MPD integer word, read by the spec's `index` kind (Arguments.swift): one
    /// parser, one wording ("Integer expected: x").
    static func int(_ s: String) throws -> Int {
        do throws(PlayerError) {
            guard case .integer(let v) = try ArgumentSpec("n", .index).read(mpd: s) else { throw PlayerError(.badRequest, "Integer expected: \(s)") }
            return v
        } catch {
            throw error.mpdFailure
        }
    }

    /// "N" or "START:END" (END exclusive; open END = the end of the queue). What is
    /// not a number or a range, or negative, is refused in MPD's words before the queue
    /// is looked at; then an index outside it is "Bad song index".
    static func range(_ p: Player, _ text: String) throws -> Range<Int> {
        try range(p, try rangeArgument(text))
    }

    /// The syntax of "N", "START:" or "START:END": the start, and the end if given
    /// (nil: open, or a single index when there is no colon).
    /// Read by the spec's `range` kind (Arguments.swift), the one parser of MPD ranges.
    static func rangeArgument(_ text: String) throws -> (start: Int, end: Int?, isRange: Bool) {
        do throws(PlayerError) {
            guard case .range(let lo, let hi, let isRange) = try ArgumentSpec("range", .range).read(mpd: text) else {
                throw PlayerError(.badRequest, "Integer or range expected: \(text)")
            }
            return (lo, hi, isRange)
        } catch {
            throw error.mpdFailure
        }
    }

    static func range(_ p: Player, _ r: (start: Int, end: Int?, isRange: Bool)) throws -> Range<Int> {
        let count = p.queue.count
        // `lo < count` before `lo + 1`: a range of Int.max overflowed here.
        guard r.start < count else { throw Failure(.arg, "Bad song index") }
        let hi = r.isRange ? (r.end ?? count) : r.start + 1
        guard hi > r.start, hi <= count else { throw Failure(.arg, "Bad song index") }
        return r.start..<hi
    }

    /// A priority, 0…255, in MPD's words.
    static func priority(_ text: String) throws -> Int {
        let v = try int(text)
        guard (0...255).contains(v) else { throw Failure(.arg, "Number too large: \(text)") }
        return v
    }

    /// `load`'s range: "N" or "START:END"; a range past the end is cut at the end.
    static func loadRange(_ text: String) throws -> Range<Int> {
        let r = try rangeArgument(text)
        let hi = r.isRange ? r.end ?? Int.max : r.start + 1
        guard hi >= r.start else { throw Failure(.arg, "Malformed range: \(text)") }
        return r.start..<hi
    }

    /// A stored playlist's entries (absolute paths and URLs), errors in MPD's words.
    static func storedEntries(_ p: Player, _ name: String) throws -> [String] {
        do throws(PlayerError) {
            return try p.storedPlaylistEntries(name)
        } catch {
            throw failure(error)
        }
    }

    static func update(_ p: Player, _ a: [String]) throws -> [String] {
        guard p.library != nil else { throw Failure(.system, "No database") }
        // A scan already running (the one at start, say) answers for this request too:
        // its job, as MPD queues an update rather than refusing it (`mpc update --wait`
        // right after start failed otherwise).
        let target = a.first.map { path(p, $0) }
        do throws(PlayerError) {
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
