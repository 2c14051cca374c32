import CoreStream
import Logging
import PlaydProtocol
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// playd as a daemon: the engine, the control socket, saved state, systemd readiness.
public final class Daemon: @unchecked Sendable {
    // @unchecked Sendable: `engine` is thread-safe; `lastSaved` and the server's
    // state are touched only on the control thread (the server's `run()`), apart from
    // `shutdown()` which runs after that thread has stopped.

    public static let version = "0.2.0"

    /// Replaced by a reload (SIGHUP). Control thread.
    var config: DaemonConfig
    let logger: Logger
    /// Reads the config again for a reload (the file and the command line's flags).
    public var reloadConfig: (() throws -> DaemonConfig)?
    /// Saving is off while the saved state is being restored: a save then would write
    /// "stopped, no file" over the state being restored, and a second crash in that
    /// window lost the track. Control thread.
    var restoring = false
    /// The saved track when it could not be played at start (missing for now): kept in
    /// the state written until something else is played, so nothing is lost.
    var unrestored: SavedState?
    /// Queue entries reported unplayable since the current track started: an entry
    /// refused by `setNext` and then by `play` is reported once. Control thread.
    var reportedSkips: Set<Int> = []
    let engine: PlaybackEngine
    var server: ControlServer!
    let statePath: String

    private var lastSaved: UInt64 = 0
    /// The play queue. Control thread.
    var queue = PlayQueue()
    /// The queue entry handed to the engine to follow the current one: gaplessly, or
    /// (when its format needs the device reopened) to play when the current ends.
    /// Control thread.
    var pendingNext: (id: Int, gapless: Bool)?
    /// When the daemon started (MPD's `stats` uptime).
    let startedAt = monotonicNanoseconds()
    /// MPD's playlist version: bumped at every queue change. Control thread.
    var playlistVersion = 1
    /// The hardware mixer (`volume.mixer = "hardware"`), when it opened.
    var hardwareMixer: ALSAMixer?
    /// The volume set through the hardware mixer (the engine's own stays at 100).
    var hardwareVolume = 100
    /// The music library, when `library.music_roots` is set.
    var library: MusicLibrary?
    /// Songs in the library index (refreshed after each scan). Control thread.
    var librarySongs = 0
    /// When the last library progress event went out. Control thread.
    var lastLibraryEvent: UInt64 = 0
    /// Tags and durations for `queue` listings, by path. Control thread.
    var probeCache: [String: (title: String?, artist: String?, duration: Double?)] = [:]
    /// Set while the output device is lost (DaemonOutputRecovery.swift). Control thread.
    var recovery: OutputRecovery?

    public init(config: DaemonConfig, logger: Logger) throws {
        self.config = config
        self.logger = logger
        self.statePath = config.resolvedStateFile
        var ec = PlaybackEngine.Configuration()
        ec.output = config.outputSpec
        ec.bufferMillis = config.bufferTime
        ec.periodMillis = config.periodTime
        ec.ringFrames = config.ringFrames
        ec.formatChange = PlaybackEngine.FormatChange(rawValue: config.formatChange) ?? .resample
        ec.feeds = try config.feeds.map { spec throws(StreamError) in try FeedOutput(spec: spec) }
        let box = EventSink()
        engine = PlaybackEngine(configuration: ec, logger: logger) { event in box.forward(event) }
        var level = LevelSettings()
        level.replayGain = ReplayGainMode(rawValue: config.replayGain) ?? .off
        level.preampDB = config.replayGainPreamp
        level.missingPreampDB = config.replayGainMissingPreamp
        level.preventClipping = config.replayGainLimit
        engine.setLevel(level)
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
        server = try ControlServer(path: config.resolvedSocketPath, mode: config.socketMode, group: config.socketGroup,
                                   handler: { [unowned self] req, client in self.handle(req, client) },
                                   onTick: { [unowned self] in self.tick() })
        server.tickEvent = { [unowned self] in self.positionEvent() }
        do {
            server.access = try AccessPolicy.resolve(users: config.allowedUsers, groups: config.allowedGroups)
        } catch {
            throw DaemonConfig.Error(message: error.message)
        }
        let access = server.access
        server.limits = Self.serverLimits(config)
        server.onConnection = { [logger] peer, address, listener, refused in
            var meta: Logger.Metadata = ["listener": "\(listener)"]
            if let p = peer {
                meta["peer.uid"] = "\(p.uid)"; meta["peer.gid"] = "\(p.gid)"; meta["peer.pid"] = "\(p.pid)"
            }
            // TCP peers have no credentials: their address says who they are.
            if let a = address { meta["peer.address"] = "\(a)" }
            if let why = refused {
                logger.warning("client refused: \(why)", metadata: meta)
            } else {
                logger.info("client connected", metadata: meta)
            }
        }
        if !access.isOpen && !config.mpdTCP.isEmpty {
            logger.warning("mpd.bind: TCP clients carry no credentials, so with control.allowed_users/allowed_groups set they are all refused")
        }
        if config.mpdEnabled {
            let password = config.mpdPassword.isEmpty ? nil : config.mpdPassword
            let make: () -> LineSession = { [unowned self] in
                MPDSession(password: password, maxCommandListBytes: self.config.maxCommandListKiB * 1024) {
                    [unowned self] command, args throws(MPDSession.Failure) in
                    try self.mpdExecute(command, args)
                }
            }
            try server.addListener(path: config.resolvedMPDSocketPath, mode: config.socketMode, group: config.socketGroup, factory: make)
            if !config.mpdTCP.isEmpty { try server.addListener(tcp: config.mpdTCP, factory: make) }
        }
        box.target = self
        if !config.musicRoots.isEmpty {
            let dbPath = config.libraryDatabase.isEmpty
                ? String(statePath[..<(statePath.lastIndex(of: "/") ?? statePath.startIndex)]) + "/library.db"
                : config.libraryDatabase
            do {
                try StateStore.makeParents(of: dbPath)
                library = try MusicLibrary(roots: config.musicRoots, databasePath: dbPath) { [weak self] report in
                    self?.server?.post { [weak self] in self?.libraryScanEnded(report) }
                }
            } catch let e as MusicLibrary.Error {
                throw DaemonConfig.Error(message: e.message)
            } catch let e as StateStore.Error {
                throw DaemonConfig.Error(message: e.message)
            }
            librarySongs = library?.counts().songs ?? 0
            // Every file opened from now on (plays, probes, playlists, covers) is held
            // to the roots on the descriptor itself, not only when it is queued.
            if !config.allowOutsideRoots, let roots = library?.roots { LocalFile.roots = roots }
            logger.info("library", metadata: ["roots": "\(library!.roots)", "database": "\(dbPath)", "songs": "\(librarySongs)"])
            if config.updateOnStart { _ = try? library?.update() }
        }
        restoreState()
    }

    /// Runs until SIGTERM/SIGINT (or `stop()`), then fades out, saves and cleans up.
    public func run() {
        SignalWake.install { [weak self] signal in
            guard let self else { return }
            if signal == SIGHUP {
                self.server.post { [weak self] in self?.reload() }
            } else {
                self.server.stop()
            }
        }
        SDNotify.send("READY=1\nSTATUS=listening on \(server.path)")
        logger.info("listening", metadata: ["socket.path": "\(server.path)", "state.path": "\(statePath)"])
        server.run()
        shutdown()
    }

    public func stop() { server.stop() }

    static func serverLimits(_ c: DaemonConfig) -> ControlServer.Limits {
        var l = ControlServer.Limits()
        l.maxConnections = c.maxConnections
        l.maxConnectionsPerPeer = c.maxConnectionsPerUser
        l.connectionTimeoutSeconds = c.connectionTimeout
        return l
    }

    /// SIGHUP: reads the config again and applies what can change while running (log
    /// level, limits, state options, ReplayGain, `library.allow_outside_roots`); logs
    /// the keys that need a restart. A config that does not parse changes nothing.
    /// Control thread.
    func reload() {
        guard let read = reloadConfig else { return }
        let new: DaemonConfig
        do { new = try read() } catch {
            let message = (error as? DaemonConfig.Error)?.message ?? "\(error)"
            logger.error("reload refused: the config has an error; nothing changed", metadata: ["error": "\(message)"])
            return
        }
        var restartNeeded: [String] = []
        func check<T: Equatable>(_ key: String, _ path: KeyPath<DaemonConfig, T>) {
            if config[keyPath: path] != new[keyPath: path] { restartNeeded.append(key) }
        }
        check("control.socket", \.socketPath); check("control.socket_mode", \.socketMode)
        check("control.socket_group", \.socketGroup); check("control.allowed_users", \.allowedUsers)
        check("control.allowed_groups", \.allowedGroups); check("output.device", \.outputDevice)
        check("output.fallback", \.outputFallback); check("output.feeds", \.feeds)
        check("output.buffer_time", \.bufferTime); check("output.period_time", \.periodTime)
        check("engine.ring_frames", \.ringFrames); check("library.music_roots", \.musicRoots)
        check("library.database", \.libraryDatabase); check("state.file", \.stateFile)
        check("output.format_change", \.formatChange); check("volume.mixer", \.mixer)
        check("volume.mixer_device", \.mixerDevice); check("volume.mixer_control", \.mixerControl)
        check("mpd.enabled", \.mpdEnabled); check("mpd.socket", \.mpdSocket); check("mpd.tcp", \.mpdTCP)
        check("mpd.password", \.mpdPassword); check("mpd.max_command_list_size", \.maxCommandListKiB)
        // What does change now.
        var applied = config
        applied.logLevel = new.logLevel
        applied.maxConnections = new.maxConnections
        applied.maxConnectionsPerUser = new.maxConnectionsPerUser
        applied.connectionTimeout = new.connectionTimeout
        applied.maxQueueLength = new.maxQueueLength
        applied.maxPlaylistBytes = new.maxPlaylistBytes
        applied.maxPlaylistEntries = new.maxPlaylistEntries
        applied.saveInterval = new.saveInterval
        applied.resume = new.resume
        applied.updateOnStart = new.updateOnStart
        applied.allowOutsideRoots = new.allowOutsideRoots
        applied.replayGain = new.replayGain
        applied.replayGainPreamp = new.replayGainPreamp
        applied.replayGainMissingPreamp = new.replayGainMissingPreamp
        applied.replayGainLimit = new.replayGainLimit
        config = applied
        LogLevelSwitch.set(config.logLevel)
        server.limits = Self.serverLimits(config)
        LocalFile.roots = (!config.allowOutsideRoots ? library?.roots : nil) ?? []
        var level = engine.status().level
        level.replayGain = ReplayGainMode(rawValue: config.replayGain) ?? .off
        level.preampDB = config.replayGainPreamp
        level.missingPreampDB = config.replayGainMissingPreamp
        level.preventClipping = config.replayGainLimit
        engine.setLevel(level)
        if restartNeeded.isEmpty {
            logger.notice("config reloaded")
        } else {
            logger.warning("config reloaded; these keys changed and take effect at the next start: \(restartNeeded.joined(separator: ", "))")
        }
    }

    private func shutdown() {
        SDNotify.send("STOPPING=1")
        saveState()
        engine.shutdown()
        logger.info("stopped")
    }

    // MARK: - Events

    /// Forwards engine events to subscribers. The engine calls it on its reader thread.
    final class EventSink: @unchecked Sendable {
        // @unchecked Sendable: `target` is set once, before the engine plays anything.
        weak var target: Daemon?
        func forward(_ e: PlaybackEngine.Event) { target?.publish(e) }
    }

    func publish(_ e: PlaybackEngine.Event) {
        switch e {
        case .trackStarted, .trackEnded, .stateChanged: notifyMPD(["player"])
        case .outputChanged: notifyMPD(["output"])
        default: break
        }
        let json: JSON
        switch e {
        case .trackStarted(let t): json = .object([("event", .string("track")), ("file", .string(t.path))] + Self.metadata(t))
        case .trackEnded(let p):
            json = .obj(("event", .string("track_end")), ("file", .string(p)))
            server?.post { [weak self] in self?.queueTrackEnded(p) }
        case .stateChanged(let s):
            json = .obj(("event", .string("state")), ("state", .string(s.rawValue)))
            // Stopped: hand the heap's free pages back (a long queue of damaged files
            // leaves ~2 MB of fragments otherwise; measured in BadMediaQueueTests).
            if s == .stopped { server?.post { ProcessTuning.releaseFreeMemory() } }
        case .underruns(let n): json = .obj(("event", .string("underrun")), ("underruns", .int(n)))
        case .corruptPackets(let p, let n): json = .obj(("event", .string("corrupt_packets")), ("file", .string(p)), ("count", .int(n)))
        case .error(let err):
            json = .obj(("event", .string("error")), ("code", .string(err.code.name)), ("message", .string(err.message)))
            if err.code == .outputFailed { server?.post { [weak self] in self?.outputLost(err) } }
        case .gaplessTransition(_, let to):
            // The `track_end` and `track` events went out already; the queue moves on.
            server?.post { [weak self] in self?.queueTrackStarted(to) }
            return
        case .loopWrapped(let pass, let remaining):
            json = .obj(("event", .string("loop_wrapped")), ("passes", .int(pass)), ("remaining", remaining.map(JSON.int) ?? .null))
        case .outputChanged(let name):
            // A feed's thread sends this; the engine's lock may be held by a reopen that
            // waits for that very thread, so the listing is made on the control thread.
            server?.post { [weak self] in
                guard let self, let o = self.engine.outputs().first(where: { $0.name == name }) else { return }
                self.server?.broadcast(.object([("event", .string("output"))] + Self.outputMembers(o)))
            }
            return
        }
        server?.broadcast(json)
    }

    func positionEvent() -> JSON {
        let s = engine.status()
        return .obj(("event", .string("position")), ("state", .string(s.state.rawValue)),
                    ("position", .number(s.positionSeconds)), ("position_frames", .int(s.positionFrames)))
    }

    /// Periodic work on the control thread: save state while playing.
    private func tick() {
        // The control loop is turning: tell systemd's watchdog (WatchdogSec). A wedged
        // control thread stops sending, and systemd restarts playd.
        SDNotify.watchdog()
        let now = monotonicNanoseconds()
        // While the output is lost the position stands still: the state saved before
        // it went is the one to keep.
        if recovery == nil && engine.status().state == .playing && now - lastSaved > UInt64(config.saveInterval) * 1_000_000_000 {
            saveState()
        }
        outputRecoveryTick()
        libraryTick()
    }

    // MARK: - Requests

    func handle(_ req: JSON, _ client: ControlServer.ClientContext) -> JSON {
        let id = req["id"]
        guard let cmd = req["cmd"] else { return errorReply(id: id, .badRequest, "missing \"cmd\"") }
        guard let name = cmd.stringValue else { return errorReply(id: id, .badRequest, "\"cmd\" must be a string") }
        do {
            let result: [(String, JSON)]
            switch name {
            case "ping": result = [("pong", .bool(true))]
            case "version": result = [("version", .string(Self.version)), ("protocol", .int(1))]
            case "status": result = statusMembers()
            case "play": result = req["path"] == nil ? try playQueue(req) : try play(req)
            case "add", "insert", "remove", "move", "clear", "queue", "next", "prev", "repeat", "shuffle", "consume":
                result = try queueRequest(name, req)
            case "pause", "resume", "toggle", "stop": transport(name); result = []
            case "seek": result = try seek(req)
            case "loop": result = try setLoop(req)
            case "direction": result = try setDirection(req)
            case "volume": result = try setVolume(req)
            case "mute": result = try setMute(req)
            case "cover": result = try cover()
            case "outputs": result = [("outputs", .array(engine.outputs().map { .object(Self.outputMembers($0)) }))]
            case "update", "search", "find", "list", "ls": result = try libraryRequest(name, req)
            case "output": result = try setOutput(req)
            case "subscribe":
                client.subscribed = true
                if let t = req["ticks"] {
                    guard let ms = t.numberValue, ms >= 50, ms <= 60_000 else {
                        throw RequestError(.badRequest, "\"ticks\" must be a number of milliseconds, 50…60000")
                    }
                    client.tickInterval = Int(ms)
                }
                result = [("subscribed", .bool(true))]
            case "unsubscribe":
                client.subscribed = false
                client.tickInterval = 0
                result = []
            default:
                return errorReply(id: id, .unknownCommand, "unknown command '\(name)'")
            }
            return .object([("id", id ?? .null), ("ok", .bool(true))] + result)
        } catch let e as RequestError {
            return errorReply(id: id, e.code, e.message)
        } catch let e as StreamError {
            return errorReply(id: id, code: e.code.name, e.message)
        } catch {
            return errorReply(id: id, .internal, "\(error)")
        }
    }

    struct RequestError: Error {
        var code: ProtocolErrorCode
        var message: String
        init(_ code: ProtocolErrorCode, _ message: String) { self.code = code; self.message = message }
    }

    private func play(_ req: JSON) throws -> [(String, JSON)] {
        guard let p = req["path"] else { throw RequestError(.badRequest, "play needs \"path\"") }
        guard let given = p.stringValue, !given.isEmpty else { throw RequestError(.badRequest, "\"path\" must be a non-empty string") }
        guard given.utf8.count <= 4096 else { throw RequestError(.badRequest, "\"path\" longer than 4096 bytes") }
        let path = try admit(given)
        if let at = req["at"] {
            let t = try timeArgument(at, field: "at")
            guard t.direction == 0 else { throw RequestError(.badRequest, "\"at\" cannot be relative") }
            switch t.value {
            case .seconds(let s): try engine.play(path: path, fromSeconds: s)
            case .frames(let f): try engine.play(path: path, from: f)
            }
        } else {
            try engine.play(path: path)
        }
        // A file played by path is outside the queue.
        queue.setCurrent(nil)
        pendingNext = nil
        saveState()
        return [("file", .string(path))]
    }

    private func seek(_ req: JSON) throws -> [(String, JSON)] {
        guard let to = req["to"] else { throw RequestError(.badRequest, "seek needs \"to\"") }
        let t = try timeArgument(to, field: "to")
        let s = engine.status()
        guard let track = s.track, s.state != .stopped else { throw RequestError(.notPlaying, "nothing is playing to seek in") }
        var frame = try frames(t, rate: track.sampleRate)
        if t.direction != 0 { frame = s.positionFrames + frame }
        let end = track.durationFrames ?? Int64.max
        frame = max(0, min(frame, end))
        try engine.seek(to: frame)
        return [("position_frames", .int(frame)), ("position", .number(FrameTime.seconds(frame, rate: track.sampleRate)))]
    }

    private func setLoop(_ req: JSON) throws -> [(String, JSON)] {
        let s = engine.status()
        if req["clear"]?.boolValue == true || req["off"]?.boolValue == true {
            if s.track != nil && s.state != .stopped { try engine.setLoop(nil) }
            saveState()
            server?.broadcast(.obj(("event", .string("loop")), ("loop", .null)))
            return [("loop", .null)]
        }
        guard let a = req["start"], let b = req["end"] else {
            throw RequestError(.badRequest, "loop needs \"start\" and \"end\", or \"clear\": true")
        }
        guard let track = s.track, s.state != .stopped else { throw RequestError(.notPlaying, "nothing is playing to loop in") }
        let ta = try timeArgument(a, field: "start"), tb = try timeArgument(b, field: "end")
        guard ta.direction == 0 && tb.direction == 0 else { throw RequestError(.badRequest, "loop points cannot be relative") }
        let start = try frames(ta, rate: track.sampleRate), end = try frames(tb, rate: track.sampleRate)
        var count: Int?
        if let c = req["count"], !c.isNull {
            guard let n = c.numberValue, n == n.rounded(), n >= 0, n < 1e9 else {
                throw RequestError(.invalidArgument, "\"count\" must be a whole number ≥ 0 (or null for forever); the current region is kept")
            }
            count = Int(n)
        }
        var pingPong = false
        if let p = req["ping_pong"], !p.isNull {
            guard let v = p.boolValue else { throw RequestError(.badRequest, "\"ping_pong\" must be true or false") }
            pingPong = v
        }
        try engine.setLoop(LoopRegion(start: start, end: end, count: count, pingPong: pingPong))
        saveState()
        let json = loopJSON(engine.status()) ?? .null
        server?.broadcast(.obj(("event", .string("loop")), ("loop", json)))
        return [("loop", json)]
    }

    private func setDirection(_ req: JSON) throws -> [(String, JSON)] {
        guard let v = req["direction"] else { throw RequestError(.badRequest, "direction needs \"direction\": \"forward\" or \"reverse\"") }
        guard let name = v.stringValue, let d = PlayDirection(rawValue: name) else {
            throw RequestError(.badRequest, "\"direction\" must be \"forward\" or \"reverse\"")
        }
        let before = engine.status().direction
        engine.setDirection(d)
        saveState()
        if before != d { server?.broadcast(.obj(("event", .string("direction")), ("direction", .string(d.rawValue)))) }
        return [("direction", .string(d.rawValue))]
    }

    /// The level as the user sees it: with a hardware mixer, its volume.
    func currentLevel() -> LevelSettings {
        var level = engine.status().level
        if hardwareMixer != nil { level.volume = hardwareVolume }
        return level
    }

    private func setVolume(_ req: JSON) throws -> [(String, JSON)] {
        if config.mixer == "none" && (req["set"] != nil || req["change"] != nil) {
            throw RequestError(.badRequest, "the volume is fixed (volume.mixer = \"none\")")
        }
        var level = currentLevel()
        if let v = req["set"] {
            guard let n = v.numberValue, n == n.rounded(), n >= 0, n <= 100 else {
                throw RequestError(.invalidArgument, "\"set\" must be a whole number 0…100")
            }
            level.volume = Int(n)
        } else if let v = req["change"] {
            guard let n = v.numberValue, n == n.rounded(), abs(n) <= 100 else {
                throw RequestError(.invalidArgument, "\"change\" must be a whole number −100…100")
            }
            level.volume = min(100, max(0, level.volume + Int(n)))
        }
        return try applyLevel(level)
    }

    private func setMute(_ req: JSON) throws -> [(String, JSON)] {
        var level = currentLevel()
        if let m = req["muted"], !m.isNull {
            guard let b = m.boolValue else { throw RequestError(.badRequest, "\"muted\" must be true or false") }
            level.muted = b
        } else {
            level.muted.toggle()
        }
        return try applyLevel(level)
    }

    @discardableResult
    func applyLevel(_ level: LevelSettings) throws -> [(String, JSON)] {
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
            server?.broadcast(.obj(("event", .string("volume")), ("volume", .int(Int64(level.volume))), ("muted", .bool(level.muted))))
            notifyMPD(["mixer"])
        }
        return [("volume", .int(Int64(level.volume))), ("muted", .bool(level.muted))]
    }

    /// One output as `outputs` and `output` events show it.
    static func outputMembers(_ o: PlaybackEngine.OutputReport) -> [(String, JSON)] {
        var m: [(String, JSON)] = [("name", .string(o.name)), ("kind", .string(o.kind)), ("spec", .string(o.spec)),
                                   ("enabled", .bool(o.enabled)), ("state", .string(o.state)),
                                   ("format", o.format.map(JSON.string) ?? .null)]
        if let w = o.framesWritten { m.append(("frames_written", .int(w))) }
        if let d = o.framesDropped { m.append(("frames_dropped", .int(d))) }
        m.append(("error", o.error.map(JSON.string) ?? .null))
        return m
    }

    private func setOutput(_ req: JSON) throws -> [(String, JSON)] {
        guard let name = req["name"]?.stringValue, !name.isEmpty else {
            throw RequestError(.badRequest, "output needs \"name\" (see `outputs`)")
        }
        guard let on = req["enabled"]?.boolValue else {
            throw RequestError(.badRequest, "output needs \"enabled\": true or false")
        }
        try engine.setOutputEnabled(name, on)
        saveState()
        guard let o = engine.outputs().first(where: { $0.name == name }) else { return [] }
        return Self.outputMembers(o)
    }

    /// The current track's embedded cover art, Base64 in `data` (`cover` null when none).
    private func cover() throws -> [(String, JSON)] {
        let s = engine.status()
        guard let t = s.track, s.state != .stopped else { throw RequestError(.notPlaying, "nothing is playing") }
        guard let art = try AudioDecoder.coverArt(path: t.path) else { return [("cover", .null)] }
        return [("cover", .obj(("mime", .string(art.mime)), ("size", .int(Int64(art.bytes.count))),
                               ("data", .string(Base64.encode(art.bytes)))))]
    }

    /// Tags and stream facts of a track, for `status` and `track` events.
    static func metadata(_ t: TrackInfo) -> [(String, JSON)] {
        var m: [(String, JSON)] = []
        func add(_ key: String, _ v: String?) { if let v { m.append((key, .string(v))) } }
        func add(_ key: String, _ v: Int?) { if let v { m.append((key, .int(Int64(v)))) } }
        add("title", t.title)
        add("artist", t.artist)
        add("album", t.album)
        add("album_artist", t.albumArtist)
        add("track", t.trackNumber)
        add("disc", t.discNumber)
        add("date", t.date)
        add("genre", t.genre)
        m += [("duration", t.durationSeconds.map(JSON.number) ?? .null),
              ("codec", .string(t.codec)), ("sample_rate", .int(Int64(t.sampleRate))), ("channels", .int(Int64(t.channels)))]
        add("bitrate", t.bitRate)
        add("bit_depth", t.bitsPerSample)
        m.append(("cover", t.cover.map { .obj(("mime", .string($0.mime)), ("size", .int(Int64($0.size)))) } ?? .null))
        return m
    }

    private func timeArgument(_ v: JSON, field: String) throws -> TimeArgument {
        let relative = v["relative"]?.boolValue ?? false
        if let s = v["seconds"]?.numberValue {
            guard s.isFinite else { throw RequestError(.badRequest, "\"\(field)\".seconds must be finite") }
            guard relative || s >= 0 else { throw RequestError(.invalidArgument, "\"\(field)\" is negative") }
            return TimeArgument(value: .seconds(abs(s)), direction: relative ? (s < 0 ? -1 : 1) : 0)
        }
        if let f = v["frames"]?.numberValue {
            guard f == f.rounded(), abs(f) < 9e15 else { throw RequestError(.badRequest, "\"\(field)\".frames must be a whole number") }
            guard relative || f >= 0 else { throw RequestError(.invalidArgument, "\"\(field)\" is negative") }
            return TimeArgument(value: .frames(Int64(abs(f))), direction: relative ? (f < 0 ? -1 : 1) : 0)
        }
        if let s = v.numberValue {
            guard s.isFinite, s >= 0 else { throw RequestError(.invalidArgument, "\"\(field)\" must be a non-negative number of seconds") }
            return TimeArgument(value: .seconds(s))
        }
        if let text = v.stringValue {
            do { return try TimeArgument(parsing: text) } catch { throw RequestError(.badRequest, "\"\(field)\": \(error)") }
        }
        throw RequestError(.badRequest, "\"\(field)\" must be seconds (number), {\"seconds\": …} or {\"frames\": …}")
    }

    /// Signed frame count of a time argument.
    private func frames(_ t: TimeArgument, rate: Int) throws -> Int64 {
        let sign: Int64 = t.direction < 0 ? -1 : 1
        switch t.value {
        case .seconds(let s):
            guard let f = FrameTime.checkedFrames(seconds: s, rate: rate) else {
                throw RequestError(.badRequest, "\(s) s is out of range")
            }
            return sign * f
        case .frames(let f):
            guard f <= FrameTime.maxFrames else { throw RequestError(.badRequest, "\(f) frames is out of range") }
            return sign * f
        }
    }

    private func loopJSON(_ s: PlaybackEngine.Status) -> JSON? {
        guard let l = s.loop, let rate = s.track?.sampleRate else { return nil }
        return .obj(("start", .number(FrameTime.seconds(l.start, rate: rate))), ("end", .number(FrameTime.seconds(l.end, rate: rate))),
                    ("start_frames", .int(l.start)), ("end_frames", .int(l.end)),
                    ("count", l.count.map(JSON.int) ?? .null), ("ping_pong", .bool(l.pingPong)),
                    ("passes", .int(s.loopPasses)), ("remaining", s.loopRemaining.map(JSON.int) ?? .null))
    }

    func statusMembers() -> [(String, JSON)] {
        let s = playerStatus()
        var m: [(String, JSON)] = [("state", .string(s.state.rawValue))]
        if let t = s.track {
            m += [("file", .string(t.path)),
                  ("position", .number(s.positionSeconds)),
                  ("duration", t.durationSeconds.map(JSON.number) ?? .null),
                  ("position_frames", .int(s.positionFrames)),
                  ("duration_frames", t.durationFrames.map(JSON.int) ?? .null),
                  ("duration_is_estimate", .bool(t.durationIsEstimate)),
]
            m += Self.metadata(t).filter { $0.0 != "duration" }
            m.append(("loop", loopJSON(s) ?? .null))
        } else {
            m += [("file", .null), ("position", .number(0)), ("duration", .null), ("position_frames", .int(0)),
                  ("duration_frames", .null), ("loop", .null)]
        }
        m.append(("direction", .string(s.direction.rawValue)))
        m.append(("queue", queueStatusJSON()))
        m.append(("library", libraryStatusJSON()))
        if let o = s.output {
            m.append(("output", .obj(("device", .string(o.device)), ("format", .string(o.sampleFormat.rawValue)),
                                     ("sample_rate", .int(o.pcm.sampleRate)), ("channels", .int(o.pcm.channels)),
                                     ("period_frames", .int(o.periodFrames)), ("buffer_frames", .int(o.bufferFrames)))))
        } else {
            m.append(("output", .null))
        }
        m += [("volume", .int(Int64(currentLevel().volume))), ("muted", .bool(s.level.muted)),
              ("mixer", .string(hardwareMixer != nil ? "hardware" : config.mixer == "none" ? "none" : "software")),
              ("replay_gain", .obj(("mode", .string(s.level.replayGain.rawValue)),
                                   ("applied_db", s.replayGainAppliedDB.map(JSON.number) ?? .null),
                                   ("track_gain_db", s.replayGain.trackGainDB.map(JSON.number) ?? .null),
                                   ("album_gain_db", s.replayGain.albumGainDB.map(JSON.number) ?? .null))),
              ("underruns", .int(s.underruns)), ("device_xruns", .int(s.deviceXruns)),
              ("corrupt_packets", .int(s.corruptPackets)),
              ("clients_dropped", .int(server?.droppedSlowClients.load(ordering: .relaxed) ?? 0)),
              ("clients_refused", .int(server?.refusedClients.load(ordering: .relaxed) ?? 0)),
              ("clients_connected", .int(server?.connectedClients.load(ordering: .relaxed) ?? 0)),
              ("clients_over_limits", .int(server?.refusedByLimits.load(ordering: .relaxed) ?? 0)),
              ("clients_timed_out", .int(server?.timedOutClients.load(ordering: .relaxed) ?? 0)),
              ("output_error", outputErrorJSON())]
        if let ns = s.lastStartLatencyNanoseconds {
            // From the last play/seek request to its first frame written to the output.
            m.append(("start_latency_ms", .number(Double(ns) / 1e6)))
        }
        return m
    }

    // MARK: - State

    func saveState() {
        guard !restoring else { return }
        lastSaved = monotonicNanoseconds()
        let s = engine.status()
        if let kept = unrestored, s.track == nil {
            // The track saved before could not be played at start: keep it.
            var state = kept
            state.queue = queue
            state.volume = currentLevel().volume
            state.muted = s.level.muted
            do { try StateStore.save(state, to: statePath) } catch {
                logger.error("cannot save state", metadata: ["state.path": "\(statePath)", "error": "\(error)"])
            }
            return
        }
        unrestored = nil
        var loop = s.loop
        if let c = s.loopRemaining { loop?.count = Int(c) }
        let state = SavedState(file: s.track?.path, positionFrames: s.positionFrames, sampleRate: s.track?.sampleRate,
                               state: s.state.rawValue, loop: loop, direction: s.direction,
                               volume: currentLevel().volume, muted: s.level.muted, queue: queue,
                               disabledOutputs: engine.outputs().filter { !$0.enabled }.map(\.name))
        do {
            try StateStore.save(state, to: statePath)
        } catch {
            logger.error("cannot save state", metadata: ["state.path": "\(statePath)", "error": "\(error)"])
        }
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
        queue = st.queue
        engine.setDirection(st.direction)
        for name in st.disabledOutputs {
            // An output no longer configured is forgotten.
            try? engine.setOutputEnabled(name, false)
        }
        var level = currentLevel()
        // A hardware mixer keeps its own level (others may set it); the software one is ours.
        if hardwareMixer == nil { level.volume = st.volume }
        level.muted = st.muted
        _ = try? applyLevel(level)
        guard let file = st.file, config.resume != "stopped", st.state != "stopped" else { return }
        do {
            try engine.play(path: file, from: st.positionFrames, paused: config.resume != "playing")
            if let l = st.loop {
                do { try engine.setLoop(l) } catch { logger.warning("cannot restore the loop region", metadata: ["error": "\(error)"]) }
            }
            logger.info("restored", metadata: ["track.path": "\(file)", "position.frames": "\(st.positionFrames)"])
        } catch {
            logger.warning("cannot restore the saved track", metadata: ["track.path": "\(file)", "error": "\(error)"])
            unrestored = st
        }
    }
}
