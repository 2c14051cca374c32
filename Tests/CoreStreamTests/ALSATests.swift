import Foundation
import Logging
import Testing
import CoreStream
import CoreStreamTestSupport

/// The real ALSA path. `scripts/test` starts a headless PulseAudio (scripts/pulse) and
/// exports PULSE_SERVER; run by hand without one, the tests that need it fail, saying
/// so (they never skip).
enum PulseEnvironment {
    static var server: String? { ProcessInfo.processInfo.environment["PULSE_SERVER"] }
    static let missing: Comment = "PULSE_SERVER is not set: run scripts/test, or start scripts/pulse and export what it prints"
}

@Suite("ALSA output", .checksSomething, .serialized)
struct ALSATests {
    func engine(_ spec: String) -> PlaybackEngine {
        var config = PlaybackEngine.Configuration()
        config.output = spec
        var logger = Logger(label: "test")
        logger.logLevel = .warning
        return PlaybackEngine(configuration: config, logger: logger)
    }

    @Test func playsThroughTheNullPCM() throws {
        let e = engine("alsa:null")
        defer { e.shutdown() }
        try e.play(path: Fixtures.named("mp3cbr-44100-2.mp3").path)
        let s = e.status()
        #expect(s.output?.device == "null")
        #expect(s.output?.pcm.sampleRate == 44100)
        let deadline = Date().addingTimeInterval(10)
        while e.status().state != .stopped && Date() < deadline { usleep(5_000) }
        #expect(e.status().state == .stopped)
    }

    @Test func anUnknownDeviceFallsBackAlongTheChain() throws {
        // hw:7 does not exist here; plughw:7 neither; the chain ends at "null".
        let out = try OutputSpec.make("alsa:hw:7|plughw:7|null")
        let negotiated = try out.open(PCMFormat(sampleRate: 48000, channels: 2))
        defer { out.close() }
        #expect(negotiated.device == "null")
        #expect(negotiated.fallbacks.count == 2)
        #expect(negotiated.fallbacks[0].hasPrefix("hw:7: snd_pcm_open() failed"))
    }

    @Test func noDeviceAtAllIsATypedError() {
        let error = #expect(throws: StreamError.self) {
            let out = try OutputSpec.make("alsa:hw:9|plughw:9")
            _ = try out.open(PCMFormat(sampleRate: 48000, channels: 2))
        }
        #expect(error?.code == .outputUnavailable, "\(String(describing: error))")
        #expect(error?.message.contains("hw:9") == true && error?.message.contains("plughw:9") == true,
                "the error names every device tried: \(String(describing: error))")
    }

    /// A bare device name gets the usual chain: `hw:9` → `plughw:9` → `default`, which
    /// is the pulse PCM while a PulseAudio server is reachable.
    @Test func aBareDeviceFallsBackToDefault() throws {
        try #require(PulseEnvironment.server != nil, PulseEnvironment.missing)
        let out = try OutputSpec.make("alsa:hw:9")
        let negotiated = try out.open(PCMFormat(sampleRate: 48000, channels: 2))
        defer { out.close() }
        #expect(negotiated.device == "default")
        #expect(negotiated.fallbacks.count == 2 && negotiated.fallbacks[0].hasPrefix("hw:9: snd_pcm_open() failed"), "\(negotiated.fallbacks)")
    }

    /// The render thread of a paced output runs SCHED_FIFO (the tests run as root, as
    /// the unit's LimitRTPRIO allows); an unpaced one (a WAV rendered as fast as it
    /// decodes) has no deadline and stays at normal priority: at FIFO 50 it ran ahead
    /// of PulseAudio's RR 5 thread for the length of a render. Read from the kernel
    /// (/proc/self/task/TID/stat, field 41), not from playd's own report.
    @Test(arguments: [("null", 1), ("wav:WAV?pace=off", 0)])
    func onlyAPacedOutputRunsInRealTime(_ spec: String, _ policy: Int) throws {
        func renderThreads() -> [String: Int] {
            let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
            var found: [String: Int] = [:]
            for t in tasks {
                guard let comm = try? String(contentsOfFile: "/proc/self/task/\(t)/comm", encoding: .utf8),
                      comm.trimmingCharacters(in: .whitespacesAndNewlines) == "playd-render",
                      let stat = try? String(contentsOfFile: "/proc/self/task/\(t)/stat", encoding: .utf8),
                      let close = stat.lastIndex(of: ")") else { continue }
                // Fields after the name start at field 3; the policy is field 41.
                let fields = stat[stat.index(after: close)...].split(separator: " ")
                if fields.count > 38, let p = Int(fields[38]) { found[t] = p }
            }
            return found
        }
        let dir = NSTemporaryDirectory() + "playd-rt-\(getpid())"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let before = Set(renderThreads().keys)
        let e = engine(spec.replacingOccurrences(of: "WAV", with: dir + "/out.wav"))
        defer { e.shutdown() }
        try e.play(path: Fixtures.named("flac-44100-2.flac").path)
        // The render thread lives while the output is open, the track's end included.
        let new = renderThreads().filter { !before.contains($0.key) }
        #expect(new.count == 1 && new.values.first == policy, "new render threads and their policies: \(new)")
    }

    @Test(arguments: ["bogus", "alsa:", "wav:", "null?pace=maybe", "null?buffer_time=0", "null?color=red",
                      "null?buffer_time=100&period_time=200", "null:x", "alsa?pace=off", "fifo:/tmp/x", "nullx"])
    func badSpecsAreRefused(_ spec: String) {
        #expect(throws: StreamError.self) { _ = try OutputSpec.make(spec) }
    }

    /// The registry parses each spec into its kind, target and options.
    @Test("spec parts", arguments: [
        ("alsa", "alsa", "default"),
        ("alsa:hw:1|default?buffer_time=500", "alsa", "hw:1|default"),
        ("null?pace=off", "null", ""),
        ("wav:/tmp/a:b.wav?pace=off", "wav", "/tmp/a:b.wav"),
    ])
    func specParts(_ text: String, _ kind: String, _ target: String) throws {
        let spec = try OutputSpec.parse(text)
        #expect(spec.kind.name == kind && spec.target == target)
    }

    /// A scratch directory for a test that needs the PulseAudio server.
    func pulseScratch(_ name: String) throws -> String {
        try #require(PulseEnvironment.server != nil, PulseEnvironment.missing)
        let dir = NSTemporaryDirectory() + "playd-\(name)-\(getpid())"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        return dir
    }

    /// A FLAC at 48 kHz: half a second of silence, then `seconds` of sine at amplitude
    /// 1/8 on each channel. The silence goes first because PulseAudio's monitor source
    /// misses the first ~120 ms after the null sink wakes from idle (aplay loses the same).
    func leadInTone(in dir: String, left: Int, right: Int, seconds: Double) throws -> String {
        let tone = dir + "/tone.flac"
        func channel(_ hz: Int) -> String { "if(gte(t,0.5),0.125*sin(2*PI*\(hz)*t),0)" }
        try Shell.ffmpeg(["-f", "lavfi", "-i", "aevalsrc='\(channel(left))|\(channel(right))':s=48000:d=\(0.5 + seconds)",
                          "-c:a", "flac", tone])
        return tone
    }

    /// RMS of one channel of interleaved stereo, per window of `window` frames.
    func windowRMS(_ samples: [Float], channel: Int, window: Int) -> [Float] {
        (0..<(samples.count / 2 / window)).map { w in
            var sum: Float = 0
            for f in (w * window)..<((w + 1) * window) { sum += samples[2 * f + channel] * samples[2 * f + channel] }
            return (sum / Float(window)).squareRoot()
        }
    }

    /// Plays a 440/1000 Hz tone through ALSA's pulse PCM into PulseAudio's null sink,
    /// records the sink's monitor with parec, and checks frequency, level, length and
    /// that no gap appears.
    @Test
    func playsThroughPulseAudioInRealTime() throws {
        let dir = try pulseScratch("pulse-test")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let seconds = 3.0
        let lead = 0.5
        let tone = try leadInTone(in: dir, left: 440, right: 1000, seconds: seconds)
        let recorder = try PulseRecorder(path: dir + "/capture.raw")
        defer { recorder.stop() }
        #expect(waitUntil(seconds: 10) { recorder.bytesWritten > 0 }, "parec recorded nothing")
        let e = engine("alsa:pulse")
        let started = Date()
        try e.play(path: tone)
        let deadline = Date().addingTimeInterval(lead + seconds + 5)
        while e.status().state != .stopped && Date() < deadline { usleep(5_000) }
        let wall = Date().timeIntervalSince(started)
        let status = e.status()
        e.shutdown()
        let samples = try recorder.finish()
        let total = lead + seconds

        #expect(status.state == .stopped)
        #expect(status.underruns == 0)
        // Paced in real time, not dumped at once (a slower machine only makes it longer:
        // no upper bound here; the recording below checks what was played).
        #expect(wall > total * 0.95, "wall time \(wall) s for \(total) s")

        let frames = samples.count / 2
        // The sounding region: first and last 10 ms windows with signal.
        let window = 480
        let rms = windowRMS(samples, channel: 0, window: window)
        let expectedRMS: Float = 0.125 / Float(2).squareRoot()  // lavfi sine amplitude 1/8
        let loud = rms.indices.filter { rms[$0] > expectedRMS * 0.5 }
        let first = try #require(loud.first, "nothing audible was recorded")
        let last = loud.last!
        let duration = Double(last - first + 1) * Double(window) / 48000
        #expect(abs(duration - seconds) < 0.05, "recorded \(duration) s of tone")
        // No gap: every window in the region is at the tone's level.
        let inner = rms[(first + 1)..<last]
        #expect(inner.allSatisfy { abs($0 - expectedRMS) < expectedRMS * 0.1 }, "a window fell out of level: gap or glitch")
        // Frequency by zero crossings, left 440 Hz and right 1000 Hz.
        func frequency(channel: Int) -> Double {
            var crossings = 0
            let a = (first + 1) * window, b = last * window
            for f in a..<(b - 1) where (samples[2 * f + channel] < 0) != (samples[2 * (f + 1) + channel] < 0) { crossings += 1 }
            return Double(crossings) / 2 / (Double(b - a) / 48000)
        }
        #expect(abs(frequency(channel: 0) - 440) < 2)
        #expect(abs(frequency(channel: 1) - 1000) < 2)
    }

    /// Pause and resume through ALSA's pulse plugin: the plugin accepts a rewind but has
    /// already sent the frames on, so rewinding there repeated half a second of audio.
    /// The source is a chirp (its frequency sweeps, so no stretch of it looks like
    /// another). In the recording the part before the pause is the source, ramping out
    /// linearly over 240 frames (5 ms) from source frame p; the part after it is the
    /// source again, ramping in from source frame q. Each ramp's start is measured from
    /// the gains in it (rec / source at each frame), to about a frame: nothing skipped
    /// or repeated means q = p + 240. (A constant tone, as before, hid up to 30 ms.)
    /// The plugin cannot rewind, so the ramp-out goes behind what it holds (750 ms);
    /// when it holds a full buffer at the pause, the ramp is written once it has room.
    /// Held for 200 ms, the pause usually ends before that: the resume follows what the
    /// plugin still holds at full level, and the recording is the whole source, once,
    /// in order. (Held for 600 ms and 1.5 s this passed 3 runs of 3 on a quiet machine,
    /// and failed on one loaded by a benchmark, so those holds are not in the table.)
    @Test(arguments: [200_000] as [UInt32])
    func pauseThroughPulseRepeatsNothing(holdMicroseconds: UInt32) throws {
        let session = try ChirpRecording(dir: try pulseScratch("pulse-pause-\(holdMicroseconds)"))
        defer { session.close() }
        let chirp = session.chirp
        let e = engine("alsa:pulse")
        try e.play(path: chirp)
        #expect(waitUntil(seconds: 10) { e.status().positionFrames > 48_000 + 24_000 })
        e.pause()
        #expect(waitUntil(seconds: 10) { e.status().state == .paused })
        // How long the pause is held (not a synchronisation): the keeper's silence keeps
        // the sink running however long (its monitor loses ~120 ms after waking from
        // idle, which would hide the ramp-in).
        usleep(holdMicroseconds)  // hold: the pause's length (above)
        e.resume()
        #expect(waitUntil(seconds: 10) { e.status().state == .stopped })
        e.shutdown()
        try session.finish().expectPauseRepeatsNothing()
    }

    /// A seek through the pulse plugin: what PulseAudio recorded is the source up to the
    /// frame heard when the seek was asked (the old stream's queue, up to 750 ms in the
    /// server, is dropped: the plugin's prepare disconnects its stream), then silence,
    /// then the source from the target to its end, with nothing repeated or skipped.
    @Test func seekThroughPulseDropsTheOldQueue() throws {
        let session = try ChirpRecording(dir: try pulseScratch("pulse-seek"))
        defer { session.close() }
        let chirp = session.chirp
        let e = engine("alsa:pulse")
        try e.play(path: chirp)
        #expect(waitUntil(seconds: 10) { e.status().positionFrames > 48_000 + 48_000 })
        let heard = Int(e.status().positionFrames)
        let target = 4 * 48_000
        try e.seek(to: Int64(target))
        #expect(waitUntil(seconds: 10) { e.status().state == .stopped })
        e.shutdown()
        // (The seek came right after `heard` was read; 250 ms leaves room for a loaded
        // machine and is a third of what the plugin holds.)
        try session.finish().expectSeekCut(heard: heard, target: target, within: 12_000)
    }

    func waitUntil(seconds: Double, _ condition: () -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline { if condition() { return true }; usleep(5_000) }
        return condition()
    }
}

/// A 6.5 s stereo chirp at 48 kHz (half a second of silence, then a sweep, so no
/// stretch of it looks like another), played into PulseAudio's null sink while parec
/// records its monitor, for the tests that check what the pulse plugin played.
final class ChirpRecording {
    let dir: String
    let chirp: String
    let source: [Float]
    private let keeper = Process()
    private let recorder: PulseRecorder

    init(dir: String) throws {
        self.dir = dir
        chirp = dir + "/chirp.flac"
        func channel(_ phase: String) -> String { "if(gte(t,0.5),0.25*sin(2*PI*(200*(t-0.5)+300*(t-0.5)*(t-0.5))\(phase)),0)" }
        // 6 s of chirp: a pause at 1.5 s must leave more than PulseAudio may have taken
        // in already (with 3 s, one run in a few had the whole rest in the server's
        // buffer and nothing to ramp).
        try Shell.ffmpeg(["-f", "lavfi", "-i", "aevalsrc='\(channel(""))|\(channel("+1"))':s=48000:d=6.5", "-c:a", "flac", chirp])
        source = try Reference.decode(chirp)
        // Digital silence from pacat keeps the sink running through a pause or a seek:
        // the monitor loses the first ~120 ms after its sink wakes from idle, which
        // would hide a ramp-in.
        keeper.executableURL = URL(fileURLWithPath: "/usr/bin/pacat")
        keeper.arguments = ["--raw", "--format=s16le", "--rate=48000", "--channels=2", "/dev/zero"]
        keeper.standardOutput = FileHandle.nullDevice
        keeper.standardError = FileHandle.nullDevice
        try keeper.run()
        do {
            recorder = try PulseRecorder(path: dir + "/capture.raw")
        } catch {
            kill(keeper.processIdentifier, SIGKILL)
            keeper.waitUntilExit()
            throw error
        }
        // parec's stream is up once it writes (the keeper's silence flows through the
        // monitor): 100 ms of it on disk. A fixed 300 ms wait was sometimes too short
        // on a loaded machine, and the recording began 160 ms into the chirp.
        #expect(PulseRecorder.wait(10) { recorder.bytesWritten >= 48_000 * 4 / 10 }, "parec recorded nothing")
    }

    /// Stops recording and reads what was recorded.
    func finish() throws -> RecordingMatch {
        RecordingMatch(rec: try recorder.finish(), source: source)
    }

    func close() {
        recorder.stop()
        if keeper.isRunning { kill(keeper.processIdentifier, SIGKILL) }
        keeper.waitUntilExit()
        try? FileManager.default.removeItem(atPath: dir)
    }
}

/// A 48 kHz s16 stereo recording against its float source.
struct RecordingMatch {
    let rec: [Float]
    let source: [Float]
    var frames: Int { source.count / 2 }

    /// Recorded frame `r` is source frame `s`, within 2 LSB on both channels.
    func matches(_ r: Int, _ s: Int) -> Bool {
        r >= 0 && s >= 0 && s < frames && (r + 1) * 2 <= rec.count
            && abs(rec[2 * r] - source[2 * s]) < 2.0 / 32768 && abs(rec[2 * r + 1] - source[2 * s + 1]) < 2.0 / 32768
    }

    /// The offset o with rec[k + o] == source[k] for 2,400 frames from source frame `from`.
    func align(from: Int, near: Int, radius: Int) -> Int? {
        (near - radius...near + radius).first { o in (from..<(from + 2400)).allSatisfy { matches($0 + o, $0) } }
    }

    /// The source frame 250 ms into the chirp and the recording's offset there. Aligned
    /// that far in: the monitor may have missed the first frames after the sink woke (up
    /// to ~120 ms), so the first loud recorded frame only says roughly where.
    func firstRun() throws -> (settled: Int, offset: Int) {
        let sourceOnset = try #require((0..<frames).first { abs(source[2 * $0]) > 0.02 })
        let r1 = try #require((0..<(rec.count / 2)).first { abs(rec[2 * $0]) > 0.02 }, "nothing was recorded")
        let settled = sourceOnset + 12_000
        let found = align(from: settled, near: r1 - sourceOnset, radius: 12_000)  // outside #require: it would print the recording
        let o1 = try #require(found,
                              "the recording is not the source 250 ms into it")
        return (settled, o1)
    }
}

/// Records PulseAudio's null sink monitor with parec.
final class PulseRecorder {
    let path: String
    private let process = Process()
    private var stopped = false

    init(path: String) throws {
        self.path = path
        process.executableURL = URL(fileURLWithPath: "/usr/bin/parec")
        process.arguments = ["-d", "s.monitor", "--format=s16le", "--rate=48000", "--channels=2", "--latency-msec=20", path]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
    }

    /// The test runner's blocked-signal mask is inherited, so parec never sees SIGINT
    /// or SIGTERM: SIGKILL it (what was played 300 ms before is on disk by then).
    func stop() {
        guard !stopped else { return }
        stopped = true
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }

    /// Bytes parec has written so far.
    var bytesWritten: Int {
        ((try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? Int) ?? 0
    }

    /// Starts parec and waits (up to 10 s) until it has written its first bytes, so
    /// what plays next is recorded from its start.
    static func started(path: String) throws -> PulseRecorder {
        let r = try PulseRecorder(path: path)
        let deadline = Date().addingTimeInterval(10)
        while r.bytesWritten == 0 && Date() < deadline { usleep(5_000) }
        return r
    }

    /// An engine playing into the pulse plugin (ALSA's `pulse` device), logging warnings.
    static func pulseEngine(onEvent: @escaping @Sendable (PlaybackEngine.Event) -> Void = { _ in }) -> PlaybackEngine {
        var config = PlaybackEngine.Configuration()
        config.output = "alsa:pulse"
        var logger = Logger(label: "test")
        logger.logLevel = .warning
        return PlaybackEngine(configuration: config, logger: logger, onEvent: onEvent)
    }

    /// Polls `condition` every 5 ms for up to `seconds`.
    static func wait(_ seconds: Double, _ condition: () -> Bool) -> Bool {
        let end = Date().addingTimeInterval(seconds)
        while Date() < end { if condition() { return true }; usleep(5_000) }
        return condition()
    }

    /// The loudest window's level and the first and last windows within 90 % of it.
    static func loudSpan(_ rms: [Float]) -> (full: Float, first: Int, last: Int)? {
        let full = rms.max() ?? 0
        let loud = rms.indices.filter { rms[$0] > full * 0.9 }
        guard let first = loud.first, let last = loud.last else { return nil }
        return (full, first, last)
    }

    /// The left channel's RMS level in windows of `window` frames.
    static func levels(_ samples: [Float], window: Int) -> [Float] {
        (0..<(samples.count / 2 / window)).map { w in
            var sum: Float = 0
            for f in (w * window)..<((w + 1) * window) { sum += samples[2 * f] * samples[2 * f] }
            return (sum / Float(window)).squareRoot()
        }
    }

    /// Waits for the sink's tail, stops, and returns the interleaved stereo samples.
    /// The null sink's monitor goes on delivering (silence once nothing plays), so the
    /// wait is for parec to have written one more second (192,000 bytes) after this
    /// call: by then everything the server still held (the pulse plugin keeps up to
    /// 750 ms) and parec's own buffer are in the file. A fixed 300 ms sleep lost the
    /// last frames once in a loaded CI run (a seek test saw the source's last 6 frames
    /// missing). 10 s is a hang guard.
    func finish() throws -> [Float] {
        let from = bytesWritten
        let deadline = Date().addingTimeInterval(10)
        while bytesWritten < from + 192_000 && Date() < deadline { usleep(5_000) }
        stop()
        let data = try Data(contentsOf: URL(fileURLWithPath: path))
        return data.withUnsafeBytes { Array($0.bindMemory(to: Int16.self)) }.map { Float($0) / 32768 }
    }
}

extension RecordingMatch {
    /// A pause and a resume, recorded: the source up to a 5 ms ramp-out, silence, then a
    /// 5 ms ramp-in from where the ramp-out ended and the source to its end, nothing
    /// repeated or skipped (or, when the pause fell within what the sink still held and
    /// the resume took the ramp back, the whole source once, in order).
    /// Returns the source frame where the ramp-out began (nil when the resume took it
    /// back, the second case).
    @discardableResult
    func expectPauseRepeatsNothing() throws -> Double? {
        let m = self, ramp = 240
        /// Where a linear ramp over `range` of source frames (at offset o) started, from
        /// each loud frame's gain: k − 240·g rising, k − 240·(1 − g) falling.
        func rampStart(_ range: Range<Int>, _ o: Int, rising: Bool) -> Double? {
            var starts: [Double] = []
            for k in range where k >= 0 && k < frames && k + o >= 0 && (k + o) * 2 < rec.count && abs(source[2 * k]) > 0.05 {
                let g = Double(rec[2 * (k + o)]) / Double(source[2 * k])
                guard g > 0.05 && g < 0.95 else { continue }
                starts.append(Double(k) - Double(ramp) * (rising ? g : 1 - g))
            }
            return starts.isEmpty ? nil : starts.sorted()[starts.count / 2]
        }
        let (settled, o1) = try m.firstRun()
        if let firstOff = (settled..<frames).first(where: { !m.matches($0 + o1, $0) }) {
            let p = try #require(rampStart((firstOff - 20)..<(firstOff + ramp + 20), o1, rising: false), "no ramp-out")
            // After the ramp-out: the recording is the source again, at the same offset
            // or a later one.
            let gapEnd = try #require(((firstOff + o1 + ramp)..<(rec.count / 2)).first { abs(rec[2 * $0]) > 0.02 }, "nothing after the pause")
            let found = m.align(from: firstOff + 3 * ramp, near: gapEnd - firstOff - ramp, radius: 4 * ramp)
            let o2 = try #require(found,
                                  "after the pause the recording is not the source near frame \(firstOff + ramp)")
            let q = try #require(rampStart((firstOff + ramp - 20)..<(firstOff + 2 * ramp + 20), o2, rising: true), "no ramp-in")
            #expect(abs(q - p - Double(ramp)) <= 1.5,
                    "ramp-out from source frame \(p), ramp-in from \(q): \(q - p - Double(ramp)) frames skipped (negative: repeated)")
            let rest = ((firstOff + 3 * ramp)..<frames).first { !m.matches($0 + o2, $0) }
            #expect(rest == nil, "after the ramp-in the recording leaves the source at frame \(rest ?? -1)")
            return p
        } else {
            // The pause fell inside what the plugin still held, and the resume took the
            // queued ramp back: the whole source is in the recording once, in order, to
            // its last frame (seen on a freshly started server). Nothing skipped or
            // repeated either way; the recording must reach the end.
            #expect((frames - 1 + o1 + 1) * 2 <= rec.count, "the recording stops before the source's end")
            return nil
        }
    }
}

extension RecordingMatch {
    /// A seek, recorded: the source up to about the frame `heard` when the seek was
    /// asked (left no later than `within` frames after it: the old queue was dropped),
    /// silence, then the source from `target` after a ramp-in, to its end, nothing
    /// repeated or skipped.
    func expectSeekCut(heard: Int, target: Int, within: Int) throws {
        let m = self, ramp = 240
        let (settled, o1) = try m.firstRun()
        // Where it leaves the first run for good (a millisecond of no match: one frame
        // off by more than 2 LSB is not a cut).
        let cut = try #require((settled..<frames).first { k in !(k..<(k + 48)).contains { m.matches($0 + o1, $0) } },
                               "the recording never leaves the first run")
        // Left where it was heard, not up to 750 ms later: the old queue was dropped.
        // (The position is the plugin's delay read back: a few ms either way.)
        #expect(cut + 4_800 >= heard && cut <= heard + within, "the old stream played on to source frame \(cut), heard \(heard) at the seek")
        // Then the target, after a ramp-in from silence, to the end.
        // Found within 3 s of the cut. How soon PulseAudio starts the new stream is not
        // what this checks (the cut above is), and a loaded machine delays it: once in a
        // CI run it was not there within 250 ms, and on 2026-11-27, beside the daemon
        // tests' minute of 20 listeners, not within a second. Outside #require: its
        // message would print the whole recording.
        let found = m.align(from: target + 3 * ramp, near: cut + o1 - target + 71_000, radius: 72_000)
        let o2 = try #require(found, "within 3 s after the cut the recording is not the source from frame \(target)")
        // (The server may start the new stream right where the old one was cut: then
        // there is no gap to look at.)
        let quietUntil = max(target + o2, cut + o1 + 1)
        let stray = ((cut + o1 + 1)..<quietUntil).first { abs(rec[2 * $0]) > 0.02 }
        #expect(stray == nil, "sound between the cut and the target's ramp-in, at recorded frame \(stray ?? -1)")
        let rest = ((target + 3 * ramp)..<frames).first { !m.matches($0 + o2, $0) }
        #expect(rest == nil, "after the ramp-in the recording leaves the source at frame \(rest ?? -1)")
    }
}
