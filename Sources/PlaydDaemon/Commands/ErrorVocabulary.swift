import CoreStream
import PlaydProtocol
import PlaydSessions

/// The one table from a refused command to each protocol's words: the JSON error code
/// and MPD's ACK code (with the message MPD itself sends, where clients match on it).
/// Before issue 40 six places mapped errors between vocabularies, and the same fault
/// came back with two codes depending on the path.
extension PlayerError {
    /// Whatever a command's work threw, as a player error: the one conversion.
    public init(any error: any Error) {
        switch error {
        case let e as PlayerError: self = e
        case let e as StreamError: self.init(e)
        case let e as MusicLibrary.Error: self.init(e.updateRunning ? .updateRunning : .invalidArgument, e.message)
        // Anything unexpected: the engine's `internal`; the message says what.
        default: self.init(.stream(.internalError), "\(error)")
        }
    }

    /// The JSON protocol's code (docs/protocol.md): its own for the player's codes,
    /// the engine's code name for an engine error.
    public var jsonCode: String { Self.wire(code).json }

    /// MPD's ACK for this error.
    public var mpdFailure: MPDSession.Failure {
        if code == .workPending { return .workPending }
        let w = Self.wire(code)
        return MPDSession.Failure(w.mpd, w.mpdMessage ?? message)
    }

    /// The table. `mpdMessage`: MPD's fixed wording, where it has one (mpc and
    /// python-mpd2 users see it, and the differential suite compares it).
    static func wire(_ code: Code) -> (json: String, mpd: MPDSession.Code, mpdMessage: String?) {
        switch code {
        case .badRequest: return (ProtocolErrorCode.badRequest.rawValue, .arg, nil)
        case .invalidArgument: return (ProtocolErrorCode.invalidArgument.rawValue, .arg, nil)
        case .badIndex: return (ProtocolErrorCode.invalidArgument.rawValue, .arg, "Bad song index")
        case .noSuchOutput: return (ProtocolErrorCode.invalidArgument.rawValue, .noExist, "No such audio output")
        case .notPlaying: return (ProtocolErrorCode.notPlaying.rawValue, .playerSync, "Not playing")
        case .noSuchEntry: return (ProtocolErrorCode.invalidArgument.rawValue, .noExist, "No such song")
        case .outsideLibrary: return (ProtocolErrorCode.outsideLibrary.rawValue, .permission, nil)
        case .tooLarge: return (ProtocolErrorCode.tooLarge.rawValue, .playlistMax, nil)
        case .updateRunning: return (ProtocolErrorCode.updateRunning.rawValue, .updateAlready, nil)
        case .noLibrary: return (ProtocolErrorCode.badRequest.rawValue, .system, "No database")
        case .noMixer: return (ProtocolErrorCode.badRequest.rawValue, .system, "No mixer")
        case .noSuchPlaylist: return (ProtocolErrorCode.noSuchPlaylist.rawValue, .noExist, nil)
        case .playlistExists: return (ProtocolErrorCode.playlistExists.rawValue, .exist, nil)
        case .workPending: return (ProtocolErrorCode.internal.rawValue, .system, nil)
        default:
            let name = code.stream?.name ?? ProtocolErrorCode.internal.rawValue
            switch code.stream {
            case .fileNotFound?, .httpNotFound?: return (name, .noExist, nil)
            case .streamNotAllowed?: return (name, .permission, nil)
            case .invalidArgument?: return (name, .arg, nil)
            default: return (name, .system, nil)
            }
        }
    }
}
