import Foundation
import Testing
import PlaydProtocol
import CoreStreamTestSupport

/// The next track edited over MPD in the last 2 s of a track, at 15 points, on a paced
/// output (issue 38): each edit an MPD client makes to what follows (the next entry
/// deleted, replaced, an entry inserted before it, `single 1`, `repeat 1` at the
/// queue's end, the last entry deleted) acts on the track it names. The engine-level
/// sweep (CoreStreamTests' NextEditTests) checks the engine's replace, clear and a next
/// set first late; this one the daemon's queue, both protocols' "next" fields and its
/// events.
///
/// Tracks of constant levels (FLAC keeps them exactly): the capture's runs say which
/// tracks were heard and how much of each. For each point the daemon plays A from a
/// frame chosen so the point comes 100 ms later, and the test makes the edit once the
/// position heard has passed the point. Checked for every point:
/// - the capture is A from that frame to its last one, then each track the `track`
///   events announced, whole, in that order (nothing heard twice, nothing unannounced);
/// - the engine stopped (a `state` event) when nothing followed, and not before;
/// - right after the edit, MPD's `nextsongid` and the JSON status's `next_id` name the
///   same entry, and while the device cannot hold the old next yet (more than 250 ms
///   before A's end: ring 0.74 s is taken back, the device's 200 ms buffer is not), that
///   entry and the tracks heard are the model's; later, the model's, or the old next
///   (whole) and then what follows it in the edited queue.
@Suite("Next track edited late over MPD, paced", .serialized)
struct NextEditSweepTests {
    static let rate = 44_100
    /// A 2.2 s, B and D 1.5 s, C 0.15 s. A track followed by another is longer than
    /// what the engine decodes ahead (ring 0.74 s and the device's 0.2 s): the entry after
    /// it is handed to the engine when its join is heard, and a shorter one ends in the
    /// reader before that (the engine stops and the player starts the entry after it: a
    /// transient stop, noted in issue 38 as what remains).
    static let lengths = ["A": 97_020, "B": 66_150, "C": 6_615, "D": 66_150]
    static var lengthA: Int { lengths["A"]! }
    static let levels: [String: Float] = ["A": 0.5, "B": 0.25, "C": 0.125, "D": 0.0625]
    static let points = [1_950, 1_700, 1_450, 1_200, 1_000, 800, 650, 500, 400, 300, 220, 150, 90, 40, 10]
    /// Beyond this many ms before A's end the edit must act as the model says.
    static let takenBackAbove = 250

    enum Edit: String, CaseIterable {
        /// A B C; `deleteid B`: A C.
        case deleteNext
        /// A B C; `deleteid B` and `addid D 1` in one command list: A D C.
        case replaceNext
        /// A C; `addid D 1`: A D C.
        case insertBefore
        /// A B C; `single 1`: A, then stop.
        case single
        /// C A, consume on, A playing; `repeat 1`: A, then C (from the top), then stop
        /// (both consumed).
        case repeatAtTheEnd
        /// A C; `deleteid C`: A, then stop.
        case deleteLast
    }

    static func tracks(_ dir: String) throws -> [String: String] {
        var out: [String: String] = [:]
        for (name, level) in levels {
            let path = "\(dir)/\(name).flac"
            let seconds = Double(lengths[name]!) / Double(rate)
            try Shell.ffmpeg(["-f", "lavfi", "-i", "aevalsrc=\(level)|\(level):s=\(rate):d=\(seconds)", "-c:a", "flac", path])
            out[name] = path
        }
        return out
    }

    /// An MPD connection: one request, its lines up to `OK` (nil on an `ACK`).
    final class MPD {
        let c: LineClient
        init(_ socket: String) throws {
            c = try LineClient(path: socket)
            _ = c.readLine(timeoutMillis: 5000)
        }
        @discardableResult
        func ask(_ line: String) -> [String: String]? {
            guard c.send(line) else { return nil }
            var out: [String: String] = [:]
            while let l = c.readLine(timeoutMillis: 5000) {
                if l == "OK" { return out }
                if l.hasPrefix("ACK") { return nil }
                if let colon = l.range(of: ": ") { out[String(l[..<colon.lowerBound])] = String(l[colon.upperBound...]) }
            }
            return nil
        }
        func addid(_ path: String, _ at: Int? = nil) throws -> Int {
            try #require(Int(ask("addid \"\(path)\"" + (at.map { " \($0)" } ?? ""))?["Id"] ?? ""), "addid \(path)")
        }
    }

    /// Runs of one level (left channel): (level, frames), silence left out. A track
    /// started mid-way (A, from the seek) ramps in from silence over 5 ms (220 frames):
    /// samples of no track's level count for the run they lead into.
    static func runs(_ samples: [Float]) -> [(Float, Int)] {
        var out: [(Float, Int)] = []
        var ramp = 0
        let known = Set(levels.values)
        for k in stride(from: 0, to: samples.count, by: 2) where samples[k] != 0 {
            let v = samples[k]
            guard known.contains(v) else { ramp += 1; continue }
            if let last = out.last, last.0 == v, ramp == 0 { out[out.count - 1].1 += 1 } else { out.append((v, 1 + ramp)) }
            ramp = 0
        }
        return out
    }

    @Test(arguments: Edit.allCases)
    func anEditInTheLastTwoSecondsActsOnTheTrackItNames(_ edit: Edit) throws {
        let h = try DaemonHarness(name: "sweep-\(edit)")
        let paths = try Self.tracks(h.dir)
        let name = Dictionary(uniqueKeysWithValues: paths.map { ($0.value, $0.key) })
        try h.start()
        let mpd = try MPD(h.dir + "/mpd.sock")
        let json = try LineClient(path: h.socket)
        let events = try LineClient(path: h.socket)
        #expect(events.request(.obj(("id", .int(1)), ("cmd", .string("subscribe"))))?["ok"] == .bool(true))
        var expectedRuns: [[(Float, Int)]] = []
        var outcomes: [String] = []
        var requestID: Int64 = 1
        for ms in Self.points {
            // The queue afresh, and what the model says follows A after the edit.
            #expect(mpd.ask("clear") != nil && mpd.ask("single 0") != nil && mpd.ask("repeat 0") != nil
                    && mpd.ask("consume \(edit == .repeatAtTheEnd ? 1 : 0)") != nil)
            var ids: [String: Int] = [:]
            let order: [String] = switch edit {
            case .repeatAtTheEnd: ["C", "A"]
            case .deleteLast, .insertBefore: ["A", "C"]
            default: ["A", "B", "C"]
            }
            for t in order { ids[t] = try mpd.addid(paths[t]!) }
            let indexA = order.firstIndex(of: "A")!
            let model: [String] = switch edit {
            case .deleteNext: ["C"]
            case .replaceNext: ["D", "C"]
            case .insertBefore: ["D", "C"]
            case .single, .deleteLast: []
            case .repeatAtTheEnd: ["C"]
            }
            // Too late to take back (the device holds the old next's first frames): the
            // old next is heard whole, then what follows it in the edited queue, or the
            // model's tracks (when the old next's entry was deleted, or they follow it).
            let late: [[String]] = switch edit {
            case .deleteNext: [["B", "C"]]
            case .replaceNext: [["B", "D", "C"]]
            case .insertBefore: [["C"], ["C", "D", "C"]]
            case .single: [["B"]]
            case .deleteLast: [["C"]]
            case .repeatAtTheEnd: []
            }
            // A from 100 ms before the point, on a 10 ms grid (441 frames: exact seconds).
            let startMS = (Self.lengthA * 1000 / Self.rate - ms - 100) / 10 * 10
            let startFrame = startMS * Self.rate / 1000
            #expect(mpd.ask("seek \(indexA) \(Double(startMS) / 1000)") != nil)
            let at = Int64(Self.lengthA - ms * Self.rate / 1000)
            var position: Int64 = 0
            while position < at {
                requestID += 1
                guard let s = json.request(.obj(("id", .int(requestID)), ("cmd", .string("status")))),
                      s["state"]?.stringValue == "playing", let p = s["position_frames"]?.numberValue else {
                    Issue.record("\(edit) at \(ms) ms: not playing before the point"); break
                }
                position = Int64(p)
                if position < at { usleep(1_000) }
            }
            // The edit, and the next entry as each protocol says right after it.
            var expectedNext: Int?
            switch edit {
            case .deleteNext:
                #expect(mpd.ask("deleteid \(ids["B"]!)") != nil); expectedNext = ids["C"]
            case .replaceNext:
                guard mpd.c.send("command_list_begin\ndeleteid \(ids["B"]!)\naddid \"\(paths["D"]!)\" 1\ncommand_list_end") else { break }
                var reply: [String] = []
                while let l = mpd.c.readLine(timeoutMillis: 5000) { reply.append(l); if l == "OK" || l.hasPrefix("ACK") { break } }
                let d = reply.first { $0.hasPrefix("Id: ") }.flatMap { Int($0.dropFirst(4)) }
                #expect(reply.last == "OK" && d != nil, "\(reply)")
                ids["D"] = d; expectedNext = d
            case .insertBefore:
                ids["D"] = try mpd.addid(paths["D"]!, 1); expectedNext = ids["D"]
            case .single:
                #expect(mpd.ask("single 1") != nil); expectedNext = nil
            case .repeatAtTheEnd:
                #expect(mpd.ask("repeat 1") != nil); expectedNext = ids["C"]
            case .deleteLast:
                #expect(mpd.ask("deleteid \(ids["C"]!)") != nil); expectedNext = nil
            }
            let mpdStatus = mpd.ask("status")
            requestID += 1
            let jsonStatus = json.request(.obj(("id", .int(requestID)), ("cmd", .string("status"))))
            let mpdNext = mpdStatus?["nextsongid"].flatMap { Int($0) }
            let jsonNext = jsonStatus?["queue"]?["next_id"]?.numberValue.map { Int($0) }
            let sameSong = mpdStatus?["songid"].flatMap { Int($0) } == jsonStatus?["queue"]?["current_id"]?.numberValue.map { Int($0) }
            if sameSong { #expect(mpdNext == jsonNext, "\(edit) at \(ms) ms: MPD's next \(String(describing: mpdNext)), JSON's \(String(describing: jsonNext))") }
            if ms > Self.takenBackAbove {
                #expect(mpdNext == expectedNext && jsonNext == expectedNext,
                        "\(edit) at \(ms) ms: next is MPD \(String(describing: mpdNext)), JSON \(String(describing: jsonNext)); the model's \(String(describing: expectedNext))")
            }
            // What was heard, by the events, up to the stop.
            // The point ends at a stop with no current entry (the queue's end), or, in
            // single mode, at the stop after A (a stop between two tracks, when the one
            // after a short track is started after it ended, is not the end).
            var heard: [String] = []
            var stopped = false
            var atQueueEnd = false
            var stops = 0
            while !stopped, let line = events.readLine(timeoutMillis: 20_000), let e = try? JSON.parse(line) {
                switch e["event"]?.stringValue {
                case "track": heard.append(name[e["file"]?.stringValue ?? ""] ?? "?")
                case "queue": atQueueEnd = e["current"]?.isNull == true
                case "state" where e["state"]?.stringValue == "stopped" && !heard.isEmpty:
                    stops += 1
                    stopped = atQueueEnd || edit == .single
                default: break
                }
            }
            #expect(stopped, "\(edit) at \(ms) ms: no stop within 20 s after \(heard)")
            #expect(heard.first == "A", "\(edit) at \(ms) ms: heard \(heard)")
            let after = Array(heard.dropFirst())
            if ms > Self.takenBackAbove {
                #expect(after == model, "\(edit) at \(ms) ms: after A, \(after); the model: \(model)")
                // Gapless: no stop before the last (the wav output writes nothing while
                // stopped, so the capture alone would not show one).
                #expect(stops == 1, "\(edit) at \(ms) ms: \(stops) stops")
            } else {
                #expect(after == model || late.contains(after), "\(edit) at \(ms) ms: after A, \(after); the model: \(model), or \(late)")
            }
            outcomes.append("\(ms): \(after.joined())")
            expectedRuns.append([(Self.levels["A"]!, Self.lengthA - startFrame)]
                                + after.map { (Self.levels[$0] ?? -1, Self.lengths[$0] ?? -1) })
        }
        _ = h.terminate()
        // The capture: exactly what the events announced, A's tail and each track whole.
        // Every point's A starts with its ramp, so no two runs merge: the capture splits
        // into points at each run of A's level.
        var points: [[(Float, Int)]] = []
        for r in Self.runs(try Reference.decode(h.capture)) {
            if r.0 == Self.levels["A"]! || points.isEmpty { points.append([r]) } else { points[points.count - 1].append(r) }
        }
        #expect(points.count == Self.points.count, "\(edit): \(points.count) points heard of \(Self.points.count); outcomes \(outcomes)")
        for (k, (got, want)) in zip(points, expectedRuns).enumerated() {
            #expect(got.map(\.0) == want.map(\.0) && got.map(\.1) == want.map(\.1),
                    "\(edit) at \(Self.points[k]) ms: heard \(got), the events announced \(want)")
        }
    }
}
