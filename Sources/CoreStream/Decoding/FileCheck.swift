#if canImport(Glibc)
import Glibc
#endif

/// Checks FFmpeg does not make. (Which files are opened at all: ``LocalFile`` and
/// ``MediaInput``.)
enum FileCheck {
    /// FFmpeg's WAV demuxer quietly clips a data chunk that runs past the end of the
    /// file, so a truncated WAV is found by comparing the RIFF header with the file size.
    static func checkRIFFLength(_ path: String, container: String) throws(StreamError) {
        guard container == "wav" || container == "w64" else { return }
        guard let (fd, _) = try? LocalFile.openRegular(path) else { return }
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
