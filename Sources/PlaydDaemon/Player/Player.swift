import CoreStream
import Logging
import PlaydProtocol
#if canImport(Glibc)
import Glibc
#endif

/// The player both protocols drive: engine, queue, library, output recovery, mixer and
/// saved state, behind typed commands (``perform(_:)``) and read-only views. It knows
/// no protocol: what changed goes out from one place, ``flush()``, as ``Changes`` and
/// ``PlayerEvent``s, to whoever ``onNotify`` hands them (the daemon: every session).
///
/// Thread: control only (the control server's thread), apart from `init` and
/// `shutdown()`, which run before and after it. Engine events arrive on the reader
/// thread and are posted to the control thread (``post``) before they touch anything.
public final class Player: @unchecked Sendable {
    // @unchecked Sendable: every mutable field is touched on the control thread only
    // (see each); other threads reach the player only through `post`, which runs the
    // work on the control thread.
    /// Replaced by a reload (SIGHUP). Control thread.
    public internal(set) var config: DaemonConfig
    let logger: Logger
    public let engine: PlaybackEngine
    /// The "listen here" streams (`http.streams`, issue 45), fed by a tap on the local
    /// output named ``streamOutputName``; nil without them.
    public let streamHub: StreamHub?
    public static let streamOutputName = "stream"
    /// Measured loudness of the queued files (Player+Loudness.swift).
    let loudness = LoudnessStore()
    let statePath: String
    /// The commands the protocols serve from specs (CommandSpecs.swift, and a test's
    /// own). Written once, at init.
    public let commands: CommandTable
    /// Runs work on the control thread soon (the server's `post`). Any thread. Set by
    /// the daemon before ``restore()``, so before anything plays; until then engine
    /// events are dropped (nothing has played to report).
    public var post: @Sendable (@escaping @Sendable () -> Void) -> Void = { _ in }
    /// Told what changed, once per ``flush()``. Control thread.
    public var onNotify: ((Changes, [PlayerEvent]) -> Void)?

    /// Saving is off while the saved state is being restored: a save then would write
    /// "stopped, no file" over the state being restored, and a second crash in that
    /// window lost the track. Control thread.
    var restoring = false
    /// The saved track when it could not be played at start (missing for now): kept in
    /// the state written until something else is played, so nothing is lost.
    var unrestored: SavedState?
    /// The saved track while it opens off the control thread at start (a NAS that does
    /// not answer yet at boot); played from its position when it has opened, unless a
    /// client moved playback meanwhile (``cancelRestore(for:)``). Control thread.
    var restoreOpening: SavedState?
    /// Queue entries reported unplayable since the current track started: an entry
    /// refused by `setNext` and then by `play` is reported once. Control thread.
    var reportedSkips: Set<Int> = []
    /// Something changed that the state file holds: written once at the next
    /// ``flush()`` (a `delete 0:500` is one write, not 500). Control thread.
    var stateDirty = false
    var lastSaved: UInt64 = 0
    /// State files written so far (tests count them: one per command).
    private(set) var stateWrites = 0
    /// Writes them off this thread. Set in init.
    let stateWriter: StateWriter
    /// Changes and events since the last ``flush()``. Control thread.
    private var pendingChanges = Changes()
    private var pendingEvents: [PlayerEvent] = []

    /// The play queue. Control thread.
    public internal(set) var queue = PlayQueue()
    /// The queue entry handed to the engine to follow the current one: gaplessly, or
    /// (when its format needs the device reopened, or while its file still opens off
    /// this thread: ``nextOpening``) to play when the current ends. Control thread.
    /// `generation`: the engine's for a gapless one (``PlaybackEngine/Status/generation``
    /// says when it is heard; the control thread hears of it from an event, later).
    var pendingNext: (id: Int, gapless: Bool, generation: UInt64?)?
    /// The queue entries handed to the engine to follow gaplessly, by the engine's
    /// generation for them, newest last (8), until the join to them is taken in: one
    /// replaced too late to be taken back is heard all the same, and its entry becomes
    /// the current one. Control thread.
    var handedOut: [(generation: UInt64, id: Int)] = []
    /// The engine's generation for an entry handed out, deleted, and heard all the same
    /// (too late to take back): when the engine stops at its end, the queue goes on from
    /// the current entry as at that entry's end (before, the queue stayed at the entry
    /// before it, "current" while stopped; issue 38's sweep). Control thread.
    var heardGone: UInt64?

    /// The queue entries being heard and to follow it, by what the engine plays: the
    /// current entry, or the one queued to follow once the engine plays its frames. The
    /// queue moves on when this thread takes in the engine's event; a status between the
    /// two showed the next track's position under the old song (MPD's `elapsed` went
    /// back to 0.036 with the same `songid`). Control thread.
    public func heardEntries(_ s: PlaybackEngine.Status) -> (current: Int?, next: Int?) {
        if let h = handedOut.last(where: { $0.generation == s.generation }), h.id != queue.currentEntry?.id,
           let i = queue.index(ofID: h.id) {
            return (i, s.state == .stopped ? nil : queue.successor(of: i))
        }
        guard s.state != .stopped else { return (queue.current, nil) }
        // The entry handed to the engine, which skipped unplayable ones; else the queue's.
        return (queue.current, pendingNext.flatMap { queue.index(ofID: $0.id) } ?? queue.successor())
    }
    /// When the daemon started (MPD's `stats` uptime).
    public let startedAt = monotonicNanoseconds()
    /// MPD's playlist version: bumped at every queue change. Control thread.
    public internal(set) var playlistVersion = 1
    /// The volume outside playd's samples (`volume.mixer = "hardware"`: an ALSA mixer;
    /// `"pipewire"`: the PipeWire stream's own), when it opened.
    var hardwareMixer: (any VolumeControl)?
    /// The volume set through the hardware mixer (the engine's own stays at 100).
    var hardwareVolume = 100
    /// The music library, when `library.music_roots` is set.
    public internal(set) var library: MusicLibrary?
    /// Songs in the library index (refreshed after each scan). Control thread.
    public internal(set) var librarySongs = 0
    /// The running scan's job as the control thread knows it: set when it starts one, 0
    /// when that job's end report has been taken in (``libraryScanEnded(_:)``). The
    /// scanner thread clears the library's own flag before its report arrives here, and
    /// a status in between said "not updating" with the song count of before (a test
    /// saw 0 songs after a start-up scan of 7). `updating`, `updating_db` and the count
    /// change together from this. Control thread.
    public internal(set) var libraryJob = 0
    /// When the last library progress event went out. Control thread.
    var lastLibraryEvent: UInt64 = 0
    /// Time spent playing before the current stretch, and when the current one began
    /// (MPD's `playtime`). Control thread.
    var playedNanoseconds: UInt64 = 0
    var playingSince: UInt64?
    /// Seconds played since start (MPD `stats` `playtime`).
    public var playtimeSeconds: UInt64 {
        (playedNanoseconds &+ (playingSince.map { monotonicNanoseconds() &- $0 } ?? 0)) / 1_000_000_000
    }
    /// Tags, durations and formats for queue listings, by path; emptied when it
    /// reaches ``songInfoCacheLimit``. Filled off this thread (Player+DiskReads.swift).
    /// Control thread.
    var probeCache: [String: SongInfo] = [:]
    /// Listing probes and cover reads under way and done (Player+DiskReads.swift).
    /// Control thread.
    var diskReads = DiskReads()
    /// Twice the default queue limit: a full queue stays cached, a cache of everything
    /// ever queued does not grow without end (about 1 kB an entry).
    static let songInfoCacheLimit = 32_768
    /// Set while the output device is lost (Player+Output.swift). Control thread.
    var recovery: OutputRecovery?
    /// Folder walks and playlist reads for `add`, off the control thread.
    let walker = SerialWorker(name: "playd-walk")
    /// `add`s whose sources the walker is collecting now (by their sources). Control thread.
    var collecting: Set<[String]> = []
    /// Collections the walker finished, kept until the end of the turn they arrived
    /// in: the sessions resumed in that turn take them (``flush()`` drops them, so a
    /// session that hung up meanwhile leaves nothing behind). Control thread.
    var collectedSources: [[String]: Result<QueueSources.Collected, any Error>] = [:]
    /// Local files being opened for `play` off the control thread, with when each
    /// began, and the opens done, kept until the end of the turn they arrived in
    /// (Player+Open.swift). Control thread.
    var openingFiles: [String: UInt64] = [:]
    /// Opens a file when it is not opening one already (Player+Open.swift), and whether
    /// it is (until that open's result is back here; one stuck on a hung mount keeps it
    /// busy). Control thread.
    let fileOpener = SerialWorker(name: "playd-open-file")
    var fileOpenerBusy = false
    var openedFiles: [String: Result<Handoff<AudioDecoder>, StreamError>] = [:]
    /// A ``playEntry(_:)`` waiting for `awaited` to open, from the entry it began at
    /// (``retryOpens()`` goes on with it). Control thread.
    var autoPlay: (start: Int, awaited: String)?
    /// The file of the entry to follow (``pendingNext``) while it opens off this thread;
    /// ``retryNextOpen()`` hands it to the engine once it has. Control thread.
    var nextOpening: String?
    /// Files found unplayable since the current track began (by ``playEntry(_:)`` on its
    /// way through the queue, or as the one to follow): the run again after an open goes
    /// past them without opening them again, and so does the choice of the next track.
    /// Control thread.
    var unplayable: [String: StreamError] = [:]
    /// Home Assistant's TTS sequence under way (Player+TTS.swift). Control thread.
    var ttsWatch: TTSWatch?
    /// Since when the music paused at a `clear` waits to be stopped (or taken back by
    /// a TTS clip's `play`): status shows it stopped. Control thread.
    var ttsPausedMusic: UInt64?
    /// Network stream opens (connect and probe), off the control thread.
    let opener = SerialWorker(name: "playd-open")
    /// The stream being opened now, if any (Player+Stream.swift). Control thread.
    var streamOpening: StreamOpening?
    /// A stream that opened while the output was being reopened after a loss: played
    /// once the attempt is over (``outputReopened(_:)``). Control thread.
    var deferredStreamOpen: (serial: Int, result: Result<Handoff<AudioDecoder>, StreamError>)?
    /// An output reopen ended this turn: what waited for it without a session goes on
    /// in ``flush()``, after the sessions' requests have run again. Control thread.
    var outputReopenEnded = false
    /// The device reopened on a worker for a play whose track is in another format
    /// (Player+Output.swift, ``awaitDevice(for:path:)``): the track's decoder, kept for
    /// the play that runs again, and the reopen's result once it is back. Control thread.
    var formatReopen: FormatReopen?
    /// A format reopen's worker is still out though its request was answered: it timed
    /// out (``reopenTimeoutTick()``), and a sound server that never answers holds it in
    /// the device's open. A play that needs another reopen is refused meanwhile rather
    /// than start a worker that would wait behind it. Control thread.
    var formatReopenHung = false
    var openSerial = 0
    /// Queue entries in a row whose stream could not be opened (stops a queue of dead
    /// URLs going round for ever). Control thread.
    var streamFailures = 0
    /// The playing stream's ICY title, and the reconnect attempt while it is dropped.
    /// Control thread.
    public internal(set) var streamTitle: String?
    public internal(set) var streamReconnecting: Int?
    /// The URL being opened (status: `buffering`), if any.
    public var openingStream: String? { streamOpening?.url }
    /// How much of its network buffer's prefill has arrived (0…100).
    public var openingPercent: Int { streamOpening?.percent ?? 0 }
    /// Announcements playing and waiting (Player+Announce.swift). Control thread.
    var announcements = Announcements()
    /// MPD's crossfade and MixRamp settings (Player+Crossfade.swift). Control thread.
    public internal(set) var crossfade = CrossfadeSettings()
    /// The schedule as it runs (Player+Schedule.swift). Control thread.
    var scheduleRun = ScheduleRun()
    /// Set while the schedule itself acts: its commands are not a client's override.
    /// Control thread.
    var scheduleIsActing = false
    /// The schedule's occurrence and override in the saved state, until the schedule
    /// starts (``restore()``). Control thread.
    var restoredSchedule: (occurrence: String, overridden: Bool)?
    /// Resumes the sessions parked on ``PlayerError/Code/workPending`` (the server's
    /// `resumeParked`). Set by the daemon. Control thread.
    public var resumeParked: () -> Void = {}

    /// Opens the output (a broken device fails here) and the library.
    public init(config: DaemonConfig, logger: Logger, commands: CommandTable = CommandTable()) throws {
        self.commands = commands
        self.config = config
        self.logger = logger
        self.stateWriter = StateWriter(logger: logger)
        self.statePath = config.resolvedStateFile
        var ec = PlaybackEngine.Configuration()
        ec.output = config.outputSpec
        ec.bufferMillis = config.bufferTime
        ec.periodMillis = config.periodTime
        ec.ringFrames = config.ringFrames
        ec.formatChange = PlaybackEngine.FormatChange(rawValue: config.formatChange) ?? .resample
        ec.feeds = try config.feeds.map { spec throws(StreamError) in try FeedOutput(spec: spec) }
        if !config.httpListen.isEmpty && !config.httpStreams.isEmpty {
            guard !ec.feeds.contains(where: { $0.name == Self.streamOutputName }) else {
                throw DaemonConfig.Error(message: "output.feeds: the name '\(Self.streamOutputName)' is the listen stream's (http.streams): give that feed another ?name=")
            }
            let hub = StreamHub(formats: config.httpStreams.compactMap(StreamHub.Format.init(rawValue:)),
                                maxListeners: config.httpMaxListeners, bufferMillis: config.httpStreamBufferMillis)
            let tap = FeedOutput(tapNamed: Self.streamOutputName, format: StreamHub.pcm,
                                 fixedVolume: config.httpStreamVolume == "fixed") { hub.push($0, bytes: $1) }
            // Listeners get silence while nothing plays (paused, stopped), not nothing.
            hub.onListening { [weak tap] on in tap?.setIdleSilence(on) }
            ec.feeds.append(tap)
            streamHub = hub
        } else {
            streamHub = nil
        }
        let box = EventSink()
        engine = PlaybackEngine(configuration: ec, logger: logger) { event in box.forward(event) }
        engine.setLoudnessLookup { [loudness] path in loudness.figures(path) }
        engine.setStreamNormalize(config.streamNormalize ? config.replayGainReferenceLUFS : nil)
        var startLevel = Self.level(config, engine.status().level)
        if config.volumeStart >= 0 { startLevel.volume = config.volumeStart }
        startLevel.volume = min(startLevel.volume, config.volumeMax)
        engine.setLevel(startLevel)
        if config.mixer == "hardware" {
            do {
                hardwareMixer = try ALSAMixer(device: config.mixerDevice, control: config.mixerControl)
                hardwareVolume = hardwareMixer?.volume() ?? 100
            } catch {
                logger.error("hardware mixer unavailable: using the software volume", metadata: ["error": "\(error.message)"])
            }
        }
        // Open the output now so a broken device fails the start (and READY=1 means it works).
        try engine.openOutput(for: PCMFormat(sampleRate: 44100, channels: 2))
        if config.mixer == "pipewire" {
            // The stream's volume: checked against the output now it is open.
            do {
                let v = try PipeWireVolume(engine: engine)
                try v.setVolume(100)
                hardwareMixer = v
            } catch {
                logger.error("pipewire mixer unavailable: using the software volume", metadata: ["error": "\(error.message)"])
            }
        }
        box.target = self
        if !config.musicRoots.isEmpty {
            let dbPath = config.libraryDatabase.isEmpty
                ? String(statePath[..<(statePath.lastIndex(of: "/") ?? statePath.startIndex)]) + "/library.db"
                : config.libraryDatabase
            do {
                try StateStore.makeParents(of: dbPath)
                library = try MusicLibrary(roots: config.musicRoots, databasePath: dbPath) { [weak box] report in
                    box?.target?.post { [weak box] in box?.target?.libraryScanEnded(report) }
                }
            } catch let e as MusicLibrary.Error {
                throw DaemonConfig.Error(message: e.message)
            } catch let e as StateStore.Error {
                throw DaemonConfig.Error(message: e.message)
            }
            librarySongs = library?.songCount() ?? 0
            // Every file opened from now on (plays, probes, playlists, covers) is held
            // to the roots on the descriptor itself, not only when it is queued.
            if !config.allowOutsideRoots, let roots = library?.roots { LocalFile.roots = roots }
            logger.info("library", metadata: ["roots": "\(library!.roots)", "database": "\(dbPath)", "songs": "\(librarySongs)"])
            loudness.attach(LibraryLoudness(databasePath: dbPath))
            // The start-up scan begins in restore(), once `post` carries its end report.
        }
    }

    /// Restores the saved state (queue, options, volume, outputs, the track and its
    /// position). Call once, after ``post`` is set: the engine's events from here on go
    /// through it.
    public func restore() {
        // The start-up scan, here and not in init: its end report comes through `post`,
        // and a scan of a few unchanged files ended before the daemon had set it, so the
        // report was dropped and `status` said "updating" for ever, the songs unmeasured
        // (CI, twice in 2026-11: a 3-song library, a loaded machine).
        if library != nil {
            if config.updateOnStart, libraryJob == 0, let job = try? library?.update() { libraryJob = job }
            // The songs not measured yet: after the scan when one runs (it holds the
            // index's write lock), else now (what a pass stopped by a restart left).
            if config.measureLoudness && libraryJob == 0 { loudness.measureLibrary() }
        }
        restoreState()
        // What restoring did is no news to anyone; the state file already says it.
        pendingEvents.removeAll()
        pendingChanges = []
        stateDirty = false
        // The schedule starts in the block the clock is in (after a restart too).
        startSchedule(saved: restoredSchedule)
        restoredSchedule = nil
    }

    /// The ReplayGain part of the config applied to `level`.
    static func level(_ config: DaemonConfig, _ current: LevelSettings) -> LevelSettings {
        var level = current
        level.replayGain = ReplayGainMode(rawValue: config.replayGain) ?? .off
        level.preampDB = config.replayGainPreamp
        level.missingPreampDB = config.replayGainMissingPreamp
        level.preventClipping = config.replayGainLimit
        level.source = ReplayGainSource(rawValue: config.replayGainSource) ?? .tags
        level.referenceLUFS = config.replayGainReferenceLUFS
        level.maxTruePeakDBTP = config.replayGainMaxTruePeak
        return level
    }

    /// Applies a reloaded config's player keys (ReplayGain, roots policy, limits).
    /// Control thread.
    func apply(_ new: DaemonConfig) {
        config = new
        LocalFile.roots = (!config.allowOutsideRoots ? library?.roots : nil) ?? []
        engine.setLevel(Self.level(config, engine.status().level))
        engine.setStreamNormalize(config.streamNormalize ? config.replayGainReferenceLUFS : nil)
        measureQueuedLoudness()
        if library != nil {
            if config.measureLoudness { if libraryJob == 0 { loudness.measureLibrary() } } else { loudness.stopLibrary() }
        }
        // A schedule changed by a reload: its blocks are numbered anew, so the block
        // the clock is in is put in place again (with a fade, as at a boundary).
        if new.schedule != scheduleRun.config {
            scheduleRun = ScheduleRun()
            if !new.schedule.isEmpty {
                let now = WallClock.local(WallClock.now())
                scheduleRun.lastLook = (now.date, now.second)
                beginSwitch(to: new.schedule.occurrence(now.date, now.second), fade: true)
            } else {
                emit(.schedule)
            }
        }
    }

    /// Saves and stops the engine. After the control thread has stopped.
    public func shutdown() {
        writeState(now: true)
        engine.shutdown()
    }

    // MARK: - Notification: the one place

    /// Records `event` (and what it changed) for the next ``flush()``.
    func emit(_ event: PlayerEvent) {
        ControlThread.check()
        pendingEvents.append(event)
        pendingChanges.formUnion(event.changes)
    }

    /// Writes the state if a command changed it, and tells ``onNotify`` what changed
    /// since the last flush: once per command, whichever protocol sent it. The server
    /// calls it at the end of every turn of its loop, after the lines and the posted
    /// work of that turn. Control thread.
    public func flush() {
        ControlThread.check()
        retryOpens()
        retryNextOpen()
        retryAdmittingAnnouncements()
        retryOutputRecovery()
        retryFormatReopen()
        retryRestore()
        collectedSources.removeAll()
        openedFiles.removeAll()
        diskReads.done.removeAll()
        if stateDirty { writeState() }
        guard !pendingChanges.isEmpty || !pendingEvents.isEmpty else { return }
        if pendingChanges.contains(.queue) { measureQueuedLoudness() }
        let (c, e) = (pendingChanges, pendingEvents)
        pendingChanges = []
        pendingEvents = []
        onNotify?(c, e)
    }

    // MARK: - Engine events

    /// Forwards engine events to the control thread. The engine calls it on its reader
    /// thread (or a feed's).
    final class EventSink: @unchecked Sendable {
        // @unchecked Sendable: `target` is set once, before the engine plays anything.
        weak var target: Player?
        func forward(_ e: PlaybackEngine.Event) {
            guard let t = target else { return }
            t.post { [weak t] in t?.engineEvent(e) }
        }
    }

    /// An engine event, on the control thread.
    func engineEvent(_ e: PlaybackEngine.Event) {
        switch e {
        case .trackStarted(let t):
            streamTitle = t.streamTitle
            streamReconnecting = nil
            emit(.track(t))
        case .stream(let path, let e): streamEvent(path: path, e)
        case .trackEnded(let p, let generation, let stopped):
            emit(.trackEnd(path: p))
            if stopped { queueTrackEnded(p, generation: generation) }
        case .stateChanged(let s):
            // A pause is sent by the engine once the sound has stopped: where it stopped
            // is the position status reports from now on. One overtaken by a resume (or a
            // stop) on this thread is not news any more.
            var at: (frame: Int64, seconds: Double)?
            if s == .paused, ttsPausedMusic != nil {
                // The music paused at a `clear`: where the sound stopped is where it goes
                // on after a TTS clip. Now it stops, as the `clear` asked.
                settleTTSPause()
                return
            }
            if s == .paused {
                let status = engine.status()
                guard status.state == .paused else { return }
                at = (status.positionFrames, status.positionSeconds)
            }
            let now = monotonicNanoseconds()
            if let since = playingSince { playedNanoseconds &+= now &- since }
            playingSince = s == .playing ? now : nil
            emit(.state(s, position: at))
            // Stopped: hand the heap's free pages back (a long queue of damaged files
            // leaves ~2 MB of fragments otherwise; measured in BadMediaQueueTests).
            if s == .stopped { ProcessTuning.releaseFreeMemory() }
        case .underruns(let n): emit(.underruns(n))
        case .corruptPackets(let p, let n): emit(.corruptPackets(path: p, count: n))
        case .error(let err):
            emit(.error(code: err.code.name, message: err.message))
            if err.code == .outputFailed { outputLost(err) }
        case .gaplessTransition(_, _, let generation):
            // The `track_end` and `track` events went out already; the queue moves on.
            queueTrackStarted(generation: generation)
        case .loopWrapped(let pass, let remaining): emit(.loopWrapped(passes: pass, remaining: remaining))
        case .announcementStarted, .announcementEnded: announcementEvent(e)
        case .outputChanged(let name):
            // Listed here, on the control thread: a feed's thread sends this.
            if let o = engine.outputs().first(where: { $0.name == name }) { emit(.output(o)) }
        }
    }

    /// Periodic work on the control thread: save state while playing, output recovery,
    /// library progress.
    public func tick() {
        let now = monotonicNanoseconds()
        // While the output is lost the position stands still: the state saved before
        // it went is the one to keep.
        if recovery == nil && engine.status().state == .playing && now - lastSaved > UInt64(config.saveInterval) * 1_000_000_000 {
            writeState()
        }
        outputRecoveryTick()
        libraryTick()
        ttsTick()
        fileOpenTick()
        reopenTimeoutTick()
        diskReadTick()
        scheduleTick()
    }

    // MARK: - Views

    /// The level as the user sees it: with a hardware mixer, its volume.
    public func currentLevel() -> LevelSettings {
        var level = engine.status().level
        if hardwareMixer != nil { level.volume = hardwareVolume }
        return level
    }

    /// `software`, `hardware`, `pipewire` or `none`.
    public var mixerKind: String { hardwareMixer?.kind ?? (config.mixer == "none" ? "none" : "software") }

    /// The loop region as listings show it.
    public struct LoopView: Sendable, Equatable {
        public var start: Int64, end: Int64, rate: Int
        public var count: Int?, pingPong: Bool, passes: Int64, remaining: Int64?
    }

    public func loopView(_ s: PlaybackEngine.Status) -> LoopView? {
        guard let l = s.loop, let rate = s.track?.sampleRate else { return nil }
        return LoopView(start: l.start, end: l.end, rate: rate, count: l.count, pingPong: l.pingPong,
                        passes: s.loopPasses, remaining: s.loopRemaining)
    }

    /// Title, artist and duration of a queued file, probed once and cached.
    public func probeSummary(_ path: String) -> (title: String?, artist: String?, duration: Double?) {
        let s = songInfo(path)
        return (s.tags["title"], s.tags["artist"], s.duration)
    }

    /// What a listing shows of a file: its tags, duration, format and modification
    /// time, as probed off this thread (``probeForListing(_:)``, which a listing runs
    /// first). A file not probed (yet), and a URL (network I/O has no place on this
    /// thread), have no tags.
    public func songInfo(_ path: String) -> SongInfo {
        probeCache[path] ?? SongInfo()
    }

    // MARK: - State

    /// The state file is written at the next ``flush()``.
    func saveState() { stateDirty = true }

    /// Writes the state file: on the writer thread, or here when `now` (at shutdown).
    /// Control thread (or at shutdown).
    func writeState(now: Bool = false) {
        guard !restoring else { return }
        stateDirty = false
        stateWrites += 1
        lastSaved = monotonicNanoseconds()
        var s = engine.status()
        if ttsPausedMusic != nil {
            // Cleared, waiting for a TTS clip: stopped, as status says (a restart in
            // those milliseconds must not bring back a track the `clear` took away).
            s.state = .stopped
            s.track = nil
            s.positionFrames = 0
        }
        if let kept = unrestored, s.track == nil {
            // The track saved before could not be played at start: keep it.
            var state = kept
            state.queue = queue
            state.volume = currentLevel().volume
            state.muted = s.level.muted
            state.crossfade = crossfade
            state.schedule = scheduleRun.applied.map { ($0.description, scheduleRun.overridden) }
            store(state, now: now)
            return
        }
        unrestored = nil
        var loop = s.loop
        if let c = s.loopRemaining { loop?.count = Int(c) }
        let state = SavedState(file: s.track?.path, positionFrames: s.positionFrames, sampleRate: s.track?.sampleRate,
                               state: s.state.rawValue, loop: loop, direction: s.direction,
                               volume: currentLevel().volume, muted: s.level.muted, queue: queue,
                               disabledOutputs: engine.outputs().filter { !$0.enabled }.map(\.name),
                               crossfade: crossfade,
                               schedule: scheduleRun.applied.map { ($0.description, scheduleRun.overridden) })
        store(state, now: now)
    }

    /// Hands `state` to the writer thread, or (`now`, at shutdown) writes it here.
    private func store(_ state: SavedState, now: Bool) {
        let text = state.json.text + "\n"
        if now { stateWriter.writeNow(text, to: statePath) } else { stateWriter.write(text, to: statePath) }
    }

    private func restoreState() {
        StateStore.removeLeftovers(of: statePath)
        restoring = true
        defer { restoring = false }
        let saved: SavedState?
        do {
            saved = try StateStore.load(from: statePath)
        } catch {
            logger.warning("ignoring the saved state", metadata: ["state.path": "\(statePath)", "error": "\(error)"])
            return
        }
        guard let st = saved else { return }
        restoredSchedule = st.schedule
        queue = st.queue
        crossfade = st.crossfade
        engine.setDirection(st.direction)
        for name in st.disabledOutputs {
            // An output no longer configured is forgotten.
            try? engine.setOutputEnabled(name, false)
        }
        var level = currentLevel()
        // A hardware mixer keeps its own level (others may set it); the software one is
        // ours. `volume.start` overrides the saved one; `volume.max` caps both.
        if hardwareMixer == nil { level.volume = st.volume }
        if config.volumeStart >= 0 { level.volume = config.volumeStart }
        level.volume = min(level.volume, config.volumeMax)
        level.muted = st.muted
        _ = try? applyLevel(level)
        guard let file = st.file, config.resume != "stopped", st.state != "stopped" else { return }
        if NetworkInput.isStreamURL(file) {
            // A stream is connected to again off this thread (a radio from where it is
            // now); `resume = "paused"` leaves it be rather than hold a connection open.
            if config.resume == "playing" {
                openStream(file, entry: queue.currentEntry.flatMap { $0.path == file ? $0.id : nil })
            }
            return
        }
        // Opened off this thread (issue 38): on a mount whose reads hang FFmpeg's open
        // never returns, and here, before READY=1, it held the whole start (a music
        // NAS still booting after a power cut left playd unanswered until it was up).
        // Waited for 1 s (a file on a disk that answers opens in milliseconds, and is
        // there for the first client, as before); later, it plays when it has opened.
        // Until then the state written keeps the saved track (`unrestored`).
        unrestored = st
        do {
            guard let sync = try openAtStart(file, graceSeconds: 1) else {
                restoreOpening = st
                logger.notice("restoring: the saved track is opening", metadata: ["track.path": "\(file)"])
                return
            }
            playRestored(st, .success(sync))
        } catch {
            logger.warning("cannot restore the saved track", metadata: ["track.path": "\(file)", "error": "\(error)"])
        }
    }

    /// Plays the saved track once it has opened, from the saved position. A failure
    /// leaves it in the state written (``unrestored``), for a later start. Control thread.
    func playRestored(_ st: SavedState, _ opened: Result<AudioDecoder, StreamError>) {
        guard let file = st.file else { return }
        do {
            try engine.play(decoder: try opened.get(), from: st.positionFrames, paused: config.resume != "playing")
            if let l = st.loop {
                do { try engine.setLoop(l) } catch { logger.warning("cannot restore the loop region", metadata: ["error": "\(error)"]) }
            }
            logger.info("restored", metadata: ["track.path": "\(file)", "position.frames": "\(st.positionFrames)"])
        } catch {
            logger.warning("cannot restore the saved track", metadata: ["track.path": "\(file)", "error": "\(error)"])
        }
    }

    /// The saved track has opened (or failed to) in this turn: it plays now. From
    /// ``flush()``, before the turn's opens are dropped.
    func retryRestore() {
        guard let st = restoreOpening, let file = st.file, let done = openedFiles.removeValue(forKey: file) else { return }
        restoreOpening = nil
        playRestored(st, done.map(\.value))
    }

    /// A client's command that moves playback (plays, stops, seeks, skips, clears) while
    /// the saved track still opens: the restore is called off, the client's command
    /// wins. Control thread.
    func cancelRestore(for command: Command) {
        guard restoreOpening != nil else { return }
        switch command {
        case .playFile, .playIndex, .playID, .playQueue, .transport, .seek, .seekEntry, .next, .previous, .clear, .loadPlaylist:
            restoreOpening = nil
            logger.info("restoring called off: a client moved playback first")
        default: break
        }
    }
}

/// A file as queue listings show it (``Player/songInfo(_:)``).
public struct SongInfo: Sendable {
    /// FFmpeg's tags, keys lowercased.
    public var tags: [String: String] = [:]
    public var duration: Double?
    /// `RATE:WIDTH:CHANNELS` as MPD's `Format:` (`44100:16:2`, `44100:f:2`).
    public var format: String?
    /// Modification time, seconds since 1970.
    public var modified: Int?
}
