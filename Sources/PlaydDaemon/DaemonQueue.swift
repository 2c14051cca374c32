import CoreStream
import PlaydProtocol

/// The queue commands and track transitions. Everything here runs on the control thread
/// (requests, and engine events posted to it).
extension Daemon {
    // MARK: - Requests

    func queueRequest(_ name: String, _ req: JSON) throws -> [(String, JSON)] {
        switch name {
        case "add", "insert":
            var paths: [String] = []
            if let list = req["paths"]?.arrayValue {
                paths = list.compactMap(\.stringValue)
                guard paths.count == list.count else { throw RequestError(.badRequest, "\"paths\" must be strings") }
            } else if let p = req["path"]?.stringValue {
                paths = [p]
            }
            guard !paths.isEmpty else { throw RequestError(.badRequest, "\(name) needs \"path\" or \"paths\"") }
            var files: [String] = []
            for p in paths { files += try QueueSources.expand(try admit(p), limits: sourceLimits(adding: files.count)) }  // a StreamError names the path
            // Entries a folder's symlinks or a playlist lead out of the music roots.
            let (kept, refused) = admitAll(files)
            try checkRoom(kept.count)
            let ids = name == "add" ? queue.add(kept) : queue.insertNext(kept)
            queueChanged()
            var reply: [(String, JSON)] = [("added", .array(ids.map { JSON.int(Int64($0)) })), ("length", .int(Int64(queue.count)))]
            if refused > 0 { reply.append(("outside_library", .int(refused))) }
            return reply
        case "remove":
            let index = try entryIndex(req)
            let wasCurrent = queue.remove(at: index)
            if wasCurrent && engine.status().state != .stopped {
                // As MPD: removing the entry playing goes on with the one after it.
                if index < queue.count { playEntry(index) } else { engine.stop() }
            }
            queueChanged()
            return [("length", .int(Int64(queue.count)))]
        case "move":
            let from = try entryIndex(req)
            guard let to = req["to"]?.integer(in: 0...Int64(queue.count - 1)) else {
                throw RequestError(.invalidArgument, "\"to\" must be an index 0…\(queue.count - 1)")
            }
            queue.move(from: from, to: Int(to))
            queueChanged()
            return []
        case "clear":
            queue.clear()
            pendingNext = nil
            transport("stop")
            queueChanged()
            return []
        case "queue":
            return [("queue", .array(queue.entries.enumerated().map { entryJSON($0.offset, $0.element) })),
                    ("current", queue.current.map { JSON.int(Int64($0)) } ?? .null)]
        case "next":
            guard let n = queue.successor(manual: true) else { engine.stop(); queue.setCurrent(nil); return [] }
            playEntry(n)
            return currentJSON()
        case "prev":
            guard let p = queue.predecessor() else {
                if engine.status().state != .stopped { try engine.seek(to: 0) }
                return currentJSON()
            }
            playEntry(p)
            return currentJSON()
        case "repeat":
            guard let m = req["mode"]?.stringValue, let mode = PlayQueue.Repeat(rawValue: m) else {
                throw RequestError(.badRequest, "repeat needs \"mode\": off, on or one")
            }
            queue.repeatMode = mode
            queueChanged()
            return optionsJSON()
        case "shuffle", "consume":
            guard let on = req["on"]?.boolValue else { throw RequestError(.badRequest, "\(name) needs \"on\": true or false") }
            if name == "shuffle" { queue.setShuffle(on) } else { queue.consume = on }
            queueChanged()
            return optionsJSON()
        default:
            throw RequestError(.unknownCommand, "unknown command '\(name)'")
        }
    }

    /// What one `add` may bring in: the room left in the queue, the playlist limits.
    func sourceLimits(adding already: Int = 0) -> QueueSources.Limits {
        QueueSources.Limits(maxEntries: max(0, config.maxQueueLength - queue.count - already),
                            playlistBytes: config.maxPlaylistBytes, playlistEntries: config.maxPlaylistEntries)
    }

    /// Refuses an addition of `n` entries past `limits.max_queue_length`.
    func checkRoom(_ n: Int) throws {
        guard queue.count + n <= config.maxQueueLength else {
            throw RequestError(.tooLarge, "the queue holds at most \(config.maxQueueLength) entries (limits.max_queue_length); it has \(queue.count), \(n) more do not fit")
        }
    }

    /// `play` with an `index` or `id`, or with nothing: start (or resume) the queue.
    func playQueue(_ req: JSON) throws -> [(String, JSON)] {
        if req["index"] != nil || req["entry"] != nil {
            let i = try entryIndex(req)
            playEntry(i)
            return currentJSON()
        }
        let s = engine.status()
        if s.state == .paused { engine.resume(); return currentJSON() }
        guard s.state == .stopped else { return currentJSON() }
        guard let start = queue.current ?? queue.successor() else {
            throw RequestError(.badRequest, "play needs \"path\", \"index\" or \"entry\" (the queue is empty)")
        }
        playEntry(start)
        return currentJSON()
    }

    private func entryIndex(_ req: JSON) throws -> Int {
        // "entry", not "id": a request's "id" is the client's own tag for the reply.
        if let v = req["entry"] {
            // Ids are positive and below 2^53 (PlayQueue never gets near): anything else
            // names no entry, and is checked before it becomes an Int.
            guard let id = v.integer(in: 0...FrameTime.maxFrames) else {
                throw RequestError(.badRequest, "\"entry\" must be an entry id (a whole number ≥ 0), not \(v.text)")
            }
            guard let i = queue.index(ofID: Int(id)) else { throw RequestError(.invalidArgument, "no queue entry with id \(id)") }
            return i
        }
        if let v = req["index"] ?? req["from"] {
            guard case .number = v else { throw RequestError(.badRequest, "\"index\" must be a number, not \(v.text)") }
            guard let index = v.integer(in: 0...Int64(max(0, queue.count - 1))), index < queue.count else {
                throw RequestError(.invalidArgument, "index \(v.text) is outside the queue (0…\(queue.count - 1))")
            }
            return Int(index)
        }
        throw RequestError(.badRequest, "give \"entry\" (an entry id) or \"index\"")
    }

    // MARK: - Playing

    /// Plays the entry at `index`; entries that cannot be played are reported in a
    /// `skipped` event and the ones after them tried, once round the queue at most.
    func playEntry(_ index: Int) {
        var candidate: Int? = index
        var tries = 0
        while let i = candidate, tries < queue.count {
            tries += 1
            let id = queue.entries[i].id
            guard let now = queue.advance(to: i) else { break }
            pendingNext = nil
            let path = queue.entries[now].path
            do {
                try engine.play(path: path)
                reportedSkips.removeAll()
                queueNextInEngine()
                saveState()
                return
            } catch {
                reportSkipped(id: id, path: path, error)
                candidate = queue.successor(of: now, manual: true)
                if candidate == now { break }
            }
        }
        engine.stop()
        queue.setCurrent(nil)
    }

    /// Queues the entry that follows the current one in the engine, for a gapless
    /// change (or, when its format needs the device reopened, for playing at the end).
    func queueNextInEngine() {
        guard let current = queue.current, engine.status().state != .stopped else { return }
        var candidate = queue.successor()
        var tries = 0
        while let i = candidate, tries < queue.count {
            tries += 1
            let e = queue.entries[i]
            do {
                let gapless = try engine.setNext(path: e.path)
                pendingNext = (e.id, gapless)
                return
            } catch where error.code == .notPlaying {
                // The current track ended meanwhile (a short one, or an unpaced output):
                // its trackEnded plays what comes next. Nothing is wrong with this entry.
                pendingNext = nil
                return
            } catch {
                reportSkipped(id: e.id, path: e.path, error)
                candidate = queue.successor(of: i, manual: true)
                if candidate == current { break }
            }
        }
        pendingNext = nil
        try? engine.setNext(path: nil)
    }

    /// An engine `trackStarted`: when it is the entry queued to follow, it is current now.
    func queueTrackStarted(_ info: TrackInfo) {
        guard let p = pendingNext, p.gapless, let i = queue.index(ofID: p.id), queue.entries[i].path == info.path else { return }
        pendingNext = nil
        queue.advance(to: i)
        reportedSkips.removeAll()
        queueNextInEngine()
        queueChanged(save: true)
    }

    /// An engine `trackEnded`: when nothing follows gaplessly, play what comes next.
    func queueTrackEnded(_ path: String) {
        guard engine.status().state == .stopped, let c = queue.currentEntry, c.path == path else { return }
        if let p = pendingNext, !p.gapless, let i = queue.index(ofID: p.id) {
            playEntry(i)
        } else if let n = queue.successor() {
            playEntry(n)
        } else {
            queue.advance(to: nil)
            pendingNext = nil
            queueChanged(save: true)
        }
    }

    /// After an edit or an option change: the entry to follow may be another one now.
    func queueChanged(save: Bool = true) {
        playlistVersion += 1
        notifyMPD(["playlist"])
        let want = queue.successor().map { queue.entries[$0].id }
        if want != pendingNext?.id { queueNextInEngine() }
        if save { saveState() }
        server?.broadcast(.obj(("event", .string("queue")), ("length", .int(Int64(queue.count))),
                               ("current", queue.current.map { JSON.int(Int64($0)) } ?? .null)))
    }

    private func reportSkipped(id: Int, path: String, _ error: Error) {
        // Refused by setNext and then again by play: one report (see reportedSkips).
        guard reportedSkips.insert(id).inserted else { return }
        let e = error as? StreamError
        let code = e?.code.name ?? "internal"
        let message = e?.message ?? "\(error)"
        logger.warning("skipping an unplayable queue entry", metadata: ["track.path": "\(path)", "error": "\(message)"])
        server?.broadcast(.obj(("event", .string("skipped")), ("entry", .int(Int64(id))), ("file", .string(path)),
                               ("code", .string(code)), ("message", .string(message))))
    }

    // MARK: - JSON

    private func entryJSON(_ index: Int, _ e: PlayQueue.Entry) -> JSON {
        let summary = probeSummary(e.path)
        return .obj(("index", .int(Int64(index))), ("entry", .int(Int64(e.id))), ("file", .string(e.path)),
                    ("title", summary.title.map(JSON.string) ?? .null), ("artist", summary.artist.map(JSON.string) ?? .null),
                    ("duration", summary.duration.map(JSON.number) ?? .null), ("current", .bool(index == queue.current)))
    }

    /// Title, artist and duration of a queued file, probed once and cached.
    func probeSummary(_ path: String) -> (title: String?, artist: String?, duration: Double?) {
        if let s = probeCache[path] { return s }
        let p = AudioDecoder.probe(path: path)
        let s = (title: p?.tags["title"], artist: p?.tags["artist"], duration: p?.durationSeconds)
        probeCache[path] = s
        return s
    }

    private func currentJSON() -> [(String, JSON)] {
        [("current", queue.current.map { JSON.int(Int64($0)) } ?? .null),
         ("entry", queue.currentEntry.map { JSON.int(Int64($0.id)) } ?? .null)]
    }

    func optionsJSON() -> [(String, JSON)] {
        [("repeat", .string(queue.repeatMode.rawValue)), ("shuffle", .bool(queue.shuffle)), ("consume", .bool(queue.consume))]
    }

    /// The queue part of `status`.
    func queueStatusJSON() -> JSON {
        .object([("length", .int(Int64(queue.count))), ("current", queue.current.map { JSON.int(Int64($0)) } ?? .null),
                 ("current_id", queue.currentEntry.map { JSON.int(Int64($0.id)) } ?? .null),
                 ("next_id", pendingNext.map { JSON.int(Int64($0.id)) } ?? .null)] + optionsJSON())
    }
}
