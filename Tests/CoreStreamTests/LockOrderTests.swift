import Foundation
import Logging
import Synchronization
import Testing
import CoreStream
import CoreStreamTestSupport

/// No thread waits for another while holding a lock the other may take.
///
/// Until 2026-11-22 a `play` that reopened the output (a file in another format) held
/// the engine's control lock while it waited for the reader to let go of its decoder,
/// and the reader took that lock in its report after every fill (a loop wrap, a track
/// end): both threads hung. This test races exactly that, thousands of times.
@Suite("Lock order between the control side and the reader", .checksSomething, .serialized, .tags(.threadSanitizer))
struct LockOrderTests {
    /// Format-changing plays race loop wraps and track ends on the unpaced null output
    /// (the reader reports a wrap every few hundred microseconds there).
    ///
    /// A hang cannot be an assertion that returns; a watchdog thread ends the test run
    /// with a message when no play has returned for 60 s (each takes well under 10 ms;
    /// this is a hang detector, not a speed bound).
    @Test func formatChangingPlaysRacingLoopWrapsNeverHang() throws {
        let a = Fixtures.named("wav16-44100-2.wav"), b = Fixtures.named("wav16-48000-1.wav")
        var config = PlaybackEngine.Configuration()
        config.output = "null?pace=off&buffer_time=20&period_time=5"
        var logger = Logger(label: "test")
        logger.logLevel = .critical
        let wraps = Counter(), ends = Counter()
        let engine = PlaybackEngine(configuration: config, logger: logger) { e in
            if case .loopWrapped = e { wraps.value.add(1, ordering: .relaxed) }
            if case .trackEnded = e { ends.value.add(1, ordering: .relaxed) }
        }
        defer { engine.shutdown() }
        let progress = Counter(), finished = Counter()
        let watchdog = Thread {
            var seen = -1, still = 0
            while finished.value.load(ordering: .relaxed) == 0 {
                Thread.sleep(forTimeInterval: 1)
                let now = progress.value.load(ordering: .relaxed)
                if now == seen { still += 1 } else { seen = now; still = 0 }
                if still >= 60 {
                    fatalError("deadlock: no play returned for 60 s after \(now) iterations (control side waiting on the reader while holding the control lock?)")
                }
            }
        }
        watchdog.start()
        defer { finished.value.store(1, ordering: .relaxed) }
        let iterations = Int(ProcessInfo.processInfo.environment["PLAYD_LOCK_ITERATIONS"] ?? "") ?? 2000
        for i in 0..<iterations {
            let f = i % 2 == 0 ? a : b
            // Near the end, so some plays end while the next one reopens; the rest loop
            // a short region, so the reader reports wraps all the time.
            let rate = Int64(f.sampleRate)
            if i % 3 == 0 {
                try engine.play(path: f.path, from: f.sourceFrames - rate / 100)
            } else {
                try engine.play(path: f.path, from: 0)
                // The unpaced output may have played the file to its end already.
                _ = try? engine.setLoop(LoopRegion(start: 0, end: 256, count: nil, pingPong: i % 4 == 1))
            }
            progress.value.add(1, ordering: .relaxed)
        }
        // The race needs the reader to be reporting wraps and ends while plays reopen.
        #expect(wraps.value.load(ordering: .relaxed) > 0)
        #expect(ends.value.load(ordering: .relaxed) > 0)
    }

    final class Counter: Sendable { let value = Atomic<Int>(0) }
}
