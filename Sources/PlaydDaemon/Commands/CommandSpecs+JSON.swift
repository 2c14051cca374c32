import CoreStream
import PlaydProtocol
import PlaydSessions

/// The commands only JSON spells whose reply is JSON's own (a stored playlist's files,
/// the library's songs as objects, a cover as base64): specs like the rest, their
/// members made by JSONEncoding as their output (``CommandSpec/Reply/jsonMembers``).
/// MPD has its own commands for the same needs (CommandSpecs+MPD.swift).
extension CommandSpecs {
    static let jsonOnly: [CommandSpec] = [add("add", place: .end), add("insert", place: .next)]
        + jsonStoredPlaylists + jsonLibrary + jsonReads

    /// `find`'s tags: each an optional member (`"artist": "Alpha"`, `"title": "D*"`).
    static let findTags = MusicLibrary.fields.keys.sorted()
    /// At most this many songs in one reply (default 10,000).
    static let songLimit = A.Kind.integer(1...1_000_000)

    /// `add` and `insert` (right after the entry playing): `path` or `url` (one), or
    /// `paths` (files, folders, playlists and URLs, expanded off the control thread).
    static func add(_ name: String, place: Command.Place) -> CommandSpec {
        .jsonMembers(name, .add, [A("path", .name, optional: true), A("url", .name, optional: true),
                                  A("paths", .list(.name), optional: true)]) { p, a throws(PlayerError) in
            var paths: [String] = []
            if a.has("paths") {
                for case .text(let t) in a.list("paths") { paths.append(t) }
            } else if let one = a.text("path") ?? a.text("url") {
                paths = [one]
            }
            guard !paths.isEmpty else { throw PlayerError(.badRequest, "\(name) needs \"path\", \"url\" or \"paths\"") }
            let out = try p.perform(.add(sources: paths, place: place))
            var reply: [(String, JSON)] = [("added", .array(out.added.map { JSON.int(Int64($0)) })), ("length", .int(p.queue.count))]
            if out.outsideRoots > 0 { reply.append(("outside_library", .int(out.outsideRoots))) }
            return reply
        }
    }

    static let jsonStoredPlaylists: [CommandSpec] = [
        .jsonMembers("load", .add, [A("name", .name)]) { p, a throws(PlayerError) in
            let ids = try p.perform(.loadPlaylist(a.text("name")!, range: nil, place: .end)).added
            return [("added", .int(Int64(ids.count))), ("length", .int(p.queue.count))]
        },
        .jsonMembers("playlists", .read) { p, _ throws(PlayerError) in
            [("playlists", .array(p.storedPlaylists.list().map {
                .obj(("name", .string($0.name)), ("modified", .int(Int64($0.modified))))
            }))]
        },
        .jsonMembers("playlist", .read, [A("name", .name)]) { p, a throws(PlayerError) in
            let name = a.text("name")!
            return [("name", .string(name)), ("files", .array(try p.storedPlaylistEntries(name).map(JSON.string)))]
        },
    ]

    static let jsonLibrary: [CommandSpec] = [
        .jsonMembers("update", .admin, [A("path", .name, optional: true)]) { p, a throws(PlayerError) in
            [("job", .int(try p.perform(.update(path: a.text("path"))).job ?? 0))]
        },
        .jsonMembers("search", .read, [A("query", .name), A("limit", songLimit, optional: true), A("add", .flag, optional: true)]) {
            p, a throws(PlayerError) in
            let library = try p.requireLibrary()
            guard let q = a.text("query"), !q.isEmpty else { throw PlayerError(.badRequest, "search needs \"query\"") }
            let songs: [LibrarySong]
            do { songs = try library.search(q, limit: a.integer("limit") ?? 10_000) } catch { throw PlayerError(any: error) }
            return try JSONCommands.songs(p, songs, add: a.flag("add") == true)
        },
        // Tags as members; a value ending in `*` matches as a prefix.
        .jsonMembers("find", .read, findTags.map { A($0, .name, optional: true) }
                     + [A("limit", songLimit, optional: true), A("add", .flag, optional: true)]) { p, a throws(PlayerError) in
            let library = try p.requireLibrary()
            let filters: [(field: String, value: String, prefix: Bool)] = findTags.compactMap { tag in
                a.text(tag).map { v in (tag, v.hasSuffix("*") ? String(v.dropLast()) : v, v.hasSuffix("*")) }
            }
            guard !filters.isEmpty else { throw PlayerError(.badRequest, "find needs one of \(findTags.joined(separator: ", "))") }
            let songs: [LibrarySong]
            do { songs = try library.find(filters, limit: a.integer("limit") ?? 10_000) } catch { throw PlayerError(any: error) }
            return try JSONCommands.songs(p, songs, add: a.flag("add") == true)
        },
        // `what`: artists or albums (or the singular); narrowed by `artist`, `album`.
        .jsonMembers("list", .read, [A("what", .name), A("artist", .name, optional: true), A("album", .name, optional: true)]) {
            p, a throws(PlayerError) in
            let library = try p.requireLibrary()
            let what = a.text("what")!
            let field = what.hasSuffix("s") ? String(what.dropLast()) : what
            var filters: [(field: String, value: String)] = []
            if let v = a.text("artist") { filters.append(("artist", v)) }
            if let v = a.text("album") { filters.append(("album", v)) }
            do { return [(what, .array(try library.list(field, filters: filters).map(JSON.string)))] } catch { throw PlayerError(any: error) }
        },
        .jsonMembers("ls", .read, [A("path", .name, optional: true)]) { p, a throws(PlayerError) in
            let library = try p.requireLibrary()
            do {
                let (dirs, songs) = try library.ls(a.text("path"))
                return [("directories", .array(dirs.map(JSON.string))), ("songs", .array(songs.map(JSONEncoding.song)))]
            } catch {
                throw PlayerError(any: error)
            }
        },
    ]

    static let jsonReads: [CommandSpec] = [
        // The playing track's embedded picture, read off the control thread (a hung
        // mount; Player+DiskReads.swift).
        .jsonMembers("cover", .read) { p, _ throws(PlayerError) in
            guard let t = p.snapshot().playing else { throw PlayerError(.notPlaying, "nothing is playing") }
            let path = t.path
            let read = try p.readOffThread("cover\0" + path, what: "cover of \(path)") {
                Result { () throws(StreamError) in try AudioDecoder.coverArt(path: path) }
            }
            let art: (mime: String, bytes: [UInt8])?
            do { art = try read.get() } catch { throw PlayerError(any: error) }
            guard let art else { return [("cover", .null)] }
            return [("cover", .obj(("mime", .string(art.mime)), ("size", .int(Int64(art.bytes.count))),
                                   ("data", .string(Base64.encode(art.bytes)))))]
        },
    ]
}
