import CoreStream

/// What the protocols read of the engine, taken once for a reply: the playback state
/// as clients see it (``Player/playerStatus()``: the frame an output's recovery will
/// resume from, stopped while the music waits for a TTS clip) and the outputs. Protocol
/// code reads these, never `player.engine` (issue 40: it reached into the engine in 11
/// places, some past those corrections). The queue, options, level and crossfade are
/// the Player's own fields, read there.
public struct PlayerSnapshot: Sendable {
    public let status: PlaybackEngine.Status
    public let outputs: [PlaybackEngine.OutputReport]

    /// The track heard, unless stopped.
    public var playing: TrackInfo? { status.state == .stopped ? nil : status.track }
}

extension Player {
    /// The engine's state for one reply. Control thread.
    public func snapshot() -> PlayerSnapshot {
        PlayerSnapshot(status: playerStatus(), outputs: engine.outputs())
    }
}
