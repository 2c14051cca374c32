import Foundation

/// Runs a command and collects its output. For tests and scripts, never the engine.
public enum Shell {
    public struct Output: Sendable {
        public var status: Int32
        public var stdout: Data
        public var stderr: String
    }

    /// Runs the ffmpeg CLI quietly; throws with its stderr when it fails.
    public static func ffmpeg(_ arguments: [String]) throws {
        let r = try run(["ffmpeg", "-nostdin", "-v", "error", "-y"] + arguments)
        guard r.status == 0 else { throw FixtureError("ffmpeg \(arguments.joined(separator: " ")): \(r.stderr)") }
    }

    /// Runs `argv` (argv[0] looked up on PATH when it has no slash) to completion.
    @discardableResult
    public static func run(_ argv: [String], environment: [String: String]? = nil) throws -> Output {
        let p = Process()
        if argv[0].contains("/") {
            p.executableURL = URL(fileURLWithPath: argv[0])
            p.arguments = Array(argv.dropFirst())
        } else {
            p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            p.arguments = argv
        }
        if let env = environment {
            p.environment = ProcessInfo.processInfo.environment.merging(env) { _, new in new }
        }
        let out = Pipe(), err = Pipe()
        p.standardOutput = out
        p.standardError = err
        p.standardInput = FileHandle.nullDevice
        try p.run()
        // Read both pipes concurrently so neither fills up and blocks the child.
        nonisolated(unsafe) var errData = Data()
        let group = DispatchGroup()
        group.enter()
        DispatchQueue.global().async {
            errData = err.fileHandleForReading.readDataToEndOfFile()
            group.leave()
        }
        let outData = out.fileHandleForReading.readDataToEndOfFile()
        group.wait()
        p.waitUntilExit()
        return Output(status: p.terminationStatus, stdout: outData,
                      stderr: String(decoding: errData, as: UTF8.self))
    }
}

/// A fresh folder for one test's files: NSTemporaryDirectory()/`prefix`-PID-`name`
/// (letters and digits of it), emptied if a previous run left it.
public func freshTestDirectory(_ prefix: String, _ name: String) throws -> String {
    let dir = NSTemporaryDirectory() + "\(prefix)-\(getpid())-\(name.filter { $0.isLetter || $0.isNumber })"
    try? FileManager.default.removeItem(atPath: dir)
    try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    return dir
}

/// `body` over `items` on `width` threads at once, the results in the items' order; the
/// first error is thrown once all have finished. For work that mostly waits on a child
/// process (ffprobe over a corpus of 231 files took 60 s of the test run one at a time).
public func concurrentMap<T: Sendable, R: Sendable>(_ items: [T], width: Int,
                                                    _ body: @escaping @Sendable (T) throws -> R) throws -> [R] {
    let state = ConcurrentMapState<R>(items.count)
    let done = DispatchGroup()
    for _ in 0..<max(1, min(width, items.count)) {
        done.enter()
        Thread.detachNewThread {
            while true {
                state.lock.lock()
                let i = state.next
                state.next += 1
                state.lock.unlock()
                guard i < items.count else { break }
                let r = Result { try body(items[i]) }
                state.lock.lock()
                state.results[i] = r
                state.lock.unlock()
            }
            done.leave()
        }
    }
    done.wait()
    return try state.results.map { try $0!.get() }
}

/// concurrentMap's shared work counter and results.
private final class ConcurrentMapState<R>: @unchecked Sendable {
    let lock = NSLock()
    var next = 0                          // guarded by lock
    var results: [Result<R, any Error>?]  // guarded by lock
    init(_ n: Int) { results = Array(repeating: nil, count: n) }
}
