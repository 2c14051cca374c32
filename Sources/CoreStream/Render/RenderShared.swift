import Synchronization

/// Where a run of ring frames came from: ring frame `ringIndex` is source frame
/// `sourceFrame` of the stream `generation`, and later ring frames follow it at
/// `sourceRate`/`deviceRate` — one after another in `direction`, or round a loop region
/// `[loopStart, loopEnd)` (wrapping, or ping-pong) with `pass` wraps done at `ringIndex`.
/// A loop run needs one marker however many times it wraps, so a region of ten frames
/// does not flood the marker queue.
public struct SegmentMarker: BitwiseCopyable, Sendable, Equatable {
    public var ringIndex: Int
    public var sourceFrame: Int64
    public var generation: UInt64
    public var sourceRate: Int32
    public var deviceRate: Int32
    /// +1 forward, −1 reverse: the direction of the frame at `ringIndex`.
    public var direction: Int8 = 1
    public var pingPong = false
    /// The loop region, or `loopEnd <= loopStart` for a straight run.
    public var loopStart: Int64 = 0
    public var loopEnd: Int64 = 0
    public var pass: Int64 = 0
    /// Which `setLoop` the pass count belongs to (the engine counts them).
    public var loopEpoch: UInt32 = 0
    /// Render takes this stream's level at once rather than ramping to it: a track that
    /// came in by a cross-fade already had its own level in the overlap.
    public var snapsLevel = false

    public init(ringIndex: Int, sourceFrame: Int64, generation: UInt64, sourceRate: Int32, deviceRate: Int32) {
        self.ringIndex = ringIndex
        self.sourceFrame = sourceFrame
        self.generation = generation
        self.sourceRate = sourceRate
        self.deviceRate = deviceRate
    }

    /// A marker for a planned run (see ``Playhead``).
    public init(ringIndex: Int, firstFrame: Int64, direction: PlayDirection, shape: RunShape, pass: Int64,
                generation: UInt64, sourceRate: Int32, deviceRate: Int32) {
        self.init(ringIndex: ringIndex, sourceFrame: firstFrame, generation: generation,
                  sourceRate: sourceRate, deviceRate: deviceRate)
        self.direction = direction.sign
        self.pass = pass
        if case .loop(let a, let b, let pp, _) = shape {
            loopStart = a
            loopEnd = b
            pingPong = pp
        }
    }

    public var isLoop: Bool { loopEnd > loopStart }

    /// Source frames between `ringIndex` and ring frame `index` (≥ `ringIndex`).
    @inline(__always)
    private func offset(_ index: Int) -> Int64 {
        let o = Int64(index - ringIndex)
        if sourceRate == deviceRate { return o }
        return FrameTime.rescaleFloor(o, Int64(sourceRate), Int64(deviceRate))
    }

    /// Ping-pong phase of `sourceFrame`: u in [0, 2P) runs A…B−1 (u = 0…P) then
    /// B−2…A+1, P = length − 1. A reverse frame at A sits at u = 2P (end of a reverse half).
    @inline(__always)
    private var phase: Int64 {
        let p = loopEnd - loopStart - 1
        return direction > 0 ? sourceFrame - loopStart : 2 * p - (sourceFrame - loopStart)
    }

    /// Turns in a ping-pong run between `ringIndex` and `o` source frames later. From
    /// the marker, v counts steps in its own direction: v0 at the marker, up to P =
    /// length − 1 at the far end; a turn comes before each step v = kP + 1 (k ≥ 1).
    @inline(__always)
    private func pingPongTurns(_ o: Int64) -> Int64 {
        let p = loopEnd - loopStart - 1
        let v0 = direction > 0 ? sourceFrame - loopStart : loopEnd - 1 - sourceFrame
        func turns(_ v: Int64) -> Int64 { v >= 1 ? (v - 1) / p : 0 }
        return turns(v0 + o) - turns(v0)
    }

    /// The source frame of ring frame `index` (≥ `ringIndex`). Real-time safe.
    @inline(__always)
    public func sourceFrame(atRing index: Int) -> Int64 {
        let o = offset(index)
        guard isLoop else { return sourceFrame + Int64(direction) * o }
        let span = loopEnd - loopStart
        if pingPong {
            let p = span - 1
            let u = (phase + o) % (2 * p)
            return u <= p ? loopStart + u : loopStart + 2 * p - u
        }
        if direction > 0 { return loopStart + (sourceFrame - loopStart + o) % span }
        return loopEnd - 1 - (loopEnd - 1 - sourceFrame + o) % span
    }

    /// Wraps done at ring frame `index`. Real-time safe.
    @inline(__always)
    public func pass(atRing index: Int) -> Int64 {
        guard isLoop else { return pass }
        let o = offset(index)
        let span = loopEnd - loopStart
        if pingPong {
            // Steps taken in the marker's direction before the next turn: v0 … P. A turn
            // comes before each step v = kP + 1 (k ≥ 1).
            return pass + pingPongTurns(o)
        }
        let v = direction > 0 ? sourceFrame - loopStart : loopEnd - 1 - sourceFrame
        return pass + (v + o) / span
    }

    /// The direction ring frame `index` was played in. Real-time safe.
    @inline(__always)
    public func direction(atRing index: Int) -> PlayDirection {
        let mine: PlayDirection = direction > 0 ? .forward : .reverse
        guard isLoop && pingPong else { return mine }
        return pingPongTurns(offset(index)) % 2 == 0 ? mine : mine.flipped
    }

    /// The shape of this run.
    public var shape: RunShape {
        let d: PlayDirection = direction > 0 ? .forward : .reverse
        guard isLoop else { return .linear(d) }
        return .loop(start: loopStart, end: loopEnd, pingPong: pingPong, direction: pingPong ? .forward : d)
    }

    static let empty = SegmentMarker(ringIndex: 0, sourceFrame: 0, generation: 0, sourceRate: 1, deviceRate: 1)
}

/// The render thread's state, published for monitoring.
public enum RenderState: UInt8, Sendable {
    /// Waiting for the reader to fill the ring (after start, seek or stop).
    case starting = 0
    case running = 1
    /// Paused: ramped out, device stopped once its queue played out.
    case paused = 2
    /// End of stream pushed; letting the device play out its queue.
    case draining = 3
    /// The device failed and could not be recovered (e.g. unplugged: -ENODEV).
    case failed = 4
}

/// Everything the reader, the render thread and the control side share.
///
/// Every field says who writes it. Atomics that carry a hand-off use acquire/release
/// as commented; counters are relaxed (monitoring only).
public final class RenderShared: @unchecked Sendable {
    // @unchecked Sendable: all mutable shared state is in atomics or in the two SPSC
    // structures, whose own contracts make them safe for one producer and one consumer.

    /// Audio, reader → render. Producer: reader thread. Consumer: render thread.
    public let ring: FrameRing
    /// Segment markers, reader → render. Producer: reader. Consumer: render.
    public let markers: SPSCQueue<SegmentMarker>
    /// The second voice (announcements): its ring and hand-offs, see ``VoiceShared``.
    public let voice = VoiceShared()

    /// Wakes the render thread (commands, data after a starvation). Any thread signals.
    public let renderWake: Int32
    /// Wakes the reader thread (low water, flush acknowledged, end of stream, commands).
    /// Any thread signals. Drained by the reader, and also by the control side while it
    /// waits for the render thread (a reopen's scheduling report, shutdown's fade),
    /// which hands a wake-up back afterwards so no command waits for the reader's tick.
    public let readerWake: Int32

    /// Whether the user wants sound. Written by the control side; read by render (relaxed:
    /// a plain flag, the wake-up eventfd provides the happens-before).
    public let wantPlaying = Atomic<Bool>(false)
    /// Flush requests: the reader stores a new number (release) and wakes render.
    public let flushRequest = Atomic<UInt64>(0)
    /// Written by render (release) when it has dropped the device queue and emptied the
    /// ring for `flushRequest`'s number; read by the reader (acquire) before it refills.
    public let flushAck = Atomic<UInt64>(0)
    /// Ring index at which the current stream ends, `Int.max` while it goes on.
    /// Written by the reader (release) after its last write; read by render (acquire).
    public let endIndex = Atomic<Int>(Int.max)
    /// The generation `endIndex` belongs to, so render can report the end of a stream
    /// it received no frame of. Written by the reader before `endIndex` (published by it).
    public let streamGeneration = Atomic<UInt64>(0)
    /// The output level is `level` × the ReplayGain of the stream playing: `replayGain`,
    /// or `nextReplayGain` once render plays frames of generation `nextGeneration` (a
    /// track queued to follow without a gap, until the control side promotes it).
    /// Linear gains as `Float` bits. All written by the control side (relaxed: plain
    /// values); render reads them once per period and ramps to their product over 20 ms,
    /// so a change never steps (after a flush it starts at the new level at once).
    public let level = Atomic<UInt32>(Float(1).bitPattern)
    public let replayGain = Atomic<UInt32>(Float(1).bitPattern)
    public let nextReplayGain = Atomic<UInt32>(Float(1).bitPattern)
    public let nextGeneration = Atomic<UInt64>(UInt64.max)
    /// A slow fade over the music (the schedule's fade at a block boundary): where it
    /// goes (0…1, `Float` bits) and over how many device frames a full 0 → 1 takes;
    /// published by bumping `fadeSerial` (release) after both. Written by the control
    /// side; render reads the serial once per period and takes the other two when it
    /// changed. A flush (a new track, a seek, a stop) ends a fade: the new stream starts
    /// at full level, so a programme faded out and replaced is never heard faded.
    public let fadeTarget = Atomic<UInt32>(Float(1).bitPattern)
    /// `[streams] normalize`: the loudness a network stream is brought toward, LUFS, as
    /// `Double` bits (NaN: off). Written by the control side, read by the reader when
    /// it decodes a stream's step (``StreamNormalizer``).
    public let streamNormalizeLUFS = Atomic<UInt64>(Double.nan.bitPattern)
    /// The gain the stream's normalizer applies now, dB as `Double` bits (NaN: none).
    /// Written by the reader after each step, read by `status`.
    public let streamGainDB = Atomic<UInt64>(Double.nan.bitPattern)
    public let fadeFrames = Atomic<Int>(0)
    public let fadeSerial = Atomic<UInt64>(0)
    /// The local output is disabled: render writes silence to it, keeping it open as
    /// the clock that paces the feeds. Written by the control side (relaxed: a plain
    /// flag read once per period).
    public let localMuted = Atomic<Bool>(false)
    /// Set by the control side to end the render thread.
    public let quit = Atomic<Bool>(false)
    /// Set by render (relaxed) while it waits for data, so the reader knows to wake it.
    public let starving = Atomic<Bool>(false)

    // Render → others (relaxed counters and states, for monitoring).
    /// Written by render.
    public let state = Atomic<UInt8>(RenderState.starting.rawValue)
    /// Periods padded with silence because the ring ran dry while playing. Written by render.
    public let underruns = Atomic<Int>(0)
    /// Device under-runs reported by the device itself (-EPIPE) and recovered. Written by render.
    public let deviceXruns = Atomic<Int>(0)
    /// System suspends (-ESTRPIPE) recovered. Written by render.
    public let suspends = Atomic<Int>(0)
    /// The last unrecoverable device error (negative errno), 0 if none. Written by render;
    /// reset to 0 by the control side in `reopenOutput`, only while no render thread runs.
    public let deviceError = Atomic<Int>(0)
    /// The generation whose last frame the device has played. Written by render (release).
    public let endedGeneration = Atomic<UInt64>(0)
    /// pthread_setschedparam(SCHED_FIFO) result on the render thread: 0 granted, else the
    /// errno; -1 before the thread started; -2 not asked (an unpaced output, which has no
    /// deadline). Written by render once.
    public let realtimeResult = Atomic<Int32>(-1)
    /// When the first frame of generation `firstWrittenGeneration` went to the device
    /// (CLOCK_MONOTONIC ns). Render stores the time (relaxed), then the generation
    /// (release); readers load the generation (acquire), then the time.
    public let firstWrittenTime = Atomic<UInt64>(0)
    public let firstWrittenGeneration = Atomic<UInt64>(0)
    /// When the reader had decoded the first frames of generation `firstDecodedGeneration`
    /// (the seek and the codec's preroll included; render resets the device meanwhile). The reader stores the time (relaxed),
    /// then the generation (release); readers load the generation (acquire), then the time.
    public let firstDecodedTime = Atomic<UInt64>(0)
    public let firstDecodedGeneration = Atomic<UInt64>(0)
    /// How long render's last flush took to drop and prepare the device (ns; 0 when the
    /// device held nothing and the reset was skipped). Written by render (relaxed); read
    /// with `firstWrittenGeneration`, which render stores after it.
    public let lastResetNanoseconds = Atomic<UInt64>(0)

    // Splices: the reader replaces what is queued after a point without a gap (loop and
    // direction changes). The reader stores a new request number (release) and wakes
    // render; render takes back what the device has queued beyond a safety margin,
    // writes `spliceRing` (the first ring frame not kept) and `spliceMarker` (the marker
    // in force at `spliceRing − 1`, or an empty one with generation 0 when no frame of
    // the ring has been kept), empties the ring, and stores the number in `spliceAck`
    // (release). The reader loads `spliceAck` (acquire) and then reads the two fields.
    /// Written by the reader (release).
    public let spliceRequest = Atomic<UInt64>(0)
    /// Written by render (release), after `spliceRing` and `spliceMarker`.
    public let spliceAck = Atomic<UInt64>(0)
    /// Written by render (relaxed, published by `spliceAck`).
    public let spliceRing = Atomic<Int>(0)
    /// Written by render before `spliceAck`; read by the reader after it. See above.
    public let spliceMarker: UnsafeMutablePointer<SegmentMarker>

    // Reopening an end: the reader finished the stream (set `endIndex`), then a next came
    // while render had not yet played that end. The reader stores a new request number
    // (release) and wakes render. Render accepts when the end was not reached and what is
    // left to play before it (ring and device) is at least the margin a splice leaves:
    // then it sets `endIndex` to `Int.max`, runs again if it was draining, and the next's
    // frames follow the end in the ring, nothing taken back. It stores `reopenAccepted`
    // and then the number in `reopenAck` (release). Refused, the end stands.
    /// Written by the reader (release).
    public let reopenRequest = Atomic<UInt64>(0)
    /// Written by render (release), after `reopenAccepted` (and `endIndex`).
    public let reopenAck = Atomic<UInt64>(0)
    /// Written by render (relaxed, published by `reopenAck`).
    public let reopenAccepted = Atomic<Bool>(false)

    // The heard position, published by render with a sequence lock so readers get a
    // consistent (frame, time, generation) triple without ever blocking the writer.
    private let positionSequence = Atomic<UInt64>(0)
    private let positionFrame = Atomic<Int64>(0)
    private let positionTime = Atomic<UInt64>(0)
    private let positionGeneration = Atomic<UInt64>(0)
    private let positionAdvancing = Atomic<Bool>(false)
    private let positionDirection = Atomic<Int8>(1)
    private let positionPass = Atomic<Int64>(0)
    private let positionLoopStart = Atomic<Int64>(0)
    private let positionLoopEnd = Atomic<Int64>(0)
    private let positionPingPong = Atomic<Bool>(false)
    private let positionLoopEpoch = Atomic<UInt32>(0)
    private let positionLimit = Atomic<Int64>(Int64.max)

    /// Pauses asked for: the control side stores a new number (release) when the
    /// transport pauses. Render stores it in `pauseSettled` (release) once the music
    /// has stopped being heard (the device played the 5 ms ramp-out and whatever it held
    /// that could not be taken back) and the heard position says so (not advancing).
    /// The reader then sends the `paused` event, carrying that frame: sent at the
    /// command, it carried a position up to 4 periods old (issue 48).
    public let pauseRequest = Atomic<UInt64>(0)
    /// Written by render (release), after the heard position it settled on.
    public let pauseSettled = Atomic<UInt64>(0)

    /// Ring frames below which render wakes the reader.
    public let lowWater: Int

    public init(ringFrames: Int, retainFrames: Int, channels: Int, lowWater: Int) {
        ring = FrameRing(minimumCapacity: ringFrames, retain: retainFrames, channels: channels)
        markers = SPSCQueue(minimumCapacity: 256, filler: .empty)
        renderWake = EventFD.make()
        readerWake = EventFD.make()
        self.lowWater = lowWater
        spliceMarker = .allocate(capacity: 1)
        spliceMarker.initialize(to: .empty)
    }

    deinit {
        _ = close(renderWake)
        _ = close(readerWake)
        spliceMarker.deallocate()
    }

    /// What `readPosition` returns: the frame being heard and how it moves.
    public struct HeardPosition: Sendable {
        public var frame: Int64
        /// CLOCK_MONOTONIC ns when `frame` was heard.
        public var time: UInt64
        public var generation: UInt64
        /// Whether it advances with the clock (playing) or stands (paused, ended).
        public var advancing: Bool
        public var direction: PlayDirection
        /// Loop wraps heard.
        public var pass: Int64
        /// The loop region the frame was heard in (`loopEnd <= loopStart`: none).
        public var loopStart: Int64
        public var loopEnd: Int64
        public var pingPong: Bool
        /// The loop setting `pass` counts for.
        public var loopEpoch: UInt32
        /// Where an advancing position stops: the frame after the last one written to the
        /// device (forward; reverse, the last one), so that interpolating between reports
        /// never passes a frame the device was not given (a pause's ramp-out, a track's
        /// end). nil inside a loop run.
        public var limit: Int64?
    }

    /// The heard position. Thread: render only. Real-time safe: yes.
    ///
    /// Seqlock writer: odd sequence (relaxed) + release fence so the data stores cannot
    /// move above it; data stores (relaxed); even sequence (release) publishes them.
    @inline(__always)
    func publishPosition(frame: Int64, marker m: SegmentMarker, ringIndex: Int, advancing: Bool, limit: Int64?, at time: UInt64) {
        let s = positionSequence.load(ordering: .relaxed)
        positionSequence.store(s &+ 1, ordering: .relaxed)
        atomicMemoryFence(ordering: .releasing)
        positionFrame.store(frame, ordering: .relaxed)
        positionTime.store(time, ordering: .relaxed)
        positionGeneration.store(m.generation, ordering: .relaxed)
        positionAdvancing.store(advancing, ordering: .relaxed)
        positionDirection.store(m.direction(atRing: ringIndex).sign, ordering: .relaxed)
        positionPass.store(m.pass(atRing: ringIndex), ordering: .relaxed)
        positionLoopStart.store(m.loopStart, ordering: .relaxed)
        positionLoopEnd.store(m.loopEnd, ordering: .relaxed)
        positionPingPong.store(m.pingPong, ordering: .relaxed)
        positionLoopEpoch.store(m.loopEpoch, ordering: .relaxed)
        positionLimit.store(limit ?? Int64.max, ordering: .relaxed)
        positionSequence.store(s &+ 2, ordering: .releasing)
    }

    /// A consistent snapshot of the heard position. Thread: any. Never blocks the writer;
    /// retries while a write is in progress.
    ///
    /// Seqlock reader: sequence (acquire), data (relaxed), acquire fence, sequence again;
    /// equal and even means the data is one write's.
    public func readPosition() -> HeardPosition {
        while true {
            let s1 = positionSequence.load(ordering: .acquiring)
            if s1 & 1 == 1 { continue }
            var p = HeardPosition(frame: positionFrame.load(ordering: .relaxed),
                                  time: positionTime.load(ordering: .relaxed),
                                  generation: positionGeneration.load(ordering: .relaxed),
                                  advancing: positionAdvancing.load(ordering: .relaxed),
                                  direction: positionDirection.load(ordering: .relaxed) > 0 ? .forward : .reverse,
                                  pass: positionPass.load(ordering: .relaxed),
                                  loopStart: positionLoopStart.load(ordering: .relaxed),
                                  loopEnd: positionLoopEnd.load(ordering: .relaxed),
                                  pingPong: positionPingPong.load(ordering: .relaxed),
                                  loopEpoch: positionLoopEpoch.load(ordering: .relaxed),
                                  limit: positionLimit.load(ordering: .relaxed))
            if p.limit == Int64.max { p.limit = nil }
            atomicMemoryFence(ordering: .acquiring)
            if positionSequence.load(ordering: .relaxed) == s1 { return p }
        }
    }
}

#if canImport(Glibc)
import Glibc
#endif
