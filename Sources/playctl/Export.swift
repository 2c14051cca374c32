import ArgumentParser
import CLinux
import CoreStream
import PlaydProtocol
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Set by SIGINT/SIGTERM while exporting.
private let exportCancelled = Atomic<Bool>(false)

struct Export: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Render a track or a region to WAV, FLAC or AAC in M4A.",
        discussion: """
        playctl export INPUT OUTPUT, or playctl export --current OUTPUT for the daemon's
        track and loop region. Runs in this process at lowered priority, never inside the
        daemon. Writes a temporary file and renames it at the end: Ctrl-C or a failure
        leaves nothing behind. --format defaults from OUTPUT's extension.
        """)
    @OptionGroup var connection: Connection
    @Argument(help: "INPUT OUTPUT (or just OUTPUT with --current).", completion: .file()) var paths: [String]
    @Flag(name: .long, help: "Export the daemon's current track (and its loop region).") var current = false
    @Option(name: .long, help: "Start at TIME (e.g. 1:23.5 or 123456f).") var from: String?
    @Option(name: .long, help: "End before TIME.") var to: String?
    @Option(name: .long, help: "wav, flac or m4a.") var format: String?
    @Option(name: .long, help: "Output sample rate (resampled).") var rate: Int?
    @Option(name: .long, help: "Output channels.") var channels: Int?
    @Option(name: .long, help: "16, 24 or 32f (WAV); 16 or 24 (FLAC).") var bits: String?
    @Option(name: .long, help: "AAC bit rate, e.g. 256k.") var bitrate: String = "256k"
    @Flag(name: .long, help: "Replace OUTPUT if it exists.") var force = false

    func run() throws {
        _ = setpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0, 10)  // never compete with playback
        var input: String
        var output: String
        var regionFrom: Int64?
        var regionTo: Int64?
        if current {
            guard paths.count == 1 else { throw ValidationError("with --current give only OUTPUT") }
            let s = try connection.send("status")
            guard let file = s["file"]?.stringValue else { fail("nothing is playing to export", code: 1) }
            input = file
            output = absolute(paths[0])
            if let l = s["loop"], !l.isNull, let a = l["start_frames"]?.numberValue, let b = l["end_frames"]?.numberValue {
                regionFrom = Int64(a)
                regionTo = Int64(b)
            }
        } else {
            guard paths.count == 2 else { throw ValidationError("give INPUT and OUTPUT") }
            input = absolute(paths[0])
            output = absolute(paths[1])
        }
        guard let fmt = format.map({ ExportOptions.Format(rawValue: $0) }) ?? ExportOptions.Format(path: output) else {
            fail("\(format.map { "unknown format '\($0)'" } ?? "cannot tell the format from \(output)"): use --format wav, flac or m4a", code: 2)
        }
        var options = ExportOptions(input: input, output: output, format: fmt)
        options.sampleRate = rate
        options.channels = channels
        options.force = force
        if let b = bits {
            guard let v = ExportOptions.Bits(rawValue: b) else { fail("--bits must be 16, 24 or 32f", code: 2) }
            options.bits = v
        }
        options.bitRate = try Self.parseBitRate(bitrate)
        do {
            if from != nil || to != nil {
                let sourceRate = try AudioDecoder(path: input).info.sampleRate
                if let f = from { regionFrom = try Self.frames(f, rate: sourceRate) }
                if let t = to { regionTo = try Self.frames(t, rate: sourceRate) }
            }
            options.from = regionFrom
            options.to = regionTo
            let exporter = try Exporter(options)
            signal(SIGINT) { _ in exportCancelled.store(true, ordering: .relaxed) }
            signal(SIGTERM) { _ in exportCancelled.store(true, ordering: .relaxed) }
            // A parent may have left them blocked (a test runner does): Ctrl-C must work.
            _ = clinux_unblock_termination_signals()
            let view = ProgressView(json: connection.json, tty: isatty(1) != 0)
            try exporter.run(progress: { view.show($0) }, cancelled: { exportCancelled.load(ordering: .relaxed) })
            view.done()
            for f in exporter.fallbacks {
                warn("encoder \(f) is not in this FFmpeg; used \(exporter.encoderName)")
            }
            if let why = exporter.coverDropped { warn("cover art not copied: \(why)") }
            if connection.json {
                print(JSON.obj(("event", .string("done")), ("file", .string(output)), ("encoder", .string(exporter.encoderName)),
                               ("frames", .int(exporter.totalFrames)), ("sample_rate", .int(Int64(exporter.outputFormat.sampleRate))),
                               ("cover_copied", .bool(exporter.coverCopied)),
                               ("cover_dropped", exporter.coverDropped.map(JSON.string) ?? .null)).text)
            } else {
                print("\(output): \(exporter.totalFrames) frames, \(exporter.outputFormat), \(exporter.encoderName)"
                      + (exporter.coverCopied ? ", cover art copied" : ""))
            }
        } catch {
            if exportCancelled.load(ordering: .relaxed) {
                warn("export cancelled; nothing was written")
                throw ExitCode(130)
            }
            fail("\(error.code.name): \(error.message)", code: 1)
        }
    }

    static func frames(_ text: String, rate: Int) throws(StreamError) -> Int64 {
        let t: TimeArgument
        do { t = try TimeArgument(parsing: text) } catch { throw StreamError(.invalidArgument, "'\(text)': \(error)") }
        guard t.direction == 0 else { throw StreamError(.invalidArgument, "'\(text)': a region point cannot be relative") }
        switch t.value {
        case .seconds(let s): return FrameTime.frames(seconds: s, rate: rate)
        case .frames(let f): return f
        }
    }

    static func parseBitRate(_ text: String) throws -> Int {
        let lower = text.lowercased()
        let scale = lower.hasSuffix("k") ? 1000.0 : lower.hasSuffix("m") ? 1_000_000.0 : 1
        guard let v = Double(scale == 1 ? lower : String(lower.dropLast())), v > 0, v * scale <= 2_000_000 else {
            throw ValidationError("--bitrate must be like 256k")
        }
        return Int(v * scale)
    }
}

/// A line on stderr.
func warn(_ message: String) {
    var line = "playctl: " + message + "\n"
    _ = line.withUTF8 { write(2, $0.baseAddress, $0.count) }
}

/// Progress: a bar on a terminal, plain lines otherwise, JSON events with --json.
final class ProgressView {
    let json: Bool
    let tty: Bool
    private var lastDecile = -1
    init(json: Bool, tty: Bool) { self.json = json; self.tty = tty }

    func show(_ p: Exporter.Progress) {
        let percent = Int(p.fraction * 100)
        let left = p.secondsLeft.map { formatClock($0) } ?? "?:??"
        if json {
            print(JSON.obj(("event", .string("progress")), ("frames", .int(p.frames)), ("total_frames", .int(p.totalFrames)),
                           ("fraction", .number((p.fraction * 1000).rounded() / 1000)),
                           ("speed", .number((p.speed * 10).rounded() / 10)),
                           ("seconds_left", p.secondsLeft.map { .number(($0 * 10).rounded() / 10) } ?? .null)).text)
        } else if tty {
            let width = 30, filled = min(width, Int(p.fraction * Double(width)))
            let bar = String(repeating: "#", count: filled) + String(repeating: "-", count: width - filled)
            print("\r[\(bar)] \(percent)%  \(String(format1: p.speed))× real time  \(left) left ", terminator: "")
        } else if percent / 10 != lastDecile {
            lastDecile = percent / 10
            print("\(percent)% \(String(format1: p.speed))x \(left) left")
        }
        fflush(nil)
    }

    func done() { if tty && !json { print("") } }
}

extension String {
    /// One decimal place, without Foundation.
    init(format1 v: Double) {
        let tenths = Int((v * 10).rounded())
        self = "\(tenths / 10).\(abs(tenths % 10))"
    }
}
