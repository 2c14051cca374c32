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
        /// The last frame of the track was heard.
        case trackEnded(path: String)
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
        /// `from` (sent after that track's `trackEnded` and this one's `trackStarted`).
        case gaplessTransition(from: String, to: TrackInfo)
        /// An output was enabled or disabled, or a feed's reader came or went.
        case outputChanged(name: String)
    }

    /// One output as `outputs` lists it: the local one first, then the feeds.
    public struct OutputReport: Sendable {
        public var name: String
        /// `alsa`, `null`, `wav` or `fifo`.
        public var kind: String
        /// The spec it was made from.
        public var spec: String
        public var enabled: Bool
        /// Local: `open` or `closed`; a feed: its ``FeedState`` name.
        public var state: String
        /// What it runs at: the negotiated device format, or the feed's `rate:bits:channels`.
        public var format: String?
        /// Feeds: frames written to and dropped at the FIFO (in the feed's format).
        public var framesWritten: Int?
        public var framesDropped: Int?
        public var error: String?
    }

    /// The name of the local output in ``outputs()``.
    public static let localOutputName = "local"

    public struct Status: Sendable {
        public var state: Transport.State
        public var track: TrackInfo?
        /// The source frame being heard.
        public var positionFrames: Int64
        public var output: NegotiatedFormat?
        public var underruns: Int
        public var deviceXruns: Int
        /// The output's failure (a negative errno from the device), 0 while it works.
        /// Set by the render thread; cleared when ``recoverOutput()`` reopens it.
        public var deviceError: Int
        public var corruptPackets: Int
        /// From the last `seek` (or `play`) call to its first frame written to the
        /// device, once that has happened.
        public var lastStartLatencyNanoseconds: UInt64?
        /// The direction set (a ping-pong loop turns round inside it on its own).
        public var direction: PlayDirection
        /// The loop region set, if any.
        public var loop: LoopRegion?
        /// Wraps heard since the region was set.
        public var loopPasses: Int64
        /// Volume, mute and ReplayGain settings.
        public var level: LevelSettings
        /// The current track's ReplayGain tags, and the gain applied from them (dB; nil
        /// when ReplayGain is off).
        public var replayGain: ReplayGainInfo
        public var replayGainAppliedDB: Double?
        /// Wraps left (nil: forever, or no loop).
        public var loopRemaining: Int64? {
            guard let l = loop, let c = l.count else { return nil }
            return max(0, Int64(c) - loopPasses)
        }
        public var positionSeconds: Double {
            track.map { FrameTime.seconds(positionFrames, rate: $0.sampleRate) } ?? 0
        }
    }

    public let configuration: Configuration
    private let logger: Logger
    private let onEvent: @Sendable (Event) -> Void
    private let shared: RenderShared

    // Control state. Protected by `control`; written by API callers and the reader thread.
    private struct Control {
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
        /// The position to report until the render thread has played a frame of `generation`.
        var pendingPosition: Int64 = 0
        var negotiated: NegotiatedFormat?
        var requestedFormat: PCMFormat?
        var requestedSampleFormat: DeviceSampleFormat = .float32
        var output: (any AudioOutput)?
        var renderThread: PThread?
        var usingNullFallback = false
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
    }
    private let control = Locked(Control())
    /// Serializes what reopens the output (`play` of another format, `openOutput`,
    /// `recoverOutput`): held while the reader is detached and the render thread
    /// restarted, so `control` need not be. Taken before `control`, never while holding
    /// it; never taken by the reader or render thread.
    private let reconfigure = Locked(())

    // Reader commands. Protected by `commands`; pushed by the control side, taken by the reader.
    private enum Command {
        case load(Handoff<AudioDecoder>, start: Int64, direction: PlayDirection, generation: UInt64)
        case seek(Int64, generation: UInt64)
        case edit(Edit)
        case next(Handoff<AudioDecoder>?, generation: UInt64)
        case stop(generation: UInt64)
        case detach(Handoff<Semaphore>)
        case barrier(Handoff<Semaphore>)
        case quit
    }
    /// Changes that keep the stream going: the reader splices them in.
    fileprivate enum Edit {
        case loop(LoopRegion?, epoch: UInt32)
        case direction(PlayDirection)
    }
    private let commands = Locked<[Command]>([])
    /// Set by `send` after it appends, cleared by the reader before it takes the list:
    /// `fill()` stops at the next step when a command waits. Against an output that
    /// takes audio as fast as it comes (`null?pace=off`, a capture) the ring never
    /// fills, and a detach waited up to 1.2 s for a fill to end (LockOrderTests).
    private let commandWaiting = Atomic<Bool>(false)
    /// Set at init; cleared by `shutdown()` under `reconfigure`, and read under it.
    private var readerThread: PThread?
    private let shutDown = Atomic<Bool>(false)

    public init(configuration: Configuration = Configuration(), logger: Logger,
                onEvent: @escaping @Sendable (Event) -> Void = { _ in }) {
        self.configuration = configuration
        self.logger = logger
        self.onEvent = onEvent
        // The ring is sized when an output opens (reopenOutput); until then it holds
        // nothing, so no memory is spent on a ring for a format not yet known.
        shared = RenderShared(ringFrames: 1, retainFrames: 0, channels: 1,
                              lowWater: configuration.ringFrames / 3)
        let shared = self.shared
        let reader = ReaderState(shared: shared, chunk: 4096)
        let handoff = Handoff((reader, self))
        readerThread = PThread(name: "playd-reader") { handoff.value.1.readerMain(handoff.value.0) }
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
        try play(AudioDecoder(path: path), from: start, paused: paused)
    }

    /// Plays `path` from `seconds` (rounded to the nearest source frame).
    public func play(path: String, fromSeconds seconds: Double, paused: Bool = false) throws(StreamError) {
        guard seconds.isFinite, seconds >= 0 else {
            throw StreamError(.invalidArgument, "\(path): start position \(seconds) s is not a time")
        }
        let decoder = try AudioDecoder(path: path)
        guard let start = FrameTime.checkedFrames(seconds: seconds, rate: decoder.info.sampleRate) else {
            throw StreamError(.invalidArgument, "\(path): start position \(seconds) s is out of range")
        }
        try play(decoder, from: start, paused: paused)
    }

    private func play(_ decoder: AudioDecoder, from requested: Int64?, paused: Bool) throws(StreamError) {
        let path = decoder.info.path
        if let start = requested, let d = decoder.info.durationFrames, !decoder.info.durationIsEstimate, start > d || start < 0 {
            throw StreamError(.invalidArgument, "\(path): start position \(start) is outside 0…\(d)")
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
        try reconfigure.withLock { (_: inout Void) throws(StreamError) in
            let reopen = control.withLock { c in
                c.output == nil || c.requestedFormat != wanted || c.requestedSampleFormat != width
                    || shared.deviceError.load(ordering: .relaxed) != 0
            }
            if reopen { detachReader() }
            try control.withLock { (c: inout Control) throws(StreamError) in
                // The new track's level first, so a render thread started below begins at it.
                let oldReplayGain = c.replayGain
                c.replayGain = ReplayGainInfo(tags: decoder.info.tags)
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
                c.requestedAt = monotonicNanoseconds()
                c.track = decoder.info
                c.loop = nil
                c.next = nil
                c.pendingPosition = start
                c.corruptPackets = 0
                _ = c.transport.on(.play)
                if paused { _ = c.transport.on(.pause) }
                shared.wantPlaying.store(!paused, ordering: .relaxed)
                send(.load(Handoff(decoder), start: start, direction: c.direction, generation: c.generation))
                logger.info("playing", metadata: ["track.path": "\(path)", "track.codec": "\(decoder.info.codec)",
                                                  "track.rate": "\(decoder.info.sampleRate)", "start.frame": "\(start)",
                                                  "direction": "\(c.direction.rawValue)"])
            }
        }
        ProcessTuning.releaseFreeMemory()
        onEvent(.trackStarted(decoder.info))
        onEvent(.stateChanged(paused ? .paused : .playing))
    }

    /// Opens the output for `format` now (a daemon does this at start, so a broken device
    /// fails the start). A later track in another format reopens it.
    public func openOutput(for format: PCMFormat, preferring width: DeviceSampleFormat = .int16) throws(StreamError) {
        try reconfigure.withLock { (_: inout Void) throws(StreamError) in
            let reopen = control.withLock { c in
                c.output == nil || c.requestedFormat != format || c.requestedSampleFormat != width
            }
            guard reopen else { return }
            detachReader()
            try control.withLock { (c: inout Control) throws(StreamError) in try reopenOutput(&c, for: format, preferring: width) }
        }
    }

    /// After the output failed (``Status/deviceError``; an `.error` event with
    /// `output_failed`): closes it and opens it again in the format it had. Throws while
    /// the device is still gone. What was playing is not resumed here: the reader has
    /// let go of it; `play(path:from:paused:)` from the position heard goes on (the
    /// daemon does that, with backoff between attempts). Control side only.
    /// Returns false when there was nothing to recover (a `play` reopened it already).
    @discardableResult
    public func recoverOutput() throws(StreamError) -> Bool {
        try reconfigure.withLock { (_: inout Void) throws(StreamError) -> Bool in
            let last = control.withLock { c in
                shared.deviceError.load(ordering: .relaxed) != 0 || c.output == nil ? c.lastOpened : nil
            }
            guard let last else { return false }
            detachReader()
            try control.withLock { (c: inout Control) throws(StreamError) in
                try reopenOutput(&c, for: last.format, preferring: last.width)
            }
            return true
        }
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
            let end = track.durationFrames ?? Int64.max
            guard frame >= 0, track.durationIsEstimate || frame <= end else {
                throw StreamError(.invalidArgument, "\(track.path): seek to frame \(frame) is outside 0…\(end)")
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
            if let l = region {
                guard l.start >= 0 else {
                    throw StreamError(.invalidArgument, "loop start (\(l.start)) is negative; the current region is kept")
                }
                guard l.start < l.end else {
                    throw StreamError(.invalidArgument, "loop start (\(l.start)) must be before its end (\(l.end)); the current region is kept")
                }
                if let d = track.durationFrames, !track.durationIsEstimate, l.end > d {
                    throw StreamError(.invalidArgument, "loop end (\(l.end)) is beyond the end of the track (\(d)); the current region is kept")
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
            c.direction = direction
            if c.track != nil && c.transport.state != .stopped { send(.edit(.direction(direction))) }
        }
    }

    /// Sets volume, mute and ReplayGain. The render thread ramps to the new level over
    /// 20 ms. Thread: any.
    public func setLevel(_ settings: LevelSettings) {
        control.withLock { c in
            c.level = settings
            applyLevel(c)
        }
    }

    private func applyLevel(_ c: Control) {
        shared.level.store(Loudness.volumeLevel(c.level).bitPattern, ordering: .relaxed)
        shared.replayGain.store(Float(Loudness.replayGain(c.replayGain, c.level).factor).bitPattern, ordering: .relaxed)
        if let n = c.next {
            let rg = Loudness.replayGain(ReplayGainInfo(tags: n.info.tags), c.level).factor
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
    @discardableResult
    public func setNext(path: String?) throws(StreamError) -> Bool {
        guard let path else {
            control.withLock { c in
                c.next = nil
                applyLevel(c)
                send(.next(nil, generation: 0))
            }
            return false
        }
        // Checked before opening too, so a track that already ended costs no open.
        let playing = control.withLock { c in c.track != nil && c.transport.state != .stopped }
        guard playing else { throw StreamError(.notPlaying, "nothing is playing for \(path) to follow") }
        let decoder = try AudioDecoder(path: path)
        return try control.withLock { (c: inout Control) throws(StreamError) -> Bool in
            guard c.track != nil, c.transport.state != .stopped, let out = c.negotiated else {
                throw StreamError(.notPlaying, "nothing is playing for \(path) to follow")
            }
            let natural = PCMFormat(sampleRate: decoder.info.sampleRate, channels: decoder.info.channels)
            if natural != out.pcm && configuration.formatChange == .reopen {
                c.next = nil
                applyLevel(c)
                send(.next(nil, generation: 0))
                return false
            }
            try decoder.setOutputFormat(out.pcm)
            c.next = (c.allocateGeneration(), decoder.info)
            applyLevel(c)
            send(.next(Handoff(decoder), generation: c.next!.generation))
            return true
        }
    }

    /// The track queued by ``setNext(path:)`` and not yet heard.
    public var queuedNext: TrackInfo? { control.withLock { $0.next?.info } }

    /// Waits until the reader thread has acted on every command sent before (a load, a
    /// seek, a loop or direction change has been spliced in). Tests use it to set up a
    /// paused stream deterministically. Thread: any but the reader.
    public func waitUntilApplied() {
        let done = Semaphore()
        send(.barrier(Handoff(done)))
        done.wait()
    }

    /// A snapshot of what is playing. Thread: any. Never waits for the render thread.
    public func status() -> Status {
        control.withLock { c in
            var position = c.pendingPosition
            let direction = c.direction
            var passes: Int64 = 0
            let heard = shared.readPosition()
            var current = (generation: c.generation, track: c.track)
            if let n = c.next, heard.generation == n.generation { current = (n.generation, n.info) }
            if heard.generation == current.generation, let track = current.track, let out = c.negotiated {
                position = heard.frame
                passes = heard.loopEpoch == c.loopEpoch ? heard.pass : 0
                if heard.advancing && c.transport.state == .playing && !heard.pingPong {
                    // Interpolate between the render thread's reports (one every 4 periods).
                    let elapsed = Int64(min(monotonicNanoseconds() &- heard.time, UInt64(out.periodFrames) * 6_000_000_000 / UInt64(out.pcm.sampleRate)))
                    let moved = FrameTime.rescaleFloor(elapsed, Int64(track.sampleRate), 1_000_000_000)
                    if heard.loopEnd > heard.loopStart {
                        let span = heard.loopEnd - heard.loopStart
                        let u = heard.direction == .forward ? position - heard.loopStart + moved
                                                            : heard.loopEnd - 1 - position + moved
                        position = heard.direction == .forward ? heard.loopStart + u % span : heard.loopEnd - 1 - u % span
                    } else {
                        position += heard.direction == .forward ? moved : -moved
                    }
                }
                position = max(0, position)
                if let d = track.durationFrames, !track.durationIsEstimate { position = min(position, d) }
            }
            var latency: UInt64?
            if shared.firstWrittenGeneration.load(ordering: .acquiring) == c.generation {
                latency = shared.firstWrittenTime.load(ordering: .relaxed) &- c.requestedAt
            }
            return Status(state: c.transport.state, track: current.track, positionFrames: position,
                          output: c.negotiated,
                          underruns: shared.underruns.load(ordering: .relaxed),
                          deviceXruns: shared.deviceXruns.load(ordering: .relaxed),
                          deviceError: shared.deviceError.load(ordering: .relaxed),
                          corruptPackets: c.corruptPackets,
                          lastStartLatencyNanoseconds: latency,
                          direction: direction, loop: c.loop, loopPasses: c.loop == nil ? 0 : passes,
                          level: c.level, replayGain: c.replayGain,
                          replayGainAppliedDB: Loudness.replayGain(c.replayGain, c.level).db)
        }
    }

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
        // and none starts waiting for a reader that has quit.
        reconfigure.withLock { _ in
            send(.quit)
            readerThread?.join()
            readerThread = nil
            control.withLock { c in
                stopRenderThread(&c)
                c.output?.close()
                c.output = nil
            }
        }
        for feed in configuration.feeds { feed.stop() }
    }

    // MARK: - Outputs

    /// The local output and the feeds, with their state and counters. Thread: any.
    public func outputs() -> [OutputReport] {
        let (negotiated, spec) = control.withLock { c in
            (c.negotiated, c.usingNullFallback ? "null" : configuration.output)
        }
        let kind = spec == "auto" ? "alsa" : String(spec.prefix { $0 != ":" && $0 != "?" })
        var list = [OutputReport(name: Self.localOutputName, kind: kind, spec: spec,
                                 enabled: !shared.localMuted.load(ordering: .relaxed),
                                 state: negotiated == nil ? "closed" : "open",
                                 format: negotiated?.description)]
        for f in configuration.feeds {
            list.append(OutputReport(name: f.name, kind: "fifo", spec: f.spec, enabled: f.isEnabled,
                                     state: f.state.name, format: f.format.description,
                                     framesWritten: f.framesWritten, framesDropped: f.framesDropped,
                                     error: f.lastError))
        }
        return list
    }

    /// Enables or disables an output by name. A disabled feed gets nothing and closes
    /// its FIFO; the disabled local output stays open, silent, as the clock that paces
    /// the feeds (configure `null` as the device to leave the sound card alone).
    /// Thread: any.
    public func setOutputEnabled(_ name: String, _ on: Bool) throws(StreamError) {
        if name == Self.localOutputName {
            guard shared.localMuted.exchange(!on, ordering: .relaxed) == on else { return }
        } else if let f = configuration.feeds.first(where: { $0.name == name }) {
            guard f.isEnabled != on else { return }
            f.setEnabled(on)
        } else {
            let names = ([Self.localOutputName] + configuration.feeds.map(\.name)).joined(separator: ", ")
            throw StreamError(.invalidArgument, "no output named '\(name)' (outputs: \(names))")
        }
        logger.info("output \(on ? "enabled" : "disabled")", metadata: ["output.name": "\(name)"])
        onEvent(.outputChanged(name: name))
    }

    // MARK: - Control helpers (called with `control` held)

    private func transport(_ event: Transport.Event) {
        let newState: Transport.State? = control.withLock { c in
            let before = c.transport.state
            switch c.transport.on(event) {
            case .setPlaying(let on):
                shared.wantPlaying.store(on, ordering: .relaxed)
                EventFD.signal(shared.renderWake)
            case .unload:
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
            return c.transport.state != before ? c.transport.state : nil
        }
        if let s = newState { onEvent(.stateChanged(s)) }
    }

    private func send(_ command: Command) {
        commands.withLock { $0.append(command) }
        commandWaiting.store(true, ordering: .releasing)
        EventFD.signal(shared.readerWake)
    }

    /// Makes the reader let go of its decoder and stop writing into the ring, and waits
    /// until it has. Called holding `reconfigure` and never `control`: the reader takes
    /// `control` in `report()` before it reads its next command, so waiting for it with
    /// `control` held hung both threads (LockOrderTests). Thread: control side.
    private func detachReader() {
        guard readerThread != nil else { return }  // shut down: nothing reads
        let done = Semaphore()
        send(.detach(Handoff(done)))
        done.wait()
    }

    /// Stops the render thread, reopens the output for `format`, and starts a new render
    /// thread. The reader has been detached (``detachReader()``) under the same hold of
    /// `reconfigure`, so nothing writes into the ring this resizes.
    private func reopenOutput(_ c: inout Control, for format: PCMFormat, preferring width: DeviceSampleFormat) throws(StreamError) {
        // 1. No render thread, no consumer.
        stopRenderThread(&c)
        c.output?.close()
        c.negotiated = nil
        c.requestedFormat = nil
        // 2. Open.
        var output = c.output
        if output == nil { output = try makeOutput(&c) }
        var negotiated: NegotiatedFormat
        do {
            negotiated = try output!.open(format, preferring: width)
        } catch {
            guard configuration.output == "auto", !c.usingNullFallback else { throw error }
            logger.warning("no sound card: playing through the paced null output (audio is discarded)",
                           metadata: ["output.error": "\(error.message)"])
            c.usingNullFallback = true
            output = NullOutput(bufferTimeMicros: configuration.bufferMillis * 1000,
                                periodTimeMicros: configuration.periodMillis * 1000)
            negotiated = try output!.open(format)
        }
        for f in negotiated.fallbacks { logger.warning("output fallback", metadata: ["output.failed": "\(f)"]) }
        logger.info("output open", metadata: ["output.device": "\(negotiated.device)",
                                              "output.format": "\(negotiated.sampleFormat.rawValue)",
                                              "output.rate": "\(negotiated.pcm.sampleRate)",
                                              "output.channels": "\(negotiated.pcm.channels)",
                                              "output.period": "\(negotiated.periodFrames)",
                                              "output.buffer": "\(negotiated.bufferFrames)"])
        // 3. A clean ring for the new format, then the render thread. The producer keeps
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
        let h = Handoff((shared, output!, negotiated, configuration.feeds))
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

    private static func runRender<O: AudioOutput>(shared: RenderShared, output: O, format: NegotiatedFormat,
                                                  feeds: [FeedOutput]) {
        var loop = RenderLoop(shared: shared, output: output, format: format, feeds: feeds)
        loop.run()
    }

    private func stopRenderThread(_ c: inout Control) {
        guard let t = c.renderThread else { return }
        shared.quit.store(true, ordering: .relaxed)
        EventFD.signal(shared.renderWake)
        t.join()
        c.renderThread = nil
        shared.quit.store(false, ordering: .relaxed)
        shared.realtimeResult.store(-1, ordering: .relaxed)
        // The render thread acknowledged nothing it will never see: align the flush counters.
        shared.flushAck.store(shared.flushRequest.load(ordering: .relaxed), ordering: .relaxed)
        shared.spliceAck.store(shared.spliceRequest.load(ordering: .relaxed), ordering: .relaxed)
    }

    private func makeOutput(_ c: inout Control) throws(StreamError) -> any AudioOutput {
        let spec = configuration.output == "auto" ? "alsa:default" : configuration.output
        return try OutputSpec.make(spec, bufferMillis: configuration.bufferMillis, periodMillis: configuration.periodMillis)
    }

    // MARK: - Reader thread

    /// What the reader thread owns.
    fileprivate final class ReaderState {
        let shared: RenderShared
        /// Forward steps, and the first reverse block after a reposition or splice.
        let chunk: Int
        /// Reverse blocks: large enough that a seek's preroll (MP3: 11520 frames) is a
        /// small part of each, small enough to stay a few hundred KiB.
        let blockFrames = 32 * 1024
        /// Loop regions up to this long are decoded once and replayed from memory.
        let cacheFrames = 32 * 1024

        var decoder: AudioDecoder?
        /// The track to follow without a gap, and its generation.
        var next: (decoder: AudioDecoder, generation: UInt64)?
        /// The track the reader left for `next`, until the control side hears the switch
        /// (a seek before that is a seek in it).
        var previous: (decoder: AudioDecoder, generation: UInt64)?
        /// Counts loads, so the cache knows which decoder it holds.
        var decoderSerial = 0
        var generation: UInt64 = 0
        var finished = true
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
        var spliceBase: (ring: Int, head: Playhead, edits: [Edit], turn: Bool)?

        /// Decoded frames waiting to go into the ring (one step), and the marker that
        /// must precede them.
        var pending: UnsafeMutablePointer<Float>
        var pendingFrames = 0
        var pendingOffset = 0
        var pendingMarker: SegmentMarker?
        var channels = 2

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
        /// The loop setting the planner's pass counts belong to.
        var loopEpoch: UInt32 = 0

        init(shared: RenderShared, chunk: Int) {
            self.shared = shared
            self.chunk = chunk
            pending = .allocate(capacity: blockFrames * 2)
        }

        /// Makes the buffers fit `channels`. Reader thread.
        func prepare(channels: Int) {
            guard channels != self.channels else { return }
            pending.deallocate()
            pending = .allocate(capacity: blockFrames * channels)
            cache?.deallocate()
            cache = nil
            cacheSerial = -1
            self.channels = channels
        }

        func dropPending() {
            pendingFrames = 0
            pendingOffset = 0
            pendingMarker = nil
        }

        deinit {
            pending.deallocate()
            cache?.deallocate()
        }
    }

    private func readerMain(_ r: ReaderState) {
        while true {
            commandWaiting.store(false, ordering: .relaxed)
            let pending = commands.withLock { list -> [Command] in
                let l = list
                list.removeAll()
                return l
            }
            var edits: [Edit] = []
            for command in pending {
                if case .edit(let e) = command {
                    edits.append(e)
                    continue
                }
                // Edits queued before a reposition apply before it.
                if !edits.isEmpty { splice(r, edits); edits = [] }
                switch command {
                case .quit:
                    r.decoder = nil
                    return
                case .barrier(let done):
                    done.value.signal()
                case .detach(let done):
                    r.decoder = nil
                    r.head = nil
                    r.finished = true
                    r.detached = true
                    done.value.signal()
                case .stop(let generation):
                    r.generation = generation
                    r.next = nil
                    r.previous = nil
                    r.decoder = nil
                    r.head = nil
                    r.finished = true
                    // Detached, the reader has nothing in the ring to flush, and the
                    // render thread may be being replaced (no one to acknowledge).
                    if !r.detached { flush(r) }
                case .load(let handoff, let start, let direction, let generation):
                    let decoder = handoff.value
                    r.generation = generation
                    r.direction = direction
                    r.prepare(channels: decoder.outputFormat.channels)
                    r.detached = false
                    r.decoder = decoder
                    r.decoderSerial += 1
                    r.reportedPass = 0
                    r.next = nil
                    r.previous = nil
                    reposition(r, to: start, loop: nil)
                case .seek(let frame, let generation):
                    if let p = r.previous, let current = r.decoder {
                        // Switched to the next track but it is not heard yet: the seek
                        // is in the track being heard. Go back; the next follows again.
                        r.next = (current, r.generation)
                        r.decoder = p.decoder
                        r.decoderSerial += 1
                        r.previous = nil
                    }
                    r.generation = generation
                    reposition(r, to: frame, loop: r.head?.loop)
                case .next(let handoff, let generation):
                    r.next = handoff.map { ($0.value, generation) }
                case .edit:
                    break
                }
            }
            if !edits.isEmpty { splice(r, edits) }
            fill(r)
            report(r)
            // Sleep until the render thread wants more (low water, end, underrun, device
            // error all signal readerWake), a command arrives, or a housekeeping tick:
            // 1 s, or 50 ms while a loop runs, so wrap events are timely.
            // Without a stream the reader does not look at the ring at all: the control
            // side resizes it (reopenOutput) while the reader is detached.
            if r.finished || r.decoder == nil || r.shared.ring.writableFrames < r.chunk {
                let looping = r.head?.loop.map { l in l.count.map { r.reportedPass < Int64($0) } ?? true } ?? false
                let switching = r.previous != nil  // events at the frame the next track is heard
                EventFD.wait(r.shared.readerWake, timeoutNanoseconds: looping || switching ? 50_000_000 : 1_000_000_000)
            }
        }
    }

    /// Plays from `frame` (a new track or a seek): decodes the first step, and only
    /// then flushes the ring, so the old audio plays until the new audio is ready.
    private func reposition(_ r: ReaderState, to frame: Int64, loop: LoopRegion?) {
        guard let decoder = r.decoder else { return }
        var head = Playhead(position: frame, direction: r.direction, loop: loop,
                            length: decoder.info.durationIsEstimate ? nil : decoder.info.durationFrames)
        head.reposition(to: frame)
        r.head = head
        r.dropPending()
        r.firstStep = true
        var more = true
        do {
            more = try produce(r)
        } catch {
            logger.error("seek failed", metadata: ["track.path": "\(decoder.info.path)", "error": "\(error)"])
            onEvent(.error(error))
            more = false
        }
        flush(r)
        r.finished = false
        r.spliceBase = (r.shared.ring.producerIndex, head, [], false)
        if more {
            _ = drainPending(r)
        } else {
            finish(r)
        }
        EventFD.signal(r.shared.renderWake)
    }

    /// Applies loop and direction changes without a gap: asks the render thread for the
    /// last frame it keeps (it takes back what the device queued beyond a safety
    /// margin and empties the ring), restarts the plan after that frame, applies the
    /// edits, and refills.
    private func splice(_ r: ReaderState, _ edits: [Edit]) {
        for case .direction(let d) in edits { r.direction = d }
        guard r.decoder != nil, var head = r.head else { return }
        r.dropPending()
        handshake(r, request: r.shared.spliceRequest, ack: r.shared.spliceAck, what: "splice")
        let kept = r.shared.spliceRing.load(ordering: .relaxed)
        let m = r.shared.spliceMarker.pointee
        var base: Playhead
        var all: [Edit]
        var turn: Bool
        if let b = r.spliceBase, kept <= b.ring || m.generation != r.generation {
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
                r.loopEpoch = epoch
                r.reportedPass = 0
            case .direction(let d): head.setDirection(d, turn: turn)
            }
        }
        r.head = head
        logger.debug("splice", metadata: ["kept": "\(kept)", "base": "\(base)", "head": "\(head)", "marker": "\(m)"])
        r.spliceBase = (r.shared.ring.producerIndex, base, all, turn)
        r.firstStep = true
        r.finished = false
        fill(r)
        EventFD.signal(r.shared.renderWake)
    }

    /// The flush handshake: ask the render thread to drop the device queue and empty the
    /// ring, and wait until it has (or until it is not running).
    private func flush(_ r: ReaderState) {
        handshake(r, request: r.shared.flushRequest, ack: r.shared.flushAck, what: "flush")
    }

    /// Reopens the stream's end, stores a new request number (release: publishes that
    /// and the reader's other state), wakes render, and waits for its acknowledgement
    /// (acquire: what render wrote before it is visible), at most 2 s.
    private func handshake(_ r: ReaderState, request: borrowing Atomic<UInt64>, ack: borrowing Atomic<UInt64>, what: String) {
        r.shared.endIndex.store(Int.max, ordering: .relaxed)
        let number = request.load(ordering: .relaxed) &+ 1
        request.store(number, ordering: .releasing)
        EventFD.signal(r.shared.renderWake)
        let deadline = monotonicNanoseconds() + 2_000_000_000
        while ack.load(ordering: .acquiring) != number {
            if monotonicNanoseconds() > deadline {
                logger.error("render thread did not acknowledge a \(what) within 2 s")
                break
            }
            EventFD.wait(r.shared.readerWake, timeoutNanoseconds: 2_000_000)
        }
    }

    private func finish(_ r: ReaderState) {
        r.finished = true
        r.shared.streamGeneration.store(r.generation, ordering: .relaxed)
        r.shared.endIndex.store(r.shared.ring.producerIndex, ordering: .releasing)  // after the last write
        EventFD.signal(r.shared.renderWake)
    }

    /// Decodes until the ring is full (its high-water mark), then returns.
    private func fill(_ r: ReaderState) {
        guard let decoder = r.decoder, !r.finished else { return }
        while true {
            guard drainPending(r) else { break }
            if r.shared.ring.writableFrames < r.chunk || commandWaiting.load(ordering: .relaxed) { break }
            do {
                if try !produce(r) {
                    if switchToNext(r) { continue }
                    finish(r)
                    return
                }
            } catch {
                logger.error("decoding stopped", metadata: ["track.path": "\(decoder.info.path)", "error": "\(error)"])
                onEvent(.error(error))
                finish(r)
                return
            }
        }
        if r.shared.starving.load(ordering: .relaxed) { EventFD.signal(r.shared.renderWake) }
    }

    /// At the end of a track played forward, goes on with the queued next one in the
    /// same ring: its first step carries a marker of its own generation, which is how
    /// render and the control side know where it starts. Returns whether it did.
    private func switchToNext(_ r: ReaderState) -> Bool {
        guard let n = r.next, let old = r.decoder, r.head?.direction == .forward else { return false }
        r.previous = (old, r.generation)
        r.decoder = n.decoder
        r.generation = n.generation
        r.decoderSerial += 1
        r.next = nil
        let info = n.decoder.info
        let head = Playhead(position: 0, length: info.durationIsEstimate ? nil : info.durationFrames)
        r.head = head
        r.firstStep = true
        r.reportedPass = 0
        r.spliceBase = (r.shared.ring.producerIndex, head, [], false)
        logger.debug("next track decoding", metadata: ["track.path": "\(info.path)"])
        return true
    }

    /// Writes what is pending into the ring, its marker first. Returns true when all of
    /// it went in.
    private func drainPending(_ r: ReaderState) -> Bool {
        while r.pendingOffset < r.pendingFrames {
            let room = r.shared.ring.writableFrames
            if room == 0 { return false }
            if var m = r.pendingMarker {
                m.ringIndex = r.shared.ring.producerIndex
                guard r.shared.markers.push(m) else { return false }  // full: the render thread frees it
                r.pendingMarker = nil
            }
            let n = min(room, r.pendingFrames - r.pendingOffset)
            r.shared.ring.write(r.pending + r.pendingOffset * r.channels, frames: n)
            r.pendingOffset += n
            if r.shared.starving.load(ordering: .relaxed) { EventFD.signal(r.shared.renderWake) }
        }
        return true
    }

    /// Decodes the playhead's next step into `pending`. Returns false at the end.
    private func produce(_ r: ReaderState) throws(StreamError) -> Bool {
        guard let decoder = r.decoder, var head = r.head else { return false }
        let sourceRate = decoder.info.sampleRate, deviceRate = decoder.outputFormat.sampleRate
        // Step sizes are in source frames; keep their output inside `pending`.
        let fit = Int(FrameTime.rescaleFloor(Int64(r.blockFrames), Int64(sourceRate), Int64(deviceRate))) - 64
        let wanted = head.direction == .reverse && !r.firstStep ? r.blockFrames : r.chunk
        guard let step = head.next(maxFrames: max(1, min(wanted, fit))) else { return false }
        r.head = head
        r.firstStep = false
        var produced = 0
        if let region = head.loop, try cacheHolds(r, region, step) {
            let from = r.cache! + Int(step.start - r.cacheStart) * r.channels
            r.pending.update(from: from, count: step.count * r.channels)
            produced = step.count
        } else {
            if decoder.position != step.start || step.direction == .reverse {
                try decoder.seek(to: step.start)
            }
            let end = step.start + Int64(step.count)
            while produced < r.blockFrames {
                let n = try decoder.read(into: r.pending + produced * r.channels, capacity: r.blockFrames - produced, limit: end)
                if n == 0 { break }
                produced += n
            }
            if produced == 0 {
                // The track ended before its stated length.
                return step.direction == .reverse ? try produce(r) : false
            }
        }
        if step.direction == .reverse { reverseFrames(r.pending, frames: produced, channels: r.channels) }
        r.pendingFrames = produced
        r.pendingOffset = 0
        if let shape = step.newRun {
            // A short reverse block (the track ended early) starts lower.
            let first = step.direction == .reverse && sourceRate == deviceRate
                ? step.start + Int64(produced) - 1 : step.firstFrame
            var m = SegmentMarker(ringIndex: 0, firstFrame: first, direction: step.direction, shape: shape,
                                  pass: step.pass, generation: r.generation,
                                  sourceRate: Int32(sourceRate), deviceRate: Int32(deviceRate))
            m.loopEpoch = r.loopEpoch
            r.pendingMarker = m
        }
        return true
    }

    /// Whether `step` lies in `region` and the region is (now) decoded in the cache.
    /// Regions longer than the cache, or resampled, are decoded pass by pass instead.
    private func cacheHolds(_ r: ReaderState, _ region: LoopRegion, _ step: Playhead.Step) throws(StreamError) -> Bool {
        guard let decoder = r.decoder, region.length <= Int64(r.cacheFrames),
              decoder.info.sampleRate == decoder.outputFormat.sampleRate,
              step.start >= region.start, step.start + Int64(step.count) <= region.end else { return false }
        if r.cacheSerial == r.decoderSerial && r.cacheStart == region.start && Int64(r.cacheCount) >= region.length {
            return true
        }
        if r.cache == nil { r.cache = .allocate(capacity: r.cacheFrames * r.channels) }
        try decoder.seek(to: region.start)
        var got = 0
        let want = Int(region.length)
        while got < want {
            let n = try decoder.read(into: r.cache! + got * r.channels, capacity: want - got, limit: region.end)
            if n == 0 { break }
            got += n
        }
        r.cacheSerial = r.decoderSerial
        r.cacheStart = region.start
        r.cacheCount = got
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

    /// Turns the render thread's counters into events (never from the render thread).
    private func report(_ r: ReaderState) {
        if r.previous != nil, r.shared.readPosition().generation == r.generation {
            // The next track is being heard: it is the current one now.
            r.previous = nil
            let change: (ended: String, started: TrackInfo)? = control.withLock { c in
                guard let n = c.next, n.generation == r.generation, let old = c.track else { return nil }
                c.track = n.info
                c.generation = n.generation
                c.next = nil
                c.loop = nil
                c.corruptPackets = 0
                c.pendingPosition = 0
                c.replayGain = ReplayGainInfo(tags: n.info.tags)
                applyLevel(c)
                return (old.path, n.info)
            }
            if let (ended, started) = change {
                logger.info("track ended", metadata: ["track.path": "\(ended)"])
                onEvent(.trackEnded(path: ended))
                logger.info("playing", metadata: ["track.path": "\(started.path)", "gapless": "true"])
                onEvent(.trackStarted(started))
                onEvent(.gaplessTransition(from: ended, to: started))
            }
        }
        let heard = r.shared.readPosition()
        if heard.generation == r.generation, heard.loopEpoch == r.loopEpoch, heard.pass != r.reportedPass {
            let wrapped = heard.pass > r.reportedPass
            r.reportedPass = heard.pass
            if wrapped, let loop = control.withLock({ $0.loop }) {
                let remaining = loop.count.map { max(0, Int64($0) - heard.pass) }
                onEvent(.loopWrapped(pass: heard.pass, remaining: remaining))
            }
        }
        let ended = r.shared.endedGeneration.load(ordering: .acquiring)
        if ended != r.reportedEnded {
            r.reportedEnded = ended
            let path: String? = control.withLock { c in
                guard ended == c.generation, c.transport.state != .stopped else { return nil }
                _ = c.transport.on(.ended)
                c.next = nil
                let p = c.track?.path
                c.pendingPosition = c.direction == .reverse ? 0 : c.track?.durationFrames ?? c.pendingPosition
                c.loop = nil
                return p
            }
            if let p = path {
                logger.info("track ended", metadata: ["track.path": "\(p)"])
                onEvent(.trackEnded(path: p))
                onEvent(.stateChanged(.stopped))
            }
        }
        let underruns = r.shared.underruns.load(ordering: .relaxed)
        let now = monotonicNanoseconds()
        if underruns != r.reportedUnderruns && now &- r.lastUnderrunReport > 1_000_000_000 {
            r.reportedUnderruns = underruns
            r.lastUnderrunReport = now
            logger.warning("underruns", metadata: ["underruns.total": "\(underruns)"])
            onEvent(.underruns(total: underruns))
        }
        if let d = r.decoder, d.corruptPackets != r.reportedCorrupt {
            r.reportedCorrupt = d.corruptPackets
            control.withLock { $0.corruptPackets = d.corruptPackets }
            logger.warning("corrupt packets skipped", metadata: ["track.path": "\(d.info.path)", "packets.total": "\(d.corruptPackets)"])
            onEvent(.corruptPackets(path: d.info.path, total: d.corruptPackets))
        }
        let deviceError = r.shared.deviceError.load(ordering: .relaxed)
        if deviceError != r.reportedDeviceError {
            r.reportedDeviceError = deviceError
            guard deviceError != 0 else { return }  // cleared by a reopen
            let e = StreamError(.outputFailed, "output failed: \(String(cString: strerror(Int32(-deviceError)))) (\(deviceError))")
            logger.error("output failed", metadata: ["errno": "\(deviceError)"])
            onEvent(.error(e))
        }
    }
}

/// A counting semaphore for the control side (never used by the render thread).
final class Semaphore: @unchecked Sendable {
    // @unchecked Sendable: sem_t is designed for use from several threads.
    private let sem = UnsafeMutablePointer<sem_t>.allocate(capacity: 1)
    init() { sem_init(sem, 0, 0) }
    deinit { sem_destroy(sem); sem.deallocate() }
    func signal() { sem_post(sem) }
    func wait() { while sem_wait(sem) != 0 && errno == EINTR {} }
}
