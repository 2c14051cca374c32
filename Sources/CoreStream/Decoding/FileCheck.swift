#if canImport(Glibc)
import Glibc
#endif

/// Checks made before FFmpeg sees a file, so each failure has its own error code
/// and a message naming the file.
enum FileCheck {
    /// Throws `fileNotFound`, `isDirectory`, `permissionDenied`, `emptyFile`, or
    /// `notAudio` for something that is not a regular file.
    static func validate(_ path: String) throws(StreamError) {
        guard !path.isEmpty else { throw StreamError(.invalidArgument, "empty path") }
        var st = stat()
        if stat(path, &st) != 0 {
            let e = errno
            switch e {
            case ENOENT, ENOTDIR: throw StreamError(.fileNotFound, "\(path): no such file")
            case EACCES: throw StreamError(.permissionDenied, "\(path): permission denied (stat)")
            case ENAMETOOLONG: throw StreamError(.invalidArgument, "\(path): path too long")
            case ELOOP: throw StreamError(.invalidArgument, "\(path): too many levels of symbolic links")
            default: throw StreamError(.ioError, "\(path): stat() failed: \(String(cString: strerror(e)))")
            }
        }
        let type = st.st_mode & S_IFMT
        if type == S_IFDIR { throw StreamError(.isDirectory, "\(path): is a directory, not a file") }
        if type != S_IFREG { throw StreamError(.notAudio, "\(path): not a regular file (a FIFO, socket or device)") }
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        if fd < 0 {
            let e = errno
            if e == EACCES || e == EPERM { throw StreamError(.permissionDenied, "\(path): permission denied (cannot open for reading)") }
            throw StreamError(.ioError, "\(path): open() failed: \(String(cString: strerror(e)))")
        }
        close(fd)
        if st.st_size == 0 { throw StreamError(.emptyFile, "\(path): file is empty (0 bytes)") }
    }

    /// FFmpeg's WAV demuxer quietly clips a data chunk that runs past the end of the
    /// file, so a truncated WAV is found by comparing the RIFF header with the file size.
    static func checkRIFFLength(_ path: String, container: String) throws(StreamError) {
        guard container == "wav" || container == "w64" else { return }
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0 else { return }
        let fileSize = Int64(st.st_size)
        // Walk the chunks: "RIFF" size "WAVE", then (id, size) pairs until "data".
        var header = [UInt8](repeating: 0, count: 12)
        guard read(fd, &header, 12) == 12, header[0...3] == [0x52, 0x49, 0x46, 0x46] else { return }
        var offset: Int64 = 12
        var chunk = [UInt8](repeating: 0, count: 8)
        while offset + 8 <= fileSize {
            guard pread(fd, &chunk, 8, off_t(offset)) == 8 else { return }
            let size = Int64(chunk[4]) | Int64(chunk[5]) << 8 | Int64(chunk[6]) << 16 | Int64(chunk[7]) << 24
            if chunk[0...3] == [0x64, 0x61, 0x74, 0x61] {  // "data"
                // 0xFFFFFFFF and 0 are streaming placeholders: nothing declared.
                if size == 0xFFFF_FFFF || size == 0 { return }
                let end = offset + 8 + size
                if end > fileSize {
                    throw StreamError(.truncated, "\(path): truncated: the WAV header declares \(size) bytes of audio but the file holds \(fileSize - offset - 8)")
                }
                return
            }
            offset += 8 + size + (size & 1)
        }
    }
}

/// `12.34`: seconds with two decimals, without Foundation.
func formatSeconds(_ seconds: Double) -> String {
    let hundredths = Int64((seconds * 100).rounded())
    let frac = hundredths % 100
    return "\(hundredths / 100).\(frac < 10 ? "0" : "")\(frac)"
}
