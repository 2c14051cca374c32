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

@Suite("ALSA output", .serialized)
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
        usleep(300_000)
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
    /// The recorded tone must last exactly as long as the file's.
    @Test
    func pauseThroughPulseRepeatsNothing() throws {
        let dir = try pulseScratch("pulse-pause")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let tone = try leadInTone(in: dir, left: 440, right: 440, seconds: 3.0)
        let recorder = try PulseRecorder(path: dir + "/capture.raw")
        defer { recorder.stop() }
        usleep(300_000)
        let e = engine("alsa:pulse")
        try e.play(path: tone)
        usleep(1_600_000)
        e.pause()
        usleep(1_000_000)
        e.resume()
        let deadline = Date().addingTimeInterval(6)
        while e.status().state != .stopped && Date() < deadline { usleep(5_000) }
        e.shutdown()
        let samples = try recorder.finish()
        let window = 240
        let loud = windowRMS(samples, channel: 0, window: window).filter { $0 > 0.04 }.count
        let sounding = Double(loud * window) / 48000
        #expect(abs(sounding - 3.0) < 0.03, "the 3.0 s tone sounded for \(sounding) s: audio was lost or repeated around the pause")
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

    /// Waits for the sink's tail, stops, and returns the interleaved stereo samples.
    func finish() throws -> [Float] {
        usleep(300_000)
        stop()
        let data = try Data(contentsOf: URL(fileURLWithPath: path))
        return data.withUnsafeBytes { Array($0.bindMemory(to: Int16.self)) }.map { Float($0) / 32768 }
    }
}
