import ArgumentParser
import CoreStream
import CLinux
import Logging
import PlaydDaemon
import PlaydProtocol
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Set by SIGINT/SIGTERM.
private let stopRequested = Atomic<Bool>(false)
/// Wakes the one-shot player's main thread: end of track, or a signal.
private let mainWake = Atomic<Int32>(-1)

@main
struct Playd: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "playd",
        abstract: "A real-time streaming playback daemon: exact to the sample, flat in memory.",
        discussion: """
        With no FILE, runs as a daemon in the foreground: reads the config (--config, else
        $XDG_CONFIG_HOME/playd/config.toml or /etc/playd/config.toml), listens on its
        control socket (see playctl and docs/protocol.md) and plays what it is told.
        SIGTERM/SIGINT fade out, save state and exit.

        With FILEs (or --demo), plays them in order through the output and exits.

        Output specs: alsa:DEVICE (default alsa:default, falling back hw:X → plughw:X →
        default), null (discard, paced like a sound card), wav:PATH (capture to a float
        WAV). Options after '?': buffer_time, period_time (ms), pace=off.
        The default, auto, is alsa:default, or null with a warning when no sound card opens.
        """,
        version: PlaydVersion.string)

    @Option(name: .long, help: "Config file (daemon mode).")
    var config: String?

    @Option(name: .long, help: "Control socket path (overrides the config).")
    var socket: String?

    @Option(name: .long, help: "Output spec: auto, alsa:DEVICE, null, wav:PATH (overrides the config).")
    var output: String?

    @Option(name: .long, help: "Device buffer, milliseconds.")
    var bufferTime: Int?

    @Option(name: .long, help: "Device period, milliseconds.")
    var periodTime: Int?

    @Option(name: .long, help: "trace, debug, info, notice, warning, error or critical (overrides the config).")
    var logLevel: String?

    @Flag(name: .long, help: "Play the generated demo track.")
    var demo = false

    @Option(name: .long, help: "Start the first file at TIME: 83.5, 1:23.5, 1:02:03 (seconds) or 123456f (frames).")
    var start: String?

    @Flag(name: .long, help: "Play the files backwards (from their end, or from --start down to 0).")
    var reverse = false

    @Argument(help: "Audio files to play.")
    var files: [String] = []

    /// The arguments as bytes, escaped as ``PathBytes`` says (a FILE with a name that
    /// is not UTF-8 can be played).
    static func main() {
        main(ProcessArguments.afterName())
    }

    func run() throws {
        ProcessTuning.tuneMalloc()
        if files.isEmpty && !demo { return try runDaemon() }
        // TIME as playctl takes it, checked before anything starts.
        var startAt: TimeArgument.Value?
        if let start {
            do {
                let t = try TimeArgument(parsing: start)
                guard t.direction == 0 else { throw ValidationError("--start cannot be relative: '\(start)'") }
                startAt = t.value
            } catch let e as TimeArgument.ParseError {
                throw ValidationError("--start: \(e.description)")
            }
        }
        let level = try Self.level(logLevel ?? "info")
        Self.bootstrapLogging(level)
        let logger = Logger(label: "playd")
        let output = self.output ?? "auto"
        let bufferTime = self.bufferTime ?? OutputSpec.defaultBufferMillis
        let periodTime = self.periodTime ?? OutputSpec.defaultPeriodMillis
        var playlist = files
        if demo || playlist.isEmpty {
            let dir = String(cString: getenv("TMPDIR") ?? strdup("/tmp"))
            let path = dir + "/playd-demo-\(getuid()).wav"
            try DemoTrack.write(to: path)
            logger.info("playing the generated demo track", metadata: ["track.path": "\(path)"])
            playlist.append(path)
        }

        var config = PlaybackEngine.Configuration()
        config.output = output
        config.bufferMillis = bufferTime
        config.periodMillis = periodTime
        if output != "auto" {
            do { _ = try OutputSpec.make(output) } catch { throw ValidationError(error.message) }
        }
        mainWake.store(EventFD.make(), ordering: .relaxed)
        let engine = PlaybackEngine(configuration: config, logger: logger) { event in
            if case .stateChanged(.stopped) = event { EventFD.signal(mainWake.load(ordering: .relaxed)) }
        }
        // The handlers only store a flag and write an eventfd (async-signal-safe).
        signal(SIGINT) { _ in stopRequested.store(true, ordering: .relaxed); EventFD.signal(mainWake.load(ordering: .relaxed)) }
        signal(SIGTERM) { _ in stopRequested.store(true, ordering: .relaxed); EventFD.signal(mainWake.load(ordering: .relaxed)) }
        // A parent may have started us with these blocked (a test runner, some
        // supervisors): then Ctrl-C never arrived and the files played to the end.
        _ = clinux_unblock_termination_signals()

        if reverse { engine.setDirection(.reverse) }
        var failures = 0
        for (i, file) in playlist.enumerated() {
            do {
                if i == 0, let startAt {
                    switch startAt {
                    case .seconds(let s): try engine.play(path: file, fromSeconds: s)
                    case .frames(let f): try engine.play(path: file, from: f)
                    }
                } else {
                    try engine.play(path: file)
                }
            } catch {
                logger.error("cannot play", metadata: ["track.path": "\(file)", "error.code": "\(error.code)", "error": "\(error.message)"])
                failures += 1
                continue
            }
            if let out = engine.status().output {
                print("playd: playing \(file) → \(out)")
            }
            // Sleep until the track ends or a signal arrives (no polling).
            while engine.status().state != .stopped && !stopRequested.load(ordering: .relaxed) {
                EventFD.wait(mainWake.load(ordering: .relaxed), timeoutNanoseconds: -1)
            }
            if stopRequested.load(ordering: .relaxed) { break }
        }
        let s = engine.status()
        engine.shutdown()
        if s.underruns > 0 { logger.warning("underruns during playback", metadata: ["underruns.total": "\(s.underruns)"]) }
        print("playd: done, \(s.underruns) underruns, \(s.deviceXruns) device xruns")
        if failures == playlist.count { throw ExitCode(1) }
    }
}

extension Playd {
    static func level(_ name: String) throws -> Logger.Level {
        guard let level = Logger.Level(rawValue: name) else {
            throw ValidationError("log level must be one of trace, debug, info, notice, warning, error, critical")
        }
        return level
    }

    static func bootstrapLogging(_ level: Logger.Level) {
        LogLevelSwitch.set(level)
        // The level lives in LogLevelSwitch, so a reload (SIGHUP) changes it everywhere.
        // Under systemd, lines for the journal: with their priority, without a time.
        let journal = JournalLogHandler.journalIsStderr
        LoggingSystem.bootstrap { label in
            SwitchedLogHandler(journal ? JournalLogHandler(label: label) : StreamLogHandler.standardError(label: label))
        }
    }

    /// Daemon mode: config, flags over config, then serve until SIGTERM.
    func runDaemon() throws {
        var (cfg, path): (DaemonConfig, String?)
        do { (cfg, path) = try DaemonConfig.load(path: config) } catch {
            // A config error is not a usage error: the file, line and key, no usage
            // text, and EX_CONFIG (78), which systemd shows as "config".
            SDNotify.send("STATUS=config error: \(error.message)")
            var text = "playd: \(error.message)\n"
            _ = text.withUTF8 { write(2, $0.baseAddress, $0.count) }
            Glibc.exit(78)
        }
        if let s = socket { cfg.socketPath = s }
        if let o = output { cfg.outputDevice = o }
        if let b = bufferTime { cfg.bufferTime = b }
        if let p = periodTime { cfg.periodTime = p }
        if let l = logLevel { cfg.logLevel = l }
        Self.bootstrapLogging(try Self.level(cfg.logLevel))
        let logger = Logger(label: "playd")
        logger.info("starting", metadata: ["version": "\(Daemon.version)", "config.path": "\(path ?? "(defaults)")"])
        let daemon: Daemon
        do {
            daemon = try Daemon(config: cfg, logger: logger)
        } catch {
            let message = (error as? StreamError)?.message ?? "\(error)"
            SDNotify.send("STATUS=failed to start: \(message)")
            logger.critical("cannot start", metadata: ["error": "\(message)"])
            throw ExitCode(1)
        }
        // SIGHUP reads the same file again, with the same flags over it.
        let flags = self
        daemon.reloadConfig = {
            var (c, _) = try DaemonConfig.load(path: path)
            if let s = flags.socket { c.socketPath = s }
            if let o = flags.output { c.outputDevice = o }
            if let b = flags.bufferTime { c.bufferTime = b }
            if let p = flags.periodTime { c.periodTime = p }
            if let l = flags.logLevel { c.logLevel = l }
            return c
        }
        daemon.run()
    }
}

enum PlaydVersion {
    static let string = Daemon.version
}
