import CoreStream
import PlaydProtocol
import PlaydSessions

/// playd's commands as specs (CommandSpec.swift): the reads, outputs, transport, play
/// options, level, crossfade, queue edits and stored playlists. Each is one row
/// whichever protocols spell it; where the two
/// protocols mean different things by one name (MPD's `repeat 0|1` and JSON's
/// one-word `repeat`, MPD's `pause [0|1]` and JSON's `pause`) each meaning is its own
/// row. The commands only MPD spells are in CommandSpecs+MPD.swift, those only JSON
/// spells in CommandSpecs+JSON.swift; the JSON session's own (`subscribe`,
/// `unsubscribe`, `status`) are rows of JSONCommands.sessionRows.
public enum CommandSpecs {
    typealias A = ArgumentSpec

    /// MPD's ranges. A volume is a percentage; a change of more than 100 in either
    /// direction saturates anyway. Crossfade is capped at an hour (longer than any
    /// track worth a fade, and `seconds × rate` stays far inside Int).
    static let volume = A.Kind.integer(VolumeLevel.range)
    static let volumeChange = A.Kind.integer(VolumeStep.range)
    static let crossfadeSeconds = A.Kind.integer(0...Player.CrossfadeSettings.maxSeconds)
    /// MixRamp levels as their analyser writes them (−90 … 0), with room either side.
    static let mixrampDB = A.Kind.number(-200...200, nan: false)
    /// ≤ 0 or NaN: MixRamp off (MPD's default is −1, `nan` its documented "off").
    static let mixrampDelay = A.Kind.number(-1e9...Double(Player.CrossfadeSettings.maxSeconds), nan: true)

    static let single = A.Kind.choice([.init("off", mpd: "0"), .init("on", mpd: "1"), .init("oneshot")],
                                      mpdRefusal: "Unrecognized single mode, expected 0, 1, or oneshot")
    static let repeatMode = A.Kind.choice(RepeatWord.allCases.map { .init($0.rawValue) }, mpdRefusal: "Unrecognized repeat mode")
    static let replayGain = A.Kind.choice(ReplayGainMode.allCases.map { .init($0.rawValue) },
                                          mpdRefusal: "Unrecognized replay gain mode")
    static let direction = A.Kind.choice(PlayDirection.allCases.map { .init($0.rawValue) },
                                         mpdRefusal: "Unrecognized direction")

    public static let all: [CommandSpec] = reads + outputs + transport + options + level + crossfade + queue + storedPlaylists
        + mpdOnly + jsonOnly

    /// What a command only reads: its reply says it all (MPDEncoding, JSONCommands.members).
    static let reads: [CommandSpec] = [
        CommandSpec(json: "ping", mpd: "ping", .none, reply: .pong) { _, _ throws(PlayerError) in },
        CommandSpec(json: "version", .none, reply: .version) { _, _ throws(PlayerError) in },
        // The schedule now; with `day` (YYYY-MM-DD, today, tomorrow) that day's plan.
        CommandSpec(json: "schedule", .read, [A("day", .name, optional: true)], reply: .schedule) { _, a throws(PlayerError) in
            if let d = a.text("day") { _ = try Player.scheduleDay(d) }
        },
        // The error status shows is an output lost (retried on its own); nothing else
        // lingers as MPD's player errors do, so there is nothing to clear.
        CommandSpec(mpd: "clearerror", .control) { _, _ throws(PlayerError) in },
        CommandSpec(mpd: "currentsong", .read, reply: .currentSong) { p, _ throws(PlayerError) in
            let s = p.snapshot().status
            if let file = p.heardEntries(s).current.map({ p.queue.entries[$0].path }) ?? s.track?.path {
                try p.probeForListing([file])
            }
        },
        CommandSpec(mpd: "stats", .read, reply: .stats) { _, _ throws(PlayerError) in },
        CommandSpec(mpd: "getvol", .read, reply: .volume) { p, _ throws(PlayerError) in
            guard p.config.mixer != "none" else { throw PlayerError(.noMixer, "mixer = \"none\": no volume") }
        },
        CommandSpec(mpd: "replay_gain_status", .read, reply: .replayGainStatus) { _, _ throws(PlayerError) in },
        CommandSpec(mpd: "urlhandlers", .read, reply: .urlHandlers) { _, _ throws(PlayerError) in },
        CommandSpec(mpd: "decoders", .read, reply: .decoders) { _, _ throws(PlayerError) in },
    ]

    /// The local output and the feeds: MPD numbers them as `outputs` lists them, JSON
    /// names them.
    static let outputs: [CommandSpec] = [
        CommandSpec(json: "outputs", mpd: "outputs", .read, reply: .outputs) { _, _ throws(PlayerError) in },
        CommandSpec(mpd: "enableoutput", .admin, [A("id", .index)]) { p, a throws(PlayerError) in
            try switchOutput(p, a.integer("id")!) { _ in true }
        },
        CommandSpec(mpd: "disableoutput", .admin, [A("id", .index)]) { p, a throws(PlayerError) in
            try switchOutput(p, a.integer("id")!) { _ in false }
        },
        CommandSpec(mpd: "toggleoutput", .admin, [A("id", .index)]) { p, a throws(PlayerError) in
            try switchOutput(p, a.integer("id")!) { !$0 }
        },
        CommandSpec(json: "output", .admin, [A("name", .name), A("enabled", .flag)], reply: .output) { p, a throws(PlayerError) in
            try p.perform(.output(name: a.text("name")!, enabled: a.flag("enabled")!))
        },
    ]

    /// Output number `index` (as `outputs` lists them) on or off.
    static func switchOutput(_ p: Player, _ index: Int, _ change: (Bool) -> Bool) throws(PlayerError) {
        let list = p.snapshot().outputs
        guard list.indices.contains(index) else { throw PlayerError(.noSuchOutput, "no output \(index) (see outputs)") }
        try p.perform(.output(name: list[index].name, enabled: change(list[index].enabled)))
    }

    static let transport: [CommandSpec] = [
        CommandSpec(json: "stop", mpd: "stop", .control) { p, _ throws(PlayerError) in try p.perform(.transport(.stop)) },
        CommandSpec(json: "next", mpd: "next", .control, reply: .current) { p, _ throws(PlayerError) in try p.perform(.next) },
        CommandSpec(json: "prev", mpd: "previous", .control, reply: .current) { p, _ throws(PlayerError) in try p.perform(.previous) },
        CommandSpec(json: "pause", .control) { p, _ throws(PlayerError) in try p.perform(.transport(.pause)) },
        CommandSpec(json: "resume", .control) { p, _ throws(PlayerError) in try p.perform(.transport(.resume)) },
        CommandSpec(json: "toggle", .control) { p, _ throws(PlayerError) in try p.perform(.transport(.toggle)) },
        // MPD's `pause` with no argument toggles (deprecated there, still sent by clients).
        CommandSpec(mpd: "pause", .control, [A("pause", .flag, optional: true)]) { p, a throws(PlayerError) in
            try p.perform(.transport(a.flag("pause").map { $0 ? .pause : .resume } ?? .toggle))
        },
        CommandSpec(json: "clear", mpd: "clear", .control) { p, _ throws(PlayerError) in try p.perform(.clear) },
        CommandSpec(json: "direction", .control, [A("direction", direction)], reply: .direction) { p, a throws(PlayerError) in
            try p.perform(.direction(PlayDirection(rawValue: a.choice("direction")!)!))
        },
    ]

    /// MPD's four options, each on its own (PlayQueue: repeats, single, shuffle, consume).
    static let options: [CommandSpec] = [
        CommandSpec(mpd: "repeat", .control, [A("on", .flag)]) { p, a throws(PlayerError) in try p.perform(.setRepeat(a.flag("on")!)) },
        CommandSpec(json: "repeat", .control, [A("mode", repeatMode)], reply: .options) { p, a throws(PlayerError) in
            let word = RepeatWord(rawValue: a.choice("mode")!)!.options
            try p.perform(.setRepeatSingle(repeats: word.repeats, single: word.single))
        },
        CommandSpec(json: "single", mpd: "single", .control, [A("mode", single)], reply: .options) { p, a throws(PlayerError) in
            try p.perform(.setSingle(PlayQueue.Single(rawValue: a.choice("mode")!)!))
        },
        CommandSpec(json: "shuffle", mpd: "random", .control, [A("on", .flag)], reply: .options) { p, a throws(PlayerError) in
            try p.perform(.setRandom(a.flag("on")!))
        },
        CommandSpec(json: "consume", mpd: "consume", .control, [A("on", .flag)], reply: .options) { p, a throws(PlayerError) in
            try p.perform(.setConsume(a.flag("on")!))
        },
    ]

    static let level: [CommandSpec] = [
        CommandSpec(mpd: "setvol", .control, [A("volume", volume)]) { p, a throws(PlayerError) in
            try p.perform(.volume(.set(a.bounded("volume")!)))
        },
        CommandSpec(mpd: "volume", .control, [A("change", volumeChange)]) { p, a throws(PlayerError) in
            try p.perform(.volume(.change(a.bounded("change")!)))
        },
        // JSON's `volume`: `set`, else `change`, else only the reply (a read).
        CommandSpec(json: "volume", .control, [A("set", volume, optional: true), A("change", volumeChange, optional: true)],
                    reply: .level) { p, a throws(PlayerError) in
            if let v: Bounded<VolumeLevel> = a.bounded("set") {
                try p.perform(.volume(.set(v)))
            } else if let v: Bounded<VolumeStep> = a.bounded("change") {
                try p.perform(.volume(.change(v)))
            }
        },
        // `muted` left out (or null): toggle.
        CommandSpec(json: "mute", .control, [A("muted", .flag, optional: true)], reply: .level) { p, a throws(PlayerError) in
            try p.perform(.mute(a.flag("muted")))
        },
        CommandSpec(mpd: "replay_gain_mode", .control, [A("mode", replayGain)]) { p, a throws(PlayerError) in
            try p.perform(.replayGain(ReplayGainMode(rawValue: a.choice("mode")!)!))
        },
    ]

    /// Crossfade and MixRamp (Player+Crossfade.swift).
    static let crossfade: [CommandSpec] = [
        CommandSpec(mpd: "crossfade", .control, [A("seconds", crossfadeSeconds)]) { p, a throws(PlayerError) in
            try p.perform(.setCrossfade(seconds: a.integer("seconds")!))
        },
        CommandSpec(mpd: "mixrampdb", .control, [A("db", mixrampDB)]) { p, a throws(PlayerError) in
            try p.perform(.setMixRampDB(a.number("db")!))
        },
        CommandSpec(mpd: "mixrampdelay", .control, [A("seconds", mixrampDelay)]) { p, a throws(PlayerError) in
            try p.perform(.setMixRampDelay(a.number("seconds")!))
        },
        // All three in one: any of the members (each read before any is set, so a bad
        // one changes nothing); none reads them. {"cmd":"crossfade","seconds":5}
        CommandSpec(json: "crossfade", .control,
                    [A("seconds", crossfadeSeconds, optional: true), A("mixramp_db", mixrampDB, optional: true),
                     A("mixramp_delay", mixrampDelay, optional: true)], reply: .crossfade) { p, a throws(PlayerError) in
            if let s = a.integer("seconds") { try p.perform(.setCrossfade(seconds: s)) }
            if let db = a.number("mixramp_db") { try p.perform(.setMixRampDB(db)) }
            if let d = a.number("mixramp_delay") { try p.perform(.setMixRampDelay(d)) }
        },
    ]

    /// Positions and ids in the queue: read as numbers here, looked up by the Player
    /// when the command runs (its check is the only one: MPD's "Bad song index", "No
    /// such song"), after every argument is read, as MPD reads them.
    static let queue: [CommandSpec] = [
        // MPD's `play`/`playid` with `-1` (or nothing): resume, or start the queue; with
        // an empty queue nothing happens and the answer is OK, as MPD's.
        CommandSpec(mpd: "play", .control, [A("position", .index, optional: true)]) { p, a throws(PlayerError) in
            if let i = a.integer("position"), i != -1 { try p.perform(.playIndex(i)) } else if p.queue.count > 0 { try p.perform(.playQueue) }
        },
        CommandSpec(mpd: "playid", .control, [A("id", .index, optional: true)]) { p, a throws(PlayerError) in
            if let id = a.integer("id"), id != -1 { try p.perform(.playID(id)) } else if p.queue.count > 0 { try p.perform(.playQueue) }
        },
        // `-1` (MPD's old "all") or `0:` on an empty queue deletes nothing, and is OK (as MPD).
        CommandSpec(mpd: "delete", .control, [A("range", .range)]) { p, a throws(PlayerError) in
            let r = try a.queueRange("range", count: p.queue.count)!
            if r.isEmpty, p.queue.count == 0, case .range(0, nil, true)? = a["range"] { return }
            try p.perform(.remove(r))
        },
        // Both read before the queue is looked at, as MPD.
        CommandSpec(mpd: "move", .control, [A("range", .range), A("to", .index)]) { p, a throws(PlayerError) in
            try p.perform(.move(try a.queueRange("range", count: p.queue.count)!, to: a.integer("to")!))
        },
        CommandSpec(mpd: "seek", .control, [A("position", .index), A("time", .seconds(relative: false))]) { p, a throws(PlayerError) in
            try p.perform(.seekEntry(index: a.integer("position")!, at: a.seekTarget("time")!))
        },
        CommandSpec(mpd: "seekid", .control, [A("id", .id), A("time", .seconds(relative: false))]) { p, a throws(PlayerError) in
            try p.perform(.seekEntry(index: try p.index(ofID: a.integer("id")!), at: a.seekTarget("time")!))
        },
        // `+N`/`-N`: from the position heard.
        CommandSpec(mpd: "seekcur", .control, [A("time", .seconds(relative: true))]) { p, a throws(PlayerError) in
            try p.perform(.seek(a.seekTarget("time")!))
        },
        CommandSpec(mpd: "deleteid", .control, [A("id", .id)]) { p, a throws(PlayerError) in
            let i = try p.index(ofID: a.integer("id")!)
            try p.perform(.remove(i..<(i + 1)))
        },
        // JSON's `remove`: by id ("entry"; a request's "id" is the client's own tag) or
        // by position.
        CommandSpec(json: "remove", .control, [A("entry", .id, optional: true), A("index", .index, optional: true)],
                    reply: .length) { p, a throws(PlayerError) in
            guard let i = try a.integer("entry").map({ id throws(PlayerError) in try p.index(ofID: id) }) ?? a.integer("index") else {
                throw PlayerError(.badRequest, "give \"entry\" (an entry id) or \"index\"")
            }
            try p.perform(.remove(i..<(i + 1)))
        },
        // JSON's `move`: the entry by id ("entry") or position ("index", or "from"), to a
        // position.
        CommandSpec(json: "move", .control, [A("entry", .id, optional: true), A("index", .index, optional: true),
                                             A("from", .index, optional: true), A("to", .index)]) { p, a throws(PlayerError) in
            guard let i = try a.integer("entry").map({ id throws(PlayerError) in try p.index(ofID: id) }) ?? a.integer("index") ?? a.integer("from") else {
                throw PlayerError(.badRequest, "give \"entry\" (an entry id) or \"index\"")
            }
            try p.perform(.move(i..<(i + 1), to: a.integer("to")!))
        },
        // The entries' tags, probed off the control thread first (Player+DiskReads.swift).
        CommandSpec(json: "queue", .read, reply: .queue) { p, _ throws(PlayerError) in
            try p.probeForListing(p.queue.entries.lazy.map(\.path))
        },
        CommandSpec(mpd: "swap", .control, [A("a", .index), A("b", .index)]) { p, a throws(PlayerError) in
            try p.perform(.swap(a.integer("a")!, a.integer("b")!))
        },
        CommandSpec(mpd: "swapid", .control, [A("a", .id), A("b", .id)]) { p, a throws(PlayerError) in
            try p.perform(.swap(try p.index(ofID: a.integer("a")!), try p.index(ofID: a.integer("b")!)))
        },
    ]

    /// Stored playlists (StoredPlaylists checks the names: MPD's "Bad playlist name").
    static let storedPlaylists: [CommandSpec] = [
        CommandSpec(json: "save", mpd: "save", .control, [A("name", .name)], reply: .name) { p, a throws(PlayerError) in
            try p.perform(.savePlaylist(a.text("name")!))
        },
        CommandSpec(json: "remove_playlist", mpd: "rm", .control, [A("name", .name)]) { p, a throws(PlayerError) in
            try p.perform(.playlistRemove(a.text("name")!))
        },
        CommandSpec(json: "rename_playlist", mpd: "rename", .control, [A("name", .name), A("to", .name)]) { p, a throws(PlayerError) in
            try p.perform(.playlistRename(a.text("name")!, to: a.text("to")!))
        },
        CommandSpec(mpd: "playlistclear", .control, [A("name", .name)]) { p, a throws(PlayerError) in
            try p.perform(.playlistClear(a.text("name")!))
        },
    ]
}
