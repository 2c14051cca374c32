import CoreStream
import Foundation
import Testing
import PlaydProtocol
import CoreStreamTestSupport
@testable import PlaydDaemon
#if canImport(Glibc)
import Glibc
#endif

/// `kill -9` at random moments while playing: the state file is never torn, the
/// stale socket is replaced, and playd resumes from what it last saved.
@Suite("Crash recovery", .checksSomething)
struct CrashRecoveryTests {
    @Test func twentyKillsAtRandomMomentsNeverLoseTheState() throws {
        let d = try DaemonHarness(extraConfig: "resume = \"playing\"", output: "null")
        let long = d.dir + "/long.flac", other = d.dir + "/other.flac"
        try Shell.ffmpeg(["-f", "lavfi", "-i", "sine=frequency=440:duration=120", "-ac", "2", long])
        try Shell.ffmpeg(["-f", "lavfi", "-i", "sine=frequency=660:duration=120", "-ac", "2", other])
        try d.start()
        #expect(d.request("add", ("paths", .array([.string(long), .string(other)])))?["ok"] == .bool(true))
        #expect(d.request("play", ("index", .int(0)))?["ok"] == .bool(true))

        var rng = SplitMix64(seed: 11)
        var failures: [String] = []
        var resumedRounds = 0
        for round in 1...20 {
            // Something happens, then the kill lands somewhere in the next 0.2–1.7 s.
            switch rng.next() % 5 {
            case 0: _ = d.request("seek", ("to", .number(Double(rng.next() % 100))))
            case 1: _ = d.request("next")
            case 2: _ = d.request("prev")
            case 3: _ = d.request("volume", ("set", .number(Double(50 + rng.next() % 50))))
            default: break
            }
            usleep(UInt32(200_000 + rng.next() % 1_500_000))
            d.kill9()

            // The state file parses, always.
            let saved: SavedState
            do {
                guard let s = try StateStore.load(from: d.stateFile) else { failures.append("round \(round): no state file"); continue }
                saved = s
            } catch {
                failures.append("round \(round): \(error)")
                continue
            }
            var st = stat()
            if lstat(d.socket, &st) != 0 || st.st_mode & S_IFMT != S_IFSOCK { failures.append("round \(round): no stale socket left to replace?") }

            // The restart replaces the stale socket and resumes what was saved.
            let restartedAt = Date()
            do { try d.start() } catch { failures.append("round \(round): restart failed: \(error)"); break }
            guard let status = d.request("status") else { failures.append("round \(round): no status"); continue }
            let elapsed = Date().timeIntervalSince(restartedAt)
            if saved.state != "stopped" {
                resumedRounds += 1
                if status["state"]?.stringValue != "playing" { failures.append("round \(round): state \(status["state"]?.text ?? "?") after restart, saved \(saved.state)") }
                if status["file"]?.stringValue != saved.file { failures.append("round \(round): playing \(status["file"]?.text ?? "nothing"), saved \(saved.file ?? "nothing")") }
                let rate = Double(saved.sampleRate ?? 44100)
                let savedSeconds = Double(saved.positionFrames) / rate
                let position = status["position"]?.numberValue ?? -1
                if position < savedSeconds - 0.05 || position > savedSeconds + elapsed + 1.0 {
                    failures.append("round \(round): resumed at \(position) s, saved \(savedSeconds) s")
                }
            } else {
                _ = d.request("play", ("index", .int(0)))  // `next` ran off the end: play on
            }
        }
        #expect(resumedRounds >= 15, "only \(resumedRounds) of 20 kills landed while playing")
        #expect(failures.isEmpty, "\(failures.joined(separator: "\n"))")
        #expect(!d.log.contains("ignoring the saved state"))
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: d.dir).filter { $0.hasPrefix("state.json.tmp.") }
        #expect(leftovers.count <= 1, "temporary state files pile up: \(leftovers)")
    }
}
