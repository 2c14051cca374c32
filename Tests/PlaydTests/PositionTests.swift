import Foundation
import Synchronization
import Testing
import PlaydProtocol
import CoreStreamTestSupport

/// The position clients read is the frame being heard (issue 48): polled as fast as a
/// client can, over JSON and MPD at once, through a pause, a resume, a seek, a gapless
/// join, a cross-fade, an announcement, an output reopen and a stop, it never goes back
/// within a track (the seeks here go forward); the
/// `paused` event carries the frame where the sound stopped, and the first status after
/// it says the same. On the paced `wav:` output that frame is checked against the
/// capture: where the ramp-out ended in what was written.
@Suite("Position heard, polled through transport changes", .checksSomething, .serialized)
struct PositionTests {
    struct Sample { let file: String; let state: String; let position: Double }

    /// Threads that poll `status` back to back, each on its own connection, until told
    /// to stop: one over JSON (position in frames), one over MPD (`elapsed`, by song id).
    final class Pollers: @unchecked Sendable {
        // @unchecked Sendable: the sample lists are behind their Mutexes; `stop` is atomic;
        // each client is used by its own thread only.
        let c: LineClient
        let m: LineClient
        let json = Mutex<[Sample]>([])
        let mpd = Mutex<[Sample]>([])
        let stop = Atomic<Bool>(false)
        private let done = DispatchSemaphore(value: 0)

        init(socket: String, mpdPort: Int) throws {
            c = try LineClient(path: socket)
            m = try LineClient(tcpPort: UInt16(mpdPort))
            _ = m.readLine(timeoutMillis: 10_000)  // the greeting
            Thread.detachNewThread { [self] in
                var id: Int64 = 0
                while !stop.load(ordering: .relaxed) {
                    id += 1
                    guard let r = c.request(.obj(("id", .int(id)), ("cmd", .string("status")))) else { break }
                    let s = Sample(file: r["file"]?.stringValue ?? "", state: r["state"]?.stringValue ?? "",
                                   position: r["position_frames"]?.numberValue ?? -1)
                    json.withLock { $0.append(s) }
                }
                done.signal()
            }
            Thread.detachNewThread { [self] in
                while !stop.load(ordering: .relaxed) {
                    guard m.send("status") else { break }
                    var fields: [String: String] = [:]
                    while let line = m.readLine(timeoutMillis: 10_000), line != "OK" {
                        if let colon = line.firstIndex(of: ":") {
                            fields[String(line[..<colon])] = String(line[line.index(colon, offsetBy: 2)...])
                        }
                    }
                    let s = Sample(file: fields["songid"] ?? "", state: fields["state"] ?? "",
                                   position: fields["elapsed"].flatMap(Double.init) ?? -1)
                    mpd.withLock { $0.append(s) }
                }
                done.signal()
            }
        }

        func finish() -> (json: [Sample], mpd: [Sample]) {
            stop.store(true, ordering: .relaxed)
            done.wait()
            done.wait()
            return (json.withLock { $0 }, mpd.withLock { $0 })
        }

        /// The first place a track's position went back between two polls, if any.
        static func wentBack(_ samples: [Sample]) -> String? {
            for (i, (a, b)) in zip(samples, samples.dropFirst()).enumerated()
            where a.file == b.file && a.state != "stop" && a.state != "stopped" && b.state != "stop" && b.state != "stopped"
                && b.position < a.position {
                return "poll \(i + 1): \(a.state) \(a.position) then \(b.state) \(b.position) in \(a.file)"
            }
            return nil
        }
    }

    /// Two 6 s tracks of constant level (0.5, then 0.25: FLAC keeps them exactly), so
    /// the capture shows where a ramp ended to the frame; two of 21 s to cross-fade
    /// (shorter ones join gaplessly), a 1 s clip, and a 3 s track at 48 kHz (the output
    /// reopens for it).
    static func tracks(in dir: String) throws -> [String] {
        try [("a", "0.5", 6, 44_100), ("b", "0.25", 6, 44_100), ("c", "0.3", 21, 44_100), ("d", "0.2", 21, 44_100),
             ("clip", "0.1", 1, 44_100), ("e", "0.4", 3, 48_000)].map { name, level, seconds, rate in
            let path = "\(dir)/\(name).flac"
            try Shell.ffmpeg(["-f", "lavfi", "-i", "aevalsrc=\(level)|\(level):s=\(rate):d=\(seconds)", "-c:a", "flac", path])
            return path
        }
    }

    @Test(arguments: ["wav", "alsa:pulse"])
    func thePositionNeverGoesBack(_ output: String) throws {
        if output == "alsa:pulse" {
            try #require(ProcessInfo.processInfo.environment["PULSE_SERVER"] != nil,
                         "PULSE_SERVER is not set: run scripts/test, or start scripts/pulse and export what it prints")
        }
        let port = ServerProcess.freePort()
        let h = try DaemonHarness(extraConfig: "[mpd]\ntcp = \"127.0.0.1:\(port)\"\npassword = \"\"",
                                  output: output == "wav" ? nil : output, name: "position-\(output)")
        try h.start()
        let files = try Self.tracks(in: h.dir)
        let c = try LineClient(path: h.socket)
        var id: Int64 = 0
        func ask(_ cmd: String, _ fields: (String, JSON)...) -> JSON? {
            id += 1
            return c.request(.object([("id", .int(id)), ("cmd", .string(cmd))] + fields))
        }
        func frames() -> Int64 { Int64(ask("status")?["position_frames"]?.numberValue ?? -1) }
        func waitFor(_ what: String, _ condition: () -> Bool) throws {
            let deadline = Date().addingTimeInterval(20)
            while !condition() {
                guard Date() < deadline else { throw FixtureError("waited 20 s for \(what)") }
                usleep(5_000)
            }
        }
        #expect(ask("subscribe")?["ok"] == .bool(true))
        #expect(ask("add", ("paths", .array(files.prefix(2).map(JSON.string))))?["ok"] == .bool(true))
        let pollers = try Pollers(socket: h.socket, mpdPort: port)
        #expect(ask("play", ("index", .int(0)))?["ok"] == .bool(true))
        try waitFor("a second played") { frames() > 44_100 }

        #expect(ask("pause")?["ok"] == .bool(true))
        // The `paused` event, then at once a status on the same connection.
        var paused: JSON?
        let deadline = Date().addingTimeInterval(20)
        while paused == nil, Date() < deadline, let line = c.readLine(timeoutMillis: 20_000) {
            if let e = try? JSON.parse(line), e["event"] == .string("state"), e["state"] == .string("paused") { paused = e }
        }
        let event = try #require(paused, "no paused event")
        let stoppedAt = try #require(event["position_frames"]?.numberValue, "the paused event carries no position: \(event.text)")
        #expect(Double(frames()) == stoppedAt, "the first status after the paused event")
        usleep(200_000)  // hold: a pause held for 200 ms
        #expect(Double(frames()) == stoppedAt, "a status while paused")
        #expect(ask("resume")?["ok"] == .bool(true))
        try waitFor("half a second after the resume") { Double(frames()) > stoppedAt + 22_050 }

        #expect(ask("seek", ("to", .obj(("seconds", .number(3)))))?["ok"] == .bool(true))
        try waitFor("the seek heard") { frames() > 3 * 44_100 + 22_050 }
        try waitFor("the gapless join to the second track") {
            let s = ask("status")
            return s?["file"]?.stringValue == files[1] && (s?["position_frames"]?.numberValue ?? 0) > 22_050
        }
        func file(_ s: JSON?) -> String? { s?["file"]?.stringValue }
        // A cross-fade: the 21 s tracks queued after it, the first played from 16 s with
        // 2 s of overlap; status shows the ending track to its end, then the next from 2 s.
        #expect(ask("crossfade", ("seconds", .number(2)))?["ok"] == .bool(true))
        #expect(ask("add", ("paths", .array(files[2...3].map(JSON.string))))?["ok"] == .bool(true))
        #expect(ask("play", ("index", .int(2)))?["ok"] == .bool(true))
        #expect(ask("seek", ("to", .obj(("seconds", .number(16)))))?["ok"] == .bool(true))
        try waitFor("the cross-fade over") { let s = ask("status"); return file(s) == files[3] && frames() > 3 * 44_100 }
        // An announcement over it (ducked).
        #expect(ask("announce", ("path", .string(files[4])))?["ok"] == .bool(true))
        try waitFor("the announcement over") { ask("status")?["announcing"]?.isNull == true }
        let afterClip = frames()
        try waitFor("the music on after the announcement") { frames() > afterClip + 22_050 }
        // What the wav: output wrote so far (the reopen below starts its file again):
        // float stereo after the 44-byte header.
        var written: [Float] = []
        if output == "wav" {
            let bytes = try Data(contentsOf: URL(fileURLWithPath: h.capture)).dropFirst(44)
            written = bytes.withUnsafeBytes { raw in
                (0..<(raw.count / 4)).map { Float(bitPattern: UInt32(littleEndian: raw.loadUnaligned(fromByteOffset: $0 * 4, as: UInt32.self))) }
            }
        }
        // A track at another rate: the output reopens.
        #expect(ask("play", ("path", .string(files[5])))?["ok"] == .bool(true))
        try waitFor("a second of the 48 kHz track") { let s = ask("status"); return file(s) == files[5] && frames() > 48_000 }
        #expect(ask("stop")?["ok"] == .bool(true))
        let (json, mpd) = pollers.finish()
        #expect(json.count > 100 && mpd.count > 100, "polls: \(json.count) JSON, \(mpd.count) MPD")
        #expect(Set(json.map(\.file)).isSuperset(of: [files[0], files[1], files[3], files[5]]), "the JSON polls saw every track")
        #expect(Pollers.wentBack(json) == nil, "JSON: \(Pollers.wentBack(json) ?? "")")
        #expect(Pollers.wentBack(mpd) == nil, "MPD: \(Pollers.wentBack(mpd) ?? "")")
        _ = h.terminate()

        if output == "wav" {
            // Where the sound stopped in what was written: the ramp-out's last frame, the
            // first after the first second under 1e-4 (0.5 × a gain that ramps to about
            // 0 in Float steps of 1/220; the ramp-in after it starts at 0.5/220).
            let zero = try #require((44_100..<(written.count / 2)).first { abs(written[2 * $0]) < 1e-4 }, "no ramp-out in the capture")
            #expect(abs(stoppedAt - Double(zero + 1)) <= 2_205,
                    "paused at frame \(stoppedAt) by the event; the capture's ramp-out ends before frame \(zero + 1) (one period is 2,205)")
        }
    }
}
