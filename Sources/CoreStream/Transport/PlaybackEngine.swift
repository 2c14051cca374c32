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
    // @unchecked Sendable: mutable control state is inside `control` (a Mutex); the
    // threads communicate through `shared` (atomics, SPSC structures) and `commands`
    // (a Mutex). `output` is touched by the control side only while the render thread
    // is not running (see `reopenOutput`).

    public struct Configuration: Sendable {
        /// Output spec (``OutputSpec``), or `"auto"`: `alsa:default`, falling back to a
        /// paced `null` output with a warning when no ALSA device opens.
        public var output: String = "auto"
        /// Device buffer and period, milliseconds.
        public var bufferMillis: Int = OutputSpec.defaultBufferMillis
        public var periodMillis: Int = OutputSpec.defaultPeriodMillis
        /// Frames the reader may keep decoded ahead (the ring's usable capacity; the ring
        /// adds 32 Ki frames of retained history and rounds up to a power of two).
        /// 32 Ki frames is 0.68 s at 48 kHz on top of the device's own buffer; the whole
        /// ring is 64 Ki frames, 512 KiB of float stereo.
        public var ringFrames: Int = 32 * 1024
        public init() {}
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
    }

    public struct Status: Sendable {
        public var state: Transport.State
        public var track: TrackInfo?
        /// The source frame being heard.
        public var positionFrames: Int64
        public var output: NegotiatedFormat?
        public var underruns: Int
        public var deviceXruns: Int
        public var corruptPackets: Int
        /// From the last `seek` (or `play`) call to its first frame written to the
        /// device, once that has happened.
        public var lastStartLatencyNanoseconds: UInt64?
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
        var generation: UInt64 = 0
        /// The position to report until the render thread has played a frame of `generation`.
        var pendingPosition: Int64 = 0
        var negotiated: NegotiatedFormat?
        var requestedFormat: PCMFormat?
        var requestedSampleFormat: DeviceSampleFormat = .float32
        var output: (any AudioOutput)?
        var renderThread: PThread?
        var usingNullFallback = false
        var corruptPackets = 0
        /// When the current generation was requested (play or seek).
        var requestedAt: UInt64 = 0
    }
    private let control = Mutex(Control())

    // Reader commands. Protected by `commands`; pushed by the control side, taken by the reader.
    private enum Command {
        case load(Handoff<AudioDecoder>, start: Int64, generation: UInt64)
        case seek(Int64, generation: UInt64)
        case stop(generation: UInt64)
        case detach(Handoff<Semaphore>)
        case quit
    }
    private let commands = Mutex<[Command]>([])
    private var readerThread: PThread?
    private let shutDown = Atomic<Bool>(false)

    public init(configuration: Configuration = Configuration(), logger: Logger,
                onEvent: @escaping @Sendable (Event) -> Void = { _ in }) {
        self.configuration = configuration
        self.logger = logger
        self.onEvent = onEvent
        // The producer keeps one device buffer's worth behind the read cursor so pause can
        // take back what the device had queued (see FrameRing.rewind).
        // 32 Ki frames covers a device buffer of up to ~680 ms at 48 kHz.
        let retain = 1 << 15
        shared = RenderShared(ringFrames: configuration.ringFrames, retainFrames: retain, channels: 2,
                              lowWater: configuration.ringFrames / 3)
        let shared = self.shared
        let reader = ReaderState(shared: shared, chunk: 4096)
        let handoff = Handoff((reader, self))
        readerThread = PThread(name: "playd-reader") { handoff.value.1.readerMain(handoff.value.0) }
    }

    deinit {
        shutdown()
    }

    // MARK: - Public API

    /// Opens `path`, validates it, and plays it from `start` (source frames).
    /// On error nothing changes: what was playing keeps playing.
    public func play(path: String, from start: Int64 = 0, paused: Bool = false) throws(StreamError) {
        try play(AudioDecoder(path: path), from: start, paused: paused)
    }

    /// Plays `path` from `seconds` (rounded to the nearest source frame).
    public func play(path: String, fromSeconds seconds: Double, paused: Bool = false) throws(StreamError) {
        guard seconds.isFinite, seconds >= 0 else {
            throw StreamError(.invalidArgument, "\(path): start position \(seconds) s is not a time")
        }
        let decoder = try AudioDecoder(path: path)
        try play(decoder, from: FrameTime.frames(seconds: seconds, rate: decoder.info.sampleRate), paused: paused)
    }

    private func play(_ decoder: AudioDecoder, from start: Int64, paused: Bool) throws(StreamError) {
        let path = decoder.info.path
        if let d = decoder.info.durationFrames, !decoder.info.durationIsEstimate, start > d || start < 0 {
            throw StreamError(.invalidArgument, "\(path): start position \(start) is outside 0…\(d)")
        }
        var lostOutput = false
        defer { if lostOutput { onEvent(.stateChanged(.stopped)) } }
        try control.withLock { (c: inout Control) throws(StreamError) in
            let wanted = PCMFormat(sampleRate: decoder.info.sampleRate, channels: decoder.info.channels)
            let width = decoder.info.preferredDeviceFormat
            if c.output == nil || c.requestedFormat != wanted || c.requestedSampleFormat != width {
                do throws(StreamError) {
                    try reopenOutput(&c, for: wanted, preferring: width)
                } catch {
                    // The old stream was already let go to reopen the device: say so
                    // truthfully (stopped) rather than report a track nothing plays.
                    lostOutput = c.transport.state != .stopped
                    c.transport = Transport()
                    c.track = nil
                    c.generation += 1
                    c.pendingPosition = 0
                    shared.wantPlaying.store(false, ordering: .relaxed)
                    throw error
                }
            }
            try decoder.setOutputFormat(c.negotiated!.pcm)
            c.generation += 1
            c.requestedAt = monotonicNanoseconds()
            c.track = decoder.info
            c.pendingPosition = start
            c.corruptPackets = 0
            _ = c.transport.on(.play)
            if paused { _ = c.transport.on(.pause) }
            shared.wantPlaying.store(!paused, ordering: .relaxed)
            send(.load(Handoff(decoder), start: start, generation: c.generation))
            logger.info("playing", metadata: ["track.path": "\(path)", "track.codec": "\(decoder.info.codec)",
                                              "track.rate": "\(decoder.info.sampleRate)", "start.frame": "\(start)"])
        }
        ProcessTuning.releaseFreeMemory()
        onEvent(.trackStarted(decoder.info))
        onEvent(.stateChanged(paused ? .paused : .playing))
    }

    /// Opens the output for `format` now (a daemon does this at start, so a broken device
    /// fails the start). A later track in another format reopens it.
    public func openOutput(for format: PCMFormat, preferring width: DeviceSampleFormat = .int16) throws(StreamError) {
        try control.withLock { (c: inout Control) throws(StreamError) in
            if c.output == nil || c.requestedFormat != format || c.requestedSampleFormat != width {
                try reopenOutput(&c, for: format, preferring: width)
            }
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
            c.generation += 1
            c.pendingPosition = frame
            c.requestedAt = monotonicNanoseconds()
            send(.seek(frame, generation: c.generation))
        }
    }

    /// A snapshot of what is playing. Thread: any. Never waits for the render thread.
    public func status() -> Status {
        control.withLock { c in
            var position = c.pendingPosition
            let heard = shared.readPosition()
            if heard.generation == c.generation, let track = c.track, let out = c.negotiated {
                position = heard.frame
                if heard.advancing && c.transport.state == .playing {
                    // Interpolate between the render thread's reports (one every 4 periods).
                    let elapsed = Int64(min(monotonicNanoseconds() &- heard.time, UInt64(out.periodFrames) * 6_000_000_000 / UInt64(out.pcm.sampleRate)))
                    position += FrameTime.rescaleFloor(elapsed, Int64(track.sampleRate), 1_000_000_000)
                }
                if let d = track.durationFrames, !track.durationIsEstimate { position = min(position, d) }
            }
            var latency: UInt64?
            if shared.firstWrittenGeneration.load(ordering: .acquiring) == c.generation {
                latency = shared.firstWrittenTime.load(ordering: .relaxed) &- c.requestedAt
            }
            return Status(state: c.transport.state, track: c.track, positionFrames: position,
                          output: c.negotiated,
                          underruns: shared.underruns.load(ordering: .relaxed),
                          deviceXruns: shared.deviceXruns.load(ordering: .relaxed),
                          corruptPackets: c.corruptPackets,
                          lastStartLatencyNanoseconds: latency)
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
        send(.quit)
        readerThread?.join()
        readerThread = nil
        control.withLock { c in
            stopRenderThread(&c)
            c.output?.close()
            c.output = nil
        }
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
                c.generation += 1
                c.track = nil
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
        EventFD.signal(shared.readerWake)
    }

    /// Stops the render thread and the reader's production, reopens the output for
    /// `format`, and starts a new render thread.
    private func reopenOutput(_ c: inout Control, for format: PCMFormat, preferring width: DeviceSampleFormat) throws(StreamError) {
        // 1. The reader lets go of its decoder and stops writing into the ring.
        let done = Semaphore()
        send(.detach(Handoff(done)))
        done.wait()
        // 2. No render thread, no consumer.
        stopRenderThread(&c)
        c.output?.close()
        c.negotiated = nil
        c.requestedFormat = nil
        // 3. Open.
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
        // 4. A clean ring for the new format, then the render thread.
        shared.ring.reset(channels: negotiated.pcm.channels)
        shared.markers.reset()
        shared.endIndex.store(Int.max, ordering: .relaxed)
        shared.state.store(RenderState.starting.rawValue, ordering: .relaxed)
        c.output = output
        c.negotiated = negotiated
        c.requestedFormat = format
        c.requestedSampleFormat = width
        let h = Handoff((shared, output!, negotiated))
        c.renderThread = PThread(name: "playd-render") {
            let (shared, out, fmt) = h.value
            Self.runRender(shared: shared, output: out, format: fmt)
        }
        // Report the scheduling result from here, never from the render thread.
        let deadline = monotonicNanoseconds() + 100_000_000
        while shared.realtimeResult.load(ordering: .relaxed) == -1 && monotonicNanoseconds() < deadline {
            EventFD.wait(shared.readerWake, timeoutNanoseconds: 1_000_000)
        }
        let rt = shared.realtimeResult.load(ordering: .relaxed)
        if rt == 0 {
            logger.info("render thread runs SCHED_FIFO")
        } else if rt > 0 {
            logger.notice("render thread could not get SCHED_FIFO; continuing with normal scheduling",
                          metadata: ["errno": "\(rt)"])
        }
    }

    private static func runRender<O: AudioOutput>(shared: RenderShared, output: O, format: NegotiatedFormat) {
        var loop = RenderLoop(shared: shared, output: output, format: format)
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
    }

    private func makeOutput(_ c: inout Control) throws(StreamError) -> any AudioOutput {
        let spec = configuration.output == "auto" ? "alsa:default" : configuration.output
        return try OutputSpec.make(spec, bufferMillis: configuration.bufferMillis, periodMillis: configuration.periodMillis)
    }

    // MARK: - Reader thread

    /// What the reader thread owns.
    fileprivate final class ReaderState {
        let shared: RenderShared
        let chunk: Int
        var decoder: AudioDecoder?
        var generation: UInt64 = 0
        var needMarker = false
        var finished = true
        /// One chunk of decoded frames, sized for the current channel count.
        var staging: UnsafeMutablePointer<Float>
        var stagingChannels = 2
        var flushCounter: UInt64 = 0
        var reportedEnded: UInt64 = 0
        var reportedUnderruns = 0
        var lastUnderrunReport: UInt64 = 0
        var reportedCorrupt = 0
        var reportedDeviceError = 0

        init(shared: RenderShared, chunk: Int) {
            self.shared = shared
            self.chunk = chunk
            staging = .allocate(capacity: chunk * 2)
        }

        /// Makes `staging` fit `channels`. Reader thread.
        func prepareStaging(channels: Int) {
            guard channels != stagingChannels else { return }
            staging.deallocate()
            staging = .allocate(capacity: chunk * channels)
            stagingChannels = channels
        }
        deinit { staging.deallocate() }
    }

    private func readerMain(_ r: ReaderState) {
        while true {
            let pending = commands.withLock { list -> [Command] in
                let l = list
                list.removeAll()
                return l
            }
            for command in pending {
                switch command {
                case .quit:
                    r.decoder = nil
                    return
                case .detach(let done):
                    r.decoder = nil
                    r.finished = true
                    done.value.signal()
                case .stop(let generation):
                    r.generation = generation
                    r.decoder = nil
                    r.finished = true
                    flush(r)
                case .load(let handoff, let start, let generation):
                    let decoder = handoff.value
                    r.generation = generation
                    r.prepareStaging(channels: decoder.outputFormat.channels)
                    r.decoder = decoder
                    reposition(r, to: start)
                case .seek(let frame, let generation):
                    r.generation = generation
                    reposition(r, to: frame)
                }
            }
            fill(r)
            report(r)
            // Sleep until the render thread wants more (low water, end, underrun, device
            // error all signal readerWake), a command arrives, or a 1 s housekeeping tick.
            let full = r.shared.ring.writableFrames < r.chunk
            if full || r.finished || r.decoder == nil {
                EventFD.wait(r.shared.readerWake, timeoutNanoseconds: 1_000_000_000)
            }
        }
    }

    /// Seeks the decoder, decodes the first chunk, and only then flushes the ring, so the
    /// old audio plays until the new audio is ready.
    private func reposition(_ r: ReaderState, to frame: Int64) {
        guard let decoder = r.decoder else { return }
        var first = 0
        do {
            try decoder.seek(to: frame)
            first = try decoder.read(into: r.staging, capacity: r.chunk)
        } catch {
            logger.error("seek failed", metadata: ["track.path": "\(decoder.info.path)", "error": "\(error)"])
            onEvent(.error(error))
        }
        flush(r)
        r.finished = false
        pushMarker(r, sourceFrame: frame)
        if first > 0 {
            r.shared.ring.write(r.staging, frames: first)
        } else {
            finish(r)
        }
        EventFD.signal(r.shared.renderWake)
    }

    /// The flush handshake: ask the render thread to drop the device queue and empty the
    /// ring, and wait until it has (or until it is not running).
    private func flush(_ r: ReaderState) {
        r.shared.endIndex.store(Int.max, ordering: .relaxed)
        r.flushCounter = r.shared.flushRequest.load(ordering: .relaxed) &+ 1
        r.shared.flushRequest.store(r.flushCounter, ordering: .releasing)  // publishes endIndex too
        EventFD.signal(r.shared.renderWake)
        let deadline = monotonicNanoseconds() + 2_000_000_000
        while r.shared.flushAck.load(ordering: .acquiring) != r.flushCounter {
            if monotonicNanoseconds() > deadline {
                logger.error("render thread did not acknowledge a flush within 2 s")
                break
            }
            EventFD.wait(r.shared.readerWake, timeoutNanoseconds: 2_000_000)
        }
    }

    private func pushMarker(_ r: ReaderState, sourceFrame: Int64) {
        guard let d = r.decoder else { return }
        let m = SegmentMarker(ringIndex: r.shared.ring.producerIndex, sourceFrame: sourceFrame,
                              generation: r.generation, sourceRate: Int32(d.info.sampleRate),
                              deviceRate: Int32(d.outputFormat.sampleRate))
        if !r.shared.markers.push(m) { logger.error("marker queue full") }
    }

    private func finish(_ r: ReaderState) {
        r.finished = true
        r.shared.endIndex.store(r.shared.ring.producerIndex, ordering: .releasing)  // after the last write
        EventFD.signal(r.shared.renderWake)
    }

    /// Decodes until the ring is full (its high-water mark), then returns.
    private func fill(_ r: ReaderState) {
        guard let decoder = r.decoder, !r.finished else { return }
        while r.shared.ring.writableFrames >= r.chunk {
            let n: Int
            do {
                n = try decoder.read(into: r.staging, capacity: r.chunk)
            } catch {
                logger.error("decoding stopped", metadata: ["track.path": "\(decoder.info.path)", "error": "\(error)"])
                onEvent(.error(error))
                finish(r)
                return
            }
            if n == 0 {
                finish(r)
                return
            }
            r.shared.ring.write(r.staging, frames: n)
            if r.shared.starving.load(ordering: .relaxed) { EventFD.signal(r.shared.renderWake) }
        }
        if r.shared.starving.load(ordering: .relaxed) { EventFD.signal(r.shared.renderWake) }
    }

    /// Turns the render thread's counters into events (never from the render thread).
    private func report(_ r: ReaderState) {
        let ended = r.shared.endedGeneration.load(ordering: .acquiring)
        if ended != r.reportedEnded {
            r.reportedEnded = ended
            let path: String? = control.withLock { c in
                guard ended == c.generation, c.transport.state != .stopped else { return nil }
                _ = c.transport.on(.ended)
                let p = c.track?.path
                c.pendingPosition = c.track?.durationFrames ?? c.pendingPosition
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
