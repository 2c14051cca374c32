import CoreStream

extension Player {
    /// Carries out one command. What it changed is told at the next ``flush()``.
    /// Control thread.
    @discardableResult
    public func perform(_ command: Command) throws(PlayerError) -> Outcome {
        ControlThread.check()
        cancelRestore(for: command)
        do {
            let out = try performTTSStep(command) ?? run(command)
            // Done: during a schedule's block, a client's play, stop or volume holds
            // until the next boundary (Player+Schedule.swift).
            noteClientCommand(command)
            return out
        } catch {
            throw PlayerError(any: error)
        }
    }

    func run(_ command: Command) throws -> Outcome {
        var out = Outcome()
        switch command {
        case .playFile(let given, let at, let atSeconds):
            out.file = try playFile(given, at: at, atSeconds: atSeconds)
        case .playIndex(let i):
            try playEntry(try checkedIndex(i))
        case .playID(let id):
            try playEntry(try index(ofID: id))
        case .playQueue:
            try playQueue()
        case .transport(let t):
            transport(t)
        case .seek(let target):
            out.seekedTo = try seek(target)
        case .seekEntry(let index, let target):
            let i = try checkedIndex(index)
            if queue.current != i || engine.status().state == .stopped {
                // Opened and started at that time, in one step (see playEntry).
                let frame = try playEntry(i, from: target)
                let s = engine.status()
                if queue.current == i, let track = s.track, s.state != .stopped {
                    out.seekedTo = frame
                    emit(.seeked(frame: frame, seconds: FrameTime.seconds(frame, rate: track.sampleRate)))
                }
            } else {
                out.seekedTo = try seek(target)
            }
        case .announce(let r): out.waiting = try announce(r)
        case .cancelAnnouncement: try cancelAnnouncement()
        case .next: try next()
        case .previous: try previous()
        case .add(let sources, let place):
            (out.added, out.outsideRoots) = try add(sources, place: place)
        case .remove(let range): try remove(range)
        case .move(let range, let to): try move(range, to: to)
        case .savePlaylist, .loadPlaylist, .playlistAdd, .playlistClear, .playlistDelete, .playlistMove,
             .playlistRename, .playlistRemove:
            out.added = try storedPlaylist(command)
        case .priority(let p, let indices):
            queue.setPriority(p.value, at: try indices.map(checkedIndex))
            queueChanged()
        case .swap(let a, let b):
            let (i, j) = (try checkedIndex(a), try checkedIndex(b))
            if i != j { queue.swap(i, j) }
            queueChanged()
        case .shuffle(let range):
            let r = try range.map(checkedRange) ?? 0..<queue.count
            queue.shuffle(r, keepingPlayingFirst: engine.status().state != .stopped)
            queueChanged()
        case .replayGain(let mode):
            var level = currentLevel()
            level.replayGain = mode
            try applyLevel(level)
            measureQueuedLoudness()
        case .clear: clear()
        case .setRepeat(let on): setOptions { $0.repeats = on }
        case .setSingle(let s): setOptions { $0.single = s }
        case .setRepeatSingle(let r, let s): setOptions { $0.repeats = r; $0.single = s }
        case .setRandom(let on): setOptions { $0.setShuffle(on) }
        case .setConsume(let on): setOptions { $0.consume = on }
        // In range already: the command specs read them (CommandSpecs.crossfade).
        case .setCrossfade(let s): setCrossfade { $0.seconds = s }
        case .setMixRampDB(let db): setCrossfade { $0.mixrampDB = db }
        case .setMixRampDelay(let d): setCrossfade { $0.mixrampDelay = d.isNaN ? -1 : d }
        case .volume(let v): try setVolume(v)
        case .mute(let m):
            var level = currentLevel()
            level.muted = m ?? !level.muted
            try applyLevel(level)
        case .loop(let region): try setLoop(region)
        case .direction(let d):
            let s = engine.status()
            if d == .reverse, s.track?.isSeekable == false, s.state != .stopped {
                throw PlayerError(.stream(.notSeekable), "\(s.track!.path): a stream that cannot seek plays forward only")
            }
            let before = s.direction
            engine.setDirection(d)
            saveState()
            if before != d { emit(.direction(d)) }
        case .output(let name, let on):
            try engine.setOutputEnabled(name, on)
            saveState()
        case .update(let path):
            out.job = try update(path)
        }
        return out
    }

    // MARK: - Checks

    func checkedIndex(_ i: Int) throws -> Int {
        guard i >= 0 && i < queue.count else {
            throw PlayerError(.badIndex, "index \(i) is outside the queue (0…\(queue.count - 1))")
        }
        return i
    }

    func index(ofID id: Int) throws(PlayerError) -> Int {
        guard let i = queue.index(ofID: id) else { throw PlayerError(.noSuchEntry, "no queue entry with id \(id)") }
        return i
    }

    func checkedRange(_ r: Range<Int>) throws -> Range<Int> {
        guard r.lowerBound >= 0, r.upperBound <= queue.count, !r.isEmpty else {
            throw PlayerError(.badIndex, "\(r.lowerBound)…\(r.upperBound - 1) is outside the queue (0…\(queue.count - 1))")
        }
        return r
    }

    // MARK: - Transport

    /// `pause`, `resume`, `toggle` or `stop`: the engine's own, then what an output
    /// recovery in progress comes back to.
    func transport(_ t: Command.Transport) {
        switch t {
        case .pause: engine.pause()
        case .resume: engine.resume()
        case .toggle: engine.toggle()
        case .stop:
            cancelStreamOpening()
            // A queue entry still opening is not played when it has opened.
            autoPlay = nil
            unplayable.removeAll()
            engine.stop()
        }
        outputRecoveryTransport(t)
        saveState()
    }

    private func playFile(_ given: String, at: Int64?, atSeconds: Double?) throws -> String {
        guard !given.isEmpty else { throw PlayerError(.badRequest, "the path is empty") }
        let path = try admit(given)
        if NetworkInput.isStreamURL(path) {
            openStream(path, entry: nil, at: at, atSeconds: atSeconds)
        } else {
            try awaitOutput()
            let decoder = try openedFile(path)
            try awaitDevice(for: decoder, path: path)
            cancelStreamOpening()
            if let s = atSeconds {
                try engine.play(decoder: decoder, fromSeconds: s)
            } else {
                try engine.play(decoder: decoder, from: at)
            }
        }
        // A file played by path is outside the queue (and a queue entry still opening
        // is not played when it has opened).
        autoPlay = nil
        queue.setCurrent(nil)
        pendingNext = nil
        queueChanged(edited: false)
        return path
    }

    /// Seeks in the current track; returns the frame it landed on.
    private func seek(_ target: SeekTarget) throws -> Int64 {
        let s = engine.status()
        guard let track = s.track, s.state != .stopped else { throw PlayerError(.notPlaying, "nothing is playing to seek in") }
        var frame: Int64
        switch target.amount {
        case .frames(let f):
            frame = f  // within ±2^53 (SeekTarget): adding the position cannot overflow
        case .seconds(let v):
            // Finite (SeekTarget); at this track's rate it may still be too many frames.
            guard let m = FrameTime.checkedFrames(seconds: abs(v), rate: track.sampleRate) else {
                throw PlayerError(.badRequest, "\(v) s is out of range")
            }
            frame = v < 0 ? -m : m
        }
        if target.relative { frame += s.positionFrames }
        frame = max(0, min(frame, track.durationFrames ?? Int64.max))
        try engine.seek(to: frame)
        saveState()
        emit(.seeked(frame: frame, seconds: FrameTime.seconds(frame, rate: track.sampleRate)))
        return frame
    }

    private func setLoop(_ region: LoopRegion?) throws {
        let s = engine.status()
        if let region {
            guard s.track != nil, s.state != .stopped else { throw PlayerError(.notPlaying, "nothing is playing to loop in") }
            try engine.setLoop(region)
        } else if s.track != nil && s.state != .stopped {
            try engine.setLoop(nil)
        }
        saveState()
        emit(.loop(loopView(engine.status())))
    }

    // MARK: - Options

    /// repeat, single, random, consume: one place, so both protocols mean the same.
    func setOptions(_ change: (inout PlayQueue) -> Void) {
        let before = (queue.repeats, queue.single, queue.shuffle, queue.consume)
        change(&queue)
        guard before != (queue.repeats, queue.single, queue.shuffle, queue.consume) else { return }
        emit(.options(repeats: queue.repeats, single: queue.single, shuffle: queue.shuffle, consume: queue.consume))
        // The entry to follow may be another one now.
        followOn()
        saveState()
    }

    // MARK: - Mixer

    private func setVolume(_ v: Command.Volume) throws {
        guard config.mixer != "none" else { throw PlayerError(.noMixer, "the volume is fixed (volume.mixer = \"none\")") }
        var level = currentLevel()
        switch v {
        case .set(let n):
            level.volume = min(n.value, config.volumeMax)
        case .change(let d):
            level.volume = min(config.volumeMax, max(0, level.volume + d.value))
        }
        try applyLevel(level)
    }

    func applyLevel(_ level: LevelSettings) throws {
        let before = currentLevel()
        if let mixer = hardwareMixer {
            try mixer.setVolume(level.volume)
            hardwareVolume = level.volume
            var software = level
            software.volume = 100
            engine.setLevel(software)
        } else {
            engine.setLevel(level)
        }
        if before != level {
            saveState()
            emit(.volume(level.volume, muted: level.muted))
        }
    }
}
