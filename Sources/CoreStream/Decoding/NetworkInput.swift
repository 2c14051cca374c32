import CFFmpeg
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// What a playing network stream reports, on the reader thread.
public enum StreamEvent: Sendable, Equatable {
    /// The ICY `StreamTitle` changed (nil: cleared).
    case title(String?)
    /// The connection dropped (`cause`); attempt `attempt` of the configured number
    /// starts after its backoff.
    case reconnecting(attempt: Int, cause: String)
    /// Connected again; the stream goes on.
    case reconnected
}

/// What a network stream may do and how long it may take. Set from the daemon's
/// `[streams]` config; the defaults are the config's.
public struct StreamOptions: Sendable {
    /// How long a connect, or a read with nothing arriving, may take before the stream
    /// fails (`timed_out`) or, when it was playing, reconnects.
    public var timeoutSeconds = 10.0
    /// Reconnect attempts after a playing stream drops, with backoff 1, 2, 4, 8 s and
    /// then every 8 s; after them the stream ends (the queue moves on).
    public var reconnectAttempts = 5
    /// Bytes FFmpeg may read while it probes what the stream holds.
    public var probeBytes = 128 * 1024
    /// The network buffer of a stream that cannot seek (``NetworkBuffer``): its size,
    /// and what is gathered before the first frame. 128 KiB is 8 s of a 128 kbit/s
    /// radio (1 s of a 1 Mbit/s FLAC stream); 32 KiB is 2 s of it, and less than the
    /// 64 KiB burst an Icecast server sends a new listener at once.
    public var bufferBytes = 128 * 1024
    public var prefillBytes = 32 * 1024
    /// Called on the opening thread as the prefill grows (percent, 0…100).
    public var onPrefill: (@Sendable (Int) -> Void)?
    /// Cancels an open or a read in progress from another thread (a newer request).
    public var cancel: StreamCancel?
    /// `streams.allowed_hosts` (empty: any): the host of the URL and of every redirect
    /// must be one (``NetworkInput/hostAllowed(_:_:)``), checked before it is connected to.
    public var allowedHosts: [String] = []
    public init() {}
}

/// A flag another thread sets to make a stream's blocked calls give up. Thread: any.
public final class StreamCancel: Sendable {
    private let flag = Atomic<Bool>(false)
    public init() {}
    public func cancel() { flag.store(true, ordering: .relaxed) }
    public var isCancelled: Bool { flag.load(ordering: .relaxed) }
}

/// Lets a blocked connect, read or backoff wait give way: FFmpeg calls
/// ``NetworkInput/interruptCallback`` from inside its network calls on the thread doing
/// them. Thread: `abort` any; `mailbox` set on the reader thread before its reads (the
/// engine's command queue hands the decoder over), read there only.
final class StreamInterrupt: @unchecked Sendable {
    // @unchecked Sendable: `abort` is atomic; `mailbox` and `deadline` belong to the
    // thread that uses the decoder (the opener, then the reader after a handoff).
    let abort = Atomic<Bool>(false)
    /// The opener's cancel flag, if it gave one.
    let cancel: StreamCancel?
    init(cancel: StreamCancel?) { self.cancel = cancel }
    /// The reader's commands: one waiting (stop, play, seek, quit) breaks off a wait.
    var mailbox: ReaderMailbox?
    /// Monotonic nanoseconds after which a blocked call gives up (0: none).
    var deadline: UInt64 = 0

    var shouldAbort: Bool {
        if abort.load(ordering: .relaxed) || cancel?.isCancelled == true { return true }
        if let m = mailbox, m.abandoning.load(ordering: .relaxed) { return true }
        return deadline != 0 && monotonicNanoseconds() > deadline
    }
}

/// Opening network streams for FFmpeg. Only `http` and `https` URLs are streams. The
/// connection is playd's own (``HTTPSource``, libcurl: http and https only, each
/// redirect checked before it is followed); the demuxer reads it and may open nothing
/// by itself (protocol allow-list `none`: no `file:`, `concat:`, `subfile:`, no HLS
/// segment), so a server cannot make playd read local files or go elsewhere.
///
/// Thread: any. Real-time safe: no (network I/O).
public enum NetworkInput {

    /// Whether `path` is a URL playd plays as a stream (http or https, any case).
    public static func isStreamURL(_ path: String) -> Bool {
        let lower = path.prefix(8).lowercased()
        return lower.hasPrefix("http://") || lower.hasPrefix("https://")
    }

    /// Whether `path` names a URL of any scheme (`x:` … `//`), which is not a stream
    /// unless ``isStreamURL(_:)``: `file://…`, `ftp://…` are refused rather than taken
    /// for a relative path.
    public static func hasScheme(_ path: String) -> Bool {
        guard let colon = path.firstIndex(of: ":"), colon != path.startIndex else { return false }
        let scheme = path[..<colon]
        return scheme.allSatisfy { $0.isLetter || $0.isNumber || $0 == "+" || $0 == "-" || $0 == "." }
            && scheme.first!.isLetter && path[colon...].hasPrefix("://")
    }

    /// The host of an http(s) URL, lowercased, without port or user info.
    public static func host(_ url: String) -> String? {
        guard isStreamURL(url), let start = url.firstRange(of: "://")?.upperBound else { return nil }
        var rest = url[start...]
        if let end = rest.firstIndex(where: { $0 == "/" || $0 == "?" || $0 == "#" }) { rest = rest[..<end] }
        if let at = rest.lastIndex(of: "@") { rest = rest[rest.index(after: at)...] }
        if rest.hasPrefix("["), let close = rest.firstIndex(of: "]") { return String(rest[rest.index(after: rest.startIndex)..<close]).lowercased() }
        if let colon = rest.lastIndex(of: ":") { rest = rest[..<colon] }
        return rest.isEmpty ? nil : rest.lowercased()
    }

    /// Whether `host` is in `hosts` (`streams.allowed_hosts`; empty: every host): the
    /// same name, or under an entry that starts with a dot (`.example.net`).
    public static func hostAllowed(_ host: String, _ hosts: [String]) -> Bool {
        hosts.isEmpty || hosts.contains { $0 == host || ($0.hasPrefix(".") && host.hasSuffix($0)) }
    }

    static let interruptCallback: @convention(c) (UnsafeMutableRawPointer?) -> Int32 = { opaque in
        guard let opaque else { return 0 }
        return Unmanaged<StreamInterrupt>.fromOpaque(opaque).takeUnretainedValue().shouldAbort ? 1 : 0
    }

    /// Opens `url` with the audio demuxers ``MediaInput`` allows, through a
    /// ``NetworkBuffer`` (kept in the context's `opaque`, released by
    /// ``MediaInput/close(_:)``). The caller keeps `interrupt` alive as long as the
    /// context. Errors are typed: HTTP status, an unreachable host, a timeout.
    static func open(_ url: String, options: StreamOptions, interrupt: StreamInterrupt) throws(StreamError) -> UnsafeMutablePointer<AVFormatContext> {
        _ = FFmpegCall.quietLogging
        guard isStreamURL(url) else { throw StreamError(.streamNotAllowed, "\(url): only http and https streams are played") }
        let timeoutMicros = Int64(max(0.1, min(options.timeoutSeconds, 3600)) * 1_000_000)
        interrupt.deadline = monotonicNanoseconds() + UInt64(timeoutMicros) * 1000
        defer { interrupt.deadline = 0 }
        let buffer = try NetworkBuffer(url: url, options: options, interrupt: interrupt)
        var dict: OpaquePointer?
        defer { av_dict_free(&dict) }
        av_dict_set(&dict, "analyzeduration", "1000000", 0)
        let cb = AVIOInterruptCB(callback: interruptCallback, opaque: Unmanaged.passUnretained(interrupt).toOpaque())
        var ctx: UnsafeMutablePointer<AVFormatContext>?
        var detected: UnsafePointer<CChar>?
        let probe = UInt32(max(4096, min(options.probeBytes, 16 << 20)))
        av_dict_set(&dict, "probesize", "\(probe)", 0)
        let ret = cffmpeg_open_pb_input(buffer.demuxerIO, url, MediaInput.allowList, cb, probe, &dict, &ctx, &detected)
        if ret == 1 {
            buffer.close()
            throw StreamError(.unsupportedFormat, "\(url): a \(detected.map { String(cString: $0) } ?? "?") stream, which playd does not open")
        }
        guard ret >= 0, let fmt = ctx else {
            buffer.close()
            throw error(url, ret, interrupt: interrupt, call: "avformat_open_input")
        }
        fmt.pointee.opaque = Unmanaged.passRetained(buffer).toOpaque()
        // A stream that cannot seek has no use for a seek index, which libavformat
        // grows by an entry per MP3 frame up to 1 MiB (measured: +860 kB over 30
        // minutes of a 128 kbit/s radio); halved whenever it reaches this size.
        if buffer.isBuffered { fmt.pointee.max_index_size = 16 * 1024 }
        return fmt
    }

    /// The network buffer of a context ``open(_:options:interrupt:)`` made, or nil.
    static func buffer(of ctx: UnsafeMutablePointer<AVFormatContext>) -> NetworkBuffer? {
        ctx.pointee.opaque.map { Unmanaged<NetworkBuffer>.fromOpaque($0).takeUnretainedValue() }
    }

    /// The body of `url` (a radio's `.pls`/`.m3u` link), at most `limit` bytes (more is
    /// `too_large`), through the same transport as a stream (its redirects checked) and
    /// within its timeout.
    public static func fetch(_ url: String, limit: Int, options: StreamOptions) throws(StreamError) -> [UInt8] {
        _ = FFmpegCall.quietLogging
        guard isStreamURL(url) else { throw StreamError(.streamNotAllowed, "\(url): only http and https URLs are fetched") }
        let interrupt = StreamInterrupt(cancel: options.cancel)
        interrupt.deadline = monotonicNanoseconds() + UInt64(max(0.1, min(options.timeoutSeconds, 3600)) * 1e9)
        let src = try HTTPSource(url: url, allowedHosts: options.allowedHosts, timeoutSeconds: options.timeoutSeconds,
                                 shouldAbort: { interrupt.shouldAbort }) { code in
            error(url, code, interrupt: interrupt, call: "connect")
        }
        defer { src.close() }
        var out: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 16_384)
        while true {
            let n = chunk.withUnsafeMutableBufferPointer { src.read($0.baseAddress!, $0.count) }
            // A playlist may end with the connection (no length): that is its end.
            if n == FFmpegCall.eof || n == 0 || (n == cffmpeg_averror(EIO) && src.closedWithoutLength) { break }
            guard n > 0 else { throw error(url, n, interrupt: interrupt, call: "read") }
            out += chunk[0..<Int(n)]
            guard out.count <= limit else {
                throw StreamError(.tooLarge, "\(url): the playlist is larger than \(limit) bytes (limits.max_playlist_size)")
            }
        }
        return out
    }

    /// A network failure as a typed error.
    static func error(_ url: String, _ ret: Int32, interrupt: StreamInterrupt, call: String) -> StreamError {
        let text = FFmpegCall.describe(ret)
        switch ret {
        case cffmpeg_averror_http_not_found():
            return StreamError(.httpNotFound, "\(url): the server answered 404 Not Found")
        case cffmpeg_averror_http_forbidden(), cffmpeg_averror_http_unauthorized():
            return StreamError(.httpForbidden, "\(url): the server refused access (\(text))")
        case cffmpeg_averror_http_bad_request(), cffmpeg_averror_http_other_4xx(), cffmpeg_averror_http_server_error():
            return StreamError(.httpError, "\(url): the server answered with an error (\(text))")
        case cffmpeg_averror_exit() where interrupt.cancel?.isCancelled == true || interrupt.abort.load(ordering: .relaxed):
            return StreamError(.ioError, "\(url): cancelled")
        case cffmpeg_averror_exit() where interrupt.mailbox?.abandoning.load(ordering: .relaxed) != true:
            return StreamError(.timedOut, "\(url): no answer within the timeout")
        case cffmpeg_averror_invaliddata(), cffmpeg_averror(EINVAL):
            // What the server sent is no audio container playd opens (an HLS or DASH
            // playlist among them: their demuxers are not allowed).
            return StreamError(.notAudio, "\(url): not an audio stream playd opens (\(call)() failed: \(text))")
        case cffmpeg_averror(ETIMEDOUT):
            return StreamError(.timedOut, "\(url): no answer within the timeout (\(text))")
        case cffmpeg_averror(ECONNREFUSED), cffmpeg_averror(EHOSTUNREACH), cffmpeg_averror(ENETUNREACH),
             cffmpeg_averror(ECONNRESET), cffmpeg_averror(EIO):
            return StreamError(.unreachable, "\(url): \(call)() failed: \(text)")
        default:
            if text.lowercased().contains("resolve") || text.lowercased().contains("name") {
                return StreamError(.unreachable, "\(url): \(call)() failed: \(text)")
            }
            return StreamError(.ioError, "\(url): \(call)() failed: \(text)")
        }
    }

    /// The ICY `StreamTitle` of the audio read last, or nil when none came.
    static func streamTitle(_ ctx: UnsafeMutablePointer<AVFormatContext>) -> String? {
        buffer(of: ctx)?.currentTitle()
    }

    /// `icy-name` from the response headers (the station's name), or nil.
    static func stationName(_ ctx: UnsafeMutablePointer<AVFormatContext>) -> String? {
        buffer(of: ctx)?.stationName
    }

    /// See ``ICYText/streamTitle(_:)``.
    public static func parseStreamTitle(_ block: String) -> String? { ICYText.streamTitle(block) }

    /// See ``ICYText/splitTitle(_:)``.
    public static func splitTitle(_ s: String) -> (artist: String?, title: String) { ICYText.splitTitle(s) }
}
