/// The control protocol's own error codes (docs/protocol.md). Errors from the engine
/// (a file that cannot be played, a device that fails) carry the engine's code name
/// unchanged, e.g. `file_not_found`, `truncated`, `output_unavailable`.
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
    /// A position or region outside the track.
    case invalidArgument = "invalid_argument"
    /// A path outside `library.music_roots` (and `library.allow_outside_roots` is off).
    case outsideLibrary = "outside_library"
    /// `update` while a library update runs.
    case updateRunning = "update_running"
    /// The connecting process's user and groups are not in `control.allowed_users` /
    /// `control.allowed_groups`; the connection is closed after this line.
    case notAllowed = "not_allowed"
    /// A connection limit (`limits.max_connections`, `limits.max_connections_per_user`)
    /// or the process's file descriptors are used up; the connection is closed after
    /// this line.
    case tooManyConnections = "too_many_connections"
    /// A playlist, folder or queue over its size limit (`limits.*`); nothing was added.
    case tooLarge = "too_large"
    /// Stored playlists: no playlist of that name, or one of that name exists.
    case noSuchPlaylist = "no_such_playlist"
    case playlistExists = "playlist_exists"
    /// Anything unexpected; the message says what.
    case `internal` = "internal"
}
