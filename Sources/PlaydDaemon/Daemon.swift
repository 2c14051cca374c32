import CoreStream
import Logging
import PlaydProtocol
import PlaydSessions
#if canImport(Glibc)
import Glibc
#endif

/// playd as a daemon: wiring only. The ``Player`` (engine, queue, library, state), the
/// byte server with a JSON listener and MPD's, the notifications from the player to
/// every session, signals, reload and systemd readiness.
public final class Daemon: @unchecked Sendable {
    // @unchecked Sendable: `player` and the server's state are touched only on the
    // control thread (the server's `run()`), apart from `init` before it starts and
    // `shutdown` after it has stopped; `stop()` only calls the server's thread-safe stop.

    public static let version = "0.2.0"

    let logger: Logger
    /// Reads the config again for a reload (the file and the command line's flags).
    public var reloadConfig: (() throws -> DaemonConfig)?
    let player: Player
    var server: ControlServer!
    /// The Zeroconf announcement of the MPD TCP listener, if any. Control thread.
    var zeroconf: ZeroconfAnnouncer?
    /// The web remote's listener (`http.listen`), if any. Set in `init`.
    var web: WebServer?

    /// `commands`: the command table (a test adds its own specs to it).
    public init(config: DaemonConfig, logger: Logger, commands: CommandTable = CommandTable()) throws {
        self.logger = logger
        if !config.schedule.timezone.isEmpty {
            // The schedule's zone is the process's (glibc's localtime reads TZ), set
            // before the player's threads start; the config checked it names a zone.
            setenv("TZ", config.schedule.timezone, 1)
            tzset()
        }
        player = try Player(config: config, logger: logger, commands: commands)
        let player = self.player
        var counters: () -> ServerCounters = { ServerCounters() }
        let json = ControlServer.Listener(name: "control",
                                          makeSession: { JSONSession(player: player, counters: counters) },
                                          refusal: JSONSession.refusal)
        server = try ControlServer(path: config.resolvedSocketPath, mode: config.socketMode, group: config.socketGroup,
                                   listener: json, onTick: { [unowned self] in self.tick() })
        let server = self.server!
        counters = { [unowned server] in
            var c = ServerCounters()
            c.dropped = server.droppedSlowClients.load(ordering: .relaxed)
            c.refused = server.refusedClients.load(ordering: .relaxed)
            c.connected = server.connectedClients.load(ordering: .relaxed)
            c.overLimits = server.refusedByLimits.load(ordering: .relaxed)
            c.timedOut = server.timedOutClients.load(ordering: .relaxed)
            return c
        }
        player.post = { [weak server] work in server?.post(work) }
        player.onNotify = { [unowned self, unowned server] changes, events in
            Self.notify(server, self.web, player, changes, events)
        }
        server.tickDue = { [unowned player] in player.scheduleDue }
        server.afterTurn = { [unowned self] in
            // Parked web requests run again before the flush, as the sockets' do.
            self.web?.resumeIfWanted()
            player.flush()
        }
        player.resumeParked = { [unowned self, unowned server] in
            server.resumeParked()
            self.web?.resumeParked()
        }
        do {
            server.access = try AccessPolicy.resolve(users: config.allowedUsers, groups: config.allowedGroups)
        } catch {
            throw DaemonConfig.Error(message: error.message)
        }
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
                // At debug: a status bar polling every second would fill the journal.
                logger.debug("client connected", metadata: meta)
            }
        }
        if !server.access.isOpen && !config.mpdTCP.isEmpty {
            logger.warning("mpd.bind: TCP clients carry no credentials, so with control.allowed_users/allowed_groups set they are all refused")
        }
        if config.mpdEnabled {
            let password = config.mpdPassword.isEmpty ? nil : config.mpdPassword
            let listBytes = config.maxCommandListKiB * 1024
            // One message board for every MPD connection (subscribe/sendmessage). A
            // wake-up is posted: it runs after the command that caused it has replied.
            let channels = MessageChannels()
            // The player reads the `announce` channel: an MPD client announces with
            // `sendmessage announce "FILE|URL"` (docs/announcements.md).
            let announceBox = channels.register(owner: player)
            _ = channels.subscribe(announceBox, to: Player.announceChannel)
            let board = UncheckedSendable((channels, announceBox))
            channels.wake = { [unowned server, unowned player] owner, subsystem in
                if owner === player {
                    // Posted: it runs after the `sendmessage` has replied.
                    server.post { [unowned player] in
                        for m in board.value.0.take(board.value.1) { MPDCommands.announceMessage(player, m.text) }
                    }
                    return
                }
                let target = UncheckedSendable(owner)
                server.post { [unowned server] in
                    server.notifySessions { session in
                        guard let m = session as? MPDSession, target.value == nil || target.value === m else { return "" }
                        return m.notify([subsystem])
                    }
                }
            }
            func listener(_ name: String) -> ControlServer.Listener {
                ControlServer.Listener(name: name, makeSession: {
                    MPDCommands.session(player, password: password, maxCommandListBytes: listBytes, channels: channels)
                }, refusal: MPDSession.refusal)
            }
            try server.addListener(path: config.resolvedMPDSocketPath, mode: config.socketMode, group: config.socketGroup, listener("mpd"))
            if !config.mpdTCP.isEmpty {
                try server.addListener(tcp: config.mpdTCP, listener("mpd-tcp"))
                if config.zeroconf, let port = config.mpdTCP.split(separator: ":").last.flatMap({ UInt16($0) }) {
                    let name = ZeroconfName.expand(config.zeroconfName, host: ZeroconfAnnouncer.hostName())
                    zeroconf = ZeroconfAnnouncer(name: name, port: port, logger: logger)
                }
            }
        }
        if !config.httpListen.isEmpty {
            var settings = WebServer.Settings()
            settings.listen = config.httpListen
            settings.password = config.httpPassword
            if !config.httpPasswordFile.isEmpty {
                guard let bytes = WebServer.readSmallFile(config.httpPasswordFile),
                      let line = String(decoding: bytes, as: UTF8.self).split(separator: "\n").first.map(String.init),
                      !line.isEmpty else {
                    throw DaemonConfig.Error(message: "http.password_file: \(config.httpPasswordFile): not a readable file whose first line is the password")
                }
                var password = line
                while let last = password.last, last == " " || last == "\r" || last == "\t" { password.removeLast() }
                settings.password = password
            }
            settings.webRoot = config.httpWebRoot
            settings.maxConnections = config.maxConnections
            settings.maxConnectionsPerAddress = config.maxConnectionsPerUser
            settings.timeoutSeconds = config.connectionTimeout
            settings.hub = player.streamHub
            do {
                web = try WebServer(settings, makeSession: { JSONSession(player: player, counters: counters) },
                                    post: { [unowned server] work in server.post(work) },
                                    log: { [logger] m in logger.warning("\(m)") })
            } catch {
                throw DaemonConfig.Error(message: error.message)
            }
            logger.info("web remote listening", metadata: ["http.listen": "\(config.httpListen.joined(separator: ", "))"])
        }
        player.restore()
    }

    /// The one place notifications go out: MPD sessions hear the changed subsystems,
    /// JSON subscribers and the web remote's event streams the events (encoded once
    /// for all of them).
    static func notify(_ server: ControlServer, _ web: WebServer?, _ player: Player, _ changes: Changes, _ events: [PlayerEvent]) {
        let n = Notification(player, changes, events)
        server.notifySessions(n.text)
        web?.notify(n.lines)
        guard !events.isEmpty else { return }
        let now = nowPlayingParts(player)
        player.streamHub?.setTitle(artist: now.artist, title: now.title)
        player.engine.setOutputMedia(artist: now.artist, title: now.title, album: now.album)
    }

    /// "Artist - Title" of what plays, for the listen streams' ICY metadata: a radio's
    /// own ICY title, else the tags (the file's name without them); empty when stopped.
    static func nowPlaying(_ p: Player) -> String {
        let now = nowPlayingParts(p)
        return [now.artist, now.title].compactMap { $0 }.joined(separator: " - ")
    }

    /// What plays as artist, title and album (the listen streams' ICY title, the
    /// PipeWire stream's media properties); all nil when stopped.
    static func nowPlayingParts(_ p: Player) -> (artist: String?, title: String?, album: String?) {
        let s = p.engine.status()
        guard let t = s.track, s.state != .stopped else { return (nil, nil, nil) }
        if NetworkInput.isStreamURL(t.path), let parts = p.streamTitleParts {
            return (parts.artist, parts.title, nil)
        }
        var title: String?, artist: String?, album: String?
        for (k, v) in JSONEncoding.metadata(t) {
            if k == "title" { title = v.stringValue }
            if k == "artist" { artist = v.stringValue }
            if k == "album" { album = v.stringValue }
        }
        return (artist, title ?? String(t.path.split(separator: "/").last ?? ""), album)
    }

    /// What one turn's changes tell each kind of session: MPD's idle subsystems, JSON
    /// subscribers' event lines (encoded once for all of them).
    struct Notification {
        let subsystems: Set<String>
        let lines: String
        init(_ player: Player, _ changes: Changes, _ events: [PlayerEvent]) {
            subsystems = changes.mpdSubsystems
            lines = events.compactMap { JSONEncoding.event($0, player)?.text }.map { $0 + "\n" }.joined()
        }
        func text(_ session: LineSession) -> String {
            switch session {
            case let m as MPDSession: return subsystems.isEmpty ? "" : m.notify(subsystems)
            case let j as JSONSession: return j.events(lines)
            default: return ""
            }
        }
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
        logger.info("listening", metadata: ["socket.path": "\(server.path)", "state.path": "\(player.statePath)"])
        server.run()
        SDNotify.send("STOPPING=1")
        zeroconf = nil   // withdraws the announcement before the sockets go
        web?.stop()      // its threads are answered and joined before the player goes
        player.shutdown()
        logger.info("stopped")
    }

    public func stop() { server.stop() }

    /// Periodic work on the control thread.
    private func tick() {
        // The control loop is turning: tell systemd's watchdog (WatchdogSec). A wedged
        // control thread stops sending, and systemd restarts playd.
        SDNotify.watchdog()
        player.tick()
        zeroconf?.poll()
    }

    static func serverLimits(_ c: DaemonConfig) -> ControlServer.Limits {
        var l = ControlServer.Limits()
        l.maxConnections = c.maxConnections
        l.maxConnectionsPerPeer = c.maxConnectionsPerUser
        l.connectionTimeoutSeconds = c.connectionTimeout
        return l
    }

    /// SIGHUP: reads the config again and applies every key that can change while
    /// running; the keys ``DaemonConfig/keys`` marks `.restart` keep their running values and are named
    /// (log and systemd `STATUS=`). A config that does not parse changes nothing.
    ///
    /// Every key applies unless it is listed as restart-only: the reverse (a list of the
    /// keys that apply) let the six `streams.*` keys fall through, `allowed_hosts`
    /// included, while the log said "config reloaded" (issue 38). Control thread.
    func reload() {
        guard let read = reloadConfig else { return }
        var applied: DaemonConfig
        do { applied = try read() } catch {
            let message = (error as? DaemonConfig.Error)?.message ?? "\(error)"
            logger.error("reload refused: the config has an error; nothing changed", metadata: ["error": "\(message)"])
            return
        }
        let restartNeeded = Self.keepRestartOnlyKeys(running: player.config, into: &applied)
        player.apply(applied)
        LogLevelSwitch.set(applied.logLevel)
        server.limits = Self.serverLimits(applied)
        if restartNeeded.isEmpty {
            logger.notice("config reloaded")
            SDNotify.send("STATUS=config reloaded; listening on \(server.path)")
        } else {
            let keys = restartNeeded.joined(separator: ", ")
            logger.warning("config reloaded; these keys changed and take effect at the next start: \(keys)")
            SDNotify.send("STATUS=config reloaded; restart to apply: \(keys)")
        }
    }

    /// The keys a running daemon cannot change (``DaemonConfig/keys`` marks them
    /// `.restart`: sockets and their access, the output and its buffers, the ring, the
    /// library's roots and files, the mixer, the MPD listeners). Each one changed in
    /// `new` is set back to its `running` value, and named in the result (in the
    /// table's order).
    static func keepRestartOnlyKeys(running: DaemonConfig, into new: inout DaemonConfig) -> [String] {
        var changed: [String] = []
        for k in DaemonConfig.keys where k.reload == .restart && k.differs(running, new) {
            changed.append(k.name)
            k.copy(&new, running)
        }
        // The zone is the process's TZ, set once at start.
        if running.schedule.timezone != new.schedule.timezone {
            changed.append("schedule.timezone")
            new.schedule.timezone = running.schedule.timezone
        }
        return changed
    }
}

/// Hands a value the control thread owns to work posted back to the control thread.
private struct UncheckedSendable<T>: @unchecked Sendable {
    // @unchecked: made and used on the control thread only (posted work runs there).
    let value: T
    init(_ value: T) { self.value = value }
}
