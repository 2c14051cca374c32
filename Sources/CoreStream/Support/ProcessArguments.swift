#if canImport(Glibc)
import Glibc
#endif

/// The process's arguments as the kernel holds them (`/proc/self/cmdline`), each escaped
/// as ``PathBytes`` says.
///
/// Not `CommandLine.unsafeArgv`: Swift finds argv by walking back from the `environ`
/// the process started with, and a preload library whose constructor calls `setenv()`
/// (libfaketime's does) moves `environ` first; argv then held a nil and playd and
/// playctl died with SIGILL at start (issue 43). The kernel's copy does not move.
public enum ProcessArguments {
    /// The kernel caps argv and the environment together at a quarter of the stack
    /// limit; 16 MiB is four times the 8 MiB default's share and bounds the read.
    static let cap = 16 << 20

    /// The arguments after the program's name.
    public static func afterName() -> [String] {
        guard let raw = read("/proc/self/cmdline") else {
            // No /proc (a chroot without it): the runtime's view, nil entries left out.
            return (1..<Int(CommandLine.argc)).compactMap { CommandLine.unsafeArgv[$0].map { PathBytes.text(cString: $0) } }
        }
        return split(raw)
    }

    /// NUL-terminated arguments, the first (the program's name) left out. An empty
    /// argument (two NULs in a row) stays an empty string.
    static func split(_ raw: [UInt8]) -> [String] {
        var parts = raw.split(separator: 0, omittingEmptySubsequences: false)
        if raw.last == 0 { parts.removeLast() }
        return parts.dropFirst().map { PathBytes.text($0) }
    }

    private static func read(_ path: String) -> [UInt8]? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var out: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65_536)
        while out.count < cap {
            let n = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if n < 0 { if errno == EINTR { continue }; return nil }
            if n == 0 { return out }
            out += chunk[0..<n]
        }
        return nil
    }
}
