import CFFmpeg
#if canImport(Glibc)
import Glibc
#endif

/// What to export and how.
public struct ExportOptions: Sendable {
    public enum Format: String, Sendable, CaseIterable {
        case wav, flac, m4a

        /// From a file name's extension.
        public init?(path: String) {
            let name = path.split(separator: "/").last.map(String.init) ?? path
            guard let dot = name.lastIndex(of: ".") else { return nil }
            switch name[name.index(after: dot)...].lowercased() {
            case "wav", "wave": self = .wav
            case "flac": self = .flac
            case "m4a", "mp4", "aac": self = .m4a
            default: return nil
            }
        }
    }

    /// Sample format of PCM output: 16-bit, 24-bit integer or 32-bit float.
    public enum Bits: String, Sendable, CaseIterable {
        case s16 = "16", s24 = "24", f32 = "32f"
    }

    public var input: String
    public var output: String
    public var format: Format
    /// Source frames [from, to); nil: the start / the end.
    public var from: Int64?
    public var to: Int64?
    /// Output rate and channels; nil: the source's.
    public var sampleRate: Int?
    public var channels: Int?
    /// nil: 24 for sources deeper than 16 bits, float for float WAV sources, else 16.
    public var bits: Bits?
    /// AAC bit rate, bits per second.
    public var bitRate = 256_000
    /// Replace an existing output.
    public var force = false
    /// AAC encoders to try, best first (the first FFmpeg has is used).
    public var aacEncoders = ["libfdk_aac", "aac"]

    public init(input: String, output: String, format: Format) {
        self.input = input
        self.output = output
        self.format = format
    }
}

/// Renders a track or a region to WAV, FLAC or AAC in M4A with FFmpeg, on the same
/// decoding and seeking path playback uses (``AudioDecoder``: exact seek, read to a
/// limit, the same resampler and the same float → integer conversion as the render
/// thread), so an exported region is exactly what its loop sounds like.
///
/// Writes to a temporary file next to the output and renames it at the end: a failure
/// or a cancel leaves no partial file and never touches an existing one.
///
/// Thread: one at a time. Real-time safe: no (meant for its own process).
public final class Exporter {
    public struct Progress: Sendable {
        public var frames: Int64
        public var totalFrames: Int64
        /// Seconds since the start.
        public var elapsed: Double
        public var rate: Int
        /// Seconds of audio per second of work.
        public var speed: Double { elapsed > 0 ? Double(frames) / Double(rate) / elapsed : 0 }
        public var fraction: Double { totalFrames > 0 ? Double(frames) / Double(totalFrames) : 1 }
        public var secondsLeft: Double? {
            guard speed > 0 else { return nil }
            return Double(totalFrames - frames) / Double(rate) / speed
        }
    }

    public let options: ExportOptions
    /// The encoder used (after `run`): e.g. `pcm_s16le`, `flac`, `aac`.
    public private(set) var encoderName = ""
    /// Whether the input's cover art went into the output.
    public private(set) var coverCopied = false
    /// Why the input's cover art did not go into the output (the audio is exported
    /// all the same); nil when it did or the input has none.
    public private(set) var coverDropped: String?
    /// Encoders that were wanted but are not in this FFmpeg (reported, not fatal).
    public private(set) var fallbacks: [String] = []

    private let decoder: AudioDecoder
    private let outFormat: PCMFormat
    private let from: Int64
    private let to: Int64
    private let total: Int64
    private let bits: ExportOptions.Bits

    /// Opens the input and checks everything that can be checked before any work: the
    /// region, the output directory, an existing output, the format/bits combination.
    public init(_ options: ExportOptions) throws(StreamError) {
        self.options = options
        // Frame-threaded decoding where the codec has it, as the ffmpeg CLI does.
        let probe = try AudioDecoder(path: options.input, threads: 1)
        let info = probe.info
        let rate = options.sampleRate ?? info.sampleRate
        let channels = options.channels ?? info.channels
        guard (8000...384_000).contains(rate), (1...8).contains(channels) else {
            throw StreamError(.invalidArgument, "export: \(rate) Hz, \(channels) channels is not an output format playd writes")
        }
        let length = info.durationFrames
        from = options.from ?? 0
        if let t = options.to { to = t } else if let l = length { to = l } else {
            throw StreamError(.invalidArgument, "\(info.path): its length is unknown; give --to")
        }
        guard from >= 0, from < to else {
            throw StreamError(.invalidArgument, "export: the region [\(from), \(to)) is empty or negative")
        }
        if let l = length, !info.durationIsEstimate, to > l {
            throw StreamError(.invalidArgument, "export: the region ends at \(to), past the end of \(info.path) (\(l))")
        }
        outFormat = PCMFormat(sampleRate: rate, channels: channels)
        total = FrameTime.convert(to - from, from: info.sampleRate, to: rate)
        let deep = (info.bitsPerSample ?? 16) > 16
        bits = options.bits ?? (info.preferredDeviceFormat == .float32 && info.codec.hasPrefix("pcm_f") ? .f32 : deep ? .s24 : .s16)
        if options.format == .flac && bits == .f32 {
            throw StreamError(.invalidArgument, "export: FLAC holds integers; use --bits 16 or 24")
        }
        try Self.checkOutput(options)
        decoder = probe
        try decoder.setOutputFormat(outFormat)
    }

    private static func checkOutput(_ o: ExportOptions) throws(StreamError) {
        let dir = o.output.contains("/") ? String(o.output[..<o.output.lastIndex(of: "/")!]) : "."
        var st = stat()
        guard PathBytes.stat(dir.isEmpty ? "/" : dir, &st) == 0, (st.st_mode & S_IFMT) == S_IFDIR else {
            throw StreamError(.fileNotFound, "export: \(dir): no such directory")
        }
        guard access(dir.isEmpty ? "/" : dir, W_OK) == 0 else {
            throw StreamError(.permissionDenied, "export: \(dir): cannot write there")
        }
        try Self.checkReplaceable(o.output, force: o.force)
    }

    /// An existing output is replaced only with `--force`, and only when it is a regular
    /// file: never a device node, a FIFO, a folder or a symlink (lstat: a dangling
    /// link's target would be created).
    static func checkReplaceable(_ output: String, force: Bool) throws(StreamError) {
        var st = stat()
        guard PathBytes.lstat(output, &st) == 0 else { return }
        guard (st.st_mode & S_IFMT) == S_IFREG else {
            throw StreamError(.notRegularFile, "export: \(output) exists and is not a regular file (a link, device, FIFO or folder); it is never replaced")
        }
        if !force { throw StreamError(.invalidArgument, "export: \(output) exists (use --force to replace it)") }
    }

    /// Runs the export. `progress` is called a few times a second; `cancelled` is
    /// polled, and when it returns true the export stops and removes its temporary file.
    public func run(progress: (Progress) -> Void = { _ in }, cancelled: () -> Bool = { false }) throws(StreamError) {
        let tmp = options.output + ".playd-\(getpid()).tmp"
        var done = false
        defer { if !done { _ = PathBytes.withCPath(tmp) { unlink($0) } } }
        let cover = decoder.info.cover != nil ? try AudioDecoder.coverPicture(path: options.input) : nil
        let encoder = try Encoder(options: options, format: outFormat, bits: bits, path: tmp, tags: decoder.info.tags, cover: cover)
        encoderName = encoder.name
        coverCopied = encoder.coverWritten
        coverDropped = encoder.coverDropped
        fallbacks = encoder.fallbacks
        let chunk = 16_384
        let buffer = UnsafeMutablePointer<Float>.allocate(capacity: chunk * outFormat.channels)
        defer { buffer.deallocate() }
        try decoder.seek(to: from)
        let start = monotonicNanoseconds()
        var last: UInt64 = 0
        var written: Int64 = 0
        while written < total {
            if cancelled() { throw StreamError(.internalError, "export cancelled") }
            var n = try decoder.read(into: buffer, capacity: chunk, limit: to)
            if n == 0 {
                // The resampler came up short of the exact count by a frame or two: pad.
                n = Int(min(Int64(chunk), total - written))
                buffer.update(repeating: 0, count: n * outFormat.channels)
            }
            n = Int(min(Int64(n), total - written))  // and never longer than the region
            try encoder.encode(buffer, frames: n)
            written += Int64(n)
            let now = monotonicNanoseconds()
            if now - last > 200_000_000 {
                last = now
                progress(Progress(frames: written, totalFrames: total, elapsed: Double(now - start) / 1e9, rate: outFormat.sampleRate))
            }
        }
        try encoder.finish()
        progress(Progress(frames: written, totalFrames: total, elapsed: Double(monotonicNanoseconds() - start) / 1e9,
                          rate: outFormat.sampleRate))
        // Checked again: something may have been put there while the export ran.
        try Self.checkReplaceable(options.output, force: true)
        guard PathBytes.withCPath(tmp, { t in PathBytes.withCPath(options.output) { rename(t, $0) } }) == 0 else {
            throw StreamError(.ioError, "export: rename(\(tmp), \(options.output)) failed: \(String(cString: strerror(errno)))")
        }
        done = true
    }

    public var totalFrames: Int64 { total }
    public var outputFormat: PCMFormat { outFormat }
}
