import Foundation
import Testing
import PlaydProtocol
import CoreStreamTestSupport

/// playd and playctl run under libfaketime (issue 43: the schedule's tests set the
/// process's clock with it). Before, a bare `LD_PRELOAD=libfaketime.so.1` killed both
/// at start (SIGILL): libfaketime's constructor calls `setenv()`, and Swift, finding
/// argv by walking back from the initial `environ`, read a nil argument.
@Suite("The process clock under libfaketime", .checksSomething, .serialized)
struct ClockTests {
    static let faketime = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"

    @Test func playdAndPlayctlStartUnderAPreloadedFakeClock() throws {
        #expect(FileManager.default.fileExists(atPath: Self.faketime), "libfaketime is missing (scripts/install-deps --test)")
        let fake = ["LD_PRELOAD": Self.faketime, "FAKETIME": "@2026-03-29 01:59:50", "TZ": "UTC",
                    // No shared-memory pair left in /dev/shm per process.
                    "FAKETIME_DISABLE_SHM": "1"]
        let h = try DaemonHarness()
        // Started directly (not through /usr/bin/env): the arguments are its `--config`.
        try h.start(environment: fake)
        #expect(h.request("ping")?["ok"] == .bool(true))
        // The daemon's clock is the fake one: its log is stamped with it.
        #expect(h.log.contains("2026-03-29T01:59:5") || h.log.contains("2026-03-29T02:00"), "playd's log: \(h.log.prefix(400))")
        let r = try Shell.run([DaemonHarness.playctl, "--socket", h.socket, "status", "--json"], environment: fake)
        #expect(r.status == 0, "playctl: \(r.stderr)")
        let status = try JSON.parse(String(decoding: r.stdout, as: UTF8.self))
        #expect(status["state"]?.stringValue == "stopped", "playctl status: \(status)")
        #expect(h.terminate().status == 0)
    }
}
