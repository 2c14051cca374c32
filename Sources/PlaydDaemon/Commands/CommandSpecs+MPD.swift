import CoreStream
import PlaydProtocol
import PlaydSessions
#if canImport(Glibc)
import Glibc  // stat(), for a mutation in scripts/mutate
#endif

/// The commands only MPD spells, as specs like the rest: its library browsing (MPD's
/// filter syntax, URIs relative to the music directory), its queue and stored-playlist
/// listings, and its forms of `add`, `load` and `update`. Their arguments are read
/// through the kinds (Arguments.swift) as every other command's; their replies exist
/// only in MPD's words, so each gives its lines, made by MPDEncoding, as its output
/// (``CommandSpec/Reply/mpdLines``). JSON has its own commands for the same needs
/// (`find` with tags as members, `playlists`, `queue`), which say things MPD's do not.
extension CommandSpecs {
    typealias M = MPDCommands

    static let mpdOnly: [CommandSpec] = mpdReads + mpdLibrary + mpdQueue + mpdStoredPlaylists

    static let mpdReads: [CommandSpec] = [
        CommandSpec(mpd: "status", .read, reply: .status) { _, _ throws(PlayerError) in },
        // `tagtypes` and its sub-commands (`clear`, `enable`, …): the tags playd keeps,
        // whatever a client asks to narrow them to (as MPD 0.23 lists them after `all`).
        .mpdLines("tagtypes", .none, [A("words", .words, optional: true)]) { _, _ throws(PlayerError) in
            M.tagTypes.map { "tagtype: \($0.name)" }
        },
        // Cover art in chunks, as Home Assistant and phone clients fetch it
        // (MPDPictures.swift): the cover file in the song's folder, and the picture in
        // the song. The offset is a whole number ≥ 0 ("Number too large: -1", as MPD).
        .mpdBinary("albumart", .read, [A("uri", .name), A("offset", .integer(0...Int.max))]) { p, a throws(PlayerError) in
            try M.picture(p, a.text("uri") ?? "", offset: a.integer("offset") ?? 0, embedded: false, limit: a.binaryLimit)
        },
        .mpdBinary("readpicture", .read, [A("uri", .name), A("offset", .integer(0...Int.max))]) { p, a throws(PlayerError) in
            try M.picture(p, a.text("uri") ?? "", offset: a.integer("offset") ?? 0, embedded: true, limit: a.binaryLimit)
        },
    ]

    /// The library: a music root's index (MusicLibrary), read on the control thread
    /// (it is SQLite with indexes, not the disk walk).
    static let mpdLibrary: [CommandSpec] = [
        // A scan already running (the one at start, say) answers for this request too.
        .mpdLines("update", .admin, [A("uri", .name, optional: true)]) { p, a throws(PlayerError) in
            try M.update(p, a.text("uri"))
        },
        .mpdLines("rescan", .admin, [A("uri", .name, optional: true)]) { p, a throws(PlayerError) in
            try M.update(p, a.text("uri"))
        },
        .mpdLines("find", .read, [A("filter", .filter(grouping: false))]) { p, a throws(PlayerError) in
            try M.find(p, a.filter("filter")!.terms, exact: true, add: false)
        },
        .mpdLines("search", .read, [A("filter", .filter(grouping: false))]) { p, a throws(PlayerError) in
            try M.find(p, a.filter("filter")!.terms, exact: false, add: false)
        },
        .mpdLines("findadd", .add, [A("filter", .filter(grouping: false))]) { p, a throws(PlayerError) in
            try M.find(p, a.filter("filter")!.terms, exact: true, add: true)
        },
        .mpdLines("searchadd", .add, [A("filter", .filter(grouping: false))]) { p, a throws(PlayerError) in
            try M.find(p, a.filter("filter")!.terms, exact: false, add: true)
        },
        // `list TAG [FILTER…]`: the filter's grammar hangs on the tag (`list album ARTIST`).
        .mpdLines("list", .read, [A("tag", .name), A("filter", .words, optional: true)]) { p, a throws(PlayerError) in
            try M.list(p, a.text("tag")!, a.words("filter"))
        },
        .mpdLines("count", .read, [A("filter", .filter(grouping: true))]) { p, a throws(PlayerError) in
            let f = a.filter("filter")!
            return try M.count(p, f.terms, group: f.group)
        },
        .mpdLines("lsinfo", .read, [A("uri", .name, optional: true)]) { p, a throws(PlayerError) in
            try M.lsinfo(p, a.text("uri") ?? "")
        },
        .mpdLines("listall", .read, [A("uri", .name, optional: true)]) { p, a throws(PlayerError) in
            try M.listAll(p, a.text("uri") ?? "", info: false)
        },
        .mpdLines("listallinfo", .read, [A("uri", .name, optional: true)]) { p, a throws(PlayerError) in
            try M.listAll(p, a.text("uri") ?? "", info: true)
        },
    ]

    /// The queue as MPD edits and lists it (positions, ids and ranges are the Player's
    /// checks, or MPD's "Bad song index" where a listing cuts a range itself).
    static let mpdQueue: [CommandSpec] = [
        CommandSpec(mpd: "add", .add, [A("uri", .name), A("position", .index, optional: true)]) { p, a throws(PlayerError) in
            let place: Command.Place = a.integer("position").map { .index($0) } ?? .end
            try p.perform(.add(sources: [M.path(p, a.text("uri")!)], place: place))
        },
        .mpdLines("addid", .add, [A("uri", .name), A("position", .index, optional: true)]) { p, a throws(PlayerError) in
            let place: Command.Place = a.integer("position").map { .index($0) } ?? .end
            // MPD reads the position as a number up to the queue's length: past it is
            // "Number too large" (its differential session).
            if case .index(let at) = place {
                guard at >= 0 else { throw PlayerError(.badRequest, "Number is negative: \(at)") }
                guard at <= p.queue.count else { throw PlayerError(.invalidArgument, "Number too large: \(at)") }
            }
            return try p.perform(.add(sources: [M.path(p, a.text("uri")!)], place: place)).added.prefix(1).map { "Id: \($0)" }
        },
        // MPD 0.23 looks the id up before it reads `TO` (`moveid 999 abc` is "No such
        // song"): `to` is a word here, read as a position once the id is found.
        CommandSpec(mpd: "moveid", .control, [A("id", .id), A("to", .name)]) { p, a throws(PlayerError) in
            let i = try p.index(ofID: a.integer("id")!)
            let to = try A("to", .index).read(mpd: a.text("to")!)
            guard case .integer(let at) = to else { return }
            try p.perform(.move(i..<(i + 1), to: at))
        },
        // A range past the end is cut at the end (as MPD); one starting past it is a bad
        // index, one ending before it starts malformed.
        CommandSpec(mpd: "shuffle", .control, [A("range", .range, optional: true)]) { p, a throws(PlayerError) in
            let r = try a.clippedRange("range", count: p.queue.count) ?? 0..<p.queue.count
            if case .range(let start, _, _)? = a["range"], start > p.queue.count { throw PlayerError(.badIndex, "Bad song index") }
            if r.count > 1 { try p.perform(.shuffle(r)) }
        },
        // Priorities, for random mode. As MPD 0.23: the arguments are taken in turn, and
        // one that fails (a range starting past the end: "Bad song index"; one ending
        // before it starts: "Malformed range"; an unknown id: "No such song") fails the
        // command with those before it set. A range ending past the end is cut there. A
        // word that is no number fails it with none set: the spec reads every word first,
        // where MPD sets those before it (docs/protocol.md). The positions are marked, not
        // listed, so `prio 1 0: 0: …` stays one flag per entry however many words.
        CommandSpec(mpd: "prio", .control, [A("priority", priority), A("ranges", .list(.range))]) { p, a throws(PlayerError) in
            var chosen = [Bool](repeating: false, count: p.queue.count), failure: PlayerError?
            for case .range(let start, let end, let isRange) in a.list("ranges") {
                do throws(PlayerError) {
                    let r = try Arguments.clipped(start, end, isRange: isRange, count: p.queue.count)
                    guard start <= p.queue.count else { throw PlayerError(.badIndex, "Bad song index") }
                    for i in r { chosen[i] = true }
                } catch { failure = error; break }
            }
            try M.setPriority(p, a.bounded("priority")!, chosen, failure)
        },
        CommandSpec(mpd: "prioid", .control, [A("priority", priority), A("ids", .list(.id))]) { p, a throws(PlayerError) in
            var chosen = [Bool](repeating: false, count: p.queue.count), failure: PlayerError?
            for case .integer(let id) in a.list("ids") {
                do throws(PlayerError) { chosen[try p.index(ofID: id)] = true } catch { failure = error; break }
            }
            try M.setPriority(p, a.bounded("priority")!, chosen, failure)
        },
        .mpdLines("playlistfind", .read, [A("filter", .filter(grouping: false))]) { p, a throws(PlayerError) in
            try M.queueFind(p, a.filter("filter")!.terms, exact: true)
        },
        .mpdLines("playlistsearch", .read, [A("filter", .filter(grouping: false))]) { p, a throws(PlayerError) in
            try M.queueFind(p, a.filter("filter")!.terms, exact: false)
        },
        .mpdLines("playlistinfo", .read, [A("range", .range, optional: true)]) { p, a throws(PlayerError) in
            var r = 0..<p.queue.count
            // `-1` (MPD's old "all") and `0:` are the whole queue, an empty one too.
            if case .range(let start, let end, let isRange)? = a["range"], !(start == 0 && isRange && end == nil) {
                r = try M.range(p, (start, end, isRange))
            }
            try p.probeForListing(r.lazy.map { p.queue.entries[$0].path })
            return r.flatMap { M.song(p, $0, path: nil) }
        },
        .mpdLines("playlistid", .read, [A("id", .id, optional: true)]) { p, a throws(PlayerError) in
            if let id = a.integer("id") {
                let i = try p.index(ofID: id)
                try p.probeForListing([p.queue.entries[i].path])
                return M.song(p, i, path: nil)
            }
            try p.probeForListing(p.queue.entries.lazy.map(\.path))
            return (0..<p.queue.count).flatMap { M.song(p, $0, path: nil) }
        },
        // The changes since a version: the whole queue when it changed (playd keeps no
        // history of versions; clients take it as a full listing), nothing when not.
        // Every entry in the window (START:END, cut at the queue's end, as MPD) when the
        // queue changed since `version`: playd keeps no version per entry.
        .mpdLines("plchanges", .read, [A("version", .index), A("window", .range, optional: true)]) { p, a throws(PlayerError) in
            let window = try a.clippedRange("window", count: p.queue.count) ?? 0..<p.queue.count
            guard a.integer("version")! != p.playlistVersion else { return [] }
            try p.probeForListing(window.lazy.map { p.queue.entries[$0].path })
            return window.flatMap { M.song(p, $0, path: nil) }
        },
    ]

    /// A priority, as MPD takes one (0…255; "Number too large" past either end).
    static let priority = A.Kind.integer(Priority.range)

    /// Stored playlists as MPD names them, and playlist files under the music folder.
    static let mpdStoredPlaylists: [CommandSpec] = [
        // A stored playlist, else a playlist file under the music folder (or a radio's
        // playlist URL), as MPD looks for both.
        CommandSpec(mpd: "load", .add, [A("name", .name), A("range", .range, optional: true)]) { p, a throws(PlayerError) in
            let name = a.text("name")!
            var range: Range<Int>?
            if case .range(let start, let end, let isRange)? = a["range"] {
                let hi = isRange ? end ?? Int.max : start + 1
                guard hi >= start else { throw PlayerError(.badRequest, "Malformed range: \(a.rangeText("range")!)") }
                range = start..<hi
            }
            if p.storedPlaylists.exists(name) {
                try p.perform(.loadPlaylist(name, range: range, place: .end))
                return
            }
            // The add looks the file up off the control thread (issue 38: a realpath or
            // stat on a hung mount never returns) and checks it against the roots before
            // anything looks at it: outside them the answer is the same whether or not it
            // exists (it told which files exist in, say, /root: issue 39); inside them a
            // missing file is MPD's "No such playlist".
            do throws(PlayerError) {
                try p.perform(.add(sources: [M.path(p, name)], place: .end))
            } catch where error.code == .stream(.fileNotFound) {
                throw PlayerError(.noSuchPlaylist, "No such playlist")
            }
        },
        .mpdLines("listplaylists", .read) { p, _ throws(PlayerError) in
            M.storedPlaylistLines(p)
        },
        .mpdLines("listplaylist", .read, [A("name", .name)]) { p, a throws(PlayerError) in
            try p.storedPlaylistEntries(a.text("name")!).map { "file: \(M.uri(p, $0))" }
        },
        .mpdLines("listplaylistinfo", .read, [A("name", .name)]) { p, a throws(PlayerError) in
            let entries = try p.storedPlaylistEntries(a.text("name")!)
            try p.probeForListing(entries)
            return entries.flatMap { e in
                NetworkInput.hasScheme(e) ? ["file: \(e)"] : M.songLines(p, e, p.songInfo(e))
            }
        },
        CommandSpec(mpd: "playlistadd", .control, [A("name", .name), A("uri", .name), A("position", .index, optional: true)]) {
            p, a throws(PlayerError) in
            do throws(PlayerError) {
                try p.perform(.playlistAdd(a.text("name")!, sources: [M.path(p, a.text("uri")!)], at: a.integer("position")))
            } catch where error.code == .stream(.fileNotFound) {
                throw PlayerError(.stream(.fileNotFound), "No such directory")
            }
        },
        // A range in the playlist: cut nowhere (past its end is a bad index, as MPD).
        CommandSpec(mpd: "playlistdelete", .control, [A("name", .name), A("range", .range)]) { p, a throws(PlayerError) in
            let name = a.text("name")!
            guard case .range(let start, let end, let isRange)? = a["range"] else { return }
            let count = try p.storedPlaylistEntries(name).count
            let hi = isRange ? end ?? count : start + 1
            guard start < count, hi > start, hi <= count else { throw PlayerError(.badIndex, "Bad song index") }
            try p.perform(.playlistDelete(name, start..<hi))
        },
        CommandSpec(mpd: "playlistmove", .control, [A("name", .name), A("from", .index), A("to", .index)]) { p, a throws(PlayerError) in
            try p.perform(.playlistMove(a.text("name")!, from: a.integer("from")!, to: a.integer("to")!))
        },
    ]
}
