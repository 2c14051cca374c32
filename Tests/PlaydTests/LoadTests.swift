import CoreStream
import Foundation
import Testing
import PlaydProtocol
import CoreStreamTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// 200 control clients at once while playing: status pollers, subscribers, clients
/// sending garbage, and one that never reads. `PLAYD_LOAD_SECONDS` sets the length:
/// 20 s in the test command, which is what fairness and the cut-off need; the long run
/// for docs/reliability.md is `PLAYD_LOAD_SECONDS=120 swift test --filter LoadTests`.
/// Figures (latencies) go to the test output and $TMPDIR/playd-load.txt; no bound on
/// time is asserted (a loaded machine would fail it, not playd).
@Suite("Control load", .checksSomething)
struct LoadTests {
    enum Kind: CaseIterable { case poller, subscriber, garbage, nonReader }

    /// One client connection, driven from a single poll loop.
    final class Client {
        let kind: Kind
        let index: Int
        var fd: Int32 = -1
        var inbox: [UInt8] = []
        var outbox: [UInt8] = []
        var sentAt: UInt64 = 0
        var waiting = false
        var nextAction: UInt64 = 0
        var replies = 0
        var events = 0
        var latenciesMicros: [Int] = []
        var closedByServer = false
        var reconnects = 0
        init(kind: Kind, index: Int) { self.kind = kind; self.index = index }
    }

    static func now() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
    }

    static func connect(_ path: String) -> Int32 {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &addr.sun_path) { raw in for (i, b) in path.utf8.enumerated() { raw[i] = b } }
        let r = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard r == 0 else { close(fd); return -1 }
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        return fd
    }

    @Test func twoHundredClientsDoNotDisturbPlaybackOrEachOther() throws {
        let seconds = Int(ProcessInfo.processInfo.environment["PLAYD_LOAD_SECONDS"] ?? "") ?? 20
        let pulse = ProcessInfo.processInfo.environment["PULSE_SERVER"] != nil
        // 200 connections from one user: above the default per-listener (100) and
        // per-user (50) limits, which this test is not about.
        // A 2 s device buffer: the render thread never waits on the control thread, so
        // what 200 clients could take from playback is CPU, and on the 2-core CI machine
        // (beside the engine's tests and two sanitizer builds) 1 run in 5 had one
        // underrun at the default 750 ms (2026-11-26). 2 s keeps the test on what it is
        // about: a control thread that blocked or starved the reader empties any buffer.
        let d = try DaemonHarness(extraConfig: "[limits]\nmax_connections = 300\nmax_connections_per_user = 300",
                                  output: pulse ? "alsa:pulse" : "null", outputKeys: "buffer_time = 2000")
        let track = d.dir + "/long.flac"
        try Shell.ffmpeg(["-f", "lavfi", "-i", "sine=frequency=440:duration=\(seconds + 60)", "-ac", "2", track])
        try d.start()
        let pid = try #require(d.process?.processIdentifier)
        #expect(d.request("play", ("path", .string(track)))?["ok"] == .bool(true))
        #expect(d.waitFor(seconds: 20) { (d.request("status")?["position"]?.numberValue ?? 0) >= 1 }, "the track never played a second")

        var clients: [Client] = []
        for i in 0..<200 {
            let kind: Kind = i == 0 ? .nonReader : i <= 120 ? .poller : i <= 170 ? .subscriber : .garbage
            clients.append(Client(kind: kind, index: i))
        }
        var rng = SplitMix64(seed: 5)
        let garbage: [[UInt8]] = [
            Array("{\"cmd\":".utf8), Array("not json at all".utf8), [0xFF, 0xFE, 0x80, 0x41],
            Array("{\"cmd\":\"no-such-command\"}".utf8), Array("[1,2,3]".utf8), Array("{\"cmd\":\"seek\",\"to\":\"ten\"}".utf8),
            Array(repeating: 0x61, count: 70 * 1024),  // longer than a line may be
            Array("{\"cmd\":\"volume\",\"set\":1e999}".utf8), Array("{\"cmd\":\"play\",\"path\":\"/nonexistent.flac\"}".utf8),
        ]
        func open(_ c: Client) {
            c.fd = Self.connect(d.socket)
            c.inbox.removeAll(); c.outbox.removeAll(); c.waiting = false
            switch c.kind {
            case .subscriber: c.outbox = Array("{\"id\":0,\"cmd\":\"subscribe\",\"ticks\":250}\n".utf8)
            case .nonReader:
                // Ticks every 50 ms, and a flood of requests whose replies it never reads.
                c.outbox = Array("{\"id\":0,\"cmd\":\"subscribe\",\"ticks\":50}\n".utf8)
            default: break
            }
        }
        for c in clients { open(c); #expect(c.fd >= 0) }

        let start = Self.now()
        let end = start + UInt64(seconds) * 1_000_000_000
        var rssSamples: [Int] = []
        var nextSample = start + 10_000_000_000
        var nonReaderCutAt: Double?
        var fds: [pollfd] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        // The load runs `seconds`; past that, until the client that never reads has been
        // cut off (for 60 s at most): how soon its replies fill the server's buffer
        // depends on how fast the daemon answers, and on a loaded machine (status median
        // 1 s, 2026-11-26) 20 s was not enough.
        let cutDeadline = end + 60_000_000_000
        while Self.now() < end || (nonReaderCutAt == nil && Self.now() < cutDeadline) {
            let t = Self.now()
            if t >= nextSample { rssSamples.append(rssAnonKB(pid) ?? 0); nextSample += 10_000_000_000 }
            for c in clients where c.fd >= 0 && t >= c.nextAction {
                switch c.kind {
                case .poller where !c.waiting:
                    c.outbox += Array("{\"id\":\(c.replies + 1),\"cmd\":\"status\"}\n".utf8)
                    let n = c.outbox.withUnsafeBytes { send(c.fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                    if n > 0 { c.outbox.removeFirst(n) }
                    c.sentAt = Self.now(); c.waiting = true
                    c.nextAction = t + 100_000_000
                case .garbage:
                    if rng.next() % 10 == 0 {
                        // Vanish in the middle of a line, then come back.
                        c.outbox += Array("{\"cmd\":\"sta".utf8)
                        _ = c.outbox.withUnsafeBytes { send(c.fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                        close(c.fd); c.reconnects += 1
                        open(c)
                    } else {
                        c.outbox += garbage[Int(rng.next() % UInt64(garbage.count))] + [0x0A]
                    }
                    c.nextAction = t + 200_000_000
                case .nonReader where nonReaderCutAt == nil:
                    c.outbox += Array(String(repeating: "{\"cmd\":\"status\"}\n", count: 50).utf8)
                    c.nextAction = t + 20_000_000
                default: break
                }
            }
            fds.removeAll(keepingCapacity: true)
            for c in clients {
                var ev = Int16(c.kind == .nonReader ? 0 : POLLIN)
                if !c.outbox.isEmpty { ev |= Int16(POLLOUT) }
                fds.append(pollfd(fd: c.fd, events: ev, revents: 0))
            }
            _ = poll(&fds, nfds_t(fds.count), 10)
            for (i, c) in clients.enumerated() where c.fd >= 0 {
                let re = fds[i].revents
                if re & Int16(POLLOUT) != 0 && !c.outbox.isEmpty {
                    let n = c.outbox.withUnsafeBytes { send(c.fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                    if n > 0 { c.outbox.removeFirst(n) }
                    if n < 0 && (errno == EPIPE || errno == ECONNRESET) {
                        c.closedByServer = true
                        if c.kind == .nonReader && nonReaderCutAt == nil { nonReaderCutAt = Double(t - start) / 1e9 }
                        close(c.fd); c.fd = -1; continue
                    }
                }
                if re & Int16(POLLHUP | POLLERR) != 0 && c.kind == .nonReader {
                    if nonReaderCutAt == nil { nonReaderCutAt = Double(t - start) / 1e9 }
                    close(c.fd); c.fd = -1  // else poll() reports the hang-up at once, forever
                    continue
                }
                guard re & Int16(POLLIN | POLLHUP | POLLERR) != 0, c.kind != .nonReader else { continue }
                let n = recv(c.fd, &buffer, buffer.count, 0)
                if n <= 0 {
                    if n == 0 || (errno != EAGAIN && errno != EINTR) {
                        c.closedByServer = true
                        close(c.fd); c.fd = -1
                    }
                    continue
                }
                c.inbox += buffer[..<n]
                while let nl = c.inbox.firstIndex(of: 0x0A) {
                    let line = c.inbox[..<nl]
                    c.inbox.removeSubrange(...nl)
                    if line.starts(with: Array("{\"event\"".utf8)) { c.events += 1; continue }
                    c.replies += 1
                    if c.kind == .poller && c.waiting {
                        c.latenciesMicros.append(Int((Self.now() - c.sentAt) / 1000))
                        c.waiting = false
                    }
                }
            }
        }
        let status = try #require(d.request("status"))
        let rssEnd = rssAnonKB(pid) ?? 0

        let latencies = clients.filter { $0.kind == .poller }.flatMap(\.latenciesMicros).sorted()
        func pct(_ p: Double) -> Double { latencies.isEmpty ? 0 : Double(latencies[min(latencies.count - 1, Int(Double(latencies.count) * p))]) / 1000 }
        let pollerReplies = clients.filter { $0.kind == .poller }.map(\.replies)
        let subscriberEvents = clients.filter { $0.kind == .subscriber }.map(\.events)
        let garbageReplies = clients.filter { $0.kind == .garbage }.map(\.replies).reduce(0, +)
        let reconnects = clients.map(\.reconnects).reduce(0, +)
        let summary = """
            control load: 200 clients for \(seconds) s through \(pulse ? "PulseAudio" : "the null output"); \
            status p50 \(String(format: "%.2f", pct(0.5))) ms, p99 \(String(format: "%.2f", pct(0.99))) ms, \
            max \(String(format: "%.1f", pct(1.0))) ms over \(latencies.count) requests; \
            replies per poller \(pollerReplies.min() ?? 0)…\(pollerReplies.max() ?? 0), \
            events per subscriber \(subscriberEvents.min() ?? 0)…\(subscriberEvents.max() ?? 0); \
            \(garbageReplies) error replies to garbage, \(reconnects) vanished mid-line; \
            non-reader cut off after \(nonReaderCutAt.map { String(format: "%.1f s", $0) } ?? "never"); \
            underruns \(status["underruns"]?.numberValue ?? -1); RssAnon \(rssSamples.map(String.init).joined(separator: " ")) \(rssEnd) kB
            """
        print(summary)
        try? summary.write(toFile: NSTemporaryDirectory() + "playd-load.txt", atomically: true, encoding: .utf8)

        #expect(status["state"]?.stringValue == "playing")
        #expect(status["underruns"]?.numberValue == 0)
        #expect(nonReaderCutAt != nil, "the client that never reads was not cut off")
        #expect((status["clients_dropped"]?.numberValue ?? 0) >= 1)
        // No starvation: the pollers were served alike (each asks once its reply came
        // and 100 ms passed), so the least served got at least half of the most served;
        // every subscriber heard events.
        let (fewest, most) = (pollerReplies.min() ?? 0, pollerReplies.max() ?? 0)
        #expect(fewest > 0 && fewest * 2 >= most, "pollers got \(fewest)…\(most) replies: one was starved")
        #expect((subscriberEvents.min() ?? 0) > 0, "a subscriber got no events")
        #expect(clients.filter { $0.kind == .poller || $0.kind == .subscriber }.allSatisfy { !$0.closedByServer })
        #expect(garbageReplies > 0)
        // Memory flat: the last sample within 1 MB of the first.
        if let first = rssSamples.first { #expect(rssEnd - first <= 1024, "RssAnon grew \(first) -> \(rssEnd) kB") }
        for c in clients where c.fd >= 0 { close(c.fd) }
        #expect(d.process?.isRunning == true)
    }
}
