import CoreStream

/// What a command (or an engine event) changed, in MPD's idle vocabulary: the one set
/// both protocols are told of, from one place (``Player/flush()``).
public struct Changes: OptionSet, Sendable, Hashable {
    public let rawValue: UInt16
    public init(rawValue: UInt16) { self.rawValue = rawValue }

    /// Play state, track, position jumps (seek), loop region, direction, output loss.
    public static let player = Changes(rawValue: 1 << 0)
    /// The queue's entries or its current entry.
    public static let queue = Changes(rawValue: 1 << 1)
    /// repeat, single, random (shuffle), consume; crossfade and MixRamp.
    public static let options = Changes(rawValue: 1 << 2)
    /// Volume and mute.
    public static let mixer = Changes(rawValue: 1 << 3)
    /// An output enabled, disabled, or its feed's state.
    public static let outputs = Changes(rawValue: 1 << 4)
    /// A library scan started or ended.
    public static let update = Changes(rawValue: 1 << 5)
    /// The library's songs changed.
    public static let database = Changes(rawValue: 1 << 6)
    /// A stored playlist changed.
    public static let storedPlaylist = Changes(rawValue: 1 << 7)

    /// MPD `idle` subsystem names.
    public var mpdSubsystems: Set<String> {
        var s: Set<String> = []
        if contains(.player) { s.insert("player") }
        if contains(.queue) { s.insert("playlist") }
        if contains(.options) { s.insert("options") }
        if contains(.mixer) { s.insert("mixer") }
        if contains(.outputs) { s.insert("output") }
        if contains(.update) { s.insert("update") }
        if contains(.database) { s.insert("database") }
        if contains(.storedPlaylist) { s.insert("stored_playlist") }
        return s
    }
}

/// Something that happened in the player, for subscribers. Protocol-neutral: the JSON
/// session encodes it as an event line; MPD sessions only see its ``changes``.
public enum PlayerEvent: Sendable {
    case track(TrackInfo)
    case trackEnd(path: String)
    /// The play state changed. A pause is told once the sound has stopped, with the
    /// frame it stopped at (and its time in seconds): the position every status reports
    /// from then on. Nil for the other states.
    case state(Transport.State, position: (frame: Int64, seconds: Double)?)
    /// A seek landed (position jumps): frame and seconds.
    case seeked(frame: Int64, seconds: Double)
    case underruns(Int)
    case corruptPackets(path: String, count: Int)
    case error(code: String, message: String)
    case loopWrapped(passes: Int64, remaining: Int64?)
    case loop(Player.LoopView?)
    case direction(PlayDirection)
    case volume(Int, muted: Bool)
    /// The queue's length or current entry changed; `edited`: its entries did.
    case queue(length: Int, current: Int?, edited: Bool)
    case options(repeats: Bool, single: PlayQueue.Single, shuffle: Bool, consume: Bool)
    /// The cross-fade settings were set (MPD's idle `options`).
    case crossfade(Player.CrossfadeSettings)
    case output(PlaybackEngine.OutputReport)
    case skipped(entry: Int, path: String, code: String, message: String)
    case outputLost(code: String, message: String, retryMillis: Int64)
    case outputRestored(afterMillis: Int64, attempts: Int)
    case updateStarted(job: Int)
    case updateRunning(job: Int, scanned: Int, rate: Double)
    case updateFinished(MusicLibrary.ScanReport, songs: Int)
    /// A stream is being connected to (status `buffering`).
    case buffering(url: String)
    /// The playing stream's ICY title changed.
    case streamTitle(path: String, title: String?)
    /// The playing stream dropped; reconnect `attempt` comes after its backoff.
    case streamReconnecting(path: String, attempt: Int, cause: String)
    case streamReconnected(path: String)
    /// A stored playlist was made, changed, renamed (its new name) or removed.
    case storedPlaylist(name: String)
    /// An announcement began: over the music from its source frame, or alone (nil).
    case announcementStarted(source: String, musicFrame: Int64?)
    /// An announcement ended: played out, cancelled, or refused (`error`).
    case announcementEnded(source: String, cancelled: Bool, error: PlayerError?)
    /// The schedule's block changed, or a client's override began (`schedule` reads it).
    case schedule

    /// What the event means for MPD's idle subsystems.
    public var changes: Changes {
        switch self {
        case .track, .trackEnd, .state, .seeked, .loop, .direction, .outputLost, .outputRestored: return .player
        case .buffering, .streamTitle, .streamReconnecting, .streamReconnected: return .player
        case .error: return .player
        case .volume: return .mixer
        case .queue(_, _, let edited): return edited ? .queue : .player
        case .skipped: return .queue
        case .options, .crossfade: return .options
        case .output: return .outputs
        case .storedPlaylist: return .storedPlaylist
        case .updateStarted: return .update
        case .updateFinished(let r, _): return r.added + r.updated + r.removed > 0 ? [.update, .database] : .update
        case .underruns, .corruptPackets, .loopWrapped, .updateRunning: return []
        // Not MPD news: MPD has no announcements (its clients send them as messages).
        case .announcementStarted, .announcementEnded, .schedule: return []
        }
    }
}
