/// Which way the source frames come out.
public enum PlayDirection: String, Sendable, Equatable, CaseIterable {
    case forward, reverse

    var sign: Int8 { self == .forward ? 1 : -1 }
    var flipped: PlayDirection { self == .forward ? .reverse : .forward }
}

/// A loop region: source frames `[start, end)`, half-open.
public struct LoopRegion: Sendable, Equatable {
    public var start: Int64
    public var end: Int64
    /// How many times playback wraps (jumps back to `start`, or turns round in
    /// ping-pong) before it carries on past the region; nil loops forever. mpv's
    /// `ab-loop-count`: with 1 the region is heard twice when played from its start.
    public var count: Int?
    /// Alternate direction at each end instead of jumping back.
    public var pingPong: Bool

    public init(start: Int64, end: Int64, count: Int? = nil, pingPong: Bool = false) {
        self.start = start
        self.end = end
        self.count = count
        self.pingPong = pingPong
    }

    public var length: Int64 { end - start }
    /// Ping-pong needs two frames to turn between; a one-frame region just repeats.
    var turns: Bool { pingPong && length >= 2 }
}

/// How a run of emitted frames maps to source frames: the part of a ``SegmentMarker``
/// that says where later ring frames come from.
public enum RunShape: Sendable, Equatable {
    /// One frame after another in `direction`.
    case linear(PlayDirection)
    /// Round and round `region` (its `count` is ignored here): forward or reverse
    /// wrapping, or ping-pong.
    case loop(start: Int64, end: Int64, pingPong: Bool, direction: PlayDirection)
}

/// Decides which source frames the reader produces next: the pure logic of loop
/// regions, ping-pong and reverse playback, with no decoding and no threads, in the
/// style of swift-nio's state machines. The reader asks for the next ``Step`` and
/// decodes it; commands (set loop, change direction, seek) change the state.
///
/// `position` is a boundary between frames: forward, the next frame emitted is
/// `position`; reverse, it is `position − 1`. A pass of a loop ends at `bound`.
public struct Playhead: Sendable, Equatable {
    /// A contiguous range of source frames to emit in `direction`:
    /// `[start, start + count)`, forward from `start` or reverse from `start + count − 1`.
    public struct Step: Sendable, Equatable {
        public var start: Int64
        public var count: Int
        public var direction: PlayDirection
        /// Set when the frames do not follow from the previous step's mapping: the
        /// reader pushes a marker with this shape (and `pass`) before writing them.
        public var newRun: RunShape?
        /// Wraps done in the current loop before the first frame of this step.
        public var pass: Int64

        /// The first source frame emitted.
        public var firstFrame: Int64 { direction == .forward ? start : start + Int64(count) - 1 }
    }

    public private(set) var position: Int64
    public private(set) var direction: PlayDirection
    public private(set) var loop: LoopRegion?
    /// Where the current pass wraps or turns (forward: when `position` reaches it;
    /// reverse: when `position` comes down to it). nil: no wrap ahead.
    public private(set) var bound: Int64?
    /// Wraps (or turns) done since the loop was set.
    public private(set) var passes: Int64 = 0
    /// The track's length in frames, when known exactly.
    public let length: Int64?
    /// The mapping of the frames emitted last; nil until the first step.
    private var run: RunShape?
    /// The current pass belongs to a region replaced while it played: at its bound the
    /// head jumps into the new region without counting a wrap.
    private var finishingOldPass = false

    public init(position: Int64, direction: PlayDirection = .forward, loop: LoopRegion? = nil, length: Int64?) {
        self.position = position
        self.direction = direction
        self.loop = loop
        self.length = length
        bound = nil
        bound = naturalBound(jumpIfPast: false)
    }

    /// Loop wraps left, nil for forever.
    public var remaining: Int64? {
        guard let l = loop, let c = l.count else { return nil }
        return max(0, Int64(c) - passes)
    }

    // MARK: - Commands

    /// Plays from `position` (a seek or a new track): frames continue in a new run.
    /// A loop the position is past (forward: at or after its end) is not wrapped into.
    public mutating func reposition(to position: Int64) {
        self.position = position
        run = nil
        finishingOldPass = false
        bound = naturalBound(jumpIfPast: false)
    }

    /// Continues after `frame`, the last frame heard before a splice, which came out
    /// in `direction` as part of `shape`, `pass` wraps into the loop.
    public mutating func resume(after frame: Int64, direction: PlayDirection, shape: RunShape, pass: Int64) {
        self.direction = direction
        position = direction == .forward ? frame + 1 : frame
        passes = pass
        run = nil
        finishingOldPass = false
        if case .loop(let a, let b, _, _) = shape, let l = loop, l.start == a, l.end == b,
           frame >= a && frame < b {
            bound = direction == .forward ? b : a
        } else {
            bound = naturalBound(jumpIfPast: false)
        }
    }

    /// Sets, moves or clears the loop. A pass in progress of the old region finishes at
    /// its old end, then the new region takes over; a region the play head is already
    /// past (in its direction) makes it jump to the region's start (its end, reverse).
    public mutating func setLoop(_ new: LoopRegion?) {
        let inOldPass = bound != nil && loop.map(inside) == true
        loop = new
        passes = 0
        finishingOldPass = false
        run = nil   // pass numbers restart: the next frames need a marker saying so
        guard new != nil else {
            bound = nil
            return
        }
        if inOldPass {
            finishingOldPass = true
            return
        }
        bound = naturalBound(jumpIfPast: true)
    }

    /// Changes direction. With `turn` (something was emitted already) it turns round at
    /// the last frame emitted, which is not repeated; without, it plays the other way
    /// from the same boundary (after a seek, reverse from F emits F−1 first).
    public mutating func setDirection(_ new: PlayDirection, turn: Bool = true) {
        guard new != direction else { return }
        if turn {
            // Forward emitted position−1 last; reverse emitted position last.
            position = max(0, position + (new == .reverse ? -1 : 1))
        }
        direction = new
        finishingOldPass = false
        run = nil
        bound = naturalBound(jumpIfPast: false)
    }

    // MARK: - Planning

    /// The next run of at most `maxFrames` frames, or nil at the end (forward: the
    /// track's end; reverse: frame 0). Advances past it.
    public mutating func next(maxFrames: Int) -> Step? {
        precondition(maxFrames > 0)
        while true {
            if direction == .forward {
                if let b = bound, position >= b { wrap(); continue }
                if let len = length, position >= len { return nil }
                let limit = bound ?? length ?? Int64.max
                let n = Int(min(Int64(maxFrames), limit - position))
                let step = Step(start: position, count: n, direction: .forward, newRun: takeNewRun(), pass: passes)
                position += Int64(n)
                return step
            } else {
                if let a = bound, position <= a { wrap(); continue }
                if position <= 0 { return nil }
                let floor = bound ?? 0
                let n = Int(min(Int64(maxFrames), position - floor))
                let shape = takeNewRun()
                position -= Int64(n)
                return Step(start: position, count: n, direction: .reverse, newRun: shape, pass: passes)
            }
        }
    }

    /// Ends the current pass at `bound`: wraps, turns, or (count spent, loop cleared)
    /// carries on.
    private mutating func wrap() {
        if finishingOldPass, let l = loop {
            finishingOldPass = false
            position = direction == .forward ? l.start : l.end
            bound = direction == .forward ? l.end : l.start
            run = nil
            return
        }
        guard let l = loop, remaining.map({ $0 > 0 }) ?? true else {
            bound = nil
            run = nil   // the frames after the bound are no longer the loop's
            return
        }
        passes += 1
        if l.turns {
            if direction == .forward {
                direction = .reverse
                position = l.end - 1
                bound = l.start
            } else {
                direction = .forward
                position = l.start + 1
                bound = l.end
            }
        } else {
            position = direction == .forward ? l.start : l.end
            bound = direction == .forward ? l.end : l.start
        }
        // Still the same loop mapping: no new marker (tiny regions wrap thousands of
        // times a second). Otherwise the next step starts the loop's mapping.
        if run != loopShape(l) { run = nil }
    }

    /// The shape for the frames about to be emitted, if it differs from the last.
    private mutating func takeNewRun() -> RunShape? {
        guard run == nil else { return nil }
        let shape: RunShape
        if let l = loop, bound != nil, inside(l), bound == (direction == .forward ? l.end : l.start) {
            shape = loopShape(l)
        } else {
            shape = .linear(direction)
        }
        run = shape
        return shape
    }

    private func loopShape(_ l: LoopRegion) -> RunShape {
        .loop(start: l.start, end: l.end, pingPong: l.turns, direction: l.turns ? .forward : direction)
    }

    /// Whether the next frame emitted lies inside `l`.
    private func inside(_ l: LoopRegion) -> Bool {
        let next = direction == .forward ? position : position - 1
        return next >= l.start && next < l.end
    }

    /// The bound for the loop from the current position, jumping into the region when
    /// the position is past it and `jumpIfPast`.
    private mutating func naturalBound(jumpIfPast: Bool) -> Int64? {
        guard let l = loop, remaining.map({ $0 > 0 }) ?? true else { return nil }
        // At exactly the end (forward) the head is at the wrap point: it wraps.
        if direction == .forward {
            if position <= l.end { return l.end }
            guard jumpIfPast else { return nil }
            position = l.start
            return l.end
        } else {
            if position >= l.start { return l.start }
            guard jumpIfPast else { return nil }
            position = l.end
            return l.start
        }
    }
}
