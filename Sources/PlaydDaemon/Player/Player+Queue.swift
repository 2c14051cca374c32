import CoreStream

/// The queue commands and track transitions. Control thread (commands, and engine
/// events posted to it).
extension Player {
    // MARK: - Editing

    func add(_ sources: [String], place: Command.Place) throws -> (ids: [Int], outside: Int) {
        guard !sources.isEmpty else { throw PlayerError(.badRequest, "nothing to add") }
        if case .index(let at) = place, !(0...queue.count).contains(at) {
            throw PlayerError(.invalidArgument, "position \(at) is outside 0…\(queue.count)")
        }
        let collected = try collect(sources)
        let (kept, refused) = (collected.files, collected.refused)
        try checkRoom(kept.count)
        let ids: [Int]
        switch place {
        case .end: ids = queue.add(kept)
        case .next: ids = queue.insertNext(kept)
        case .index(let at): ids = queue.add(kept, at: at)
        }
        queueChanged()
        return (ids, refused)
    }

    /// The files `sources` stand for, checked against the roots. A folder or playlist
    /// is walked on the walker thread: the request waits (`workPending`) and, run
    /// again when the walk is done, finds the result here. A StreamError names the
    /// path; entries a folder's symlinks or a playlist lead out of the roots are left
    /// out and counted.
    func collect(_ sources: [String]) throws -> QueueSources.Collected {
        if let done = collectedSources[sources] { return try done.get() }
        if QueueSources.fansOut(sources) {
            collectOffThread(sources)
            throw PlayerError(.workPending, "adding \(sources.count == 1 ? sources[0] : "\(sources.count) sources"): waiting for the folder walk")
        }
        // One absolute path (or a stream URL): a realpath and a stat, but on a dead NFS
        // server or a hung FUSE mount they never return, and on this thread that stopped
        // every client until the watchdog killed playd (issue 38). Read off the thread
        // with the stuck guard (`timed_out` after 5 s without an answer); a folder found
        // there goes to the walker.
        let path = sources[0], admission = self.admission, limits = sourceLimits()
        if NetworkInput.isStreamURL(path) { return try QueueSources.collect(sources, admission: admission, limits: limits) }
        let single = try readOffThread("add\0" + path, what: path) { () -> SingleSource in
            if QueueSources.isFolder(path) { return .folder }
            return .collected(ReadOutcome { try QueueSources.collect(sources, admission: admission, limits: limits) })
        }
        switch single {
        case .folder:
            collectOffThread(sources)
            throw PlayerError(.workPending, "adding \(path): waiting for the folder walk")
        case .collected(let outcome):
            return try outcome.result.get()
        }
    }

    /// What the read of one `add` source found off the control thread.
    enum SingleSource: Sendable {
        case folder
        case collected(ReadOutcome<QueueSources.Collected>)
    }

    /// Removes the entries in `range` at once: one state write, one notification.
    func remove(_ range: Range<Int>) throws {
        let r = try checkedRange(range)
        let current = queue.current
        let playing = current.map(r.contains) == true && engine.status().state != .stopped
        if playing {
            // The reply says what plays next, as MPD's does (status right after a
            // `delete` of the song playing names the next one, not the deleted one still
            // heard): the request waits for that file to open before it changes anything,
            // so running it again deletes nothing twice.
            var after = queue
            for i in r.reversed() { after.remove(at: i) }
            if let next = Self.successor(afterRemovingAt: r.lowerBound, in: &after), !NetworkInput.isStreamURL(after.entries[next].path),
               unplayable[after.entries[next].path] == nil {
                try awaitOpened(after.entries[next].path)
            }
        }
        for i in r.reversed() { queue.remove(at: i) }
        if playing {
            // As MPD: removing the entry playing goes on with the one after the range; at
            // the end of the queue, with repeat on, with the first (the shuffle's first).
            // Its file opened above; if it cannot play, playEntry goes on past it.
            if let next = Self.successor(afterRemovingAt: r.lowerBound, in: &queue) {
                playEntryLater(next)
            } else {
                engine.stop()
            }
        }
        queueChanged()
    }

    /// The entry that plays once the range starting at `lower`, which held the current
    /// entry, is gone from `queue`: the one after the range, or at the end with repeat on
    /// the first (the shuffle's first); nil to stop.
    private static func successor(afterRemovingAt lower: Int, in queue: inout PlayQueue) -> Int? {
        if lower < queue.count { return lower }
        guard queue.repeats, queue.count > 0 else { return nil }
        queue.setCurrent(nil)
        return queue.successor(of: nil, manual: true) ?? 0
    }

    func move(_ range: Range<Int>, to: Int) throws {
        let r = try checkedRange(range)
        // `to <= count - r.count`, not `to + r.count <= count`: a `to` of Int.max overflowed.
        guard to >= 0, to <= queue.count - r.count else {
            throw PlayerError(.badIndex, "position \(to) is outside the queue for \(r.count) entries")
        }
        guard r.lowerBound != to else { return }
        // One at a time keeps ids and the current entry right (PlayQueue.move).
        if to < r.lowerBound {
            for k in 0..<r.count { queue.move(from: r.lowerBound + k, to: to + k) }
        } else {
            for _ in 0..<r.count { queue.move(from: r.lowerBound, to: to + r.count - 1) }
        }
        queueChanged()
    }

    func clear() {
        if ttsPausedMusic != nil { stopTTSPause() }  // a second `clear`
        queue.clear()
        pendingNext = nil
        if !config.ttsURLs.isEmpty, announcements.current == nil, recovery == nil, engine.status().state == .playing,
           let t = engine.status().track, !t.isLive, !NetworkInput.isStreamURL(t.path) {
            // A TTS clip may follow (Player+TTS.swift): the music pauses at an exact frame
            // instead, and stops once that has settled (or at the next command that is
            // not the clip's). Status says stopped meanwhile, as after MPD's `clear`.
            cancelStreamOpening()
            autoPlay = nil
            unplayable.removeAll()
            engine.pause()
            ttsPausedMusic = monotonicNanoseconds()
            saveState()
        } else {
            transport(.stop)
        }
        queueChanged()
    }

    /// Walks folders and reads playlists for an `add` on the walker thread; when done,
    /// the result waits in ``collectedSources`` and the parked sessions run their
    /// request again (``resumeParked``). One walk per list of sources at a time.
    func collectOffThread(_ sources: [String]) {
        guard collecting.insert(sources).inserted else { return }
        let admission = self.admission, limits = sourceLimits(), post = self.post
        walker.submit { [weak self] in
            let result = Result { try QueueSources.collect(sources, admission: admission, limits: limits) }
            post { [weak self] in
                guard let self else { return }
                self.collecting.remove(sources)
                self.collectedSources[sources] = result
                self.resumeParked()
            }
        }
    }

    /// What one `add` may bring in: the room left in the queue, the playlist limits.
    func sourceLimits() -> QueueSources.Limits {
        QueueSources.Limits(maxEntries: max(0, config.maxQueueLength - queue.count),
                            playlistBytes: config.maxPlaylistBytes, playlistEntries: config.maxPlaylistEntries,
                            stream: streamOptions(StreamCancel()))
    }

    /// Refuses an addition of `n` entries past `limits.max_queue_length`.
    func checkRoom(_ n: Int) throws {
        guard queue.count + n <= config.maxQueueLength else {
            throw PlayerError(.tooLarge, "the queue holds at most \(config.maxQueueLength) entries (limits.max_queue_length); it has \(queue.count), \(n) more do not fit")
        }
    }

    // MARK: - Moving through it

    /// Resume when paused; when stopped, start at the current entry or the first.
    func playQueue() throws {
        let s = engine.status()
        if s.state == .paused { transport(.resume); return }
        guard s.state == .stopped else { return }
        guard let start = queue.current ?? queue.successor() else {
            throw PlayerError(.badRequest, "nothing to play: the queue is empty (give a path, an index or an entry)")
        }
        try playEntry(start)
    }

    func next() throws {
        guard let n = queue.successor(manual: true) else {
            engine.stop()
            queue.setCurrent(nil)
            queueChanged(edited: false)
            return
        }
        try playEntry(n)
    }

    func previous() throws {
        guard let p = queue.predecessor() else {
            if engine.status().state != .stopped {
                try engine.seek(to: 0)
                emit(.seeked(frame: 0, seconds: 0))
            }
            return
        }
        try playEntry(p)
    }

    /// Plays the entry at `index`; entries that cannot be played are reported in a
    /// `skipped` event and the ones after them tried, once round the queue at most.
    ///
    /// A local file is opened off the control thread (issue 38: a `next` to a file on a
    /// hung mount stopped every client): until it has opened this throws `workPending`,
    /// and a session's request waits and runs again (``resumeParked``), or, for a caller
    /// with no session (``playEntryLater``), ``retryOpens()`` runs it again. Nothing moves
    /// before an open is done, so the run again starts from the same entry, and the
    /// entries found unplayable on the way (``unplayable``) are not opened twice.
    /// `from`: where in the entry at `index` to start (MPD's `seek POS TIME` on an entry
    /// not playing), in source frames once it has opened; returns that frame. Started at
    /// 0 and then sought, the track's first frames were heard before the seek's ramp (a
    /// 1–5 ms blip of its start, found by issue 38's sweep).
    @discardableResult
    func playEntry(_ index: Int, from: SeekTarget? = nil) throws -> Int64 {
        ControlThread.check()
        autoPlay = nil
        var candidate: Int? = index
        var tries = 0
        // Moving to another entry is not an edit, unless consume took the last one out.
        let before = queue.count
        var waiting = false  // nothing moved yet: no news, no save
        defer { if !waiting { queueChanged(edited: queue.count != before) } }
        while let i = candidate, tries < queue.count {
            tries += 1
            let e = queue.entries[i]
            if NetworkInput.isStreamURL(e.path) {
                cancelStreamOpening()
                unplayable.removeAll()
                queue.advance(to: i)
                pendingNext = nil
                // Opened off this thread; a failure goes on from there (streamOpened).
                openStream(e.path, entry: e.id)
                return 0
            }
            do {
                if let failed = unplayable[e.path] { throw failed }
                let decoder: AudioDecoder
                do {
                    // After an output loss the device reopens on a worker first.
                    try awaitOutput()
                    decoder = try openedFile(e.path)
                    try awaitDevice(for: decoder, path: e.path)
                } catch let p as PlayerError where p.code == .workPending {
                    autoPlay = (queue.entries[index].id, e.path)
                    waiting = true
                    throw p
                }
                // nil: from the start, or from the end in reverse (the engine decides:
                // a 0 here began a reversed track at its end of play, silently).
                var start: Int64?
                if let from, i == index {
                    let info = decoder.info
                    let f: Int64
                    switch from.amount {
                    case .frames(let n): f = n  // within ±2^53 (SeekTarget)
                    case .seconds(let s):
                        // Finite (SeekTarget); at this rate it may still be too many frames.
                        guard let n = FrameTime.checkedFrames(seconds: s, rate: info.sampleRate) else {
                            throw PlayerError(.badRequest, "\(s) s is out of range")
                        }
                        f = n
                    }
                    start = min(max(0, f), info.durationFrames ?? Int64.max)
                }
                cancelStreamOpening()
                queue.advance(to: i)
                pendingNext = nil
                try engine.play(decoder: decoder, from: start)
                reportedSkips.removeAll()
                unplayable.removeAll()
                return start ?? 0
            } catch let p as PlayerError where p.code == .badRequest {
                throw p
            } catch let p as PlayerError where p.code == .workPending {
                throw p
            } catch {
                if let s = error as? StreamError { unplayable[e.path] = s }
                reportSkipped(id: e.id, path: e.path, error)
                candidate = queue.successor(of: i, manual: true)
                if candidate == index { break }
            }
        }
        unplayable.removeAll()
        cancelStreamOpening()
        engine.stop()
        queue.setCurrent(nil)
        return 0
    }

    /// ``playEntry(_:)`` for a caller whose request must not run again (a `delete` of
    /// the entry playing, a track's end): an open still going on finishes in
    /// ``retryOpens()``.
    func playEntryLater(_ index: Int) {
        do { try playEntry(index) } catch let p as PlayerError where p.code == .workPending {
            // autoPlay is set: retryOpens goes on when the file has opened.
        } catch {}
    }

    /// Goes on with a ``playEntry(_:)`` that waited for a file to open, once it has
    /// opened (or could not), unless a session's request ran it again first or
    /// something else was played since (either clears ``autoPlay``). From ``flush()``,
    /// after the sessions resumed in the turn.
    func retryOpens() {
        if let a = autoPlay, openedFiles[a.awaited] != nil {
            autoPlay = nil
            if let i = queue.index(ofID: a.start) { playEntryLater(i) }
        }
    }

    /// Queues the entry that follows the current one in the engine, for a gapless
    /// change (or, when its format needs the device reopened, for playing at the end).
    func queueNextInEngine() {
        ControlThread.check()
        nextOpening = nil
        let status = engine.status()
        guard let current = queue.current, status.state != .stopped else { return }
        // A live stream does not end on its own (only when it cannot be reconnected):
        // what follows plays then, from trackEnded.
        if status.track?.isLive == true { pendingNext = nil; return }
        var candidate = queue.successor()
        var tries = 0
        while let i = candidate, tries < queue.count {
            tries += 1
            let e = queue.entries[i]
            if NetworkInput.isStreamURL(e.path) {
                // A stream is opened when its turn comes, off the control thread.
                try? engine.setNext(path: nil)
                pendingNext = (e.id, false, nil)
                return
            }
            if unplayable[e.path] != nil {
                // Reported already: not opened again while this track plays (every
                // edit of the queue runs this again).
                candidate = queue.successor(of: i, manual: true)
                if candidate == current { break }
                continue
            }
            do {
                // Opened off this thread (issue 38): on a hung mount FFmpeg's open of the
                // next file never returns, and on the control thread it stopped every
                // client. Until it has opened the engine has no next (a replaced one must
                // not play meanwhile); the open usually takes milliseconds, while the
                // reader runs 0.74 s plus the device buffer ahead of what is heard, and a
                // next that comes after the reader reached the end still joins gaplessly
                // (the reader reopens the end: ReaderLoop.reopenEnd). Later than that, the
                // track's end stops the engine and trackEnded plays this entry.
                let decoder: AudioDecoder
                if let done = openedFiles.removeValue(forKey: e.path) {
                    decoder = try done.get().value
                } else if let sync = try startOpening(e.path) {
                    decoder = sync
                } else {
                    try? engine.setNext(path: nil)
                    pendingNext = (e.id, false, nil)
                    nextOpening = e.path
                    return
                }
                let gapless = try engine.setNext(decoder: decoder, crossfadeFor: crossfadeRule())
                let generation = gapless ? engine.lastQueuedNextGeneration : nil
                pendingNext = (e.id, gapless, generation)
                if let g = generation { handedOut = Array((handedOut + [(g, e.id)]).suffix(8)) }
                return
            } catch let p as PlayerError {
                // No thread to open it on (8 opens stuck on a hung mount): played, or
                // refused, when its turn comes.
                logger.debug("the next track cannot be opened yet", metadata: ["track.path": "\(e.path)", "error": "\(p.message)"])
                try? engine.setNext(path: nil)
                pendingNext = (e.id, false, nil)
                return
            } catch let error as StreamError where error.code == .notPlaying {
                // The current track ended meanwhile (a short one, or an unpaced output):
                // its trackEnded plays what comes next. Nothing is wrong with this entry.
                pendingNext = nil
                return
            } catch {
                unplayable[e.path] = error as? StreamError ?? StreamError(.internalError, "\(error)")
                reportSkipped(id: e.id, path: e.path, error)
                candidate = queue.successor(of: i, manual: true)
                if candidate == current { break }
            }
        }
        pendingNext = nil
        try? engine.setNext(path: nil)
    }

    /// Hands the engine the track to follow once its file has opened off this thread
    /// (``queueNextInEngine()``), if it is still the one to follow. From ``flush()``,
    /// before the opens of the turn are dropped.
    func retryNextOpen() {
        guard let path = nextOpening, openedFiles[path] != nil else { return }
        nextOpening = nil
        guard let p = pendingNext, !p.gapless, let i = queue.index(ofID: p.id), queue.entries[i].path == path else { return }
        queueNextInEngine()
    }

    /// An engine `gaplessTransition`: the entry handed out for that stream is current
    /// now (the one queued to follow, or one replaced too late to be taken back), if it
    /// is still in the queue.
    func queueTrackStarted(generation: UInt64) {
        guard let k = handedOut.lastIndex(where: { $0.generation == generation }) else { return }
        let h = handedOut[k]
        // Taken in: that stream is the queue's to show now (and nothing handed out
        // before it will be heard any more).
        handedOut.removeFirst(k + 1)
        guard let i = queue.index(ofID: h.id) else {
            // Deleted, but too late to take back: heard all the same, while the queue's
            // current entry stays the one before it. Its end is that entry's end.
            heardGone = generation
            return
        }
        // The engine's next is still the one queued after it, unless it was this one.
        if pendingNext?.generation == generation { pendingNext = nil }
        let before = queue.count
        queue.advance(to: i)
        reportedSkips.removeAll()
        unplayable.removeAll()
        queueChanged(edited: queue.count != before)
    }

    /// An engine `trackEnded` that stopped the transport (nothing followed gaplessly):
    /// play what comes next, unless something was played since (the engine is in
    /// another stream).
    func queueTrackEnded(_ path: String, generation: UInt64) {
        let s = engine.status()
        guard s.state == .stopped, s.generation == generation, let c = queue.currentEntry,
              c.path == path || heardGone == generation else { return }
        heardGone = nil
        if let p = pendingNext, !p.gapless, let i = queue.index(ofID: p.id) {
            playEntryLater(i)
        } else if let n = queue.successor() {
            playEntryLater(n)
        } else if queue.single != .off {
            // Single without repeat: stopped after the song, which stays the current
            // one (as MPD: `play` plays it again). A oneshot is used up.
            pendingNext = nil
            if queue.single == .oneshot {
                queue.single = .off
                emit(.options(repeats: queue.repeats, single: queue.single, shuffle: queue.shuffle, consume: queue.consume))
            }
            queueChanged(edited: false)
        } else {
            // The end of the queue: stopped, no current entry.
            let before = queue.count
            queue.advance(to: nil)
            pendingNext = nil
            queueChanged(edited: queue.count != before)
        }
    }

    /// After an edit (`edited`: MPD's playlist version moves on, `idle playlist`) or a
    /// move to another entry (`idle player`): the state is saved, the entry to follow
    /// may be another one.
    func queueChanged(edited: Bool = true) {
        if edited { playlistVersion += 1 }
        followOn()
        saveState()
        emit(.queue(length: queue.count, current: queue.current, edited: edited))
    }

    /// Hands the engine the entry that follows, if that is another one now.
    func followOn() {
        let want = wantedNext().map { queue.entries[$0].id }
        if want != pendingNext?.id { queueNextInEngine() }
    }

    /// The entry to follow the current one: its successor, past the entries found
    /// unplayable since it began (``unplayable``).
    func wantedNext() -> Int? {
        var candidate = queue.successor()
        var tries = 0
        while let i = candidate, unplayable[queue.entries[i].path] != nil {
            tries += 1
            candidate = queue.successor(of: i, manual: true)
            if candidate == queue.current || tries >= queue.count { return nil }
        }
        return candidate
    }

    func reportSkipped(id: Int, path: String, _ error: Error) {
        // Refused by setNext and then again by play: one report (see reportedSkips).
        guard reportedSkips.insert(id).inserted else { return }
        let e = error as? StreamError
        let code = e?.code.name ?? "internal"
        let message = e?.message ?? "\(error)"
        logger.warning("skipping an unplayable queue entry", metadata: ["track.path": "\(path)", "error": "\(message)"])
        emit(.skipped(entry: id, path: path, code: code, message: message))
    }
}
