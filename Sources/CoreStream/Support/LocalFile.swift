#if canImport(Glibc)
import Glibc
#endif

/// Opening a file that someone else named (a client, a playlist, a saved state, a
/// folder walk): the one way playd does it, so every reader gets the same rules.
///
/// - Only regular files. `stat` first, so a device or FIFO is never opened at all;
///   then `open(O_NONBLOCK)` and `fstat` on the descriptor, so a FIFO swapped in
///   between the two cannot block the caller (a blocking open of a FIFO waits for a
///   writer forever: it wedged the control thread, and SIGTERM with it).
/// - Inside the roots, when ``roots`` is set: the check is made on the descriptor's
///   own path (`/proc/self/fd/N`), after the open, so a folder swapped for a symlink
///   between a check and the open is caught, not raced.
/// - A path outside the roots gets the same answer whether or not it exists, so the
///   answer does not tell a local user which files exist elsewhere.
/// - Reads have a cap (``read(_:limit:)``).
///
/// Thread: any. Real-time safe: no (file I/O).
public enum LocalFile {
    /// The folders files may be opened under (resolved, no trailing slash); empty: any.
    /// Set by the daemon at start and on reload; read by every thread that opens media.
    /// Protected by its lock.
    private static let rootsLock = Locked<[String]>([])

    /// The roots every open is held to (see the type's doc). Thread: any.
    public static var roots: [String] {
        get { rootsLock.withLock { $0 } }
        set { rootsLock.withLock { $0 = newValue } }
    }

    /// Whether a resolved path is a root or under one (true when no roots are set).
    public static func isInside(_ real: String, roots: [String]) -> Bool {
        roots.isEmpty || roots.contains { real == $0 || real.hasPrefix($0 + "/") || ($0.isEmpty && real.hasPrefix("/")) }
    }

    /// The error for a path outside the roots: the same text whether it exists or not.
    public static func outsideRoots(_ path: String, roots: [String]) -> StreamError {
        StreamError(.outsideRoots, "\(path) is outside the music roots (\(roots.joined(separator: ", ")))")
    }

    /// Opens `path` for reading if it is a regular, non-empty file (inside ``roots``
    /// when they are set); returns the descriptor (close it) and the file's size.
    /// Throws `file_not_found`, `is_directory`, `permission_denied`, `empty_file`,
    /// `outside_roots`, or `not_regular_file` for a FIFO, socket or device.
    /// `withinRoots: false` for playd's own files (config, state), which are not media.
    public static func openRegular(_ path: String, allowEmpty: Bool = false,
                                   withinRoots: Bool = true) throws(StreamError) -> (fd: Int32, size: Int64) {
        guard !path.isEmpty else { throw StreamError(.invalidArgument, "empty path") }
        guard !path.utf8.contains(0) else { throw StreamError(.invalidArgument, "a path cannot contain a NUL byte") }
        let roots = withinRoots ? self.roots : []
        var st = stat()
        if PathBytes.stat(path, &st) != 0 {
            let e = errno
            // Outside the roots, "no such file" would say which files exist there.
            if !roots.isEmpty, !isInside(resolvedParent(path), roots: roots) { throw outsideRoots(path, roots: roots) }
            switch e {
            case ENOENT, ENOTDIR: throw StreamError(.fileNotFound, "\(path): no such file")
            case EACCES: throw StreamError(.permissionDenied, "\(path): permission denied (stat)")
            case ENAMETOOLONG: throw StreamError(.invalidArgument, "\(path): path too long")
            case ELOOP: throw StreamError(.invalidArgument, "\(path): too many levels of symbolic links")
            default: throw StreamError(.ioError, "\(path): stat() failed: \(String(cString: strerror(e)))")
            }
        }
        try checkType(path, st)
        let fd = PathBytes.withCPath(path) { open($0, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY) }
        if fd < 0 {
            let e = errno
            if !roots.isEmpty, !isInside(resolvedParent(path), roots: roots) { throw outsideRoots(path, roots: roots) }
            if e == EACCES || e == EPERM { throw StreamError(.permissionDenied, "\(path): permission denied (cannot open for reading)") }
            throw StreamError(.ioError, "\(path): open() failed: \(String(cString: strerror(e)))")
        }
        var ok = false
        defer { if !ok { close(fd) } }
        // The descriptor is what gets read: check it, not the name again.
        guard fstat(fd, &st) == 0 else { throw StreamError(.ioError, "\(path): fstat() failed: \(String(cString: strerror(errno)))") }
        try checkType(path, st)
        if !roots.isEmpty {
            guard let real = descriptorPath(fd), isInside(real, roots: roots) else { throw outsideRoots(path, roots: roots) }
        }
        if st.st_size == 0 && !allowEmpty { throw StreamError(.emptyFile, "\(path): file is empty (0 bytes)") }
        // Regular files ignore O_NONBLOCK; cleared anyway so reads block as usual.
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK)
        ok = true
        return (fd, Int64(st.st_size))
    }

    /// Reads all of a regular file of at most `limit` bytes (more: `too_large`, and
    /// nothing is read past the limit).
    public static func read(_ path: String, limit: Int, withinRoots: Bool = true) throws(StreamError) -> [UInt8] {
        let (fd, size) = try openRegular(path, allowEmpty: true, withinRoots: withinRoots)
        defer { close(fd) }
        guard size <= Int64(limit) else {
            throw StreamError(.tooLarge, "\(path): \(size) bytes, more than the limit of \(limit)")
        }
        var data = [UInt8](repeating: 0, count: Int(size) + 1)
        var have = 0
        while have < data.count {
            let n = data.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress! + have, $0.count - have) }
            if n < 0 { if errno == EINTR { continue }; throw StreamError(.ioError, "\(path): read() failed: \(String(cString: strerror(errno)))") }
            if n == 0 { break }
            have += n
            // It grew since fstat: still held to the limit.
            if have > limit { throw StreamError(.tooLarge, "\(path): more than the limit of \(limit) bytes") }
        }
        data.removeSubrange(have...)
        return data
    }

    private static func checkType(_ path: String, _ st: stat) throws(StreamError) {
        let type = st.st_mode & S_IFMT
        if type == S_IFDIR { throw StreamError(.isDirectory, "\(path): is a directory, not a file") }
        if type != S_IFREG { throw StreamError(.notRegularFile, "\(path): not a regular file (a FIFO, socket or device)") }
    }

    /// The path the kernel has for an open descriptor.
    static func descriptorPath(_ fd: Int32) -> String? {
        var buf = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let n = readlink("/proc/self/fd/\(fd)", &buf, buf.count - 1)
        guard n > 0 else { return nil }
        return PathBytes.text(buf[..<n].map { UInt8(bitPattern: $0) })
    }

    /// The resolved path of the nearest existing folder above `path` plus the rest:
    /// where a path that does not exist would be.
    public static func resolvedParent(_ path: String) -> String {
        var dir = path
        var rest: [Substring] = []
        while true {
            if let p = PathBytes.withCPath(dir, { realpath($0, nil) }) {
                defer { free(p) }
                let base = PathBytes.text(cString: p)
                return rest.isEmpty ? base : base + "/" + rest.reversed().joined(separator: "/")
            }
            guard let slash = dir.lastIndex(of: "/") else { return path }
            rest.append(dir[dir.index(after: slash)...])
            if slash == dir.startIndex { return "/" + rest.reversed().joined(separator: "/") }
            dir = String(dir[..<slash])
        }
    }
}
