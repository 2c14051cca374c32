import CoreStream

/// The schedule as it runs (`[schedule]`, issue 43; the config's side is
/// Schedule.swift). Each second (the control thread's tick, and sooner when a fade is
/// due) the wall clock is read and the block it is in compared with the one in place;
/// a new one fades the music out over its cross-fade (or `schedule.fade`) and then puts
/// its programme in the queue and plays it. The files of a folder or playlist are
/// collected on the walker thread meanwhile, so the control thread never waits for a
/// disk. Control thread.
extension Player {
    /// What the schedule has done and is doing. Control thread.
    struct ScheduleRun {
        /// The occurrence in place (or being put in place); nil before the first.
        var applied: Schedule.Occurrence?
        /// A client's command during `applied` holds until the next boundary.
        var overridden = false
        /// The source the schedule last put in the queue (a block with the same one
        /// changes only its settings, with no fade).
        var inPlace: Schedule.Programme.Source?
        /// A change under way: the fade ends at `fadeDue` (monotonic), the files come
        /// from the walker into `files`.
        var switching: Switch?
        /// The wall clock at the last look, for the announcements between two looks.
        var lastLook: (date: LocalDate, second: Int)?
        /// When `ignore` last played the programme again (monotonic).
        var lastReassert: UInt64 = 0
        var serial = 0
        /// The schedule this runs (a reload with another starts over).
        var config = Schedule()
    }

    struct Switch {
        var occurrence: Schedule.Occurrence
        var programme: Schedule.Programme?
        var fadeDue: UInt64?
        var files: Result<[String], PlayerError>?
        var serial: Int
    }

    var schedule: Schedule { config.schedule }

    /// Starts the schedule after the saved state was restored: playd starts in the block
    /// the clock is in. The same occurrence as the one saved keeps the queue and
    /// position restored (and plays them); another one is put in place at once.
    func startSchedule(saved: (occurrence: String, overridden: Bool)?) {
        scheduleRun.config = schedule
        guard !schedule.isEmpty else { return }
        let now = WallClock.local(WallClock.now())
        scheduleRun.lastLook = (now.date, now.second)
        let o = schedule.occurrence(now.date, now.second)
        logger.info("schedule", metadata: ["block": "\(schedule.name(o))", "since": "\(o.date?.description ?? "-")"])
        guard let saved, Schedule.Occurrence(text: saved.occurrence, blocks: schedule.blocks.count) == o else {
            beginSwitch(to: o, fade: false)
            return
        }
        scheduleRun.applied = o
        scheduleRun.overridden = saved.overridden
        guard !saved.overridden else { return }
        let p = schedule.programme(o)
        scheduleRun.inPlace = p?.source
        if p == nil || p?.source == .silence {
            if engine.status().state != .stopped { scheduleActing { transport(.stop) } }
            return
        }
        scheduleActing {
            switch engine.status().state {
            case .paused: transport(.resume)
            case .stopped where streamOpening == nil:
                if queue.count == 0 { beginSwitch(to: o, fade: false) } else { try? playQueue() }
            default: break
            }
        }
    }

    /// Runs `body` as the schedule's own action (not a client's override).
    func scheduleActing(_ body: () throws -> Void) rethrows {
        let was = scheduleIsActing
        scheduleIsActing = true
        defer { scheduleIsActing = was }
        try body()
    }

    /// Each tick, and when a fade is due.
    func scheduleTick() {
        guard !schedule.isEmpty else { return }
        let now = WallClock.local(WallClock.now())
        announceDue(now)
        let o = schedule.occurrence(now.date, now.second)
        if o != scheduleRun.applied {
            beginSwitch(to: o, fade: true)
        } else {
            continueSwitch()
            if scheduleRun.switching == nil && schedule.override == .ignore { reassert(o) }
        }
    }

    /// When the control loop should look again sooner than its tick (a fade's end).
    var scheduleDue: UInt64? { scheduleRun.switching?.fadeDue }

    /// A client's command: during a block it holds until the next boundary
    /// (`override = "until_next_block"`); a change of block under way is called off and
    /// its fade taken back.
    func noteClientCommand(_ command: Command) {
        guard !scheduleIsActing, !schedule.isEmpty else { return }
        switch command {
        case .playFile, .clear, .loadPlaylist, .add:
            // The queue is the client's now: a next block with the source the schedule
            // put in place last is put in place again, not only its settings.
            scheduleRun.inPlace = nil
        default:
            break
        }
        guard scheduleRun.applied != nil, schedule.override == .untilNextBlock else { return }
        switch command {
        case .playFile, .playIndex, .playID, .playQueue, .transport, .next, .previous, .volume, .mute, .clear,
             .loadPlaylist, .setRandom, .seekEntry:
            break
        default:
            return
        }
        if scheduleRun.switching != nil {
            scheduleRun.switching = nil
            engine.setFade(to: 1, seconds: 0.05)
        }
        guard !scheduleRun.overridden else { return }
        scheduleRun.overridden = true
        logger.info("schedule: a client's command holds until the next block", metadata: ["block": "\(schedule.name(scheduleRun.applied!))"])
        emit(.schedule)
        saveState()
    }

    /// Puts occurrence `o` in place: the same source playing changes only its settings;
    /// otherwise (`fade`, and music playing) the music fades out while the files are
    /// collected, and the programme plays once both are done.
    func beginSwitch(to o: Schedule.Occurrence, fade: Bool) {
        let p = schedule.programme(o)
        scheduleRun.config = schedule
        scheduleRun.applied = o
        scheduleRun.overridden = false
        scheduleRun.serial += 1
        logger.info("schedule: block", metadata: ["block": "\(schedule.name(o))", "programme": "\(p?.sourceText ?? "silence")"])
        emit(.schedule)
        saveState()
        let playing = engine.status().state == .playing
        if let p, p.source != .silence, p.source == scheduleRun.inPlace, playing {
            scheduleRun.switching = nil
            scheduleActing { applySettings(p) }
            return
        }
        var sw = Switch(occurrence: o, programme: p, serial: scheduleRun.serial)
        if fade && playing {
            let seconds = p?.crossfade.flatMap { $0 > 0 ? Double($0) : nil } ?? schedule.fadeSeconds
            engine.setFade(to: 0, seconds: seconds)
            // The fade starts at the frames rendered next, which the device plays up to
            // a buffer (and a period) later: the switch waits until the fade has been
            // heard to its end. Waiting only `seconds`, a wav: capture kept 1.25 s of a
            // 2 s fade and cut at 47 % (the 0.75 s buffer it drops at the stop).
            let ahead = engine.status().output.map { Double($0.bufferFrames + $0.periodFrames) / Double(max(1, $0.pcm.sampleRate)) } ?? 0
            sw.fadeDue = monotonicNanoseconds() &+ UInt64((seconds + min(ahead, 10) + 0.05) * 1e9)
        } else if scheduleRun.switching?.fadeDue != nil {
            engine.setFade(to: 1, seconds: 0.05)
        }
        scheduleRun.switching = sw
        collectProgramme(p, serial: sw.serial)
        continueSwitch()
    }

    /// The programme's files, collected on the walker thread (a folder walk, a playlist
    /// read); a URL is taken as it is.
    private func collectProgramme(_ p: Schedule.Programme?, serial: Int) {
        // What to read on the walker thread: the stored playlist's file too, so the
        // control thread opens nothing (a playlist directory on a hung mount).
        let sources: [String], playlist: String?
        switch p?.source {
        case nil, .silence?:
            scheduleRun.switching?.files = .success([])
            return
        case .url(let u)?: (sources, playlist) = ([u], nil)
        case .folder(let f)?: (sources, playlist) = ([f], nil)
        case .playlist(let name)?: (sources, playlist) = ([], name)
        }
        let admission = self.admission, post = self.post, store = storedPlaylists
        let limits = QueueSources.Limits(maxEntries: config.maxQueueLength, playlistBytes: config.maxPlaylistBytes,
                                         playlistEntries: config.maxPlaylistEntries, stream: streamOptions(StreamCancel()))
        walker.submit { [weak self] in
            let result: Result<[String], PlayerError>
            do {
                var list = sources
                if let name = playlist {
                    do throws(StoredPlaylists.Error) { list = try store.read(name) } catch { throw Player.playerError(error) }
                }
                result = .success(list.isEmpty ? [] : try QueueSources.collect(list, admission: admission, limits: limits).files)
            } catch {
                result = .failure(PlayerError(any: error))
            }
            post { [weak self] in
                guard let self, self.scheduleRun.switching?.serial == serial else { return }
                self.scheduleRun.switching?.files = result
                self.continueSwitch()
            }
        }
    }

    /// Plays the programme of the change under way once its fade is over and its files
    /// are in.
    func continueSwitch() {
        guard let sw = scheduleRun.switching, sw.files != nil else { return }
        if let due = sw.fadeDue, monotonicNanoseconds() < due { return }
        scheduleRun.switching = nil
        scheduleActing {
            guard let p = sw.programme, p.source != .silence, case .success(let files)? = sw.files, !files.isEmpty else {
                if case .failure(let e)? = sw.files {
                    logger.error("schedule: the block's programme cannot play", metadata: ["block": "\(schedule.name(sw.occurrence))", "error": "\(e.message)"])
                    emit(.error(code: e.jsonCode, message: "schedule: \(schedule.name(sw.occurrence)): \(e.message)"))
                } else if let p = sw.programme, p.source != .silence {
                    logger.error("schedule: the block's programme has nothing to play", metadata: ["block": "\(schedule.name(sw.occurrence))"])
                    emit(.error(code: "no_such_entry", message: "schedule: \(schedule.name(sw.occurrence)): \(p.sourceText) has nothing to play"))
                }
                if engine.status().state != .stopped || streamOpening != nil { transport(.stop) }
                scheduleRun.inPlace = sw.programme == nil ? nil : .silence
                return
            }
            transport(.stop)
            queue.clear()
            pendingNext = nil
            _ = queue.add(Array(files.prefix(config.maxQueueLength)))
            // A block plays until its end: its queue goes round.
            queue.repeats = true
            if queue.single != .off { queue.single = .off }
            emit(.options(repeats: queue.repeats, single: queue.single, shuffle: queue.shuffle, consume: queue.consume))
            applySettings(p)
            queueChanged()
            scheduleRun.inPlace = p.source
            if let start = queue.successor() { playEntryLater(start) }
        }
    }

    /// A programme's volume, shuffle and cross-fade.
    private func applySettings(_ p: Schedule.Programme) {
        if let on = p.shuffle, on != queue.shuffle { setOptions { $0.setShuffle(on) } }
        if let c = p.crossfade, c != crossfade.seconds { setCrossfade { $0.seconds = c } }
        if let v = p.volume, config.mixer != "none" {
            var level = currentLevel()
            level.volume = min(v, config.volumeMax)
            if level.volume != currentLevel().volume {
                do { try applyLevel(level) } catch {
                    logger.warning("schedule: cannot set the volume", metadata: ["error": "\(error)"])
                }
            }
        }
    }

    /// `override = "ignore"`: the programme plays, at its volume, whatever a client did
    /// (at most every 5 s when it stops again, so a programme that cannot play is not
    /// started over and over).
    private func reassert(_ o: Schedule.Occurrence) {
        guard let p = schedule.programme(o), p.source != .silence, announcements.current == nil, recovery == nil,
              ttsWatch == nil, ttsPausedMusic == nil, streamOpening == nil, autoPlay == nil else { return }
        scheduleActing {
            switch engine.status().state {
            case .paused: transport(.resume)
            case .stopped:
                let now = monotonicNanoseconds()
                guard now &- scheduleRun.lastReassert > 5_000_000_000 else { return }
                scheduleRun.lastReassert = now
                beginSwitch(to: o, fade: false)
            case .playing:
                if let v = p.volume, config.mixer != "none", currentLevel().volume != min(v, config.volumeMax) { applySettings(p) }
            }
        }
    }

    /// The `[[schedule.announce]]` entries whose time the wall clock passed since the
    /// last look (not those of a jump of over 5 minutes: a suspend, a clock set).
    private func announceDue(_ now: (date: LocalDate, second: Int, offset: Int)) {
        defer { scheduleRun.lastLook = (now.date, now.second) }
        guard let last = scheduleRun.lastLook, !schedule.announcements.isEmpty else { return }
        // Each due one with how late it is, in seconds of wall clock.
        var due: [(Schedule.Announce, Int)] = []
        if last.date == now.date {
            guard now.second > last.second else { return }  // the clocks went back: from here on
            due = schedule.announcementsDue(now.date, after: last.second, upTo: now.second).map { ($0, now.second - $0.at) }
        } else if last.date.adding(days: 1) == now.date {
            due = schedule.announcementsDue(last.date, after: last.second, upTo: 86_399).map { ($0, 86_400 - $0.at + now.second) }
                + schedule.announcementsDue(now.date, after: -1, upTo: now.second).map { ($0, now.second - $0.at) }
        }
        for (a, late) in due where late <= 300 {
            var r = AnnounceRequest(source: a.source)
            r.chime = a.chime
            r.pause = a.pause
            r.duckDB = a.duckDB
            r.gainDB = a.gainDB
            logger.info("schedule: announcement", metadata: ["announcement": "\(a.name.isEmpty ? a.source : a.name)"])
            // Its clips are checked off the control thread: it plays when they are.
            announceWhenAdmitted(r) { [weak self] e in
                self?.logger.error("schedule: announcement refused", metadata: ["announcement": "\(a.source)", "error": "\(e.message)"])
                self?.emit(.announcementEnded(source: a.source, cancelled: false, error: e))
            }
        }
    }

    // MARK: - Views

    /// What `schedule` shows: the block now, what changes next and when, whether an
    /// override holds; with `day`, that day's plan.
    public struct ScheduleView: Sendable {
        public var configured: Bool
        public var timezone: String
        public var now: Int
        public var block: String?
        public var programme: String?
        public var since: String?
        public var overridden: Bool
        public var override: String
        public var next: (at: Int, block: String, programme: String)?
        public var day: (date: LocalDate, stretches: [(from: String, to: String, block: String, programme: String, seconds: Int)],
                         announcements: [(at: String, name: String, source: String)])?
    }

    /// `YYYY-MM-DD`, `today` or `tomorrow` (the schedule's zone).
    static func scheduleDay(_ text: String) throws(PlayerError) -> LocalDate {
        let today = WallClock.local(WallClock.now()).date
        switch text {
        case "today": return today
        case "tomorrow": return today.adding(days: 1)
        default:
            guard let d = LocalDate(text) else { throw PlayerError(.invalidArgument, "'\(text)' is not a day: YYYY-MM-DD, today or tomorrow") }
            return d
        }
    }

    public func scheduleView(day: LocalDate? = nil) -> ScheduleView {
        let s = schedule
        let now = WallClock.now()
        let zone = s.timezone.isEmpty ? (Environment.get("TZ").map { $0.hasPrefix(":") ? String($0.dropFirst()) : $0 } ?? "system") : s.timezone
        var v = ScheduleView(configured: !s.isEmpty, timezone: zone, now: now, overridden: scheduleRun.overridden,
                             override: s.override.rawValue)
        guard !s.isEmpty else { return v }
        if let o = scheduleRun.applied {
            v.block = s.name(o)
            v.programme = s.programme(o)?.sourceText ?? "silence"
            if let i = o.block, let d = o.date { v.since = WallClock.iso(WallClock.instant(d, s.blocks[i].from)) }
        }
        if let n = s.nextChange(after: now) {
            v.next = (n.at, s.name(n.occurrence), s.programme(n.occurrence)?.sourceText ?? "silence")
        }
        if let d = day {
            let stretches = s.plan(d).map { st in
                (WallClock.short(st.from), WallClock.short(st.to), s.name(st.occurrence),
                 s.programme(st.occurrence)?.sourceText ?? "silence", st.seconds)
            }
            let calls = s.announcements.filter { $0.days.contains(d) }.sorted { $0.at < $1.at }
                .map { (WallClock.short($0.at), $0.name, $0.source) }
            v.day = (d, stretches, calls)
        }
        return v
    }
}

