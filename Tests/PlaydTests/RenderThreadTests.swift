import Foundation
import Testing
import PlaydProtocol
import CoreStreamTestSupport

/// The render thread allocates, locks and logs never (README, CONTRIBUTING). Checked on
/// the real daemon with Tests/Probes/render-probe.c preloaded: it counts every malloc,
/// pthread mutex or rwlock and write to stderr made by a thread named `playd-render`
/// from its first wait on, and prints the counts when playd exits. A control run points
/// the same probe at the reader thread, which allocates and locks freely, so a probe
/// that sees nothing cannot pass the test.
@Suite("Render thread: no allocation, lock or log", .checksSomething, .serialized)
struct RenderThreadTests {
    struct Counts: Equatable { var threads = 0, allocations = 0, locks = 0, logs = 0 }

    /// Builds the probe with the system's C compiler into `dir`.
    static func probe(in dir: String) throws -> String {
        let source = Fixtures.repositoryRoot.path + "/Tests/Probes/render-probe.c"
        let library = dir + "/render-probe.so"
        let r = try Shell.run(["cc", "-shared", "-fPIC", "-O1", "-o", library, source, "-ldl", "-lpthread"])
        guard r.status == 0 else { throw FixtureError("cc render-probe.c: \(r.stderr)") }
        return library
    }

    /// The probe's line in `text`.
    static func counts(_ text: String) throws -> Counts {
        let line = try #require(text.split(separator: "\n").last { $0.hasPrefix("render-probe: ") }, "the probe printed nothing")
        var c = Counts()
        for field in line.split(separator: " ") {
            let kv = field.split(separator: "=")
            guard kv.count == 2, let n = Int(kv[1]) else { continue }
            switch kv[0] {
            case "threads": c.threads = n
            case "allocations": c.allocations = n
            case "locks": c.locks = n
            case "logs": c.logs = n
            default: break
            }
        }
        return c
    }

    @Test func theRenderThreadNeverAllocatesLocksOrLogs() throws {
        let d = try DaemonHarness()
        let probe = try Self.probe(in: d.dir)
        // The first offending call's stack goes to the log (resolve with addr2line).
        try d.start(environment: ["LD_PRELOAD": probe, "RENDER_PROBE_BACKTRACE": "1"])
        let a = Fixtures.named("flac-44100-2.flac").path, b = Fixtures.named("wav16-44100-2.wav").path
        let other = Fixtures.named("mp3cbr-48000-1.mp3").path
        func ok(_ cmd: String, _ fields: (String, JSON)...) {
            let r = d.request(cmd, fields: fields)
            #expect(r?["ok"] == .bool(true), "\(cmd): \(r?.text ?? "no reply")")
        }
        func heard(beyond frames: Double) { #expect(d.waitFor { (d.request("status")?["position_frames"]?.numberValue ?? 0) > frames }) }
        // Every transport path the render thread has: start, announcements, pause ramp
        // and idle, resume, seek, loop wraps, reverse, volume and mute, a gapless join, a
        // format change, stop, and the end of the queue.
        func announced() { #expect(d.waitFor(seconds: 20) { d.request("status")?["announcing"]?.isNull == true }) }
        ok("add", ("paths", .array([.string(a), .string(b), .string(other)])))
        ok("play", ("index", .int(0)))
        heard(beyond: 10_000)
        // An announcement over the music (a 48 kHz mono clip, converted), one cancelled
        // half-way, and one while paused (the clip alone).
        ok("announce", ("path", .string(other)), ("duck", .number(-12)))
        announced()
        ok("announce", ("path", .string(b)))
        #expect(d.waitFor { d.request("status")?["announcing"]?.isNull == false })
        ok("announce", ("cancel", .bool(true)))
        announced()
        ok("pause")
        #expect(d.waitFor { d.request("status")?["state"]?.stringValue == "paused" })
        ok("announce", ("path", .string(other)))
        announced()
        ok("resume")
        ok("seek", ("to", .number(0.5)))
        ok("loop", ("start", .number(0.6)), ("end", .number(0.7)), ("count", .int(3)))
        heard(beyond: 31_000)
        ok("direction", ("direction", .string("reverse")))
        ok("volume", ("set", .int(40)))
        ok("mute", ("muted", .bool(true)))
        ok("mute", ("muted", .bool(false)))
        ok("direction", ("direction", .string("forward")))
        ok("seek", ("to", .number(2.5)))
        // The rest of the queue: a gapless join into b, then a format change to 48 kHz.
        #expect(d.waitFor(seconds: 20) { d.request("status")?["file"]?.stringValue == other })
        ok("stop")
        ok("play", ("index", .int(0)))
        heard(beyond: 4_410)
        #expect(d.terminate().status == 0)
        let c = try Self.counts(d.log)
        #expect(c.threads >= 1, "the probe never saw a render thread: \(c)")
        let stack = d.log.split(separator: "\n").filter { $0.contains("(+0x") || $0.contains("[0x") }.joined(separator: "\n")
        #expect(c.allocations == 0 && c.locks == 0 && c.logs == 0, "the render thread \(c); first at:\n\(stack)")
    }

    /// The same probe on the reader thread sees allocations and locks: it would see
    /// them on the render thread too.
    @Test func theProbeSeesWhatItCounts() throws {
        let dir = NSTemporaryDirectory() + "playd-probe-\(getpid())"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let probe = try Self.probe(in: dir)
        let r = try Shell.run([DaemonHarness.playd, "--output", "null?pace=off", Fixtures.named("flac-44100-2.flac").path],
                              environment: ["LD_PRELOAD": probe, "RENDER_PROBE_THREAD": "playd-reader"])
        #expect(r.status == 0)
        let c = try Self.counts(r.stderr)
        #expect(c.threads == 1 && c.allocations > 0 && c.locks > 0, "\(c)")
    }
}
