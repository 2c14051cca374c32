/// An error from the streaming engine: opening a file, decoding it, or driving an output.
///
/// Modelled on swift-nio's `FileSystemError`: a ``Code`` that programs match on (the
/// control protocol sends it as a string), a human `message` that names the file or
/// device and the failing call, and an optional underlying `cause`.
public struct StreamError: Error, Sendable, CustomStringConvertible {
    /// A stable error code. A struct wrapping a private enum, so codes can be added
    /// without breaking exhaustive switches in clients.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Value: String, Hashable, Sendable {
            case fileNotFound = "file_not_found"
            case isDirectory = "is_directory"
            case permissionDenied = "permission_denied"
            case emptyFile = "empty_file"
            case notAudio = "not_audio"
            case noAudioStream = "no_audio_stream"
            case truncated = "truncated"
            case encrypted = "encrypted"
            case corrupt = "corrupt"
            case unsupportedCodec = "unsupported_codec"
            case unsupportedFormat = "unsupported_format"
            case invalidArgument = "invalid_argument"
            case notPlaying = "not_playing"
            case outputUnavailable = "output_unavailable"
            case outputFailed = "output_failed"
            case ioError = "io_error"
            case outsideRoots = "outside_library"
            case notRegularFile = "not_regular_file"
            case tooLarge = "too_large"
            case internalError = "internal"
            case notSeekable = "not_seekable"
            case httpNotFound = "http_not_found"
            case httpForbidden = "http_forbidden"
            case httpError = "http_error"
            case unreachable = "unreachable"
            case timedOut = "timed_out"
            case streamNotAllowed = "stream_not_allowed"
        }
        private let value: Value
        private init(_ value: Value) { self.value = value }

        /// The path does not exist.
        public static let fileNotFound = Code(.fileNotFound)
        /// The path names a directory, not a file.
        public static let isDirectory = Code(.isDirectory)
        /// The file exists but this process may not read it.
        public static let permissionDenied = Code(.permissionDenied)
        /// The file has zero bytes.
        public static let emptyFile = Code(.emptyFile)
        /// FFmpeg recognises no audio container in the file (text, an image, random bytes).
        public static let notAudio = Code(.notAudio)
        /// A media container with streams, none of them audio (e.g. video only).
        public static let noAudioStream = Code(.noAudioStream)
        /// The container declares more audio than the file holds.
        public static let truncated = Code(.truncated)
        /// The audio is encrypted (DRM / CENC) and cannot be decoded.
        public static let encrypted = Code(.encrypted)
        /// The audio stream is damaged so badly that no frame decodes.
        public static let corrupt = Code(.corrupt)
        /// FFmpeg has no decoder for this stream's codec.
        public static let unsupportedCodec = Code(.unsupportedCodec)
        /// A sample format, rate or channel count the engine cannot convert.
        public static let unsupportedFormat = Code(.unsupportedFormat)
        /// A position, range or option out of bounds.
        public static let invalidArgument = Code(.invalidArgument)
        /// The operation needs a track playing and none is (e.g. `setNext` after the
        /// last track ended: a race the caller resolves by playing instead).
        public static let notPlaying = Code(.notPlaying)
        /// No output in the fallback chain could be opened.
        public static let outputUnavailable = Code(.outputUnavailable)
        /// An open output failed while playing (device lost, write error).
        public static let outputFailed = Code(.outputFailed)
        /// The path resolves outside the music roots (said the same way whether or not
        /// it exists there).
        public static let outsideRoots = Code(.outsideRoots)
        /// A FIFO, socket or device where a file was expected: never opened for reading.
        public static let notRegularFile = Code(.notRegularFile)
        /// A file, list or request over its size limit.
        public static let tooLarge = Code(.tooLarge)
        /// A read or write failed at the operating-system level.
        public static let ioError = Code(.ioError)
        /// A bug or an unexpected library state.
        public static let internalError = Code(.internalError)
        /// A live stream: it has no positions to seek to, loop or play backwards.
        public static let notSeekable = Code(.notSeekable)
        /// The server answered 404 (or 410).
        public static let httpNotFound = Code(.httpNotFound)
        /// The server answered 401 or 403.
        public static let httpForbidden = Code(.httpForbidden)
        /// Another HTTP failure: 400, another 4xx, a 5xx.
        public static let httpError = Code(.httpError)
        /// The host could not be reached (no such name, connection refused or reset).
        public static let unreachable = Code(.unreachable)
        /// The server did not answer within `streams.timeout`.
        public static let timedOut = Code(.timedOut)
        /// Streams are off (`streams.enabled`), the URL's scheme is not http or https, or
        /// its host is not in `streams.allowed_hosts`.
        public static let streamNotAllowed = Code(.streamNotAllowed)

        /// The wire name, e.g. `"file_not_found"`.
        public var name: String { value.rawValue }
        public var description: String { value.rawValue }
    }

    public var code: Code
    /// What went wrong, naming the file or device and, for library failures, the call:
    /// `"song.flac: avformat_open_input() failed: Invalid data found when processing input"`.
    public var message: String
    /// The error this one wraps, if any.
    public var cause: (any Error & Sendable)?

    public init(_ code: Code, _ message: String, cause: (any Error & Sendable)? = nil) {
        self.code = code
        self.message = message
        self.cause = cause
    }

    public var description: String { "\(code.name): \(message)" }
}
