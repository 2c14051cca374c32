#if canImport(Glibc)
import Glibc
#endif

/// Writes a short demo track (a few bars of a C-major arpeggio with a soft bass) as a
/// 44.1 kHz 16-bit stereo WAV, so the first run has something to play without any
/// media on the machine. It is decoded through FFmpeg like any other file.
enum DemoTrack {
    static func write(to path: String, seconds: Int = 8) throws {
        let rate = 44100
        let frames = rate * seconds
        var pcm = [Int16](repeating: 0, count: frames * 2)
        let notes: [Double] = [261.63, 329.63, 392.00, 523.25, 392.00, 329.63]  // C E G C G E
        let noteFrames = rate / 4
        for f in 0..<frames {
            let t = Double(f) / Double(rate)
            let n = f / noteFrames
            let inNote = Double(f % noteFrames) / Double(noteFrames)
            let env = min(1, inNote * 40) * exp(-3 * inNote)
            let melody = sin(2 * .pi * notes[n % notes.count] * t) * env
            let bass = sin(2 * .pi * (n / 8 % 2 == 0 ? 130.81 : 98.0) * t) * 0.5
            let fade = min(1, Double(frames - f) / Double(rate / 2))
            let left = (0.35 * melody + 0.15 * bass) * fade
            let right = (0.25 * melody + 0.2 * bass) * fade
            pcm[2 * f] = Int16(left * 32767)
            pcm[2 * f + 1] = Int16(right * 32767)
        }
        var header = [UInt8]()
        func u32(_ v: Int) { withUnsafeBytes(of: UInt32(v).littleEndian) { header += $0 } }
        func u16(_ v: Int) { withUnsafeBytes(of: UInt16(v).littleEndian) { header += $0 } }
        let dataBytes = pcm.count * 2
        header += Array("RIFF".utf8); u32(36 + dataBytes); header += Array("WAVE".utf8)
        header += Array("fmt ".utf8); u32(16); u16(1); u16(2); u32(rate); u32(rate * 4); u16(4); u16(16)
        header += Array("data".utf8); u32(dataBytes)
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw DemoError(message: "cannot write \(path): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        let ok = header.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) == $0.count }
            && pcm.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) == $0.count }
        if !ok { throw DemoError(message: "cannot write \(path): \(String(cString: strerror(errno)))") }
    }

    struct DemoError: Error, CustomStringConvertible {
        var message: String
        var description: String { message }
    }
}
