import ArgumentParser
import CoreStream
import Logging
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Set by SIGINT/SIGTERM; polled by the main loop.
private let stopRequested = Atomic<Bool>(false)

@main
struct Playd: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "playd",
        abstract: "A real-time streaming playback daemon: exact to the sample, flat in memory.",
        discussion: """
        Plays the FILEs in order through the output and exits. With no FILE (or with
        --demo) it plays a short generated demo track.

        Output specs: alsa:DEVICE (default alsa:default, falling back hw:X → plughw:X →
        default), null (discard, paced like a sound card), wav:PATH (capture to a float
        WAV). Options after '?': buffer_time, period_time (ms), pace=off.
        The default, auto, is alsa:default, or null with a warning when no sound card opens.
        """,
        version: PlaydVersion.string)

    @Option(name: .long, help: "Output spec: auto, alsa:DEVICE, null, wav:PATH.")
    var output: String = "auto"

    @Option(name: .long, help: "Device buffer, milliseconds.")
    var bufferTime: Int = OutputSpec.defaultBufferMillis

    @Option(name: .long, help: "Device period, milliseconds.")
    var periodTime: Int = OutputSpec.defaultPeriodMillis

    @Option(name: .long, help: "trace, debug, info, notice, warning, error or critical.")
    var logLevel: String = "info"

    @Flag(name: .long, help: "Play the generated demo track.")
    var demo = false

    @Option(name: .long, help: "Start the first file at this many seconds.")
    var start: Double = 0

    @Argument(help: "Audio files to play.")
    var files: [String] = []

    func run() throws {
        ProcessTuning.limitMallocArenas()
        guard let level = Logger.Level(rawValue: logLevel) else {
            throw ValidationError("--log-level must be one of trace, debug, info, notice, warning, error, critical")
        }
        LoggingSystem.bootstrap { label in
            var h = StreamLogHandler.standardError(label: label)
            h.logLevel = level
            return h
        }
        let logger = Logger(label: "playd")
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
        let engine = PlaybackEngine(configuration: config, logger: logger)
        signal(SIGINT) { _ in stopRequested.store(true, ordering: .relaxed) }
        signal(SIGTERM) { _ in stopRequested.store(true, ordering: .relaxed) }

        var failures = 0
        for (i, file) in playlist.enumerated() {
            do {
                if i == 0 && start > 0 {
                    try engine.play(path: file, fromSeconds: start)
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
            while engine.status().state != .stopped && !stopRequested.load(ordering: .relaxed) {
                usleep(50_000)
            }
            if stopRequested.load(ordering: .relaxed) { break }
        }
        let s = engine.status()
        engine.shutdown()
        if s.underruns > 0 { logger.warning("underruns during playback", metadata: ["underruns.total": "\(s.underruns)"]) }
        if failures == playlist.count { throw ExitCode(1) }
    }
}

enum PlaydVersion {
    static let string = "0.1.0"
}
