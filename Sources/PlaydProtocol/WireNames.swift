/// The JSON protocol's event names (docs/protocol.md, "Events"): the daemon's encoder
/// (JSONEncoding.event) writes them and `playctl watch` reads them from this one list,
/// so neither can name an event the other does not know (issue 40).
public enum EventName: String, CaseIterable, Sendable {
    case track, trackEnd = "track_end", state, seeked, underrun, corruptPackets = "corrupt_packets", error
    case loopWrapped = "loop_wrapped", loop, direction, volume, queue, options, crossfade, output, skipped
    case outputLost = "output_lost", outputRestored = "output_restored", update, buffering
    case storedPlaylist = "stored_playlist", announcementStarted = "announcement_started"
    case announcementEnded = "announcement_ended", metadata, reconnecting, reconnected, schedule
    /// The periodic tick of a subscription with `ticks`.
    case position
}

/// The members of a `status` reply that `playctl status` shows. The daemon's encoder
/// writes each (StatusKeyTests checks a playing status has every one), playctl reads
/// them by these names only.
public enum StatusKey: String, CaseIterable, Sendable {
    case state, file, title, artist, album, date, position, duration, stream, loop, direction, queue
    case volume, muted, replayGain = "replay_gain", output
}

extension JSON {
    /// A `status` member by its typed name.
    public subscript(_ key: StatusKey) -> JSON? { self[key.rawValue] }
}
