import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A private headless PipeWire with WirePlumber and a null sink (`scripts/pipewire`),
/// for the native PipeWire output's tests. Stopped when released.
public final class PipeWireServer: @unchecked Sendable {
    // @unchecked Sendable: the fields are set once; the script serialises the rest.
    public let dir: String
    public let rate: Int
    public let allowedRates: [Int]
    public static let sink = "playd-test-sink"
    /// The server's socket, for `pipewire:NODE?remote=` and clients' PIPEWIRE_REMOTE.
    public var socket: String { dir + "/runtime/pipewire-0" }
    /// What a client (pw-record, pw-dump) needs to find this server.
    public var environment: [String: String] { ["PIPEWIRE_RUNTIME_DIR": dir + "/runtime"] }
    /// The output spec that plays to the test sink on this server.
    public var outputSpec: String { "pipewire:\(Self.sink)?remote=\(socket)" }

    /// A command the script runs under (e.g. `setpriv --reuid=…`: the server as
    /// another user), if any.
    public let launcher: [String]

    public init(dir: String, rate: Int = 48_000, allowedRates: [Int]? = nil, launcher: [String] = []) throws {
        self.dir = dir
        self.rate = rate
        self.allowedRates = allowedRates ?? [rate]
        self.launcher = launcher
        try start()
    }

    private static var script: String { Fixtures.repositoryRoot.path + "/scripts/pipewire" }

    /// Starts the server (again, after ``kill()``: same folder, same socket).
    public func start() throws {
        let r = try Shell.run(launcher + [Self.script, "start", dir, "\(rate)", allowedRates.map(String.init).joined(separator: " ")])
        guard r.status == 0 else { throw FixtureError("scripts/pipewire start: \(r.stderr)") }
    }

    /// Kills PipeWire and WirePlumber (SIGKILL: what a crash looks like to a client).
    public func kill() {
        _ = try? Shell.run([Self.script, "stop", dir])
    }

    deinit { kill() }

    /// `pw-dump`'s objects.
    public func dump() throws -> [[String: Any]] {
        let r = try Shell.run(["pw-dump"], environment: environment)
        guard r.status == 0, let objects = try JSONSerialization.jsonObject(with: r.stdout) as? [[String: Any]] else {
            throw FixtureError("pw-dump failed: \(r.stderr)")
        }
        return objects
    }

    /// The `info` of each node whose `node.name` is `name`, with the node's `id` added.
    public func nodes(named name: String) throws -> [[String: Any]] {
        try dump().compactMap { o in
            guard var info = o["info"] as? [String: Any], let props = info["props"] as? [String: Any],
                  props["node.name"] as? String == name else { return nil }
            info["id"] = o["id"]
            return info
        }
    }

    /// The rate the sink runs at now (its negotiated Format), if it has one.
    public func sinkRate() throws -> Int? {
        guard let info = try nodes(named: Self.sink).first, let params = info["params"] as? [String: Any],
              let format = (params["Format"] as? [[String: Any]])?.first else { return nil }
        return format["rate"] as? Int
    }
}

/// Records what the test sink plays, from its monitor, with `pw-record` (raw 32-bit
/// float, stereo, at `rate`): the graph's own format, so 16 and 24-bit sources come
/// back exactly.
///
/// Into /dev/shm: pw-record writes the file in its real-time callback, and on the test
/// machine's disk a write now and then stalled it past a graph cycle (one recorder of
/// two lost a cycle that the other recorded, 2026-11-27).
public final class PipeWireRecorder: @unchecked Sendable {
    // @unchecked Sendable: the process is started once and stopped once (by the test).
    public let path: String
    public let rate: Int
    private let process: Process
    private var stopped = false

    /// Starts pw-record and waits (up to 10 s, a hang guard) until it has written
    /// 100 ms, so what plays next is recorded from its start. `name`: the recording's
    /// file name (in /dev/shm, unique to this process; removed when released).
    public init(server: PipeWireServer, path name: String, rate: Int) throws {
        let base = (name as NSString).lastPathComponent
        self.path = "/dev/shm/playd-test-\(getpid())-\(UInt32.random(in: 0...UInt32.max))-\(base)"
        self.rate = rate
        process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/pw-record")
        process.arguments = ["-P", "{ stream.capture.sink=true }", "--target", PipeWireServer.sink,
                             "--format", "f32", "--rate", "\(rate)", "--channels", "2", path]
        process.environment = ProcessInfo.processInfo.environment.merging(server.environment) { $1 }
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        let deadline = Date().addingTimeInterval(10)
        while bytesWritten < rate * 8 / 10 && Date() < deadline && process.isRunning { usleep(5_000) }
        guard bytesWritten >= rate * 8 / 10 else {
            stop()
            throw FixtureError("pw-record recorded nothing in 10 s")
        }
    }

    public var bytesWritten: Int {
        ((try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? Int) ?? 0
    }

    /// SIGKILL (the runner's children inherit its blocked SIGINT): pw-record writes as
    /// it goes, so what is on disk is what it recorded.
    public func stop() {
        guard !stopped else { return }
        stopped = true
        Glibc.kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }

    deinit {
        stop()
        try? FileManager.default.removeItem(atPath: path)
    }

    /// Waits until one more second is on disk (the sink's monitor runs on, silent once
    /// nothing plays: by then everything the graph held is recorded; 10 s is a hang
    /// guard), stops, and returns the interleaved stereo samples.
    public func finish() throws -> [Float] {
        let from = bytesWritten
        let deadline = Date().addingTimeInterval(10)
        while bytesWritten < from + rate * 8 && Date() < deadline { usleep(5_000) }
        stop()
        let data = try Data(contentsOf: URL(fileURLWithPath: path))
        return data.withUnsafeBytes { Array($0.bindMemory(to: Float.self)) }
    }
}
