/// The control protocol's fixed set of error codes (docs/protocol.md).
public enum ProtocolErrorCode: String, CaseIterable, Sendable {
    /// The line is not valid JSON, or not a JSON object.
    case badJSON = "bad_json"
    /// A field is missing, has the wrong type, or a value is out of range.
    case badRequest = "bad_request"
    /// `cmd` names no command.
    case unknownCommand = "unknown_command"
    /// The line exceeded the size limit (the rest of it was discarded).
    case lineTooLong = "line_too_long"
    /// The command needs a track (seek, loop while stopped).
    case notPlaying = "not_playing"
    // The engine's file and device errors, with the same names as StreamError.Code.
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
    case outputUnavailable = "output_unavailable"
    case outputFailed = "output_failed"
    case ioError = "io_error"
    case `internal` = "internal"
}
