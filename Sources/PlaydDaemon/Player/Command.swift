import CoreStream
import PlaydProtocol

/// A validated request to the player, whichever protocol it came in on. The sessions
/// parse and range-check their wire format into these (JSON: JSONCommands.swift; MPD:
/// MPDCommands.swift); ``Player/perform(_:)`` carries them out.
///
/// Adding a command to both protocols: one case here, one `Player` method (called from
/// `perform`), one row in each protocol's table (CONTRIBUTING.md).
public enum Command: Sendable {
    public enum Transport: String, Sendable { case pause, resume, toggle, stop }
    /// Where `add` puts new entries.
    public enum Place: Sendable, Equatable {
        case end
        /// Right after the current entry ("play next").
        case next
        case index(Int)
    }
    public enum Volume: Sendable, Equatable {
        case set(Bounded<VolumeLevel>)
        case change(Bounded<VolumeStep>)
    }

    /// A file outside the queue, from `at` (source frames; nil: the start).
    case playFile(path: String, at: Int64?, atSeconds: Double?)
    /// The queue entry at an index (MPD `play N`, JSON `index`).
    case playIndex(Int)
    /// The queue entry with an id (MPD `playid N`, JSON `entry`).
    case playID(Int)
    /// Resume when paused, else start the queue (MPD `play`, JSON `play` with nothing).
    case playQueue
    case transport(Transport)
    /// Seek in the current track.
    case seek(SeekTarget)
    /// Play queue entry `index` (if it is not the current one) and seek in it (MPD
    /// `seek`, `seekid`: an absolute target).
    case seekEntry(index: Int, at: SeekTarget)
    case next
    case previous
    /// Entries from files, folders and playlists (expanded and checked against the roots).
    case add(sources: [String], place: Place)
    /// Queue entries `range` out (one state write, one notification, however many).
    case remove(Range<Int>)
    case move(Range<Int>, to: Int)
    /// MPD's priority for the entries at these indices.
    case priority(Bounded<Priority>, indices: [Int])
    /// Two entries change places (MPD `swap`/`swapid`).
    case swap(Int, Int)
    /// The entries in the range (nil: all) in a new random order; a playing entry in
    /// it goes first (MPD `shuffle`).
    case shuffle(Range<Int>?)
    case clear
    case setRepeat(Bool)
    case setSingle(PlayQueue.Single)
    /// MPD's two options at once (JSON's one-word `repeat`: RepeatWord).
    case setRepeatSingle(repeats: Bool, single: PlayQueue.Single)
    case setRandom(Bool)
    case setConsume(Bool)
    /// MPD's `crossfade` (whole seconds, 0: off), `mixrampdb`, `mixrampdelay` (≤ 0 or
    /// NaN: MixRamp off). See Player+Crossfade.swift.
    case setCrossfade(seconds: Int)
    case setMixRampDB(Double)
    case setMixRampDelay(Double)
    case volume(Volume)
    case replayGain(ReplayGainMode)
    /// nil: toggle.
    case mute(Bool?)
    /// nil: clear.
    case loop(LoopRegion?)
    case direction(PlayDirection)
    case output(name: String, enabled: Bool)
    /// Start a library scan (of a path under the roots, or all).
    case update(path: String?)
    /// Stored playlists (``StoredPlaylists``): the queue saved under a new name; a
    /// playlist's entries (a range of them) queued; entries appended, removed, moved;
    /// a playlist emptied, renamed, removed.
    case savePlaylist(String)
    case loadPlaylist(String, range: Range<Int>?, place: Place)
    case playlistAdd(String, sources: [String], at: Int?)
    case playlistClear(String)
    case playlistDelete(String, Range<Int>)
    case playlistMove(String, from: Int, to: Int)
    case playlistRename(String, to: String)
    case playlistRemove(String)
    /// An announcement over the music (or queued behind the one playing).
    case announce(Player.AnnounceRequest)
    /// Stop the announcement playing (the next waiting one follows).
    case cancelAnnouncement
}

/// A number checked against its range once, where it comes in (issue 40: a volume was
/// checked by the protocol's argument kind and again by the Player). From a client, the
/// command's spec reads it through a kind whose range is `B.range` (Arguments.swift),
/// and makes it with ``init(read:)``; an in-process caller (the schedule, a test) makes
/// it with ``init(checking:)``, a typed error out of range. The Player takes it as it is.
public struct Bounded<B: Bounds>: Sendable, Equatable {
    public let value: Int
    public init(checking value: Int) throws(PlayerError) {
        guard B.range.contains(value) else { throw PlayerError(.invalidArgument, "\(B.what) is \(B.range.lowerBound)…\(B.range.upperBound), not \(value)") }
        self.value = value
    }
    /// A value its argument kind has read within `B.range`: the specs only.
    init(read value: Int) { self.value = value }
}

/// A range a ``Bounded`` number is checked against, and what it is called in errors.
public protocol Bounds: Sendable {
    static var range: ClosedRange<Int> { get }
    static var what: String { get }
}
public enum VolumeLevel: Bounds {
    public static let range = 0...100
    public static let what = "the volume"
}
public enum VolumeStep: Bounds {
    public static let range = -100...100
    public static let what = "a volume change"
}
/// MPD's queue priority (MPD 0.23: 0…255).
public enum Priority: Bounds {
    public static let range = 0...255
    public static let what = "a priority"
}

/// Where a seek goes, checked once where it came in (as ``Bounded``): frames within the
/// engine's 2^53, seconds finite; signed, and `relative` from the position heard (else a
/// negative one is the start). Seconds become frames at the track's rate in the Player.
public struct SeekTarget: Sendable, Equatable {
    public enum Amount: Sendable, Equatable {
        case frames(Int64)
        case seconds(Double)
    }
    public let amount: Amount
    public let relative: Bool
    public init(checking amount: Amount, relative: Bool) throws(PlayerError) {
        switch amount {
        case .frames(let f):
            guard f.magnitude <= UInt64(FrameTime.maxFrames) else { throw PlayerError(.badRequest, "\(f) frames is out of range") }
        case .seconds(let s):
            guard s.isFinite else { throw PlayerError(.badRequest, "\(s) s is out of range") }
        }
        self.init(read: amount, relative: relative)
    }
    /// A time its argument kind has read (finite; frames within 2^53): the specs only.
    init(read amount: Amount, relative: Bool) {
        self.amount = amount
        self.relative = relative
    }
}

/// What a command did, for the replies (everything else is read from the player).
public struct Outcome: Sendable, Equatable {
    /// Ids of the entries `add` made.
    public var added: [Int] = []
    /// Entries `add` left out because a folder's symlink or a playlist line led out of
    /// the music roots.
    public var outsideRoots = 0
    /// Where a seek landed.
    public var seekedTo: Int64?
    /// A file `playFile` played (resolved).
    public var file: String?
    /// The library scan started.
    public var job: Int?
    /// An announcement: 0 when it plays now, else how many play before it.
    public var waiting: Int?
    public init() {}
}

/// A command refused: a code both protocols map to theirs, and a message for people.
public struct PlayerError: Error, Sendable, CustomStringConvertible {
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        fileprivate enum Kind: String { case badRequest, invalidArgument, badIndex, noSuchOutput, notPlaying, noSuchEntry, outsideLibrary, tooLarge,
                                             updateRunning, noLibrary, noMixer, stream, workPending,
                                             noSuchPlaylist, playlistExists }
        fileprivate let kind: Kind
        /// The engine's code, for `.stream`.
        public let stream: StreamError.Code?
        public static let badRequest = Code(kind: .badRequest, stream: nil)
        public static let invalidArgument = Code(kind: .invalidArgument, stream: nil)
        /// A queue position outside the queue (MPD: "Bad song index"). The Player's
        /// check, the only one: the protocols read a position as a number and no more.
        public static let badIndex = Code(kind: .badIndex, stream: nil)
        /// An output number `outputs` does not list (MPD: "No such audio output").
        public static let noSuchOutput = Code(kind: .noSuchOutput, stream: nil)
        public static let notPlaying = Code(kind: .notPlaying, stream: nil)
        public static let noSuchEntry = Code(kind: .noSuchEntry, stream: nil)
        public static let outsideLibrary = Code(kind: .outsideLibrary, stream: nil)
        public static let tooLarge = Code(kind: .tooLarge, stream: nil)
        public static let updateRunning = Code(kind: .updateRunning, stream: nil)
        public static let noLibrary = Code(kind: .noLibrary, stream: nil)
        public static let noMixer = Code(kind: .noMixer, stream: nil)
        /// Stored playlists: no playlist of that name; one exists already.
        public static let noSuchPlaylist = Code(kind: .noSuchPlaylist, stream: nil)
        public static let playlistExists = Code(kind: .playlistExists, stream: nil)
        /// Not an answer: the command waits for work off the control thread (a folder
        /// walk). The session parks and sends the same command again when resumed; no
        /// client ever sees this code.
        public static let workPending = Code(kind: .workPending, stream: nil)
        public static func stream(_ c: StreamError.Code) -> Code { Code(kind: .stream, stream: c) }
        public var description: String { stream?.name ?? kind.rawValue }
    }
    public var code: Code
    public var message: String
    public init(_ code: Code, _ message: String) { self.code = code; self.message = message }
    public init(_ e: StreamError) {
        switch e.code {
        case .outsideRoots: self.init(.outsideLibrary, e.message)
        case .tooLarge: self.init(.tooLarge, e.message)
        default: self.init(.stream(e.code), e.message)
        }
    }
    public var description: String { "\(code): \(message)" }
}
