import Logging
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// What the control side asks of the reader thread.
enum ReaderCommand {
    case load(Handoff<AudioDecoder>, start: Int64, direction: PlayDirection, generation: UInt64)
    case seek(Int64, generation: UInt64)
    case edit(ReaderEdit)
    case next(Handoff<AudioDecoder>?, generation: UInt64, overlap: ReaderOverlap?)
    /// The queued next's overlap changed (a cross-fade setting): for a join not begun yet.
    case nextOverlap(ReaderOverlap?, generation: UInt64)
    case stop(generation: UInt64)
    /// Let go of the decoder and of the ring until the next load (an output reopen).
    case detach(Handoff<Semaphore>)
    case barrier(Handoff<Semaphore>)
    case quit
}

/// Changes that keep the stream going: the reader splices them in.
enum ReaderEdit {
    case loop(LoopRegion?, epoch: UInt32)
    case direction(PlayDirection)
}

/// Commands from the control side to the reader thread. Thread: `send` any (the
/// control side), `take` the reader only.
final class ReaderMailbox: @unchecked Sendable {
    // @unchecked Sendable: `list` is `Locked`; `waiting` is atomic; `wake` is an eventfd.
    private let list = Locked<[ReaderCommand]>([])
    /// Set by `send` after it appends, cleared by the reader before it takes the list:
    /// `fill()` stops at the next step when a command waits. Against an output that
    /// takes audio as fast as it comes (`null?pace=off`, a capture) the ring never
    /// fills, and a detach waited up to 1.2 s for a fill to end (LockOrderTests).
    let waiting = Atomic<Bool>(false)
    /// Set with `waiting` for a command that leaves the current stream (stop, load,
    /// seek, detach, quit): a network stream's blocked read gives way to it
    /// (``StreamInterrupt``); a `next` or an edit lets the read finish.
    let abandoning = Atomic<Bool>(false)
    private let wake: Int32

    init(wake: Int32) { self.wake = wake }

    func send(_ command: ReaderCommand) {
        list.withLock { $0.append(command) }
        switch command {
        case .load, .seek, .stop, .detach, .quit: abandoning.store(true, ordering: .relaxed)
        case .edit, .next, .nextOverlap, .barrier: break
        }
        waiting.store(true, ordering: .releasing)
        EventFD.signal(wake)
    }

    func take() -> [ReaderCommand] {
        waiting.store(false, ordering: .relaxed)
        abandoning.store(false, ordering: .relaxed)
        return list.withLock { list in
            let taken = list
            list.removeAll()
            return taken
        }
    }
}

/// What the reader tells the control side. Each call takes the engine's control lock
/// and returns; the reader holds no lock while it calls (the control side waits for
/// the reader in `detachReader` with that lock released: LockOrderTests).
protocol ReaderHost: AnyObject {
    /// The next track (`generation`, `info`) is being heard: it becomes the current one.
    /// It is the one queued now, or one replaced or cleared after the reader had gone on
    /// to it and too late to take it back. Returns the track that ended and the one
    /// that started, or nil when the control side has moved on (a play or stop since).
    func readerHeardNext(generation: UInt64, info: TrackInfo) -> (ended: String, endedGeneration: UInt64, started: TrackInfo)?
    /// The render thread has stopped the sound for pause `serial`: true when the
    /// `paused` event is still to be sent for it (the transport is still paused by it).
    func readerPauseSettled(_ serial: UInt64) -> Bool
    /// The loop region set now.
    func readerLoopRegion() -> LoopRegion?
    /// The last frame of `generation` was heard: the transport stops. Returns the
    /// track's path, or nil when that stream is no longer the current one.
    func readerHeardEnd(generation: UInt64) -> String?
    /// Corrupt packets skipped so far in the current track.
    func readerCorruptPackets(_ total: Int)
}

/// The reader thread's body: takes commands from the control side, decodes on demand
/// (``AudioDecoder``, planned by ``Playhead``) into the ring the render thread
/// (``RenderLoop``) plays from, with a marker at each new run, and turns what the render
/// thread counted into events.
///
/// Thread: reader only, after `init` (which runs on the control side before the thread
/// starts). Every stored property is the reader's own; what it shares with the render
/// thread is in ``RenderShared`` (atomics, SPSC ring and marker queue), with the control
/// side the ``ReaderMailbox`` and the ``ReaderHost`` calls.
final class ReaderLoop {
    let mailbox: ReaderMailbox
    let host: any ReaderHost
    let logger: Logger
    let onEvent: @Sendable (PlaybackEngine.Event) -> Void

    let shared: RenderShared
    /// Forward steps, and the first reverse block after a reposition or splice.
    let chunk: Int
    /// Reverse blocks: large enough that a seek's preroll (MP3: 11520 frames) is a
    /// small part of each, small enough to stay a few hundred KiB.
    ///
    /// Codecs whose seek preroll is long (Opus: 400 ms, see AudioDecoder.preroll) take
    /// blocks twice as large, so the preroll stays a small part of each: with 32 Ki the
    /// 400 ms preroll made Opus reverse cost 2.1 × forward (1.8 × at 80 ms). The buffer
    /// holds the larger size; a block that never grows that large leaves its pages
    /// untouched, so it costs no memory.
    let blockFrames = 64 * 1024
    /// Reverse blocks for the other codecs (a seek preroll of at most 16 Ki frames:
    /// MP3's 11,520 is the longest).
    let shortBlockFrames = 32 * 1024
    /// Loop regions up to this long are decoded once and replayed from memory.
    let cacheFrames = 32 * 1024

    var decoder: AudioDecoder?
    /// The track to follow without a gap, its generation, and how the two overlap (see
    /// ``Crossfade``; nil: a gapless join).
    var next: (decoder: AudioDecoder, generation: UInt64, overlap: ReaderOverlap?)?
    /// The track the reader left for `next`, until the control side hears the switch
    /// (a seek before that is a seek in it, and the next follows again as it would have).
    var previous: (decoder: AudioDecoder, generation: UInt64, overlap: ReaderOverlap?)?
    /// Tracks the reader went on to that are not heard yet, in order: each is reported
    /// when its first frame is heard, and those before it too. A track shorter than the
    /// ring is decoded whole and followed by the one queued after it before its own
    /// first frame is heard (only the last switch used to be looked for, and such a
    /// track went unannounced).
    var unheard: [(generation: UInt64, info: TrackInfo)] = []
    /// Frames of `next` mixed into the current track's end so far (its overlap), from
    /// the overlap's first frame in order; 0 when none. Reset by whatever moves the
    /// current track out of order (load, seek, splice, a new next).
    var leadIn = 0
    /// `next`'s frames for the overlap, `chunk` at a time. Allocated on first use.
    var leadInBuffer: UnsafeMutablePointer<Float>?
    /// The next marker written makes render take its track's level at once (the
    /// overlap already gave that track its own level).
    var snapNextMarker = false
    /// Counts loads, so the cache knows which decoder it holds.
    var decoderSerial = 0
    var generation: UInt64 = 0
    var finished = true
    /// `finished` because the track heard reached its last frame (not an error, a stop
    /// or a detach): a next queued now can still follow it (``reopenEnd()``).
    var finishedAtEnd = false
    /// Since a `detach` (an output reopen) and until the next load: the ring is the
    /// control side's to reset.
    var detached = false
    var direction = PlayDirection.forward
    var head: Playhead?
    /// The next step is the first after a reposition or splice: keep it short.
    var firstStep = true

    /// What a splice restarts from when nothing played since the last reposition or
    /// splice: the ring index where that began, the planner state then, and the
    /// edits applied on top (`turn`: something had been heard before it).
    var spliceBase: (ring: Int, head: Playhead, edits: [ReaderEdit], turn: Bool)?

    /// Decoded frames waiting to go into the ring (one step), and the marker that
    /// must precede them.
    var pending: UnsafeMutablePointer<Float>
    var pendingFrames = 0
    var pendingOffset = 0
    var pendingMarker: SegmentMarker?
    var channels = 2
    /// The slow gain of the network stream being decoded (`[streams] normalize`).
    var normalizer: StreamNormalizer?

    /// The loop region decoded once, `[cacheStart, cacheStart + cacheCount)`, for
    /// `cacheSerial`'s decoder. Allocated on first use.
    var cache: UnsafeMutablePointer<Float>?
    var cacheSerial = -1
    var cacheStart: Int64 = 0
    var cacheCount = 0

    var reportedEnded: UInt64 = 0
    var reportedUnderruns = 0
    var lastUnderrunReport: UInt64 = 0
    var reportedCorrupt = 0
    var reportedDeviceError = 0
    var reportedPass: Int64 = 0
    var reportedPauseSettled: UInt64 = 0
    /// The loop setting the planner's pass counts belong to.
    var loopEpoch: UInt32 = 0

    init(shared: RenderShared, chunk: Int, mailbox: ReaderMailbox, host: any ReaderHost, logger: Logger,
         onEvent: @escaping @Sendable (PlaybackEngine.Event) -> Void) {
        self.shared = shared
        self.chunk = chunk
        self.mailbox = mailbox
        self.host = host
        self.logger = logger
        self.onEvent = onEvent
        pending = .allocate(capacity: blockFrames * 2)
    }

    deinit {
        pending.deallocate()
        cache?.deallocate()
        leadInBuffer?.deallocate()
    }

    /// Makes the buffers fit `channels`. Reader thread.
    private func prepare(channels: Int) {
        guard channels != self.channels else { return }
        pending.deallocate()
        pending = .allocate(capacity: blockFrames * channels)
        cache?.deallocate()
        cache = nil
        cacheSerial = -1
        leadInBuffer?.deallocate()
        leadInBuffer = nil
        self.channels = channels
    }

    private func dropPending() {
        pendingFrames = 0
        pendingOffset = 0
        pendingMarker = nil
    }

    func run() {
        while true {
            var edits: [ReaderEdit] = []
            for command in mailbox.take() {
                if case .edit(let e) = command {
                    edits.append(e)
                    continue
                }
                // Edits queued before a reposition apply before it.
                if !edits.isEmpty { splice(edits); edits = [] }
                switch command {
                case .quit:
                    self.decoder = nil
                    return
                case .barrier(let done):
                    done.value.signal()
                case .detach(let done):
                    self.decoder = nil
                    self.head = nil
                    finished = true
                    detached = true
                    done.value.signal()
                case .stop(let generation):
                    self.generation = generation
                    leadIn = 0
                    next = nil
                    previous = nil
                    unheard.removeAll()
                    self.decoder = nil
                    self.head = nil
                    finished = true
                    // Detached, the reader has nothing in the ring to flush, and the
                    // render thread may be being replaced (no one to acknowledge).
                    if !detached { flush() }
                case .load(let handoff, let start, let direction, let generation):
                    let decoder = handoff.value
                    adopt(decoder)
                    self.generation = generation
                    self.direction = direction
                    prepare(channels: decoder.outputFormat.channels)
                    detached = false
                    self.decoder = decoder
                    decoderSerial += 1
                    reportedPass = 0
                    next = nil
                    previous = nil
                    unheard.removeAll()
                    leadIn = 0
                    reposition(to: start, loop: nil)
                case .seek(let frame, let generation):
                    if let p = previous, let current = self.decoder {
                        // Switched to the next track but it is not heard yet: the seek
                        // is in the track being heard. Go back; the next follows again.
                        next = (current, self.generation, p.overlap)
                        // It plays on under the seek's generation: nothing switched to is
                        // waiting to be heard any more.
                        unheard.removeAll()
                        self.decoder = p.decoder
                        decoderSerial += 1
                        previous = nil
                    }
                    self.generation = generation
                    leadIn = 0
                    reposition(to: frame, loop: self.head?.loop)
                case .next(let handoff, let generation, let overlap):
                    // Switched to the one replaced but not heard yet: take it back, as a
                    // seek does (the replacement follows the track being heard).
                    if previous != nil { takeBackSwitch() }
                    // Frames already mixed with the one replaced stay; the rest of the
                    // current track ends on its own (leadIn 0 past the overlap's start).
                    leadIn = 0
                    next = handoff.map { ($0.value, generation, overlap) }
                    if let n = next { adopt(n.decoder) }
                    if next != nil && finishedAtEnd { reopenEnd() }
                case .nextOverlap(let overlap, let generation):
                    // Only a join not begun: once the overlap's first frames are mixed
                    // (`leadIn`) or the reader has gone on to the next track, that join
                    // is as it was decided, and the setting is for the joins after it.
                    // Before, a cross-fade change queued the next track again: an
                    // overlap under way was cut and the next one started again from its
                    // first frame, its first seconds heard twice (issue 38).
                    if let n = next, n.generation == generation, leadIn == 0, previous == nil {
                        next = (n.decoder, n.generation, overlap)
                    }
                case .edit:
                    break
                }
            }
            if !edits.isEmpty { splice(edits) }
            fill()
            report()
            // Sleep until the render thread wants more (low water, end, underrun, device
            // error all signal readerWake), a command arrives, or a housekeeping tick:
            // 1 s, or 50 ms while a loop runs, so wrap events are timely.
            // Without a stream the reader does not look at the ring at all: the control
            // side resizes it (reopenOutput) while the reader is detached.
            if finished || self.decoder == nil || shared.ring.writableFrames < chunk {
                let looping = self.head?.loop.map { l in l.count.map { reportedPass < Int64($0) } ?? true } ?? false
                let switching = !unheard.isEmpty  // events at the frame the next track is heard
                EventFD.wait(shared.readerWake, timeoutNanoseconds: looping || switching ? 50_000_000 : 1_000_000_000)
            }
        }
    }

    /// Takes a decoder handed over by the control side: a network stream's waits give
    /// way to this reader's commands, and its news become events.
    private func adopt(_ decoder: AudioDecoder) {
        guard let interrupt = decoder.interrupt else { return }
        interrupt.mailbox = mailbox
        let path = decoder.info.path
        decoder.onStreamEvent = { [onEvent, logger] e in
            switch e {
            case .reconnecting(let attempt, let cause):
                logger.warning("stream dropped, reconnecting", metadata: ["track.path": "\(path)", "attempt": "\(attempt)", "cause": "\(cause)"])
            case .reconnected:
                logger.info("stream reconnected", metadata: ["track.path": "\(path)"])
            case .title(let t):
                logger.info("stream title", metadata: ["track.path": "\(path)", "title": "\(t ?? "")"])
            }
            onEvent(.stream(path: path, e))
        }
        decoder.logger = { [logger] m in logger.warning("\(m)", metadata: ["track.path": "\(path)"]) }
    }

    /// Plays from `frame` (a new track or a seek): flushes the ring and the device, then
    /// decodes the first step while the render thread resets the device.
    ///
    /// It used to decode first, so the old audio played until the new was ready: that
    /// put the device's reset after the decode instead of beside it. Through ALSA's
    /// pulse plugin the reset is a new PulseAudio stream, 0.9–1.8 ms (p50 of seeks on
    /// five codecs, `scripts/bench-control`, 2026-11-26) against a first step decoded
    /// in 0.7–4.5 ms; the old audio stops that much earlier, and a seek is a cut anyway.
    private func reposition(to frame: Int64, loop: LoopRegion?) {
        guard let decoder = self.decoder else { return }
        var head = Playhead(position: frame, direction: self.direction, loop: loop,
                            length: decoder.info.durationIsEstimate ? nil : decoder.info.durationFrames)
        head.reposition(to: frame)
        self.head = head
        dropPending()
        firstStep = true
        flush()
        var more = true
        do {
            more = try produce()
        } catch {
            logger.error("seek failed", metadata: ["track.path": "\(decoder.info.path)", "error": "\(error)"])
            onEvent(.error(error))
            more = false
        }
        shared.firstDecodedTime.store(monotonicNanoseconds(), ordering: .relaxed)
        shared.firstDecodedGeneration.store(self.generation, ordering: .releasing)
        finished = false
        spliceBase = (shared.ring.producerIndex, head, [], false)
        if more {
            _ = drainPending()
        } else {
            finish()
        }
        EventFD.signal(shared.renderWake)
    }

    /// Applies loop and direction changes without a gap: asks the render thread for the
    /// last frame it keeps (it takes back what the device queued beyond a safety
    /// margin and empties the ring), restarts the plan after that frame, applies the
    /// edits, and refills.
    private func splice(_ edits: [ReaderEdit]) {
        // A loop or a turn is for the track being heard, not for the next one the reader
        // has switched to already: back to the track heard first. When the device plays
        // the next one's first frames already, the track a loop region was set in has
        // ended: the region is not the next one's (the control side drops it when the
        // switch is reported), while a turn acts from the frame heard, in the next track.
        var edits = edits
        if previous != nil && !takeBackSwitch() {
            edits.removeAll { if case .loop = $0 { return true } else { return false } }
            if edits.isEmpty { return }
        }
        for case .direction(let d) in edits { self.direction = d }
        guard self.decoder != nil, var head = self.head else { return }
        dropPending()
        leadIn = 0  // an overlap under way ends: the rest of the track plays on its own
        handshake(request: shared.spliceRequest, ack: shared.spliceAck, what: "splice")
        let kept = shared.spliceRing.load(ordering: .relaxed)
        let m = shared.spliceMarker.pointee
        var base: Playhead
        var all: [ReaderEdit]
        var turn: Bool
        if let b = spliceBase, kept <= b.ring || m.generation != self.generation {
            // Nothing played since the last splice or reposition: redo it with every edit.
            (base, all, turn) = (b.head, b.edits + edits, b.turn)
        } else {
            let last = kept - 1
            head.resume(after: m.sourceFrame(atRing: last), direction: m.direction(atRing: last),
                        shape: m.shape, pass: m.pass(atRing: last))
            (base, all, turn) = (head, edits, true)
        }
        head = base
        for e in all {
            switch e {
            case .loop(let l, let epoch):
                head.setLoop(l)
                loopEpoch = epoch
                reportedPass = 0
            case .direction(let d): head.setDirection(d, turn: turn)
            }
        }
        self.head = head
        logger.debug("splice", metadata: ["kept": "\(kept)", "base": "\(base)", "head": "\(head)", "marker": "\(m)"])
        spliceBase = (shared.ring.producerIndex, base, all, turn)
        firstStep = true
        finished = false
        fill()
        EventFD.signal(shared.renderWake)
    }

    /// The reader went on to the queued next track (`previous` is the one heard), which
    /// is not heard yet, and the control side replaces it, clears it, or edits the track
    /// heard: takes its frames back with a splice (render keeps what the device must
    /// play before the reader's new frames can follow) and goes on with the track heard
    /// after the last frame kept. When that frame is already the next track's (the
    /// device holds its first frames), it is heard after all: it goes on from there,
    /// and the engine is told when it is heard (``ReaderHost/readerHeardNext``).
    ///
    /// Before, the replacement became the next of the track switched to: the old next
    /// played with no events, and a late clear (MPD's `single 1`) left the engine
    /// "playing" the first track for ever (issue 38).
    ///
    /// Returns whether it was taken back (false: it is heard after all).
    @discardableResult
    private func takeBackSwitch() -> Bool {
        guard let p = previous, let switched = self.decoder else { return false }
        dropPending()
        leadIn = 0
        handshake(request: shared.spliceRequest, ack: shared.spliceAck, what: "splice")
        let kept = shared.spliceRing.load(ordering: .relaxed)
        let m = shared.spliceMarker.pointee
        var head: Playhead
        let takenBack = !(m.generation == self.generation && kept > 0)
        if !takenBack {
            // Too late: the device plays its first frames already. It is the track heard
            // from here on: a second replacement (MPD's `deleteid` and `addid` in one
            // command list are two) follows it instead of splicing it again, which cut
            // it short after about a ring's length (0.75 s; issue 38's sweep, 1 run in 3).
            previous = nil
            let info = switched.info
            head = Playhead(position: 0, length: info.durationIsEstimate ? nil : info.durationFrames)
            head.resume(after: m.sourceFrame(atRing: kept - 1), direction: m.direction(atRing: kept - 1),
                        shape: m.shape, pass: m.pass(atRing: kept - 1))
        } else {
            unheard.removeAll { $0.generation == self.generation }
            // It follows again, from its start and without the overlap (a loop, a turn or
            // a replacement ends an overlap where the reader is; a replacement then sets
            // its own next). Before, it was dropped: a loop set or a turn made in the
            // last second of a track lost the track after it (the engine stopped at the
            // end; issue 38's sweep).
            next = (switched, self.generation, nil)
            self.decoder = p.decoder
            self.generation = p.generation
            decoderSerial += 1
            previous = nil
            let info = p.decoder.info
            let length = info.durationIsEstimate ? nil : info.durationFrames
            // Nothing of it kept: it had ended (at frame 0 in reverse).
            head = self.direction == .reverse
                ? Playhead(position: 0, direction: .reverse, length: length)
                : Playhead(position: length ?? p.decoder.position, length: length)
            if m.generation == p.generation && kept > 0 {
                head.resume(after: m.sourceFrame(atRing: kept - 1), direction: m.direction(atRing: kept - 1),
                            shape: m.shape, pass: m.pass(atRing: kept - 1))
            }
        }
        logger.debug("next taken back", metadata: ["kept": "\(kept)", "heard": "\(m.generation)", "generation": "\(self.generation)"])
        self.head = head
        firstStep = true
        finished = false
        finishedAtEnd = false
        spliceBase = (shared.ring.producerIndex, head, [], true)
        EventFD.signal(shared.renderWake)
        return takenBack
    }

    /// A next queued after the reader reached the end of the last track in the ring with
    /// nothing to follow it, while render has not played that end yet (the reader runs up
    /// to the ring's 0.74 s and the device's buffer ahead of what is heard): the end is
    /// reopened, and the next's frames follow it in the ring, gaplessly, as if the next
    /// had come in time. Before, the next was kept but never reached: MPD's `repeat 1` at
    /// the queue's end, an entry added after the last one, or a short track's successor
    /// set within that last second played only after the engine had stopped (a stop
    /// event, a gap; issue 38's sweep). Render refuses when less than 100 ms is left
    /// before the end (see `handleReopen`): the end stands, and the control side plays
    /// the next after the stop as before.
    private func reopenEnd() {
        finishedAtEnd = false  // one try: refused now, it is later still
        guard self.decoder != nil, self.head?.direction == .forward else { return }
        handshake(request: shared.reopenRequest, ack: shared.reopenAck, what: "reopen", reopeningEnd: false)
        guard shared.reopenAccepted.load(ordering: .relaxed) else {
            logger.debug("too close to the end to reopen it for a next")
            return
        }
        logger.debug("end reopened for a next", metadata: ["ring": "\(shared.ring.producerIndex)"])
        finished = false
        EventFD.signal(shared.renderWake)
    }

    /// The flush handshake: ask the render thread to drop the device queue and empty the
    /// ring, and wait until it has (or until it is not running).
    private func flush() {
        handshake(request: shared.flushRequest, ack: shared.flushAck, what: "flush")
    }

    /// Reopens the stream's end (not for a reopen request: render decides that one),
    /// stores a new request number (release: publishes that and the reader's other
    /// state), wakes render, and waits for its acknowledgement
    /// (acquire: what render wrote before it is visible), at most 2 s.
    private func handshake(request: borrowing Atomic<UInt64>, ack: borrowing Atomic<UInt64>, what: String,
                           reopeningEnd: Bool = true) {
        if reopeningEnd { shared.endIndex.store(Int.max, ordering: .relaxed) }
        let number = request.load(ordering: .relaxed) &+ 1
        request.store(number, ordering: .releasing)
        EventFD.signal(shared.renderWake)
        let deadline = monotonicNanoseconds() + 2_000_000_000
        while ack.load(ordering: .acquiring) != number {
            if monotonicNanoseconds() > deadline {
                logger.error("render thread did not acknowledge a \(what) within 2 s")
                break
            }
            EventFD.wait(shared.readerWake, timeoutNanoseconds: 2_000_000)
        }
    }

    private func finish() {
        finished = true
        finishedAtEnd = false
        shared.streamGeneration.store(self.generation, ordering: .relaxed)
        shared.endIndex.store(shared.ring.producerIndex, ordering: .releasing)  // after the last write
        EventFD.signal(shared.renderWake)
    }

    /// Decodes until the ring is full (its high-water mark), then returns.
    private func fill() {
        guard let decoder = self.decoder, !finished else { return }
        while true {
            guard drainPending() else { break }
            if shared.ring.writableFrames < chunk || mailbox.waiting.load(ordering: .relaxed) { break }
            do {
                if try !produce() {
                    if switchToNext() { continue }
                    finish()
                    finishedAtEnd = true
                    return
                }
            } catch {
                logger.error("decoding stopped", metadata: ["track.path": "\(decoder.info.path)", "error": "\(error)"])
                onEvent(.error(error))
                finish()
                return
            }
        }
        if shared.starving.load(ordering: .relaxed) { EventFD.signal(shared.renderWake) }
    }

    /// At the end of a track, goes on with the queued next one in the same ring: its
    /// first step carries a marker of its own generation, which is how render and the
    /// control side know where it starts. Returns whether it did.
    ///
    /// In reverse (at frame 0 of the track) the next one plays from its end, as a `play`
    /// in reverse starts (mpv's `play-direction` carries over too), with no gap. Before,
    /// only a track played forward went on: in reverse the engine stopped after each
    /// track, and the player's start of the next one began it at frame 0, where reverse
    /// play ends at once: B and C were announced and not heard (issue 38's sweep).
    private func switchToNext() -> Bool {
        guard let n = next, let old = self.decoder, let direction = self.head?.direction else { return false }
        let info = n.decoder.info
        let length = info.durationIsEstimate ? nil : info.durationFrames
        var head = Playhead(position: Int64(leadIn), length: length)
        if direction == .reverse {
            // Where the audio really ends when the length is an estimate (a decode of the
            // last seconds, as `play` does); a live stream has no end to start from.
            guard info.isSeekable, let end = try? n.decoder.decodedEnd() else { return false }
            head = Playhead(position: end, direction: .reverse, length: length)
            head.reposition(to: end)
        }
        previous = (old, self.generation, n.overlap)
        unheard.append((n.generation, n.decoder.info))
        self.decoder = n.decoder
        self.generation = n.generation
        decoderSerial += 1
        next = nil
        // After an overlap (forward only) the track goes on from the frames already mixed
        // in (its decoder is there: no seek), at its own level from the first.
        snapNextMarker = leadIn > 0
        leadIn = 0
        self.head = head
        firstStep = true
        reportedPass = 0
        spliceBase = (shared.ring.producerIndex, head, [], false)
        logger.debug("next track decoding", metadata: ["track.path": "\(info.path)", "from": "\(head.position)", "ring": "\(shared.ring.producerIndex)"])
        return true
    }

    /// Writes what is pending into the ring, its marker first. Returns true when all of
    /// it went in.
    private func drainPending() -> Bool {
        while pendingOffset < pendingFrames {
            let room = shared.ring.writableFrames
            if room == 0 { return false }
            if var m = pendingMarker {
                m.ringIndex = shared.ring.producerIndex
                guard shared.markers.push(m) else { return false }  // full: the render thread frees it
                pendingMarker = nil
            }
            let n = min(room, pendingFrames - pendingOffset)
            shared.ring.write(self.pending + pendingOffset * channels, frames: n)
            pendingOffset += n
            if shared.starving.load(ordering: .relaxed) { EventFD.signal(shared.renderWake) }
        }
        return true
    }

    /// Decodes the playhead's next step into `pending`. Returns false at the end.
    private func produce() throws(StreamError) -> Bool {
        guard let decoder = self.decoder, var head = self.head else { return false }
        let sourceRate = decoder.info.sampleRate, deviceRate = decoder.outputFormat.sampleRate
        // Step sizes are in source frames; keep their output inside `pending`.
        let fit = Int(FrameTime.rescaleFloor(Int64(blockFrames), Int64(sourceRate), Int64(deviceRate))) - 64
        let reverseBlock = decoder.seekPrerollFrames > 16_384 ? blockFrames : shortBlockFrames
        let wanted = head.direction == .reverse && !firstStep ? reverseBlock : chunk
        guard let step = head.next(maxFrames: max(1, min(wanted, fit))) else { return false }
        self.head = head
        firstStep = false
        var produced = 0
        if let region = head.loop, try cacheHolds(region, step) {
            let from = cache! + Int(step.start - cacheStart) * channels
            self.pending.update(from: from, count: step.count * channels)
            produced = step.count
        } else {
            if decoder.position != step.start || step.direction == .reverse {
                try decoder.seek(to: step.start)
            }
            let end = step.start + Int64(step.count)
            while produced < blockFrames {
                let n = try decoder.read(into: self.pending + produced * channels, capacity: blockFrames - produced, limit: end)
                if n == 0 { break }
                produced += n
            }
            if produced == 0 {
                // The track ended before its stated length.
                return step.direction == .reverse ? try produce() : false
            }
            let target = Double(bitPattern: shared.streamNormalizeLUFS.load(ordering: .relaxed))
            if decoder.interrupt != nil, target.isFinite {
                if normalizer?.owner != ObjectIdentifier(decoder) {
                    normalizer = StreamNormalizer(owner: ObjectIdentifier(decoder), format: decoder.outputFormat, targetLUFS: target)
                }
                normalizer?.process(self.pending, frames: produced)
                shared.streamGainDB.store((normalizer?.gainDB ?? .nan).bitPattern, ordering: .relaxed)
            } else if normalizer != nil, decoder.interrupt == nil || !target.isFinite {
                normalizer = nil
                shared.streamGainDB.store(Double.nan.bitPattern, ordering: .relaxed)
            }
            if step.direction == .forward, head.loop == nil, let n = next, let o = n.overlap {
                mixLeadIn(stepStart: step.start, frames: produced, next: n, overlap: o)
            }
        }
        if step.direction == .reverse { reverseFrames(self.pending, frames: produced, channels: channels) }
        pendingFrames = produced
        pendingOffset = 0
        if let shape = step.newRun {
            // A short reverse block (the track ended early) starts lower.
            let first = step.direction == .reverse && sourceRate == deviceRate
                ? step.start + Int64(produced) - 1 : step.firstFrame
            var m = SegmentMarker(ringIndex: 0, firstFrame: first, direction: step.direction, shape: shape,
                                  pass: step.pass, generation: self.generation,
                                  sourceRate: Int32(sourceRate), deviceRate: Int32(deviceRate))
            m.loopEpoch = loopEpoch
            m.snapsLevel = snapNextMarker
            snapNextMarker = false
            pendingMarker = m
        }
        return true
    }

    /// Mixes the next track's first frames into the current track's last ones, where a
    /// step of `frames` frames from source frame `stepStart` (already in `pending`)
    /// reaches the overlap (see ``Crossfade``). The overlap begins only at its first
    /// frame and goes on only in order: anything else leaves the step as it is.
    private func mixLeadIn(stepStart: Int64, frames: Int,
                           next n: (decoder: AudioDecoder, generation: UInt64, overlap: ReaderOverlap?),
                           overlap o: ReaderOverlap) {
        guard let decoder = self.decoder, !decoder.info.durationIsEstimate, let length = decoder.info.durationFrames,
              decoder.info.sampleRate == decoder.outputFormat.sampleRate,
              n.decoder.outputFormat == decoder.outputFormat,
              n.decoder.info.sampleRate == n.decoder.outputFormat.sampleRate,
              o.frames > 0, length > Int64(o.frames) else { return }
        let from = length - Int64(o.frames)  // the current track's frame where the next comes in
        let first = max(stepStart, from)
        guard first < stepStart + Int64(frames), first - from == Int64(leadIn), leadIn < o.frames else { return }
        if leadInBuffer == nil { leadInBuffer = .allocate(capacity: chunk * channels) }
        let buffer = leadInBuffer!
        // Each voice keeps its ReplayGain: render applies the current track's to these
        // frames, so the next track's are scaled by the ratio.
        let rgCurrent = Float(bitPattern: shared.replayGain.load(ordering: .relaxed))
        let rgNext = shared.nextGeneration.load(ordering: .relaxed) == n.generation
            ? Float(bitPattern: shared.nextReplayGain.load(ordering: .relaxed)) : rgCurrent
        let scale = rgCurrent > 0 ? rgNext / rgCurrent : 1
        var j = Int(first - stepStart)
        while j < frames && leadIn < o.frames {
            let want = min(frames - j, o.frames - leadIn, chunk)
            readLeadIn(n.decoder, into: buffer, frames: want)
            let at = pending + j * channels
            switch o.curve {
            case .equalPower:
                // cos and sin of π/2 · i/N, exact at each piece's first frame and then
                // turned by a rotation (two calls to cos/sin per frame cost 0.2 % of a
                // core at 44.1 kHz, more than the rest of the mix; in Double the
                // rotation drifts under 1e-12 over a piece).
                let step = Double.pi / 2 / Double(o.frames)
                let (cd, sd) = (cos(step), sin(step))
                var (ca, sa) = (cos(step * Double(leadIn)), sin(step * Double(leadIn)))
                for k in 0..<want {
                    let (a, b) = (Float(ca), Float(sa) * scale)
                    for c in 0..<channels { at[k * channels + c] = at[k * channels + c] * a + buffer[k * channels + c] * b }
                    (ca, sa) = (ca * cd - sa * sd, sa * cd + ca * sd)
                }
            case .sum:
                for k in 0..<(want * channels) { at[k] += buffer[k] * scale }
            }
            j += want
            leadIn += want
        }
    }

    /// Reads the next track's frames `leadIn ..< leadIn + frames` into `buffer`, silence
    /// where it has none (it ended early, or failed: logged).
    private func readLeadIn(_ d: AudioDecoder, into buffer: UnsafeMutablePointer<Float>, frames: Int) {
        var got = 0
        do {
            if d.position != Int64(leadIn) { try d.seek(to: Int64(leadIn)) }  // back to its start after a reset
            while got < frames {
                let r = try d.read(into: buffer + got * channels, capacity: frames - got)
                if r == 0 { break }
                got += r
            }
        } catch {
            logger.warning("cross-fade: the next track could not be read", metadata: ["track.path": "\(d.info.path)", "error": "\(error)"])
        }
        if got < frames { (buffer + got * channels).update(repeating: 0, count: (frames - got) * channels) }
    }

    /// Whether `step` lies in `region` and the region is (now) decoded in the cache.
    /// Regions longer than the cache, or resampled, are decoded pass by pass instead.
    private func cacheHolds(_ region: LoopRegion, _ step: Playhead.Step) throws(StreamError) -> Bool {
        guard let decoder = self.decoder, region.length <= Int64(cacheFrames),
              decoder.info.sampleRate == decoder.outputFormat.sampleRate,
              step.start >= region.start, step.start + Int64(step.count) <= region.end else { return false }
        if cacheSerial == decoderSerial && cacheStart == region.start && Int64(cacheCount) >= region.length {
            return true
        }
        if cache == nil { cache = .allocate(capacity: cacheFrames * channels) }
        try decoder.seek(to: region.start)
        var got = 0
        let want = Int(region.length)
        while got < want {
            let n = try decoder.read(into: cache! + got * channels, capacity: want - got, limit: region.end)
            if n == 0 { break }
            got += n
        }
        cacheSerial = decoderSerial
        cacheStart = region.start
        cacheCount = got
        return got >= want
    }

    /// Reverses the order of `frames` interleaved frames in place.
    private func reverseFrames(_ p: UnsafeMutablePointer<Float>, frames: Int, channels: Int) {
        var i = 0, j = frames - 1
        while i < j {
            let a = p + i * channels, b = p + j * channels
            for c in 0..<channels { swap(&a[c], &b[c]) }
            i += 1
            j -= 1
        }
    }

    /// Tests only (`@testable`): microseconds `report()` waits after the tracks heard and
    /// before the end, so a test can force the interleaving that once lost an end (a
    /// short track played whole between two reads, below); 0, no wait, otherwise.
    static let reportPauseForTests = Atomic<Int>(0)

    /// Turns the render thread's counters into events (never from the render thread).
    private func report() {
        // The end first: render publishes the heard position, then the end (releasing),
        // so the position read after it is at least as new, and the tracks heard up to
        // the later of the two are the current one in turn before the end is reported
        // (the end's own generation counts, should the position lag). Read the other
        // way round, render could play a short track whole and end it between the two
        // reads: the end then named a track the control side did not have yet, was
        // dropped, and the engine stood "playing" at that track's last frame for good
        // (a queue of 20-40 ms tracks on an unpaced output, 1 CI run in about 30; 3 of 3
        // with a 3 ms sleep between the reads).
        let ended = shared.endedGeneration.load(ordering: .acquiring)
        let endNew = ended != reportedEnded
        if !unheard.isEmpty, case let g = shared.readPosition().generation,
           let k = unheard.lastIndex(where: { $0.generation == g || (endNew && $0.generation == ended) }) {
            // Heard: that track, and any before it (a short one may be passed between
            // two reports). Each is the current one now, in order.
            for u in unheard[...k] {
                guard let (ended, endedGeneration, started) = host.readerHeardNext(generation: u.generation, info: u.info) else { continue }
                logger.info("track ended", metadata: ["track.path": "\(ended)"])
                onEvent(.trackEnded(path: ended, generation: endedGeneration, stopped: false))
                logger.info("playing", metadata: ["track.path": "\(started.path)", "gapless": "true"])
                onEvent(.trackStarted(started))
                onEvent(.gaplessTransition(from: ended, to: started, generation: u.generation))
            }
            unheard.removeFirst(k + 1)
            if unheard.isEmpty { previous = nil }
        }
        let heard = shared.readPosition()
        if heard.generation == self.generation, heard.loopEpoch == loopEpoch, heard.pass != reportedPass {
            let wrapped = heard.pass > reportedPass
            reportedPass = heard.pass
            if wrapped, let loop = host.readerLoopRegion() {
                let remaining = loop.count.map { max(0, Int64($0) - heard.pass) }
                onEvent(.loopWrapped(pass: heard.pass, remaining: remaining))
            }
        }
        let settled = shared.pauseSettled.load(ordering: .acquiring)
        if settled != reportedPauseSettled {
            reportedPauseSettled = settled
            if host.readerPauseSettled(settled) { onEvent(.stateChanged(.paused)) }
        }
        // Tests only: widens the window the order above closes (NextTrackTests).
        if case let pause = Self.reportPauseForTests.load(ordering: .relaxed), pause > 0 {
            usleep(useconds_t(min(pause, 100_000)))
        }
        if endNew {
            reportedEnded = ended
            if let p = host.readerHeardEnd(generation: ended) {
                logger.info("track ended", metadata: ["track.path": "\(p)"])
                onEvent(.trackEnded(path: p, generation: ended, stopped: true))
                onEvent(.stateChanged(.stopped))
            }
        }
        let underruns = shared.underruns.load(ordering: .relaxed)
        let now = monotonicNanoseconds()
        if underruns != reportedUnderruns && now &- lastUnderrunReport > 1_000_000_000 {
            reportedUnderruns = underruns
            lastUnderrunReport = now
            logger.warning("underruns", metadata: ["underruns.total": "\(underruns)"])
            onEvent(.underruns(total: underruns))
        }
        if let d = self.decoder, d.corruptPackets != reportedCorrupt {
            reportedCorrupt = d.corruptPackets
            host.readerCorruptPackets(d.corruptPackets)
            logger.warning("corrupt packets skipped", metadata: ["track.path": "\(d.info.path)", "packets.total": "\(d.corruptPackets)"])
            onEvent(.corruptPackets(path: d.info.path, total: d.corruptPackets))
        }
        let deviceError = shared.deviceError.load(ordering: .relaxed)
        if deviceError != reportedDeviceError {
            reportedDeviceError = deviceError
            guard deviceError != 0 else { return }  // cleared by a reopen
            let e = StreamError(.outputFailed, "output failed: \(String(cString: strerror(Int32(-deviceError)))) (\(deviceError))")
            logger.error("output failed", metadata: ["errno": "\(deviceError)"])
            onEvent(.error(e))
        }
    }
}
