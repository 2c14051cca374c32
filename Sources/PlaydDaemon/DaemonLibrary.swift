import CoreStream
import PlaydProtocol
#if canImport(Glibc)
import Glibc
#endif

/// The music library's requests (`update`, `search`, `find`, `list`, `ls`) and the
/// path policy: with `library.music_roots` set, only files under the roots are played
/// or queued, unless `library.allow_outside_roots` says otherwise. Control thread.
extension Daemon {
    /// The path to play or queue, resolved; refused when outside the roots. With no
    /// roots configured (no library) every path is taken as given.
    ///
    /// A path outside the roots gets the same answer whether or not it exists (a "no
    /// such file" would tell a local user which files exist in, say, /root). The roots
    /// are checked again when the file is opened (``LocalFile``), on the descriptor.
    func admit(_ path: String) throws -> String {
        guard !path.utf8.contains(0) else { throw RequestError(.badRequest, "a path cannot contain a NUL byte") }
        guard path.utf8.count <= 4096 else { throw RequestError(.badRequest, "path longer than 4096 bytes") }
        guard let library else { return path }
        if let real = library.resolveInside(path) { return real }
        if config.allowOutsideRoots { return path }
        let absolute = path.hasPrefix("/") ? path : (library.roots.first ?? "") + "/" + path
        // Inside the roots but missing: say so. Outside: one answer for all.
        if LocalFile.isInside(LocalFile.resolvedParent(absolute), roots: library.roots) {
            throw StreamError(.fileNotFound, "\(path): no such file")
        }
        throw RequestError(.outsideLibrary,
                           "\(path) is outside the music roots (\(library.roots.joined(separator: ", "))); set library.allow_outside_roots to allow it")
    }

    /// `admit` for a list from a folder walk or a playlist: entries outside the roots
    /// (a symlink out, a playlist line pointing elsewhere) are left out and counted.
    func admitAll(_ paths: [String]) -> (kept: [String], refused: Int) {
        guard library != nil else { return (paths, 0) }
        var kept: [String] = []
        for p in paths { if let a = try? admit(p) { kept.append(a) } }
        return (kept, paths.count - kept.count)
    }

    func libraryRequest(_ name: String, _ req: JSON) throws -> [(String, JSON)] {
        guard let library else {
            throw RequestError(.badRequest, "no music library: set library.music_roots in the config")
        }
        do {
            switch name {
            case "update":
                let path = req["path"]?.stringValue
                let job = try library.update(path)
                server?.broadcast(.obj(("event", .string("update")), ("state", .string("started")), ("job", .int(job))))
                notifyMPD(["update"])
                return [("job", .int(job))]
            case "search":
                guard let q = req["query"]?.stringValue, !q.isEmpty else { throw RequestError(.badRequest, "search needs \"query\"") }
                return try songsReply(library.search(q, limit: limit(req)), req)
            case "find":
                var filters: [(field: String, value: String, prefix: Bool)] = []
                for (k, v) in req.objectMembers ?? [] where MusicLibrary.fields[k] != nil {
                    guard let s = v.stringValue else { throw RequestError(.badRequest, "\"\(k)\" must be a string") }
                    let prefix = s.hasSuffix("*")
                    filters.append((k, prefix ? String(s.dropLast()) : s, prefix))
                }
                guard !filters.isEmpty else {
                    throw RequestError(.badRequest, "find needs one of \(MusicLibrary.fields.keys.sorted().joined(separator: ", "))")
                }
                return try songsReply(library.find(filters, limit: limit(req)), req)
            case "list":
                guard let what = req["what"]?.stringValue else { throw RequestError(.badRequest, "list needs \"what\": artists or albums") }
                let field = what.hasSuffix("s") ? String(what.dropLast()) : what
                var filters: [(field: String, value: String)] = []
                if let a = req["artist"]?.stringValue { filters.append(("artist", a)) }
                if let a = req["album"]?.stringValue { filters.append(("album", a)) }
                return [(what, .array(try library.list(field, filters: filters).map(JSON.string)))]
            case "ls":
                let (dirs, songs) = try library.ls(req["path"]?.stringValue)
                return [("directories", .array(dirs.map(JSON.string))), ("songs", .array(songs.map(Self.songJSON)))]
            default:
                throw RequestError(.unknownCommand, "unknown command '\(name)'")
            }
        } catch let e as MusicLibrary.Error {
            throw RequestError(e.updateRunning ? .updateRunning : .invalidArgument, e.message)
        }
    }

    private func limit(_ req: JSON) throws -> Int {
        guard let l = req["limit"] else { return 10_000 }
        guard let n = l.numberValue, n >= 1, n <= 1_000_000 else { throw RequestError(.badRequest, "\"limit\" must be 1…1000000") }
        return Int(n)
    }

    /// The songs, and with `"add": true` the queue they were appended to.
    private func songsReply(_ songs: [LibrarySong], _ req: JSON) throws -> [(String, JSON)] {
        var out: [(String, JSON)] = [("count", .int(songs.count)), ("songs", .array(songs.map(Self.songJSON)))]
        if req["add"]?.boolValue == true {
            out += try queueRequest("add", .obj(("paths", .array(songs.map { .string($0.path) }))))
        }
        return out
    }

    static func songJSON(_ s: LibrarySong) -> JSON {
        var m: [(String, JSON)] = [("file", .string(s.path))]
        func add(_ k: String, _ v: String?) { if let v { m.append((k, .string(v))) } }
        func add(_ k: String, _ v: Int?) { if let v { m.append((k, .int(v))) } }
        add("title", s.title); add("artist", s.artist); add("album", s.album); add("album_artist", s.albumArtist)
        add("genre", s.genre); add("date", s.date); add("track", s.track); add("disc", s.disc)
        m.append(("duration", s.duration.map(JSON.number) ?? .null))
        add("codec", s.codec); add("sample_rate", s.sampleRate); add("channels", s.channels)
        if let e = s.error { m.append(("error", .string(e))) }
        return .object(m)
    }

    /// The library part of `status`.
    func libraryStatusJSON() -> JSON {
        guard let library else { return .null }
        var m: [(String, JSON)] = [("songs", .int(librarySongs)), ("updating", .bool(library.isScanning))]
        if let p = library.progress {
            m += [("job", .int(p.job)), ("scanned", .int(p.scanned)), ("rate", .number((p.rate * 10).rounded() / 10))]
        }
        return .object(m)
    }

    /// While a scan runs: a progress event about once a second. From `tick`.
    func libraryTick() {
        guard let library, let p = library.progress else { return }
        let now = monotonicNanoseconds()
        guard now - lastLibraryEvent > 1_000_000_000 else { return }
        lastLibraryEvent = now
        server?.broadcast(.obj(("event", .string("update")), ("state", .string("running")), ("job", .int(p.job)),
                               ("scanned", .int(p.scanned)), ("rate", .number((p.rate * 10).rounded() / 10))))
    }

    /// The scanner thread's end report, on the control thread.
    func libraryScanEnded(_ r: MusicLibrary.ScanReport) {
        librarySongs = library?.counts().songs ?? 0
        for u in r.unreadable { logger.warning("library: cannot read", metadata: ["path": "\(u)"]) }
        logger.info("library updated", metadata: ["job": "\(r.job)", "scanned": "\(r.scanned)", "added": "\(r.added)",
                                                  "updated": "\(r.updated)", "removed": "\(r.removed)",
                                                  "seconds": "\(r.seconds)"])
        server?.broadcast(.obj(("event", .string("update")), ("state", .string("finished")), ("job", .int(r.job)),
                               ("scanned", .int(r.scanned)), ("added", .int(r.added)), ("updated", .int(r.updated)),
                               ("removed", .int(r.removed)), ("tag_errors", .int(r.tagErrors)),
                               ("skipped_links", .int(r.skippedLinks)),
                               ("unreadable", .array(r.unreadable.map(JSON.string))), ("seconds", .number(r.seconds)),
                               ("songs", .int(librarySongs))))
        notifyMPD(r.added + r.updated + r.removed > 0 ? ["update", "database"] : ["update"])
    }
}
