import Foundation
import Testing
import PlaydProtocol
import CoreStream
import CoreStreamTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// `playd FILE…` (the one-shot player the README's first command runs), `--start`,
/// `--reverse` and `--demo`, each captured through `wav:PATH?pace=off` and compared
/// with the ffmpeg CLI's decode; and the fade-out a stop signal promises, in the
/// one-shot player and the daemon.
@Suite("One-shot player and stop signals", .checksSomething, .serialized)
struct OneShotTests {
    let flac = Fixtures.named("flac-44100-2.flac")

    func scratch(_ name: String = #function) throws -> String {
        let dir = NSTemporaryDirectory() + "playd-oneshot-\(getpid())-\(name.filter(\.isLetter))"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        return dir
    }

    func playd(_ args: [String], environment: [String: String]? = nil) throws -> Shell.Output {
        try Shell.run([DaemonHarness.playd, "--log-level", "warning"] + args, environment: environment)
    }

    /// The 5 ms ramp-in when playback starts mid-waveform, in frames (and one more).
    var rampIn: Int { flac.sampleRate / 200 + 1 }

    @Test func playsTheFilesInOrderExactly() throws {
        let dir = try scratch()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let other = Fixtures.named("wav16-44100-2.wav")
        let r = try playd(["--output", "wav:\(dir)/out.wav?pace=off", flac.path, other.path])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(String(decoding: r.stdout, as: UTF8.self).contains("playd: done, 0 underruns"))
        let cap = try WAVFile(path: dir + "/out.wav")
        let want = try Reference.decode(flac.path) + Reference.decode(other.path)
        #expect(cap.frames == want.count / 2)
        #expect(Reference.firstMismatch(cap.samples, want, channels: 2) == nil, "the capture differs from the two decodes in a row")
    }

    /// `--start` takes TIME as playctl does: seconds, m:ss, frames; all the same frame.
    @Test(arguments: ["1.5", "0:01.5", "0:00:01.500", "66150f"])
    func startsAtTheGivenTime(_ start: String) throws {
        let dir = try scratch()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let r = try playd(["--output", "wav:\(dir)/out.wav?pace=off", "--start", start, flac.path])
        #expect(r.status == 0, "\(r.stderr)")
        let cap = try WAVFile(path: dir + "/out.wav")
        let want = Array(try Reference.decode(flac.path)[(66_150 * 2)...])
        #expect(cap.frames == want.count / 2, "from 1.5 s: \(cap.frames) frames, the CLI has \(want.count / 2)")
        #expect(Reference.firstMismatch(cap.samples, want, channels: 2, from: rampIn) == nil)
    }

    @Test(arguments: ["+1", "1:x", "-0:02"])
    func aStartThatIsNoTimeIsRefused(_ start: String) throws {
        let r = try playd(["--output", "null?pace=off", "--start", start, flac.path])
        #expect(r.status == 64 && r.stderr.contains("--start"), "\(r.stderr)")
    }

    @Test func reverseplaysTheFileBackwards() throws {
        let dir = try scratch()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let r = try playd(["--output", "wav:\(dir)/out.wav?pace=off", "--reverse", flac.path])
        #expect(r.status == 0, "\(r.stderr)")
        let cap = try WAVFile(path: dir + "/out.wav")
        let reference = try Reference.decode(flac.path)
        let want = Runs.expected(reference, channels: 2, [Runs.Run(0, reference.count / 2, reverse: true)])
        #expect(cap.frames == want.count / 2)
        #expect(Reference.firstMismatch(cap.samples, want, channels: 2, from: rampIn) == nil)
    }

    @Test func demoPlaysTheGeneratedTrack() throws {
        let dir = try scratch()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let r = try playd(["--output", "wav:\(dir)/out.wav?pace=off", "--demo"], environment: ["TMPDIR": dir])
        #expect(r.status == 0, "\(r.stderr)")
        let track = dir + "/playd-demo-\(getuid()).wav"
        let want = try Reference.decode(track)
        let cap = try WAVFile(path: dir + "/out.wav")
        #expect(want.count / 2 == 8 * 44_100, "the demo track is 8 s")
        #expect(cap.frames == want.count / 2 && Reference.firstMismatch(cap.samples, want, channels: 2) == nil)
        #expect(Reference.maxDifference(want[...], [Float](repeating: 0, count: want.count)[...]) > 0.1, "the demo is not silence")
    }

    /// `playctl export --json`: progress events, then one `done` event whose frame
    /// count is the region's, and a file the CLI decodes to the source's region.
    @Test func exportReportsInJSON() throws {
        let dir = try scratch()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let out = dir + "/part.wav"
        let r = try Shell.run([DaemonHarness.playctl, "export", flac.path, out, "--from", "1", "--to", "2.5", "--json"])
        #expect(r.status == 0, "\(r.stderr)")
        let events = try String(decoding: r.stdout, as: UTF8.self).split(separator: "\n").map { try JSON.parse(String($0)) }
        let done = try #require(events.last)
        #expect(events.dropLast().allSatisfy { $0["event"]?.stringValue == "progress" && ($0["fraction"]?.numberValue ?? 2) <= 1 })
        #expect(done["event"]?.stringValue == "done" && done["file"]?.stringValue == out)
        #expect(done["frames"]?.numberValue == 66_150 && done["sample_rate"]?.numberValue == 44_100, "\(done)")
        let want = Array(try Reference.decode(flac.path)[(44_100 * 2)..<(110_250 * 2)])
        #expect(try Reference.decode(out) == want, "the export is not the CLI's decode of 1 s…2.5 s")
    }

    /// A file that cannot be played is reported and skipped; the others play.
    @Test func aBadFileIsReportedAndSkipped() throws {
        let dir = try scratch()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let r = try playd(["--output", "wav:\(dir)/out.wav?pace=off", dir + "/missing.flac", flac.path])
        #expect(r.status == 0)
        #expect(r.stderr.contains("error.code=file_not_found") && r.stderr.contains("missing.flac"), "\(r.stderr)")
        let cap = try WAVFile(path: dir + "/out.wav")
        #expect(cap.samples == (try Reference.decode(flac.path)))
        let none = try playd(["--output", "null?pace=off", dir + "/missing.flac"])
        #expect(none.status == 1, "nothing played at all: exit status 1")
    }

    /// SIGINT (Ctrl-C) mid-track fades out: the capture is the CLI's decode up to the
    /// signal, then exactly one 5 ms ramp of the next frames, never louder than the
    /// source or of the other sign, then nothing.
    @Test func ctrlCFadesOut() throws {
        let dir = try scratch()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let long = dir + "/long.flac"
        try Shell.ffmpeg(["-f", "lavfi", "-i", "sine=f=440:r=44100:d=30", "-ac", "2", long])
        let p = Process()
        p.executableURL = URL(fileURLWithPath: DaemonHarness.playd)
        p.arguments = ["--output", "wav:\(dir)/out.wav?buffer_time=200&period_time=50", long]
        p.standardOutput = FileHandle.nullDevice
        p.standardError = FileHandle.nullDevice
        try p.run()
        // Playing once the paced capture has grown past its header.
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline, ((try? FileManager.default.attributesOfItem(atPath: dir + "/out.wav")[.size] as? Int) ?? 0) < 100_000 {
            usleep(10_000)
        }
        kill(p.processIdentifier, SIGINT)
        p.waitUntilExit()
        #expect(p.terminationStatus == 0)
        try expectFadeOut(try WAVFile(path: dir + "/out.wav"), try Reference.decode(long))
    }

    /// The daemon on SIGTERM: fades out the same way, saves, says STOPPING=1 to systemd
    /// after READY=1 with a STATUS line, and exits 0.
    @Test func sigtermFadesOutAndTellsSystemd() throws {
        let d = try DaemonHarness()
        let long = d.dir + "/long.flac"
        try Shell.ffmpeg(["-f", "lavfi", "-i", "sine=f=440:r=44100:d=30", "-ac", "2", long])
        let notify = try NotifySocket(path: d.dir + "/notify.sock")
        try d.start(environment: ["NOTIFY_SOCKET": notify.path])
        #expect(d.request("play", ("path", .string(long)))?["ok"] == .bool(true))
        #expect(d.waitFor { (d.request("status")?["position"]?.numberValue ?? 0) > 0.5 })
        #expect(d.terminate().status == 0)
        let messages = notify.drain()
        #expect(messages.first?.hasPrefix("READY=1\nSTATUS=listening on ") == true, "\(messages)")
        #expect(messages.contains("STOPPING=1"), "\(messages)")
        try expectFadeOut(try WAVFile(path: d.capture), try Reference.decode(long))
        let state = try JSON.parse(try String(contentsOfFile: d.stateFile, encoding: .utf8))
        #expect(state["file"]?.stringValue == long, "the track is saved: \(state)")
    }

    func expectFadeOut(_ capture: WAVFile, _ reference: [Float], sourceLocation: SourceLocation = #_sourceLocation) throws {
        let ramp = 44_100 / 200
        let mismatch = Reference.firstMismatch(capture.samples, reference, channels: 2)
        let tail = capture.samples.suffix(8).map { String(format: "%.4f", $0) }
        let cut = try #require(mismatch, "the capture (\(capture.frames) frames, ending \(tail)) is the source cut short, with no fade",
                               sourceLocation: sourceLocation)
        #expect(cut > 4_410 && cut < reference.count / 2 - 44_100, "stopped \(cut) frames in", sourceLocation: sourceLocation)
        #expect(capture.frames == cut + ramp, "\(capture.frames - cut) frames after the cut, the ramp is \(ramp)",
                sourceLocation: sourceLocation)
        for i in (cut * 2)..<min(capture.samples.count, (cut + ramp) * 2) {
            #expect(abs(capture.samples[i]) <= abs(reference[i]) + 1e-7 && capture.samples[i] * reference[i] >= 0,
                    "frame \(i / 2) is not the source attenuated", sourceLocation: sourceLocation)
        }
    }
}

/// A datagram socket standing in for systemd's `$NOTIFY_SOCKET`.
final class NotifySocket {
    let path: String
    private let fd: Int32

    init(path: String) throws {
        self.path = path
        fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0)
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &addr.sun_path) { raw in for (i, b) in path.utf8.enumerated() { raw[i] = b } }
        let bound = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard fd >= 0, bound == 0 else { throw FixtureError("cannot bind \(path)") }
    }

    deinit { close(fd) }

    /// The next message, waiting up to `seconds` for it.
    func next(seconds: Int) -> String? {
        var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        guard poll(&p, 1, Int32(seconds * 1000)) == 1 else { return nil }
        return drainOne()
    }

    private func drainOne() -> String? {
        var buffer = [UInt8](repeating: 0, count: 4096)
        let n = recv(fd, &buffer, buffer.count, Int32(MSG_DONTWAIT))
        return n > 0 ? String(decoding: buffer[..<n], as: UTF8.self) : nil
    }

    /// Every message sent so far (non-blocking).
    func drain() -> [String] {
        var messages: [String] = []
        while let m = drainOne() { messages.append(m) }
        return messages
    }
}
