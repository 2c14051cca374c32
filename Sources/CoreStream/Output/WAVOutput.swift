#if canImport(Glibc)
import Glibc
#endif

/// `wav:PATH`: writes exactly the frames the render thread produced to a 32-bit float
/// WAV file, paced like a device by default (`wav:PATH?pace=off` for as fast as possible).
/// Used by tests to capture what was played. Frames are written when "played" by the
/// device clock, so a paused-and-rewound tail never reaches the file.
///
/// The file write on the render thread is the one exception to "no blocking call"
/// there; this output exists for capture and tests, not for listening.
public final class WAVOutput: VirtualDevice {
    public let path: String
    private var fd: Int32 = -1
    private var dataBytes = 0
    private var format = PCMFormat(sampleRate: 0, channels: 0)

    public init(path: String, paced: Bool = true, bufferTimeMicros: Int = 500_000, periodTimeMicros: Int = 125_000) {
        self.path = path
        super.init(spec: "wav:\(path)" + (paced ? "" : "?pace=off"), paced: paced,
                   bufferTimeMicros: bufferTimeMicros, periodTimeMicros: periodTimeMicros)
    }

    override var deviceName: String { "wav:\(path)" }

    override func openSink(_ format: PCMFormat) throws(StreamError) {
        closeSink()
        fd = PathBytes.withCPath(path) { Glibc.open($0, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644) }
        if fd < 0 {
            throw StreamError(.outputUnavailable, "wav:\(path): open() failed: \(String(cString: strerror(errno)))")
        }
        self.format = format
        dataBytes = 0
        writeHeader()
    }

    override func sink(_ samples: UnsafePointer<Float>, frames: Int) {
        guard fd >= 0 else { return }
        let bytes = frames * format.channels * 4
        var done = 0
        let raw = UnsafeRawPointer(samples)
        while done < bytes {
            let n = Glibc.write(fd, raw + done, bytes - done)
            if n <= 0 { if errno == EINTR { continue }; break }
            done += n
        }
        dataBytes += done
    }

    override func closeSink() {
        guard fd >= 0 else { return }
        writeHeader()
        Glibc.close(fd)
        fd = -1
    }

    /// RIFF/WAVE header for IEEE float (format tag 3), with the sizes known so far.
    private func writeHeader() {
        var h = [UInt8]()
        func u32(_ v: Int) { withUnsafeBytes(of: UInt32(truncatingIfNeeded: v).littleEndian) { h += $0 } }
        func u16(_ v: Int) { withUnsafeBytes(of: UInt16(truncatingIfNeeded: v).littleEndian) { h += $0 } }
        h += Array("RIFF".utf8); u32(36 + dataBytes); h += Array("WAVE".utf8)
        h += Array("fmt ".utf8); u32(16); u16(3); u16(format.channels); u32(format.sampleRate)
        u32(format.sampleRate * format.channels * 4); u16(format.channels * 4); u16(32)
        h += Array("data".utf8); u32(dataBytes)
        _ = h.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) }
        _ = lseek(fd, off_t(44 + dataBytes), SEEK_SET)
    }
}
