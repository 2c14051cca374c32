import Foundation
import Testing
import CoreStreamTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// A folder served by scripts/slowfs (a FUSE mirror): reads throttled to the rate in
/// `rate`, and folder listings that wait while the file `gate` exists. Needs
/// /dev/fuse and python3-fuse (`scripts/install-deps --test`): without them the test
/// fails, it does not skip.
final class SlowMount {
    let base: String, src: String, mnt: String, rate: String, gate: String
    private let fs = Process()

    /// `fill` makes the files under `src` before the mount.
    init(name: String = #function, gated: Bool = false, fill: (String) throws -> Void) throws {
        try #require(FileManager.default.fileExists(atPath: "/dev/fuse"), "/dev/fuse is missing: FUSE tests cannot run here")
        try #require((try? Shell.run(["/usr/bin/python3", "-c", "import fuse"]))?.status == 0,
                     "python3-fuse is missing: scripts/install-deps --test installs it")
        base = NSTemporaryDirectory() + "playd-slowfs-\(getpid())-\(name.filter(\.isLetter))"
        src = base + "/src"; mnt = base + "/mnt"; rate = base + "/rate"; gate = base + "/gate"
        try FileManager.default.createDirectory(atPath: src, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: mnt, withIntermediateDirectories: true)
        try "0\n".write(toFile: rate, atomically: true, encoding: .utf8)
        try fill(src)
        fs.executableURL = URL(fileURLWithPath: Fixtures.repositoryRoot.path + "/scripts/slowfs")
        fs.arguments = [src, mnt, rate, gate]
        try fs.run()
        // Mounted when the mount point shows the source's first file (a stat: never
        // gated). Polled with a deadline: FUSE has no mount event to wait on.
        let first = try FileManager.default.contentsOfDirectory(atPath: src).sorted().first ?? ""
        var mounted = false
        for _ in 0..<200 where !mounted { mounted = FileManager.default.fileExists(atPath: mnt + "/" + first); usleep(25_000) }
        if !mounted { stop() }
        try #require(mounted, "slowfs did not mount")
        if gated { closeGate() }
    }

    /// Folder listings wait from now on.
    func closeGate() { FileManager.default.createFile(atPath: gate, contents: Data()) }
    func openGate() { try? FileManager.default.removeItem(atPath: gate) }

    /// Opens the gate, detaches the mount (lazily: a killed playd may still hold a
    /// file) and stops the FUSE server outright, so nothing here waits for ever.
    func stop() {
        openGate()
        _ = try? Shell.run(["/usr/bin/fusermount3", "-uz", mnt])
        if fs.isRunning { kill(fs.processIdentifier, SIGKILL) }
        fs.waitUntilExit()
        try? FileManager.default.removeItem(atPath: base)
    }
}
