import Logging
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// The streaming engine: a reader thread decodes on demand into a lock-free ring; a
/// render thread pulls periods from it into the output.
///
/// ```
///  control (any thread) ──commands──▶ reader thread ──FrameRing + markers──▶ render thread ──▶ output
///         ▲                              │  AudioDecoder (FFmpeg)               (RenderLoop)
///         └──────── events ◀─────────────┘◀──────── atomics, eventfds ─────────────┘
/// ```
///
/// Thread safety: every public method may be called from any thread; they serialize on
/// one control mutex (never taken by the render thread). `play` opens and validates the
/// file on the caller's thread, so a bad file is refused before anything that is
/// playing is touched.
public final class PlaybackEngine: @unchecked Sendable {
    // @unchecked Sendable: mutable control state is inside `control` (`Locked`); the
    // threads communicate through `shared` (atomics, SPSC structures) and `commands`
    // (`Locked`). `output` is touched by the control side only while the render thread
    // is not running (see `reopenOutput`).

    public struct Configuration: Sendable {
        /// Output spec (``OutputSpec``), or `"auto"`: `alsa:default`, falling back to a
        /// paced `null` output with a warning when no ALSA device opens.
        public var output: String = "auto"
        /// Device buffer and period, milliseconds.
        public var bufferMillis: Int = OutputSpec.defaultBufferMillis
        public var periodMillis: Int = OutputSpec.defaultPeriodMillis
        /// Frames the reader may keep decoded ahead (the ring's usable capacity; for an
        /// output that can rewind, the ring adds 32 Ki frames of retained history, and it
        /// rounds up to a power of two). 32 Ki frames is 0.68 s at 48 kHz on top of the
        /// device's own buffer; the whole ring is 64 Ki frames (512 KiB of float stereo)
        /// with history, 32 Ki frames (256 KiB) without.
        public var ringFrames: Int = 32 * 1024
        /// A queued next track in another rate or channel count: resample it to the
        /// running format (gapless), or let it start after the device reopens (a gap).
        public var formatChange: FormatChange = .resample
        /// Extra outputs fed with what the local output plays (Snapcast FIFOs). The
        /// engine starts their threads and stops them at shutdown.
        public var feeds: [FeedOutput] = []
        public init() {}
    }

    public enum FormatChange: String, Sendable, CaseIterable {
        case resample, reopen
    }

    public enum Event: Sendable {
        /// A track started (its first frame is being heard, or it is loaded paused).
        case trackStarted(TrackInfo)
        /// The last frame of the track (played in stream `generation`) was heard. With
        /// `stopped` the transport stopped there (nothing followed): the event itself
        /// says so, since by the time it is taken in the engine may have played on, or
        /// stopped after a track that followed (a listener that asked the engine's state
        /// instead played that track again: issue 38).
        case trackEnded(path: String, generation: UInt64, stopped: Bool)
        /// The play state changed.
        case stateChanged(Transport.State)
        /// Periods padded with silence so far (reported at most once a second).
        case underruns(total: Int)
        /// Corrupt packets skipped so far in the current track.
        case corruptPackets(path: String, total: Int)
        /// The output failed and could not be recovered, or decoding stopped with an error.
        case error(StreamError)
        /// Playback wrapped (or turned, in ping-pong) at a loop end: `pass` wraps heard
        /// since the region was set, `remaining` left (nil: forever). Coalesced when
        /// the region is shorter than the reader's wake-up interval (~50 ms).
        case loopWrapped(pass: Int64, remaining: Int64?)
        /// A track queued with ``setNext(path:)`` is being heard, with no gap after
        /// `from` (sent after that track's `trackEnded` and this one's `trackStarted`), in
        /// stream `generation` (the one ``lastQueuedNextGeneration`` gave it).
        case gaplessTransition(from: String, to: TrackInfo, generation: UInt64)
        /// An output was enabled or disabled, or a feed's reader came or went.
        case outputChanged(name: String)
        /// News from the network stream playing (`path`): a title, a drop, a reconnect.
        case stream(path: String, StreamEvent)
        /// The render thread started announcement `id` (``announce(_:label:options:)``):
        /// over the music from its source frame `musicFrame`, or alone (nil). Sent by the
        /// voice thread.
        case announcementStarted(id: UInt64, label: String, musicFrame: Int64?)
        /// Announcement `id` is over: played to its end, cut short (`cancelled`: a cancel,
        /// an output reopened, shutdown), or refused (`error`: a source would not open).
        case announcementEnded(id: UInt64, label: String, cancelled: Bool, error: StreamError?)
    }

    public let configuration: Configuration
    let logger: Logger
    let onEvent: @Sendable (Event) -> Void
    let shared: RenderShared

    // Control state. Protected by `control`; written by API callers and the reader thread.
    struct Control {
        var transport = Transport()
        var track: TrackInfo?
        /// The stream being heard: a track from a play, or a seek in it. Generations
        /// only need to be unique (a queued next track has its own, taken earlier).
        var generation: UInt64 = 0
        private var lastGeneration: UInt64 = 0
        mutating func newGeneration() { generation = allocateGeneration() }
        mutating func allocateGeneration() -> UInt64 { lastGeneration += 1; return lastGeneration }
        /// The track queued to follow without a gap, and the generation its frames carry.
        var next: (generation: UInt64, info: TrackInfo)?
        /// The generation the last ``setNext(path:crossfadeFor:)`` gave its track.
        var lastQueuedNext: UInt64 = 0
        /// Nexts of the current track replaced or cleared: the reader may have gone on to
        /// one already and have been too late to take it back, and then it is heard
        /// (``readerHeardNext(generation:info:)``). Emptied by a play; the newest 8.
        var supersededNext: [UInt64] = []
        mutating func supersede() {
            if let n = next { supersededNext = Array((supersededNext + [n.generation]).suffix(8)) }
            next = nil
        }
        /// The position to report until the render thread has played a frame of `generation`.
        var pendingPosition: Int64 = 0
        var negotiated: NegotiatedFormat?
        var requestedFormat: PCMFormat?
        var requestedSampleFormat: DeviceSampleFormat = .float32
        var output: (any AudioOutput)?
        var renderThread: PThread?
        var usingNullFallback = false
        /// What `auto` became when the output was first made (``PlaybackEngine/resolved``).
        var autoSpec: String?
        /// The format of the last successful open: what ``recoverOutput()`` reopens,
        /// as a failed reopen clears `requestedFormat`.
        var lastOpened: (format: PCMFormat, width: DeviceSampleFormat)?
        var corruptPackets = 0
        /// When the current generation was requested (play or seek).
        var requestedAt: UInt64 = 0
        var direction = PlayDirection.forward
        var loop: LoopRegion?
        /// Counts `setLoop` calls, so pass counts heard are matched to the region set.
        var loopEpoch: UInt32 = 0
        var level = LevelSettings()
        /// The current track's ReplayGain tags.
        var replayGain = ReplayGainInfo()
        /// The last pause asked of the render thread (``RenderShared/pauseRequest``), and
        /// whether its `paused` event has gone out: it goes out when the render thread
        /// has stopped the sound (the reader sends it, ``readerPauseSettled(_:)``), or at
        /// once when no render thread will (none running, or failed).
        var pauseSerial: UInt64 = 0
        var pauseAnnounced = true
        /// The last position `status` reported, so that it never goes back within a
        /// stream played straight (no loop): interpolation between the render thread's
        /// reports runs on the system clock, the device on its own. A seek, a new track
        /// or a turn of direction is a new run.
        var lastReported: (generation: UInt64, frame: Int64, direction: PlayDirection)?
    }
    let control = Locked(Control())
    /// Measured loudness by path (``setLoudnessLookup(_:)``). Written by the control
    /// side; read under `control` (taken after it, never the other way).
    let loudnessLookup = Locked<(@Sendable (String) -> LoudnessFigures?)?>(nil)
    /// Serializes what reopens the output (`play` of another format, `openOutput`,
    /// `recoverOutput`): held while the reader is detached and the render thread
    /// restarted, so `control` need not be. Taken before `control`, never while holding
    /// it; never taken by the reader or render thread.
    let reconfigure = Locked(())
    /// Commands to the reader thread (``ReaderLoop``).
    let mailbox: ReaderMailbox
    /// The announcement's voice thread (PlaybackEngine+Voice.swift). Taken after
    /// `control` when both are held, never before it.
    let voiceControl = Locked(VoiceControl())

    /// Set at init; cleared by `shutdown()` under `reconfigure`, and read under it.
    var readerThread: PThread?
    let shutDown = Atomic<Bool>(false)

    public init(configuration: Configuration = Configuration(), logger: Logger,
                onEvent: @escaping @Sendable (Event) -> Void = { _ in }) {
        self.configuration = configuration
        self.logger = logger
        self.onEvent = onEvent
        // The ring is sized when an output opens (reopenOutput); until then it holds
        // nothing, so no memory is spent on a ring for a format not yet known.
        shared = RenderShared(ringFrames: 1, retainFrames: 0, channels: 1,
                              lowWater: configuration.ringFrames / 3)
        mailbox = ReaderMailbox(wake: shared.readerWake)
        let reader = ReaderLoop(shared: shared, chunk: 4096, mailbox: mailbox, host: self, logger: logger, onEvent: onEvent)
        let handoff = Handoff(reader)
        readerThread = PThread(name: "playd-reader") { handoff.value.run() }
        for feed in configuration.feeds {
            feed.start { [onEvent] name in onEvent(.outputChanged(name: name)) }
        }
    }

    deinit {
        shutdown()
    }

    // MARK: - Public API

    /// Opens `path`, validates it, and plays it from `start` (source frames; nil: from
    /// the beginning, or from the end when the direction is reverse). The loop region
    /// is cleared; the direction carries over, as mpv's `play-direction`.
    /// On error nothing changes: what was playing keeps playing.
    public func play(path: String, from start: Int64? = nil, paused: Bool = false) throws(StreamError) {
        let requestedAt = monotonicNanoseconds()
        try play(AudioDecoder(path: path), from: start, paused: paused, requestedAt: requestedAt)
    }

    /// Plays `path` from `seconds` (rounded to the nearest source frame).
    public func play(path: String, fromSeconds seconds: Double, paused: Bool = false) throws(StreamError) {
        guard seconds.isFinite, seconds >= 0 else {
            throw StreamError(.invalidArgument, "\(path): start position \(seconds) s is not a time")
        }
        let requestedAt = monotonicNanoseconds()
        let decoder = try AudioDecoder(path: path)
        guard let start = FrameTime.checkedFrames(seconds: seconds, rate: decoder.info.sampleRate) else {
            throw StreamError(.invalidArgument, "\(path): start position \(seconds) s is out of range")
        }
        try play(decoder, from: start, paused: paused, requestedAt: requestedAt)
    }

    /// Plays a decoder opened elsewhere (a network stream is opened off the control
    /// thread: its connect may take up to its timeout). A live stream plays forward:
    /// the direction turns forward with it.
    public func play(decoder: AudioDecoder, from start: Int64? = nil, paused: Bool = false) throws(StreamError) {
        try play(decoder, from: start, paused: paused, requestedAt: monotonicNanoseconds())
    }

    /// Plays a decoder opened elsewhere from `seconds` (rounded to the nearest source frame).
    public func play(decoder: AudioDecoder, fromSeconds seconds: Double, paused: Bool = false) throws(StreamError) {
        let path = decoder.info.path
        guard seconds.isFinite, seconds >= 0 else {
            throw StreamError(.invalidArgument, "\(path): start position \(seconds) s is not a time")
        }
        guard let start = FrameTime.checkedFrames(seconds: seconds, rate: decoder.info.sampleRate) else {
            throw StreamError(.invalidArgument, "\(path): start position \(seconds) s is out of range")
        }
        try play(decoder, from: start, paused: paused, requestedAt: monotonicNanoseconds())
    }

    /// `requestedAt`: when the request came, before the file was opened: the start
    /// latency in status counts the open too (it did not, before issue 25).
    func play(_ decoder: AudioDecoder, from requested: Int64?, paused: Bool, requestedAt: UInt64) throws(StreamError) {
        let path = decoder.info.path
        if !decoder.info.isSeekable {
            if let start = requested, start != 0 {
                throw StreamError(.notSeekable, "\(path): \(decoder.info.isLive ? "a live stream plays from where it is joined" : "the server takes no Range requests: it plays from the start")")
            }
            control.withLock { $0.direction = .forward }
        }
        if let start = requested, let d = decoder.info.durationFrames, !decoder.info.durationIsEstimate, start > d || start < 0 {
            throw StreamError(.invalidArgument, "\(path): start position \(FrameTime.clock(start, rate: decoder.info.sampleRate)) is past the end of the track (\(FrameTime.clock(d, rate: decoder.info.sampleRate)))")
        }
        if let start = requested, start < 0 {
            throw StreamError(.invalidArgument, "\(path): start position \(start) is negative")
        }
        // Reverse from the end: where the audio really ends when the length is estimated.
        let reverseFromEnd = requested == nil && control.withLock { $0.direction == .reverse }
        let fromEnd = reverseFromEnd ? try decoder.decodedEnd() : decoder.info.durationFrames ?? 0
        var lostOutput = false
        defer { if lostOutput { onEvent(.stateChanged(.stopped)) } }
        let wanted = PCMFormat(sampleRate: decoder.info.sampleRate, channels: decoder.info.channels)
        let width = decoder.info.preferredDeviceFormat
        // Plays that reopen the output take turns (`reconfigure`), and wait for the
        // reader with `control` released: the reader takes `control` in `report()`.
        // One held by an output recovery on a worker is not waited for: that holder may
        // hang in a device's open for as long as the sound server does (issue 38).
        let taken = try reconfigure.withLockIfAvailable { (_: inout Void) throws(StreamError) in
            let reopen = control.withLock { c in
                c.output == nil || c.requestedFormat != wanted || c.requestedSampleFormat != width
                    || shared.deviceError.load(ordering: .relaxed) != 0
            }
            if reopen { detachReader() }
            try control.withLock { (c: inout Control) throws(StreamError) in
                // The new track's level first, so a render thread started below begins at it.
                let oldReplayGain = c.replayGain
                c.replayGain = gainInfo(decoder.info, c.level)
                applyLevel(c)
                defer { if c.track?.path != path { c.replayGain = oldReplayGain; applyLevel(c) } }
                if reopen {
                    do throws(StreamError) {
                        try reopenOutput(&c, for: wanted, preferring: width)
                    } catch {
                        // The old stream was already let go to reopen the device: say so
                        // truthfully (stopped) rather than report a track nothing plays.
                        lostOutput = c.transport.state != .stopped
                        c.transport = Transport()
                        c.track = nil
                        c.newGeneration()
                        c.pendingPosition = 0
                        shared.wantPlaying.store(false, ordering: .relaxed)
                        throw error
                    }
                }
                try decoder.setOutputFormat(c.negotiated!.pcm)
                let start = requested ?? (c.direction == .reverse ? fromEnd : 0)
                c.newGeneration()
                c.requestedAt = requestedAt
                c.track = decoder.info
                c.loop = nil
                c.next = nil
                c.supersededNext.removeAll()
                c.pendingPosition = start
                c.corruptPackets = 0
                c.pauseAnnounced = true
                _ = c.transport.on(.play)
                if paused { _ = c.transport.on(.pause) }
                shared.wantPlaying.store(!paused, ordering: .relaxed)
                send(.load(Handoff(decoder), start: start, direction: c.direction, generation: c.generation))
                logger.info("playing", metadata: ["track.path": "\(path)", "track.codec": "\(decoder.info.codec)",
                                                  "track.rate": "\(decoder.info.sampleRate)", "start.frame": "\(start)",
                                                  "direction": "\(c.direction.rawValue)"])
            }
        }
        guard taken != nil else {
            throw StreamError(.outputUnavailable, "\(path): the output is being reopened; try again once it is open")
        }
        ProcessTuning.releaseFreeMemory()
        onEvent(.trackStarted(decoder.info))
        onEvent(.stateChanged(paused ? .paused : .playing))
    }

    public func pause() { transport(.pause) }
    public func resume() { transport(.resume) }
    public func toggle() { transport(.toggle) }
    public func stop() { transport(.stop) }

    /// Seeks to source frame `frame` of the current track.
    public func seek(to frame: Int64) throws(StreamError) {
        try control.withLock { (c: inout Control) throws(StreamError) in
            guard let track = c.track, c.transport.state != .stopped else {
                throw StreamError(.invalidArgument, "nothing is playing to seek in")
            }
            guard track.isSeekable else {
                throw StreamError(.notSeekable, "\(track.path): \(track.isLive ? "a live stream" : "a stream whose server takes no Range requests") cannot seek")
            }
            let end = track.durationFrames ?? Int64.max
            guard frame >= 0, track.durationIsEstimate || frame <= end else {
                throw StreamError(.invalidArgument, frame < 0
                    ? "\(track.path): seek to \(FrameTime.clock(frame, rate: track.sampleRate)) is before the start of the track"
                    : "\(track.path): seek to \(FrameTime.clock(frame, rate: track.sampleRate)) is past the end of the track (\(FrameTime.clock(end, rate: track.sampleRate)))")
            }
            c.newGeneration()
            c.pendingPosition = frame
            c.requestedAt = monotonicNanoseconds()
            send(.seek(frame, generation: c.generation))
        }
    }

    /// Sets, moves or clears (nil) the loop region of the current track, seamlessly: a
    /// pass in progress finishes, nothing is dropped, and a region the play head is
    /// already past makes it jump to the region. Errors keep the current region.
    public func setLoop(_ region: LoopRegion?) throws(StreamError) {
        try control.withLock { (c: inout Control) throws(StreamError) in
            guard let track = c.track, c.transport.state != .stopped else {
                throw StreamError(.invalidArgument, "nothing is playing to loop in")
            }
            if region != nil && !track.isSeekable { throw StreamError(.notSeekable, "\(track.path): a stream that cannot seek cannot loop") }
            if let l = region {
                guard l.start >= 0 else {
                    throw StreamError(.invalidArgument, "loop start \(FrameTime.clock(l.start, rate: track.sampleRate)) is before the start of the track; the current region is kept")
                }
                guard l.start < l.end else {
                    throw StreamError(.invalidArgument, "loop start \(FrameTime.clock(l.start, rate: track.sampleRate)) must be before its end \(FrameTime.clock(l.end, rate: track.sampleRate)); the current region is kept")
                }
                if let d = track.durationFrames, !track.durationIsEstimate, l.end > d {
                    throw StreamError(.invalidArgument, "loop end \(FrameTime.clock(l.end, rate: track.sampleRate)) is past the end of the track (\(FrameTime.clock(d, rate: track.sampleRate))); the current region is kept")
                }
                if let n = l.count, n < 0 {
                    throw StreamError(.invalidArgument, "loop count \(n) is negative; the current region is kept")
                }
            }
            c.loop = region
            c.loopEpoch &+= 1
            send(.edit(.loop(region, epoch: c.loopEpoch)))
        }
    }

    /// Plays forward or in reverse from the frame being heard, seamlessly. When nothing
    /// is playing it applies to the next track (which then starts from its end).
    public func setDirection(_ direction: PlayDirection) {
        control.withLock { c in
            guard c.direction != direction else { return }
            // A live stream plays forward only (the player refuses the turn first).
            if c.track?.isSeekable == false && c.transport.state != .stopped { return }
            c.direction = direction
            if c.track != nil && c.transport.state != .stopped { send(.edit(.direction(direction))) }
        }
    }

    /// Sets volume, mute and ReplayGain. The render thread ramps to the new level over
    /// 20 ms. Thread: any.
    public func setLevel(_ settings: LevelSettings) {
        control.withLock { c in
            let sourceChanged = c.level.source != settings.source || c.level.referenceLUFS != settings.referenceLUFS
                || c.level.maxTruePeakDBTP != settings.maxTruePeakDBTP
            c.level = settings
            if sourceChanged, let t = c.track { c.replayGain = gainInfo(t, settings) }
            applyLevel(c)
        }
    }

    /// `[streams] normalize`: network streams are brought slowly toward `targetLUFS`
    /// (``StreamNormalizer``); nil: off. Takes effect at the next step decoded.
    /// Thread: any.
    public func setStreamNormalize(_ targetLUFS: Double?) {
        let v = targetLUFS.flatMap { $0.isFinite ? $0 : nil } ?? .nan
        shared.streamNormalizeLUFS.store(v.bitPattern, ordering: .relaxed)
    }

    /// Fades what plays toward `target` (0…1, on top of the volume) over `seconds` for a
    /// full 0 → 1 (0: at once). The render thread ramps it linearly, sample by sample;
    /// the next flush (a new track played, a seek, a stop) ends it, and what plays from
    /// there is at full level. The schedule fades a programme out with it at a block
    /// boundary, then plays the next one. Thread: any.
    public func setFade(to target: Double, seconds: Double) {
        let t = target.isFinite ? min(1, max(0, target)) : 1
        let s = seconds.isFinite ? min(600, max(0, seconds)) : 0
        let rate = control.withLock { $0.negotiated?.pcm.sampleRate } ?? 48_000
        shared.fadeTarget.store(Float(t).bitPattern, ordering: .relaxed)
        shared.fadeFrames.store(Int((s * Double(rate)).rounded()), ordering: .relaxed)
        shared.fadeSerial.add(1, ordering: .releasing)
        EventFD.signal(shared.renderWake)
    }

    /// A track's ReplayGain: its tags, or the measurement the lookup has for its path
    /// (``setLoudnessLookup(_:)``), as `level.source` says.
    func gainInfo(_ info: TrackInfo, _ level: LevelSettings) -> ReplayGainInfo {
        let measured = level.source == .tags ? nil : loudnessLookup.withLock { $0 }?(info.path)
        return ReplayGainInfo(tags: info.tags, measured: measured, settings: level)
    }

    /// Where measured loudness comes from (the daemon's measurements, by path). Called
    /// with the engine's control lock held: it must not block or take a lock that is
    /// held while calling into the engine.
    public func setLoudnessLookup(_ lookup: (@Sendable (String) -> LoudnessFigures?)?) {
        loudnessLookup.withLock { $0 = lookup }
    }

    func applyLevel(_ c: Control) {
        shared.level.store(Loudness.volumeLevel(c.level).bitPattern, ordering: .relaxed)
        shared.replayGain.store(Float(Loudness.replayGain(c.replayGain, c.level).factor).bitPattern, ordering: .relaxed)
        if let n = c.next {
            let rg = Loudness.replayGain(gainInfo(n.info, c.level), c.level).factor
            shared.nextReplayGain.store(Float(rg).bitPattern, ordering: .relaxed)
            shared.nextGeneration.store(n.generation, ordering: .relaxed)
        } else {
            shared.nextGeneration.store(UInt64.max, ordering: .relaxed)
        }
        EventFD.signal(shared.renderWake)
    }

    /// Queues `path` to follow the current track with no gap: the reader decodes it into
    /// the same ring when the current one ends, and `status` and events switch to it at
    /// the frame where it is heard. A file in another rate or channel count is resampled
    /// to the running format, unless the configuration says `reopen`: then nothing is
    /// queued (returns false) and the caller plays it when this track ends. nil clears.
    /// Opens the file on the caller's thread: a bad file throws and changes nothing.
    /// With `crossfade`, the two tracks overlap when the engine can do it exactly (see
    /// ``Crossfade``); otherwise the join is gapless.
    @discardableResult
    public func setNext(path: String?, crossfade: Crossfade? = nil) throws(StreamError) -> Bool {
        try setNext(path: path) { _, _ in crossfade }
    }

    /// As ``setNext(path:crossfade:)``, the cross-fade decided from the two tracks' info
    /// (the track playing, the one opened): a caller's rule such as "not within an
    /// album". `crossfadeFor` runs under the engine's lock: it must only compute.
    @discardableResult
    public func setNext(path: String?, crossfadeFor: (TrackInfo, TrackInfo) -> Crossfade?) throws(StreamError) -> Bool {
        guard let path else {
            control.withLock { c in
                c.supersede()
                applyLevel(c)
                send(.next(nil, generation: 0, overlap: nil))
            }
            return false
        }
        // Checked before opening too, so a track that already ended costs no open.
        let playing = control.withLock { c in c.track != nil && c.transport.state != .stopped }
        guard playing else { throw StreamError(.notPlaying, "nothing is playing for \(path) to follow") }
        return try setNext(decoder: try AudioDecoder(path: path), crossfadeFor: crossfadeFor)
    }

    /// As ``setNext(path:crossfadeFor:)`` with a decoder the caller opened (off its own
    /// thread: the daemon's control thread never waits on a disk).
    @discardableResult
    public func setNext(decoder: AudioDecoder, crossfadeFor: (TrackInfo, TrackInfo) -> Crossfade?) throws(StreamError) -> Bool {
        let path = decoder.info.path
        return try control.withLock { (c: inout Control) throws(StreamError) -> Bool in
            guard c.track != nil, c.transport.state != .stopped, let out = c.negotiated else {
                throw StreamError(.notPlaying, "nothing is playing for \(path) to follow")
            }
            let natural = PCMFormat(sampleRate: decoder.info.sampleRate, channels: decoder.info.channels)
            if natural != out.pcm && configuration.formatChange == .reopen {
                c.supersede()
                applyLevel(c)
                send(.next(nil, generation: 0, overlap: nil))
                return false
            }
            try decoder.setOutputFormat(out.pcm)
            let crossfade = c.track.flatMap { crossfadeFor($0, decoder.info) }
            let overlap = crossfade.flatMap { x in
                Crossfade.overlapFrames(x, current: c.track, next: decoder.info, device: out.pcm)
            }
            c.supersede()
            c.next = (c.allocateGeneration(), decoder.info)
            c.lastQueuedNext = c.next!.generation
            applyLevel(c)
            send(.next(Handoff(decoder), generation: c.next!.generation,
                       overlap: overlap.map { ReaderOverlap(frames: $0, curve: crossfade!.curve) }))
            return true
        }
    }

    /// Decides the queued next track's join again (a cross-fade setting changed), with
    /// the same decoder: the reader applies it when the join has not begun (no overlap
    /// frame mixed yet, not gone on to the next track), and otherwise the join stays as
    /// it was. Returns false when nothing is queued. Thread: any; `crossfadeFor` runs
    /// under the engine's lock.
    @discardableResult
    public func setNextCrossfade(_ crossfadeFor: (TrackInfo, TrackInfo) -> Crossfade?) -> Bool {
        control.withLock { c in
            guard let n = c.next, let current = c.track, c.transport.state != .stopped, let out = c.negotiated else { return false }
            let crossfade = crossfadeFor(current, n.info)
            let overlap = crossfade.flatMap { x in Crossfade.overlapFrames(x, current: current, next: n.info, device: out.pcm) }
            send(.nextOverlap(overlap.map { ReaderOverlap(frames: $0, curve: crossfade!.curve) }, generation: n.generation))
            return true
        }
    }

    /// The track queued by ``setNext(path:)`` and not yet heard.
    public var queuedNext: TrackInfo? { control.withLock { $0.next?.info } }

    /// The generation the last successful ``setNext(path:crossfadeFor:)`` gave its
    /// track: ``Status/generation`` says so once it is heard. Thread: any.
    public var lastQueuedNextGeneration: UInt64 { control.withLock { $0.lastQueuedNext } }

    /// Waits until the reader thread has acted on every command sent before (a load, a
    /// seek, a loop or direction change has been spliced in). Tests use it to set up a
    /// paused stream deterministically. Thread: any but the reader.
    public func waitUntilApplied() {
        let done = Semaphore()
        send(.barrier(Handoff(done)))
        done.wait()
    }

    /// How long ``shutdown()`` waits for a reopen under way on another thread.
    static let shutdownReopenGraceNanoseconds: UInt64 = 5_000_000_000

    /// Fades out, stops the threads and closes the output. Idempotent.
    public func shutdown() {
        guard !shutDown.exchange(true, ordering: .relaxed) else { return }
        // Fade: the render thread ramps out over 5 ms and lets the device play it.
        shared.wantPlaying.store(false, ordering: .relaxed)
        EventFD.signal(shared.renderWake)
        let deadline = monotonicNanoseconds() + 300_000_000
        while monotonicNanoseconds() < deadline {
            let s = RenderState(rawValue: shared.state.load(ordering: .relaxed))
            if s != .running && s != .draining { break }
            EventFD.wait(shared.readerWake, timeoutNanoseconds: 5_000_000)
        }
        // Under `reconfigure`: a reopen in progress on another thread finishes first,
        // and none starts waiting for a reader that has quit. But a reopen whose sound
        // server never answers holds it for as long as the server does (SIGTERM then
        // waited for systemd's kill, 90 s): after 5 s the engine quits without it. The
        // device is out of the state while it is opened, so there is nothing to close;
        // the worker finds the engine shut down when its open returns, if ever, and
        // closes what it opened (``reopenReleasingControl(for:preferring:)``).
        let quit = {
            self.send(.quit)
            self.readerThread?.join()
            self.readerThread = nil
            self.control.withLock { c in
                self.stopRenderThread(&c)
                c.output?.close()
                c.output = nil
            }
        }
        let lockDeadline = monotonicNanoseconds() + Self.shutdownReopenGraceNanoseconds
        while reconfigure.withLockIfAvailable({ _ in quit() }) == nil {
            if monotonicNanoseconds() >= lockDeadline {
                logger.warning("shutting down while the output's reopen still waits for its device")
                quit()
                break
            }
            EventFD.wait(shared.readerWake, timeoutNanoseconds: 10_000_000)
        }
        stopVoice()
        for feed in configuration.feeds { feed.stop() }
    }

    // MARK: - Control helpers (called with `control` held)

    func transport(_ event: Transport.Event) {
        let newStates: [Transport.State] = control.withLock { c in
            let before = c.transport.state
            var states: [Transport.State] = []
            switch c.transport.on(event) {
            case .setPlaying(let on):
                if on {
                    // Resumed before the sound had stopped: the pause is told first.
                    if !c.pauseAnnounced { states.append(.paused) }
                    c.pauseAnnounced = true
                } else {
                    c.pauseSerial &+= 1
                    shared.pauseRequest.store(c.pauseSerial, ordering: .releasing)
                    let renderWillSettle = c.renderThread != nil
                        && shared.state.load(ordering: .relaxed) != RenderState.failed.rawValue
                    c.pauseAnnounced = !renderWillSettle
                }
                shared.wantPlaying.store(on, ordering: .relaxed)
                EventFD.signal(shared.renderWake)
            case .unload:
                c.pauseAnnounced = true
                shared.wantPlaying.store(false, ordering: .relaxed)
                c.newGeneration()
                c.track = nil
                c.loop = nil
                c.next = nil
                applyLevel(c)
                c.pendingPosition = 0
                send(.stop(generation: c.generation))
            case .none:
                break
            }
            if c.transport.state != before && (c.transport.state != .paused || c.pauseAnnounced) {
                states.append(c.transport.state)
            }
            return states
        }
        for s in newStates { onEvent(.stateChanged(s)) }
    }

    func send(_ command: ReaderCommand) {
        mailbox.send(command)
    }

    /// Makes the reader let go of its decoder and stop writing into the ring, and waits
    /// until it has. Called holding `reconfigure` and never `control`: the reader takes
    /// `control` in `report()` before it reads its next command, so waiting for it with
    /// `control` held hung both threads (LockOrderTests). Thread: control side.
    func detachReader() {
        guard readerThread != nil else { return }  // shut down: nothing reads
        let done = Semaphore()
        send(.detach(Handoff(done)))
        done.wait()
    }

    /// Stops the render thread, reopens the output for `format`, and starts a new render
    /// thread. The reader has been detached (``detachReader()``) under the same hold of
    /// `reconfigure`, so nothing writes into the ring this resizes. All under `control`
    /// (a play's reopen: the device's open is quick or fails); ``recoverOutput()`` runs
    /// the same three steps with `control` let go during the open.
    func reopenOutput(_ c: inout Control, for format: PCMFormat, preferring width: DeviceSampleFormat) throws(StreamError) {
        let output = try takeOutput(&c)
        let opened: OpenedOutput
        do throws(StreamError) {
            opened = try openDevice(output, for: format, preferring: width, nullFallbackTaken: c.usingNullFallback)
        } catch {
            c.output = output
            throw error
        }
        installOutput(&c, opened, for: format, preferring: width)
    }

    /// A device opened by ``openDevice(_:for:preferring:nullFallbackTaken:)``, to install.
    struct OpenedOutput {
        var output: any AudioOutput
        var negotiated: NegotiatedFormat
        /// `auto` found no sound card and fell back to the paced null output.
        var tookNullFallback: Bool
    }

    /// Step 1 of a reopen, under `control`: no render thread (no consumer), the old device
    /// closed, and the output taken out of the state, so `status` and `outputs` show it
    /// closed and nothing else touches it while it opens. Made here when there is none.
    func takeOutput(_ c: inout Control) throws(StreamError) -> any AudioOutput {
        stopRenderThread(&c)
        c.output?.close()
        c.negotiated = nil
        c.requestedFormat = nil
        guard let output = c.output else { return try makeOutput(&c) }
        c.output = nil
        return output
    }

    /// Step 2: the device's open. It touches no engine state, so it may run holding only
    /// `reconfigure`: a sound server that accepts the connection and never answers (one
    /// stopped, or swapping) holds this thread for as long as it hangs, and nothing else.
    func openDevice(_ given: any AudioOutput, for format: PCMFormat, preferring width: DeviceSampleFormat,
                    nullFallbackTaken: Bool) throws(StreamError) -> OpenedOutput {
        var output = given
        var negotiated: NegotiatedFormat
        var fallback = false
        do throws(StreamError) {
            negotiated = try output.open(format, preferring: width)
        } catch {
            guard configuration.output == "auto", !nullFallbackTaken else { throw error }
            logger.warning("no sound card: playing through the paced null output (audio is discarded)",
                           metadata: ["output.error": "\(error.message)"])
            fallback = true
            output = NullOutput(bufferTimeMicros: configuration.bufferMillis * 1000,
                                periodTimeMicros: configuration.periodMillis * 1000)
            negotiated = try output.open(format)
        }
        for f in negotiated.fallbacks { logger.warning("output fallback", metadata: ["output.failed": "\(f)"]) }
        logger.info("output open", metadata: ["output.device": "\(negotiated.device)",
                                              "output.format": "\(negotiated.sampleFormat.rawValue)",
                                              "output.rate": "\(negotiated.pcm.sampleRate)",
                                              "output.channels": "\(negotiated.pcm.channels)",
                                              "output.period": "\(negotiated.periodFrames)",
                                              "output.buffer": "\(negotiated.bufferFrames)"])
        return OpenedOutput(output: output, negotiated: negotiated, tookNullFallback: fallback)
    }

    /// Step 3, under `control`: the opened device installed, with a clean ring for its
    /// format, and a new render thread.
    func installOutput(_ c: inout Control, _ opened: OpenedOutput, for format: PCMFormat, preferring width: DeviceSampleFormat) {
        let output = opened.output, negotiated = opened.negotiated
        if opened.tookNullFallback { c.usingNullFallback = true }
        // A clean ring for the new format, then the render thread. The producer keeps
        // up to a device buffer's worth behind the read cursor so pause can take back
        // what the device had queued (see FrameRing.rewind); 32 Ki frames covers a
        // buffer of ~680 ms at 48 kHz. A device that cannot rewind needs none.
        shared.ring.reset(channels: negotiated.pcm.channels, minimumCapacity: configuration.ringFrames,
                          retain: negotiated.canRewind ? Self.retainFrames : 0)
        shared.markers.reset()
        shared.endIndex.store(Int.max, ordering: .relaxed)
        shared.state.store(RenderState.starting.rawValue, ordering: .relaxed)
        c.output = output
        c.negotiated = negotiated
        c.requestedFormat = format
        c.requestedSampleFormat = width
        c.lastOpened = (format, width)
        // A new device: a failure of the old one is history (the render thread that
        // set it has been joined).
        shared.deviceError.store(0, ordering: .relaxed)
        for feed in configuration.feeds { feed.configure(input: negotiated.pcm, periodFrames: negotiated.periodFrames) }
        let h = Handoff((shared, output, negotiated, configuration.feeds))
        c.renderThread = PThread(name: "playd-render") {
            let (shared, out, fmt, feeds) = h.value
            Self.runRender(shared: shared, output: out, format: fmt, feeds: feeds)
        }
        // Report the scheduling result from here, never from the render thread.
        let deadline = monotonicNanoseconds() + 100_000_000
        while shared.realtimeResult.load(ordering: .relaxed) == -1 && monotonicNanoseconds() < deadline {
            EventFD.wait(shared.readerWake, timeoutNanoseconds: 1_000_000)
        }
        // That wait may have taken a wake-up meant for the reader (a command sent
        // meanwhile): hand it back, or the reader sleeps up to its 1 s tick.
        EventFD.signal(shared.readerWake)
        let rt = shared.realtimeResult.load(ordering: .relaxed)
        if rt == 0 {
            logger.info("render thread runs SCHED_FIFO")
        } else if rt > 0 {
            logger.notice("render thread could not get SCHED_FIFO; continuing with normal scheduling",
                          metadata: ["errno": "\(rt)"])
        }
    }

    /// History kept behind the ring's read cursor for outputs that can rewind.
    static let retainFrames = 1 << 15

    static func runRender<O: AudioOutput>(shared: RenderShared, output: O, format: NegotiatedFormat,
                                                  feeds: [FeedOutput]) {
        var loop = RenderLoop(shared: shared, output: output, format: format, feeds: feeds)
        loop.run()
    }

    func stopRenderThread(_ c: inout Control) {
        joinRenderThread(askRenderThreadToStop(&c))
    }

    /// The render thread told to quit and taken out of the state, to be joined by
    /// ``joinRenderThread(_:)``, with `control` let go if need be: a render thread in a
    /// write to a sound server that hangs returns only when the server does.
    func askRenderThreadToStop(_ c: inout Control) -> PThread? {
        guard let t = c.renderThread else { return nil }
        shared.quit.store(true, ordering: .relaxed)
        EventFD.signal(shared.renderWake)
        c.renderThread = nil
        return t
    }

    func joinRenderThread(_ thread: PThread?) {
        guard let t = thread else { return }
        t.join()
        shared.quit.store(false, ordering: .relaxed)
        shared.realtimeResult.store(-1, ordering: .relaxed)
        // The render thread acknowledged nothing it will never see: align the flush counters.
        shared.flushAck.store(shared.flushRequest.load(ordering: .relaxed), ordering: .relaxed)
        shared.spliceAck.store(shared.spliceRequest.load(ordering: .relaxed), ordering: .relaxed)
    }

    func makeOutput(_ c: inout Control) throws(StreamError) -> any AudioOutput {
        var spec = configuration.output
        if spec == "auto" {
            if c.autoSpec == nil { c.autoSpec = Self.resolvedAuto() }
            spec = c.autoSpec!
        }
        return try OutputSpec.make(spec, bufferMillis: configuration.bufferMillis, periodMillis: configuration.periodMillis)
    }

    /// `auto`: PipeWire when a PipeWire server answers for this user when the output is
    /// first made, else ALSA's default device (with the null fallback `reopenOutput`
    /// adds). Decided once: a daemon started before the user's PipeWire stays on ALSA
    /// (whose default reaches PipeWire too where pipewire-alsa is installed).
    static func resolvedAuto() -> String { PipeWireOutput.serverAnswers ? "pipewire" : "alsa:default" }
}

/// A counting semaphore for the control side (never used by the render thread).
final class Semaphore: @unchecked Sendable {
    // @unchecked Sendable: sem_t is designed for use from several threads.
    let sem = UnsafeMutablePointer<sem_t>.allocate(capacity: 1)
    init() { sem_init(sem, 0, 0) }
    deinit { sem_destroy(sem); sem.deallocate() }
    func signal() { sem_post(sem) }
    func wait() { while sem_wait(sem) != 0 && errno == EINTR {} }
}
