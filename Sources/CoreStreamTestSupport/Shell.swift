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
