import Foundation
import Testing
import PlaydProtocol
import CoreStreamTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// Private memory (RssAnon) of a process, in kB, from /proc.
func threadCount(_ pid: Int32) -> Int {
    (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task"))?.count ?? -1
}

func rssAnonKB(_ pid: Int32) -> Int? {
    guard let s = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
          let line = s.split(separator: "\n").first(where: { $0.hasPrefix("RssAnon:") }) else { return nil }
    return Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "")
}

/// Issue 11's bad-media corpus through the real daemon's queue: over 1,000 damaged
/// files with good tracks between them, played through an unpaced output.
@Suite("Bad media through the queue", .checksSomething, .tags(.addressSanitizer))
struct BadMediaQueueTests {
    /// One damaged or special entry and what must happen to it.
    struct Case {
        var path: String
        var what: String
        /// nil: see `judged`; a code: must be skipped with exactly this code.
        var expectedCode: String?
        /// For a cut or a zeroed header: what the ffmpeg CLI decodes of it (frames),
        /// the independent judge: none → playd must skip it with a media code; some →
        /// playd plays it, or skips it as `truncated`/`corrupt`. nil (bytes flipped at
        /// random): may play or be skipped, as long as it ends with a typed answer.
        var judged: Int?
    }

    /// The codes a damaged file may be skipped with.
    static let mediaCodes: Set<String> = ["not_audio", "no_audio_stream", "truncated", "corrupt", "unsupported_codec", "unsupported_format"]

    /// Audio frames the ffmpeg CLI decodes from `path` (0 when it cannot open it).
    static func cliFrames(_ path: String) throws -> Int {
        let r = try Shell.run(["ffprobe", "-v", "quiet", "-select_streams", "a:0", "-count_frames",
                               "-show_entries", "stream=nb_read_frames", "-of", "csv=p=0", path])
        guard r.status == 0 else { return 0 }
        return Int(String(decoding: r.stdout, as: UTF8.self).split(separator: "\n").first ?? "") ?? 0
    }

    @Test func overAThousandBadFilesInAQueueNeverStopTheGoodOnes() throws {
        let d = try DaemonHarness(output: "null?pace=off")
        try d.start()
        let pid = try #require(d.process?.processIdentifier)
        let corpusDir = d.dir + "/corpus"

        // The corpus: every fixture truncated at 10 points, flipped at 3 rates × 12 seeds,
        // header zeroed; then the special files.
        // Under a sanitizer (the test command's ASan run) a smaller corpus, one pass and
        // no memory figures: ASan's quarantine holds freed memory on purpose.
        let sanitized = ProcessInfo.processInfo.environment["PLAYD_SANITIZER"] != nil
        // The CLI judges the cut and zeroed ones, six at a time (each ffprobe mostly waits).
        var cases = try concurrentMap(try BadMediaCorpus.make(in: corpusDir, fixtures: Fixtures.all, seeds: sanitized ? 3 : 12),
                                      width: 6) { e in
            var judged: Int?
            if case .flipped = e.damage {} else { judged = try Self.cliFrames(e.path) }
            return Case(path: e.path, what: "\(e.fixture) \(e.damage)", expectedCode: nil, judged: judged)
        }
        // A FIFO is refused when it is added (HostileInputTests), so it never reaches the
        // queue; an `.m3u8` is read by `add` as a playlist of its own (its entries are
        // held to the roots there), so the HLS cases named `.m3u8` are not media here.
        // The unreadable file is readable to a daemon running as root (as here): the
        // engine's answer to it is checked as nobody in BadInputTests.
        for c in try BadMedia.make(in: corpusDir + "/special")
        where c.name != "nonexistent path" && c.name != "a directory" && c.expectedCode != "not_regular_file"
            && !c.path.hasSuffix(".m3u8") && !(c.needsUnprivilegedReader && getuid() == 0) {
            cases.append(Case(path: c.path, what: c.name, expectedCode: c.expectedCode))
        }
        // Three that go bad after they were queued: deleted, replaced by a folder, and
        // one deleted while it plays (an open file plays on, as with MPD).
        let good = Fixtures.named("flac-44100-2.flac").path
        for name in ["vanished.flac", "became-a-folder.flac"] {
            try FileManager.default.copyItem(atPath: good, toPath: corpusDir + "/" + name)
        }
        cases.append(Case(path: corpusDir + "/vanished.flac", what: "deleted after it was queued", expectedCode: "file_not_found"))
        cases.append(Case(path: corpusDir + "/became-a-folder.flac", what: "replaced by a folder after it was queued", expectedCode: "is_directory"))
        #expect(cases.count >= (sanitized ? 400 : 1000))

        // A good track after every 25 cases: each must play.
        var queue: [String] = []
        var sentinels: [String] = []
        for (i, c) in cases.enumerated() {
            queue.append(c.path)
            if i % 25 == 24 || i == cases.count - 1 {
                let s = corpusDir + "/good-\(sentinels.count).flac"
                try FileManager.default.copyItem(atPath: good, toPath: s)
                sentinels.append(s)
                queue.append(s)
            }
        }
        // Warm up: every good fixture and the special files once, through the queue,
        // so the baseline includes what FFmpeg initialises once per codec and format
        // (its decoders' static tables). Then the same daemon gets the whole corpus.
        let warmUp = Fixtures.all.map(\.path) + cases.filter { $0.expectedCode != nil && FileManager.default.fileExists(atPath: $0.path) }.map(\.path)
        #expect(d.request("add", ("paths", .array(warmUp.map(JSON.string))))?["ok"] == .bool(true))
        #expect(d.request("play", ("index", .int(0)))?["ok"] == .bool(true))
        #expect(d.waitFor(seconds: 30) { d.request("status")?["state"]?.stringValue == "stopped" })
        #expect(d.request("clear")?["ok"] == .bool(true))
        usleep(500_000)  // hold: the allocator settles before the baseline is read (no event says when)
        let baseline = try #require(rssAnonKB(pid))

        let events = try LineClient(path: d.socket)
        #expect(events.request(.obj(("id", .int(1)), ("cmd", .string("subscribe"))))?["ok"] == .bool(true))

        // One pass: queue everything, play, and collect how each entry ended: played (a
        // `track` event) or skipped (a `skipped` event with its code). No entry may take
        // longer than `bound` seconds without an event.
        var played = Set<String>()
        var skipped: [String: (code: String, message: String)] = [:]
        var errorEvents = 0
        var corruptPackets: Int64 = 0
        func pass() throws {
            played = []; skipped = [:]; errorEvents = 0; corruptPackets = 0
            for start in stride(from: 0, to: queue.count, by: 200) {
                let batch = queue[start..<min(start + 200, queue.count)].map { JSON.string($0) }
                let r = d.request("add", ("paths", .array(Array(batch))))
                try #require(r?["ok"] == .bool(true), "add failed: \(r?.text ?? "no reply")")
            }
            // Two go bad after they were queued.
            let fm = FileManager.default
            try? fm.removeItem(atPath: corpusDir + "/vanished.flac")
            try? fm.removeItem(atPath: corpusDir + "/became-a-folder.flac")
            try fm.createDirectory(atPath: corpusDir + "/became-a-folder.flac", withIntermediateDirectories: false)
            #expect(d.request("play", ("index", .int(0)))?["ok"] == .bool(true))
            // A hang guard. Under AddressSanitizer beside the ThreadSanitizer run (the
            // test command runs them together) one bit-flipped ALAC file once went 20 s
            // without an event (CI, 2026-11-27): 60 s there.
            let bound: Int32 = sanitized ? 60_000 : 20_000
            var lastFile = ""
            while played.count + skipped.count < queue.count {
                guard let line = events.readLine(timeoutMillis: bound), let e = try? JSON.parse(line) else {
                    Issue.record("no event for \(bound / 1000) s: hung after \(lastFile) (\(played.count) played, \(skipped.count) skipped); the log's end: \(d.log.suffix(12000))")
                    break
                }
                switch e["event"]?.stringValue {
                case "track":
                    lastFile = e["file"]?.stringValue ?? ""
                    played.insert(lastFile)
                case "skipped":
                    lastFile = e["file"]?.stringValue ?? ""
                    skipped[lastFile] = (e["code"]?.stringValue ?? "", e["message"]?.stringValue ?? "")
                case "error": errorEvents += 1
                case "corrupt_packets": corruptPackets += Int64(e["count"]?.numberValue ?? 0)
                default: break
                }
            }
            #expect(d.waitFor(seconds: 20) { d.request("status")?["state"]?.stringValue == "stopped" })
            #expect(d.request("clear")?["ok"] == .bool(true))
            usleep(500_000)  // hold: the allocator settles before the next round (no event says when)
            try fm.removeItem(atPath: corpusDir + "/became-a-folder.flac")
            try fm.copyItem(atPath: good, toPath: corpusDir + "/vanished.flac")
            try fm.copyItem(atPath: good, toPath: corpusDir + "/became-a-folder.flac")
        }
        let t0 = Date()
        try pass()
        let seconds = Date().timeIntervalSince(t0)

        // Nothing lost, nothing crashed.
        #expect(d.process?.isRunning == true, "playd died: \(d.log.suffix(2000))")
        #expect(!d.log.contains("Fatal error"))
        // Collected, so one broken rule reads as one issue, not a thousand.
        var failures: [String] = []
        for s in sentinels where !played.contains(s) {
            failures.append("good track \((s as NSString).lastPathComponent) did not play (\(skipped[s].map { "\($0.code): \($0.message)" } ?? "no event"))")
        }
        for c in cases {
            let outcome = skipped[c.path]
            if !played.contains(c.path) && outcome == nil { failures.append("\(c.what): neither played nor skipped") }
            if let code = c.expectedCode, outcome?.code != code {
                failures.append("\(c.what): expected \(code), got \(outcome.map { "\($0.code): \($0.message)" } ?? "played")")
            }
            if let frames = c.judged {
                if frames == 0 && !(outcome.map { Self.mediaCodes.contains($0.code) } ?? false) {
                    failures.append("\(c.what): the CLI decodes nothing of it, playd \(outcome.map { "said \($0.code)" } ?? "played it")")
                }
                if frames > 0, let o = outcome, !["truncated", "corrupt"].contains(o.code) {
                    failures.append("\(c.what): the CLI decodes \(frames) frames of it, playd refused it as \(o.code)")
                }
            }
            if let o = outcome {
                if o.code == "internal" || o.code.isEmpty { failures.append("\(c.what): untyped error \(o.message)") }
                let name = (c.path as NSString).lastPathComponent
                if !o.message.contains(name) { failures.append("\(c.what): the error does not name the file: \(o.message)") }
            }
        }
        #expect(failures.isEmpty, "\(failures.count) failures, first: \(failures.prefix(12).joined(separator: "\n"))")

        // Memory: after the first pass, and after a second one over the same corpus.
        let after = try #require(rssAnonKB(pid))
        if !sanitized { try pass() }
        let afterSecond = try #require(rssAnonKB(pid))
        let byCode = Dictionary(grouping: skipped.values, by: \.code).mapValues(\.count).sorted { $0.key < $1.key }
        let summary = """
            bad-media corpus: \(cases.count) cases + \(sentinels.count) good tracks in \(String(format: "%.1f", seconds)) s; \
            played \(played.count), skipped \(skipped.count) \(byCode.map { "\($0.key)=\($0.value)" }.joined(separator: " ")); \
            error events \(errorEvents), corrupt packets \(corruptPackets); \
            RssAnon after warm-up \(baseline) kB, after the corpus \(after) kB, after it again \(afterSecond) kB; threads now \(threadCount(pid))
            """
        print(summary)
        if !sanitized { try? summary.write(toFile: NSTemporaryDirectory() + "playd-bad-media-corpus.txt", atomically: true, encoding: .utf8) }
        // What the first pass leaves is heap fragmentation, not a leak: a second pass over
        // the same 1,000 files adds nothing (docs/reliability.md). Fragmentation moves
        // either way between passes; a leak grows every pass: when the second grew, a
        // third must not. Since files open off the control thread (issue 38) the first
        // pass leaves more and passes move more: +1.7 MB over the warm-up with the
        // queue's plays off it, +2.5–2.9 MB and −1.5…+1.4 MB between passes when the
        // gapless next was too (opened on the control thread, 2026-11-26, same build:
        // +0.6–0.8 MB, ±0.3 MB). Not the malloc arenas: M_ARENA_MAX 1 or 2 changed
        // nothing.
        if !sanitized {
            #expect(after - baseline <= 4096, "private memory grew by \(after - baseline) kB over the corpus")
            if afterSecond - after > 1536 {
                try pass()
                let afterThird = try #require(rssAnonKB(pid))
                #expect(afterThird - afterSecond <= 1536,
                        "every pass grows private memory (\(afterSecond - after) kB, then \(afterThird - afterSecond) kB): a leak")
            }
        }
        // And the daemon still plays.
        #expect(d.request("play", ("path", .string(good)))?["ok"] == .bool(true))
    }

    /// A file deleted while it plays plays on (the open descriptor keeps it, as with
    /// MPD); one cut short while it plays ends early and the queue goes on.
    @Test(arguments: ["deleted", "truncated"])
    func aFileThatGoesAwayWhilePlaying(how: String) throws {
        let d = try DaemonHarness()
        try d.start()
        let victim = d.dir + "/long.flac"
        try Shell.ffmpeg(["-f", "lavfi", "-i", "sine=frequency=440:duration=8", "-ac", "2", victim])
        let reference = try Reference.decode(victim)
        let next = Fixtures.named("vorbis-44100-2.ogg").path
        let events = try LineClient(path: d.socket)
        #expect(events.request(.obj(("id", .int(1)), ("cmd", .string("subscribe"))))?["ok"] == .bool(true))
        #expect(d.request("add", ("paths", .array([.string(victim), .string(next)])))?["ok"] == .bool(true))
        #expect(d.request("play", ("index", .int(0)))?["ok"] == .bool(true))
        // The file goes once a second of it has been heard.
        #expect(d.waitFor(seconds: 20) { (d.request("status")?["position"]?.numberValue ?? 0) >= 1 }, "the victim never played a second")
        if how == "deleted" {
            unlink(victim)
        } else {
            #expect(truncate(victim, 40_000) == 0)
        }
        var nextStarted = false
        while !nextStarted, let line = events.readLine(timeoutMillis: 30_000), let e = try? JSON.parse(line) {
            if e["event"]?.stringValue == "track", e["file"]?.stringValue == next { nextStarted = true }
        }
        #expect(nextStarted, "the next entry did not play")
        #expect(d.process?.isRunning == true)
        // What was heard of the victim, from the capture: the CLI's decode of it (made
        // before it went) up to where the capture leaves it.
        #expect(d.terminate().status == 0)
        let heard = Reference.firstMismatch(try WAVFile(path: d.capture).samples, reference, channels: 2) ?? reference.count / 2
        if how == "deleted" {
            #expect(heard == reference.count / 2, "a deleted file plays to its end: \(heard) of \(reference.count / 2) frames")
        } else {
            #expect(heard > 44_100 && heard < reference.count / 2 - 44_100, "a truncated file ends early: \(heard) of \(reference.count / 2) frames")
        }
    }
}
