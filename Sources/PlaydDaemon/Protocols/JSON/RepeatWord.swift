/// The JSON protocol's one-word view of MPD's two options, `repeat` and `single`
/// (docs/protocol.md). The queue knows only MPD's two; the word is this protocol's (and
/// the state file's, which is written in it for earlier versions to read).
public enum RepeatWord: String, Sendable, CaseIterable {
    /// Stop after the last entry (repeat off, single off).
    case off
    /// Start again from the first (repeat on, single off).
    case on
    /// Play the current entry again (repeat on, single on; a manual `next` moves on).
    case one

    /// The word for MPD's two options: single without repeat has none (`off`).
    public init(repeats: Bool, single: PlayQueue.Single) {
        self = repeats ? (single == .off ? .on : .one) : .off
    }

    /// MPD's two options for the word.
    public var options: (repeats: Bool, single: PlayQueue.Single) {
        (self != .off, self == .one ? .on : .off)
    }
}
