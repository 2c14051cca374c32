import Foundation
import Logging
import Testing
import CoreStream
import CoreStreamTestSupport

/// The native PipeWire output (issue 46), against a private headless PipeWire with
/// WirePlumber and a null sink (scripts/pipewire) that each test starts, recorded from
/// the sink's monitor with pw-record and compared with the `ffmpeg` CLI's decode.
@Suite("PipeWire output", .checksSomething, .serialized)
struct PipeWireTests {
    func scratch(_ name: String) throws -> String { try freshTestDirectory("pipewire", name) }

    func engine(_ spec: String, onEvent: @escaping @Sendable (PlaybackEngine.Event) -> Void = { _ in }) -> PlaybackEngine {
        var config = PlaybackEngine.Configuration()
        config.output = spec
        var logger = Logger(label: "test")
        logger.logLevel = .warning
        return PlaybackEngine(configuration: config, logger: logger, onEvent: onEvent)
    }

    /// One test's server, sweep file, recorder (started) and engine on the server's sink.
    struct Rig {
        let dir: String, server: PipeWireServer, file: String, recorder: PipeWireRecorder, engine: PlaybackEngine
    }

    func rig(_ name: String, rate: Int = 48_000, bits: Int = 16, seconds: Double,
             prepare: (String, String) throws -> Void = { _, _ in }) throws -> Rig {
        let dir = try scratch(name)
        let server = try PipeWireServer(dir: dir + "/pw", rate: rate)
        let file = dir + "/chirp.flac"
        try chirp(file, rate: rate, bits: bits, seconds: seconds)
        try prepare(dir, file)
        let recorder = try PipeWireRecorder(server: server, path: dir + "/capture.raw", rate: rate)
        return Rig(dir: dir, server: server, file: file, recorder: recorder, engine: engine(server.outputSpec))
    }

    func waitUntil(seconds: Double, _ condition: () -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline { if condition() { return true }; usleep(5_000) }
        return condition()
    }

    /// A stereo sweep at `rate` (half a second of silence, then a chirp whose channels
    /// differ, so no stretch looks like another), as FLAC of `bits` bits.
    func chirp(_ path: String, rate: Int, bits: Int, seconds: Double) throws {
        func channel(_ phase: String) -> String { "if(gte(t,0.5),0.25*sin(2*PI*(200*(t-0.5)+300*(t-0.5)*(t-0.5))\(phase)),0)" }
        let format = bits == 16 ? ["-sample_fmt", "s16"] : ["-sample_fmt", "s32", "-bits_per_raw_sample", "24"]
        try Shell.ffmpeg(["-f", "lavfi", "-i", "aevalsrc='\(channel(""))|\(channel("+1"))':s=\(rate):d=\(seconds)"]
                         + format + ["-c:a", "flac", path])
    }

    /// The recording holds `reference` exactly, once, from its first sound, and only
    /// silence around it.
    func expectExact(_ rec: [Float], _ reference: [Float], _ what: String) throws {
        let a = try #require(reference.firstIndex { $0 != 0 }, "the reference is silent")
        let b = try #require(rec.firstIndex { $0 != 0 }, "nothing was recorded")
        let offset = b - a
        #expect(offset % 2 == 0, "\(what): the recording starts mid-frame")
        try #require(offset >= 0 && offset + reference.count <= rec.count,
                     "\(what): the recording (\(rec.count / 2) frames, sound from \(b / 2)) does not hold the source's \(reference.count / 2) frames")
        let first = (0..<reference.count).first { rec[offset + $0] != reference[$0] }
        var detail = ""
        if let f = first {
            // Silence put in (the source goes on later) or samples lost (it goes on at
            // the same place after the gap)?
            let zeros = rec[(offset + f)...].prefix { $0 == 0 }.count
            let back = f + zeros < reference.count ? (-4096...4096).first { d in
                let i = offset + f + zeros, j = f + zeros + d
                return j >= 0 && j + 64 <= reference.count && i + 64 <= rec.count && (0..<64).allSatisfy { rec[i + $0] == reference[j + $0] }
            } : nil
            detail = "; \(zeros) zero samples there, then the source at shift \(back.map(String.init) ?? "none")"
        }
        #expect(first == nil, "\(what): differs from ffmpeg's decode at sample \(first ?? -1): \(first.map { rec[offset + $0] } ?? 0) vs \(first.map { reference[$0] } ?? 0)\(detail)")
        let stray = rec[(offset + reference.count)...].firstIndex { $0 != 0 }
        #expect(stray == nil, "\(what): sound after the end, at recorded sample \(stray ?? -1)")
        #expect(rec[..<offset].allSatisfy { $0 == 0 }, "\(what): sound before the start")
    }

    /// A 16-bit file at 44.1 kHz and a 24-bit one at 48 kHz, each with the sink at that
    /// rate: what the sink played is ffmpeg's decode, bit for bit, with nothing before or
    /// after it.
    @Test(arguments: [(44_100, 16), (48_000, 24)])
    func losslessComesBackBitExact(rate: Int, bits: Int) throws {
        let r = try rig("exact-\(rate)", rate: rate, bits: bits, seconds: 3)
        let e = r.engine, file = r.file, recorder = r.recorder
        try e.play(path: file)
        #expect(waitUntil(seconds: 20) { e.status().state == .stopped })
        let status = e.outputs().first
        e.shutdown()
        #expect(status?.kind == "pipewire")
        #expect(status?.format?.contains("\(rate) Hz") == true, "\(status?.format ?? "no format")")
        try expectExact(try recorder.finish(), try Reference.decode(file), "\(rate) Hz \(bits)-bit")
    }

    /// Two tracks cut from one sweep at an odd frame, played as current and next: the
    /// sink played the whole sweep, with no gap and nothing twice.
    @Test func gaplessIsExact() throws {
        let cut = 48_000 + 12_345
        let r = try rig("gapless", seconds: 3) { dir, whole in
            try Shell.ffmpeg(["-i", whole, "-af", "atrim=end_sample=\(cut)", "-c:a", "flac", dir + "/a.flac"])
            try Shell.ffmpeg(["-i", whole, "-af", "atrim=start_sample=\(cut)", "-c:a", "flac", dir + "/b.flac"])
        }
        let e = r.engine, dir = r.dir, whole = r.file, recorder = r.recorder
        try e.play(path: dir + "/a.flac")
        #expect(try e.setNext(path: dir + "/b.flac"))
        #expect(waitUntil(seconds: 20) { e.status().state == .stopped })
        e.shutdown()
        try expectExact(try recorder.finish(), try Reference.decode(whole), "a then b")
    }

    /// Pause and resume through the stream: the ramp-out is heard at once (the ring
    /// is taken back), and the resume goes on from where it ended, nothing repeated.
    @Test func pauseRepeatsNothing() throws {
        let r = try rig("pause", seconds: 6.5)
        let e = r.engine, file = r.file, recorder = r.recorder, server = r.server
        try e.play(path: file)
        #expect(waitUntil(seconds: 10) { e.status().positionFrames > 48_000 + 24_000 })
        let streamNode = try #require(try server.nodes(named: "playd").first?["id"] as? Int)
        // The frame heard just before the pause was asked and just after: the ask lies
        // between them however long this thread was descheduled (on 2026-11-28, in a
        // loaded CI run, the ramp-out began 153 ms after a position read before the
        // call; the one read after it brackets that).
        let heard = Double(e.status().positionFrames)
        e.pause()
        let heardAfter = Double(e.status().positionFrames)
        #expect(waitUntil(seconds: 10) { e.status().state == .paused })
        usleep(200_000)  // hold: how long the pause is held
        e.resume()
        #expect(waitUntil(seconds: 10) { e.status().state == .playing })
        // The stream was kept through the pause: one playd node, the first one.
        #expect(try server.nodes(named: "playd").map { $0["id"] as? Int } == [streamNode])
        #expect(waitUntil(seconds: 20) { e.status().state == .stopped })
        e.shutdown()
        let m = RecordingMatch(rec: try recorder.finish(), source: try Reference.decode(file))
        let rampOut = try m.expectPauseRepeatsNothing()
        // At once: the ramp-out begins within 100 ms of where the pause was asked (the
        // ring was taken back, not played out).
        let p = try #require(rampOut, "the pause left no ramp-out in the recording")
        #expect(p >= heard - 2_400 && p <= heardAfter + 4_800,
                "ramp-out at source frame \(p), heard \(heard) before the pause was asked and \(heardAfter) after")
    }

    /// A seek through the stream: the old audio stops about where it was heard (within
    /// 100 ms: the ring is taken back, not played out as the pulse plugin's 750 ms
    /// are), then the target after a ramp-in, to the end.
    @Test func seekCutsWhereHeard() throws {
        let r = try rig("seek", seconds: 6.5)
        let e = r.engine, file = r.file, recorder = r.recorder
        try e.play(path: file)
        #expect(waitUntil(seconds: 10) { e.status().positionFrames > 2 * 48_000 })
        let heard = Int(e.status().positionFrames)
        let target = 4 * 48_000
        try e.seek(to: Int64(target))
        #expect(waitUntil(seconds: 20) { e.status().state == .stopped })
        e.shutdown()
        let m = RecordingMatch(rec: try recorder.finish(), source: try Reference.decode(file))
        try m.expectSeekCut(heard: heard, target: target, within: 4_800)
    }

    /// A 96 kHz file on a graph at 48 kHz that may run at 96 kHz: the graph switches (the
    /// sink's format in pw-dump), and the stream carries the role, names and what plays.
    @Test func aNinetySixKilohertzFileSwitchesTheGraph() throws {
        let dir = try scratch("rate")
        let server = try PipeWireServer(dir: dir + "/pw", rate: 48_000, allowedRates: [48_000, 96_000])
        let file = dir + "/hi.flac"
        try chirp(file, rate: 96_000, bits: 24, seconds: 30)
        let e = engine(server.outputSpec)
        defer { e.shutdown() }
        try e.play(path: file)
        #expect(waitUntil(seconds: 10) { e.status().positionFrames > 96_000 })
        e.setOutputMedia(artist: "Ann Artist", title: "A Title", album: "An Album")
        var rate: Int?
        #expect(waitUntil(seconds: 10) { rate = try? server.sinkRate(); return rate == 96_000 }, "the sink runs at \(rate ?? 0) Hz")
        var props: [String: Any] = [:]
        #expect(waitUntil(seconds: 10) {
            props = ((try? server.nodes(named: "playd"))?.first?["props"] as? [String: Any]) ?? [:]
            return props["media.title"] as? String == "A Title"
        }, "\(props)")
        #expect(props["media.role"] as? String == "Music")
        #expect(props["application.name"] as? String == "playd")
        #expect(props["media.artist"] as? String == "Ann Artist")
        #expect(props["media.album"] as? String == "An Album")
        #expect(props["node.rate"] as? String == "1/96000")
    }

    /// A 3 s cross-fade through the stream: what the sink played is the model computed
    /// from ffmpeg's decodes of the two tracks (A × cos, B × sin over the overlap),
    /// within float rounding, as in the `wav:` captures (CrossfadeCaptureTests).
    @Test func crossfadeMatchesTheModel() throws {
        let dir = try scratch("crossfade")
        let server = try PipeWireServer(dir: dir + "/pw", rate: 44_100)
        let (a, b) = try CrossfadeModel.tracks(in: dir)
        let recorder = try PipeWireRecorder(server: server, path: dir + "/capture.raw", rate: 44_100)
        let e = engine(server.outputSpec)
        try e.play(path: a)
        #expect(try e.setNext(path: b, crossfade: Crossfade(seconds: 3)))
        #expect(waitUntil(seconds: 60) { e.status().state == .stopped })
        e.shutdown()
        let rec = try recorder.finish()
        let model = CrossfadeModel.joined(try Reference.decode(a), try Reference.decode(b), overlap: 3 * 44_100)
        let m0 = try #require(model.firstIndex { $0 != 0 }), r0 = try #require(rec.firstIndex { $0 != 0 }, "nothing recorded")
        let offset = r0 - m0
        try #require(offset >= 0 && offset % 2 == 0 && offset + model.count <= rec.count,
                     "the recording (\(rec.count / 2) frames, sound from \(r0 / 2)) does not hold the model's \(model.count / 2)")
        let cap = Array(rec[offset..<(offset + model.count)])
        let d = CrossfadeModel.difference(cap, model)
        let bad = (0..<cap.count).first { abs(Double(cap[$0]) - model[$0]) > 1e-6 }
        let zeros = bad.map { b in cap[b...].prefix { $0 == 0 }.count } ?? 0
        #expect(d.worst <= 1e-6, "largest difference \(d.worst) at frame \(d.frame) (the overlap starts at \(17 * 44_100)); first off at frame \((bad ?? -2) / 2), \(zeros) zero samples there; underruns \(e.status().underruns)")
        #expect(rec[(offset + model.count)...].allSatisfy { $0 == 0 }, "sound after the end")
    }

    /// An announcement ducking the music through the stream: what the sink played is the
    /// model computed from ffmpeg's decodes of the music and the clip (music × the duck
    /// envelope + clip × gain), within float rounding, as in AnnouncementCaptureTests.
    @Test func announcementDuckMatchesTheModel() throws {
        let dir = try scratch("announce")
        let server = try PipeWireServer(dir: dir + "/pw", rate: 44_100)
        let (musicPath, clipPath) = (try AnnouncementModel.music(in: dir), try AnnouncementModel.ttsClip(in: dir))
        let recorder = try PipeWireRecorder(server: server, path: dir + "/capture.raw", rate: 44_100)
        let events = EventLog()
        let e = engine(server.outputSpec) { events.add($0) }
        try e.play(path: musicPath)
        #expect(waitUntil(seconds: 10) { e.status().positionFrames > 20_000 })
        var mix = PlaybackEngine.Announcement()
        mix.duckDB = -18
        mix.gainDB = -3
        try e.announce([.init(path: clipPath)], label: "clip", options: mix)
        #expect(waitUntil(seconds: 20) { AnnouncementCaptureTests.ended(events.all) != nil })
        #expect(waitUntil(seconds: 30) { e.status().state == .stopped })
        e.shutdown()
        let rec = try recorder.finish()
        let reported = try #require(AnnouncementCaptureTests.started(events.all), "the start is reported")
        let start = try #require(reported, "the music was playing: the start frame is reported")
        let music = try Reference.decode(musicPath)
        let clip = try AnnouncementModel.clip(clipPath, rate: 44_100)
        let m0 = try #require(music.firstIndex { $0 != 0 }), r0 = try #require(rec.firstIndex { $0 != 0 }, "nothing recorded")
        let offset = r0 - m0
        try #require(offset >= 0 && offset % 2 == 0 && offset + music.count <= rec.count,
                     "the recording (\(rec.count / 2) frames, sound from \(r0 / 2)) does not hold the music's \(music.count / 2)")
        let d = AnnouncementModel.duckDifference(capture: Array(rec[offset..<(offset + music.count)]), music: music, clip: clip,
                                                 start: Int(start), duckDB: -18, gainDB: -3, rate: 44_100)
        let cap = Array(rec[offset..<(offset + music.count)])
        let after3s: Int = Int(start) + 44_100 * 3
        let firstBad: Int? = (0..<(music.count / 2)).first { (f: Int) -> Bool in
            let diff: Float = abs(cap[2 * f] - music[2 * f])
            return diff > 0.3 && f > after3s
        }
        let zeros: Int = firstBad.map { (f: Int) -> Int in cap[(2 * f)...].prefix { $0 == 0 }.count } ?? 0
        #expect(d.worst <= 1e-6, "largest difference \(d.worst) at frame \(d.frame) (the announcement began at \(start)); first far-off frame after 3 s: \(firstBad ?? -1), \(zeros) zero samples there; underruns \(e.status().underruns)")
    }

    /// A 44.1 kHz track, then a 48 kHz one, on a graph that may run at either: the same
    /// stream (one playd node, the same id) plays both, and the graph follows each
    /// track's rate.
    @Test func anotherRateKeepsTheStream() throws {
        let dir = try scratch("switch")
        let server = try PipeWireServer(dir: dir + "/pw", rate: 44_100, allowedRates: [44_100, 48_000])
        try chirp(dir + "/a.flac", rate: 44_100, bits: 16, seconds: 30)
        try chirp(dir + "/b.flac", rate: 48_000, bits: 16, seconds: 30)
        let e = engine(server.outputSpec)
        defer { e.shutdown() }
        var rate: Int?
        var ids: [Int?] = []
        for (file, hz) in [("a", 44_100), ("b", 48_000), ("a", 44_100)] {
            try e.play(path: dir + "/\(file).flac")
            #expect(waitUntil(seconds: 10) { e.status().positionFrames > Int64(hz / 2) })
            #expect(waitUntil(seconds: 10) { rate = try? server.sinkRate(); return rate == hz }, "\(file): the sink runs at \(rate ?? 0) Hz")
            ids += try server.nodes(named: "playd").map { $0["id"] as? Int }
        }
        #expect(ids.count == 3 && Set(ids.map { $0 ?? -1 }).count == 1, "playd's nodes: \(ids)")
    }

    /// PipeWire killed mid-play: the output reports the failure (an error event and
    /// `deviceError`), a restarted server is reconnected by ``PlaybackEngine/recoverOutput()``
    /// with no new engine, and audio reaches the sink again.
    @Test func aKilledServerIsReconnected() throws {
        let dir = try scratch("restart")
        let server = try PipeWireServer(dir: dir + "/pw")
        let file = dir + "/long.flac"
        try chirp(file, rate: 48_000, bits: 16, seconds: 60)
        let e = engine(server.outputSpec)
        defer { e.shutdown() }
        try e.play(path: file)
        #expect(waitUntil(seconds: 10) { e.status().positionFrames > 48_000 })
        server.kill()
        #expect(waitUntil(seconds: 10) { e.status().deviceError != 0 }, "the killed server went unnoticed")
        // Gone: reopening fails with a typed error naming PipeWire.
        #expect(throws: StreamError.self) { try e.recoverOutput() }
        try server.start()
        #expect(try e.recoverOutput())
        let heard = e.status().positionFrames
        try e.play(path: file, from: heard)
        let recorder = try PipeWireRecorder(server: server, path: dir + "/capture.raw", rate: 48_000)
        #expect(waitUntil(seconds: 10) { e.status().positionFrames > heard + 48_000 })
        let rec = try recorder.finish()
        #expect(rec.contains { abs($0) > 0.02 }, "nothing reached the restarted server's sink")
    }

    /// `auto` picks PipeWire when a server answers for the user, and ALSA when none does.
    @Test func autoPrefersARunningServer() throws {
        let dir = try scratch("auto")
        let server = try PipeWireServer(dir: dir + "/pw")
        let file = dir + "/short.flac"
        try chirp(file, rate: 48_000, bits: 16, seconds: 1)
        let variable = "PIPEWIRE_RUNTIME_DIR"
        let saved = ProcessInfo.processInfo.environment[variable]
        defer { if let saved { setenv(variable, saved, 1) } else { unsetenv(variable) } }
        setenv(variable, server.dir + "/runtime", 1)
        func kind() throws -> String? {
            let e = engine("auto")
            defer { e.shutdown() }
            try e.play(path: file, paused: true)
            return e.outputs().first?.kind
        }
        #expect(try kind() == "pipewire")
        server.kill()
        // ALSA's default, or the null output where it has none (the `auto` chain).
        let without = try kind()
        #expect(without == "alsa" || without == "null", "\(without ?? "none")")
    }
}

/// The engine's events, as they come (any thread).
final class EventLog: @unchecked Sendable {
    // @unchecked Sendable: `list` only under `lock`.
    private let lock = NSLock()
    private var list: [PlaybackEngine.Event] = []
    func add(_ e: PlaybackEngine.Event) { lock.lock(); list.append(e); lock.unlock() }
    var all: [PlaybackEngine.Event] { lock.lock(); defer { lock.unlock() }; return list }
}
