import CLinux
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A feed's sample format, written as Snapcast writes it: `rate:bits:channels`
/// (`48000:16:2`, Snapcast's default). Samples are signed little-endian integers.
public struct FeedFormat: Sendable, Equatable, CustomStringConvertible {
    public var rate: Int
    /// 16 or 32.
    public var bits: Int
    public var channels: Int

    public static let snapcastDefault = FeedFormat(rate: 48000, bits: 16, channels: 2)

    public init(rate: Int, bits: Int, channels: Int) {
        self.rate = rate
        self.bits = bits
        self.channels = channels
    }

    /// Parses `rate:bits:channels`; the error names what is wrong.
    public init(parsing text: String) throws(StreamError) {
        let parts = text.split(separator: ":", omittingEmptySubsequences: false).map { Int($0) }
        guard parts.count == 3, let rate = parts[0], let bits = parts[1], let channels = parts[2] else {
            throw StreamError(.invalidArgument, "format '\(text)' is not rate:bits:channels (e.g. 48000:16:2)")
        }
        guard (8000...384_000).contains(rate) else {
            throw StreamError(.invalidArgument, "format '\(text)': rate \(rate) is outside 8000…384000")
        }
        guard bits == 16 || bits == 32 else {
            throw StreamError(.invalidArgument, "format '\(text)': bits must be 16 or 32, got \(bits)")
        }
        guard (1...8).contains(channels) else {
            throw StreamError(.invalidArgument, "format '\(text)': channels must be 1…8, got \(channels)")
        }
        self.init(rate: rate, bits: bits, channels: channels)
    }

    public var bytesPerFrame: Int { bits / 8 * channels }
    public var description: String { "\(rate):\(bits):\(channels)" }
}

/// What a feed is doing, as `outputs` reports it.
public enum FeedState: UInt8, Sendable {
    /// Enabled, nothing played yet (or the local device is paused or stopped).
    case idle
    /// A reader holds the FIFO and takes what is played.
    case writing
    /// Nobody reads the FIFO (it filled up): what is played is dropped and counted.
    case noReader
    /// The reader does not keep up (the FIFO is full): the excess is dropped and counted.
    case full
    /// Disabled at run time.
    case disabled
    /// The path cannot be used (not a FIFO, no permission); retried every few seconds.
    case failed

    public var name: String {
        switch self {
        case .idle: return "idle"
        case .writing: return "writing"
        case .noReader: return "no_reader"
        case .full: return "full"
        case .disabled: return "disabled"
        case .failed: return "failed"
        }
    }
}

/// `fifo:PATH`: an extra output that writes raw PCM into a named pipe, for Snapcast's
/// `pipe://` source (or anything that reads raw PCM).
///
/// **What it receives.** The render thread hands it each frame when the local device
/// *plays* it (``RenderLoop`` keeps a copy of what it wrote and passes frames on as the
/// device's delay says they were heard). So the feed is paced by the local device, or
/// by the paced `null` output's clock where there is no card; audio the device took
/// back (a pause's rewind, a loop splice) never reaches the feed; pause and stop write
/// nothing; resume continues without a burst.
///
/// **Never blocks, never grows.** The render thread pushes into a fixed SPSC ring and
/// drops (and counts) what does not fit. The feed thread converts (rate, channels,
/// 16/32-bit) with libswresample and writes with `O_NONBLOCK` in whole frames of at most
/// `PIPE_BUF` bytes (each write is then all or nothing).
///
/// **Readers come and go.** Like MPD's fifo output, the feed holds a read end of the FIFO
/// itself, so the write end always opens and never gets `EPIPE`, and a reader that
/// polls the FIFO (snapserver closes and reopens it on end-of-file) always finds a
/// writer. When the pipe is full — nobody reads, or too slowly — the feed empties it
/// through its own read end, counts what it threw away as dropped, and writes the new
/// audio: a returning reader gets at most one pipe (64 KiB, 0.34 s of 48000:16:2) of
/// older audio, then the current audio.
///
/// Threads: the render thread is the ring's producer (``push(_:frames:)``); the feed's own
/// thread is its consumer and owns the converter and the file descriptor; the control
/// side calls ``configure(input:)`` (only while the render thread is stopped),
/// ``setEnabled(_:)`` and reads the counters.
public final class FeedOutput: @unchecked Sendable {
    // @unchecked Sendable: cross-thread state is atomics, the SPSC ring (render →
    // feed thread) and `control` (`Locked`). `converter`, `fd` and the scratch buffer
    // are touched by the feed thread only.

    public let name: String
    public let path: String
    public let format: FeedFormat
    /// The spec it was made from, e.g. `fifo:/tmp/snapfifo?format=48000:16:2`.
    public let spec: String

    /// Render thread → feed thread, at the local device's rate and channel count.
    let ring: FrameRing
    /// Signalled by the render thread after a push, and by the control side.
    let wake: Int32

    /// Written by the control side; read by the render thread (feeds nothing while
    /// false) and the feed thread (closes the FIFO while false).
    let enabled = Atomic<Bool>(true)
    /// Frames (at the device rate) the render thread dropped because the ring was full.
    /// Written by the render thread.
    let ringDropped = Atomic<Int>(0)
    /// Frames (in ``format``) written into the FIFO (a reader takes them, or the feed
    /// empties them out again when nobody reads: those count as dropped too).
    /// Written by the feed thread.
    let written = Atomic<Int>(0)
    /// Frames (in ``format``) that reached no reader: emptied out of a full pipe, or
    /// not written (no FIFO, a late feed thread). Written by the feed thread.
    let dropped = Atomic<Int>(0)
    /// ``FeedState`` raw value. Written by the feed thread (and the control side when
    /// disabling).
    private let stateValue = Atomic<UInt8>(FeedState.idle.rawValue)
    /// Set by the feed thread to stop it. Written by the control side.
    private let quit = Atomic<Bool>(false)
    /// A tap only: someone listens, so while nothing plays (paused, stopped) the feed
    /// thread hands the sink silence by the clock. Written by ``setIdleSilence(_:)``
    /// (a listener's connection thread); read by the feed thread.
    private let idleSilence = Atomic<Bool>(false)

    private struct Control {
        /// The input format wanted, and which request it is.
        var input: PCMFormat?
        var periodFrames = 0
        var request: UInt64 = 0
        /// The last error text (a path that is not a FIFO, a failed conversion set-up).
        var lastError: String?
        var onChange: (@Sendable (String) -> Void)?
    }
    private let control = Locked(Control())
    /// The request the feed thread has applied. Written by the feed thread.
    private let applied = Atomic<UInt64>(0)
    private var thread: PThread?

    // Feed thread only.
    private var converter: SampleConverter?
    /// The write end, and the feed's own read end (to keep the FIFO open and empty it).
    private var fd: Int32 = -1
    private var readFD: Int32 = -1
    private var nextOpenAttempt: UInt64 = 0
    private let scratchFrames = 4096
    private var scratch: UnsafeMutablePointer<Float>

    /// Frames of the ring at least: 32 Ki is 0.68 s at 48 kHz. The ring grows to hold
    /// three periods and 130 ms (the release thresholds below plus a period arriving at
    /// once), so a feed thread that is late by a period loses nothing: 64 Ki frames at
    /// the default 250 ms period.
    public static let ringFrames = 32 * 1024

    /// A tap's consumer instead of a FIFO (the HTTP listen stream, ``StreamHub``): called
    /// on the feed thread with each converted chunk (bytes, byte count).
    let sink: (@Sendable (UnsafeRawPointer, Int) -> Void)?
    /// Fed the mix before the volume (and mute): ReplayGain, fades, cross-fades and
    /// announcements as heard, at a level no client's volume changes (the listen
    /// streams' `http.stream_volume = "fixed"`). Set at init.
    public let fixedVolume: Bool

    /// A feed that hands what the device plays, converted to `format`, to `sink` on the
    /// feed thread instead of writing a FIFO: the same pacing and the same frames.
    public init(tapNamed name: String, format: FeedFormat, fixedVolume: Bool = false,
                sink: @escaping @Sendable (UnsafeRawPointer, Int) -> Void) {
        self.fixedVolume = fixedVolume
        self.name = name
        self.path = ""
        self.format = format
        self.spec = "tap:\(name)?format=\(format)"
        self.sink = sink
        ring = FrameRing(minimumCapacity: Self.ringFrames, channels: 2)
        wake = EventFD.make()
        scratch = .allocate(capacity: scratchFrames * 8)
    }

    /// Makes a feed from `fifo:PATH[?format=R:B:C][&name=NAME]`. The name defaults to `fifo`.
    public init(spec: String) throws(StreamError) {
        fixedVolume = false
        (path, format, name) = try Self.parse(spec: spec)
        self.spec = spec
        sink = nil
        ring = FrameRing(minimumCapacity: Self.ringFrames, channels: 2)
        wake = EventFD.make()
        scratch = .allocate(capacity: scratchFrames * 8)
    }

    /// Checks a spec without making anything: the FIFO's path, format and name.
    public static func parse(spec: String) throws(StreamError) -> (path: String, format: FeedFormat, name: String) {
        let parsed = try OutputSpec.parse(spec, as: .feed)
        let body = parsed.target
        guard body.hasPrefix("/") else {
            throw StreamError(.invalidArgument, "feed \(spec): the FIFO path must be absolute")
        }
        var format = FeedFormat.snapcastDefault
        if let f = parsed.options["format"] {
            do throws(StreamError) { format = try FeedFormat(parsing: f) } catch {
                throw StreamError(.invalidArgument, "feed \(spec): \(error.message)")
            }
        }
        let name = parsed.options["name"] ?? "fifo"
        guard !name.isEmpty, name.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" }) else {
            throw StreamError(.invalidArgument, "feed \(spec): name '\(name)' must be letters, digits, - or _")
        }
        var st = stat()
        if PathBytes.stat(body, &st) == 0 && (st.st_mode & S_IFMT) != S_IFIFO {
            throw StreamError(.invalidArgument, "feed \(spec): \(body) exists and is not a FIFO")
        }
        return (body, format, name)
    }

    deinit {
        stop()
        Glibc.close(wake)
        scratch.deallocate()
    }

    public var state: FeedState { FeedState(rawValue: stateValue.load(ordering: .relaxed)) ?? .idle }
    public var isEnabled: Bool { enabled.load(ordering: .relaxed) }
    public var framesWritten: Int { written.load(ordering: .relaxed) }
    /// Frames lost (in ``format``): no reader, a full pipe, or a late feed thread.
    public var framesDropped: Int {
        let input = control.withLock { $0.input }
        let lateFrames = ringDropped.load(ordering: .relaxed)
        let late = input.map { Int(FrameTime.rescale(Int64(lateFrames), Int64(format.rate), Int64($0.sampleRate))) } ?? 0
        return dropped.load(ordering: .relaxed) + late
    }
    public var lastError: String? { control.withLock { $0.lastError } }

    /// Starts the feed thread; `onChange` is called (on that thread) with the feed's
    /// name when its state changes. It must not wait for the engine's lock: a reopen
    /// holds it while it waits for this thread in ``configure(input:periodFrames:)``.
    /// Idempotent.
    public func start(onChange: @escaping @Sendable (String) -> Void) {
        control.withLock { $0.onChange = onChange }
        guard thread == nil else { return }
        let h = Handoff(self)
        thread = PThread(name: "playd-feed") { h.value.run() }
    }

    /// Stops the feed thread and closes the FIFO. Idempotent.
    public func stop() {
        guard let t = thread else { return }
        quit.store(true, ordering: .relaxed)
        EventFD.signal(wake)
        t.join()
        thread = nil
    }

    /// Sets the format the render thread will push (the local device's). Call only while
    /// the render thread is stopped; waits (up to a second) until the feed thread has
    /// emptied the ring and set up its converter.
    func configure(input: PCMFormat, periodFrames: Int) {
        let request = control.withLock { c -> UInt64 in
            c.input = input
            c.periodFrames = periodFrames
            c.request += 1
            return c.request
        }
        guard thread != nil else {
            apply(request: request, input: input, periodFrames: periodFrames)
            return
        }
        EventFD.signal(wake)
        let deadline = monotonicNanoseconds() + 1_000_000_000
        while applied.load(ordering: .acquiring) < request && monotonicNanoseconds() < deadline {
            usleep(500)
        }
    }

    /// Enables or disables the feed. Disabled, nothing is pushed and the FIFO is closed
    /// (a Snapcast source then goes idle). Thread: any.
    public func setEnabled(_ on: Bool) {
        guard enabled.exchange(on, ordering: .relaxed) != on else { return }
        EventFD.signal(wake)
    }

    /// A tap's consumer listens (true) or has gone (false). While one listens and nothing
    /// plays, the sink gets silence in 20 ms steps by the clock, as MPD's httpd output
    /// sends its listeners while paused: a player waiting for data gives up (mpv after
    /// its 60 s network time-out), and a phone listening through a
    /// pause or a stop should hear the music when it plays again. Without a listener
    /// the feed thread sleeps while idle, as before. Thread: any.
    public func setIdleSilence(_ on: Bool) {
        guard sink != nil, idleSilence.exchange(on, ordering: .relaxed) != on else { return }
        EventFD.signal(wake)
    }

    // MARK: - Render thread

    /// Frames the device played: copies them into the ring, or drops and counts what
    /// does not fit. Thread: render. Real-time safe: yes.
    @inline(__always)
    func push(_ samples: UnsafePointer<Float>, frames: Int) {
        let room = ring.writableFrames
        let n = min(room, frames)
        if n > 0 { ring.write(samples, frames: n) }
        if n < frames { ringDropped.add(frames - n, ordering: .relaxed) }
    }

    // MARK: - Feed thread

    // Pacing (feed thread). Snapcast's pipe reader takes one 20 ms chunk every 20 ms by
    // the system clock and fills a chunk with silence when the pipe is empty at that
    // moment; the render thread hands frames over a period at a time. So the feed
    // thread releases frames from the ring in 20 ms steps by the clock, starting once
    // a period and a margin are in hand, and first writes `leadMillis` of silence so
    // the pipe never runs dry between steps. Over hours the local device's clock and
    // the system clock drift apart: the release catches up when the ring holds too
    // much, and forgets a deficit when it runs dry.
    /// Silence written before the audio each time the feed starts (or resumes).
    public static let leadMillis = 60
    /// Milliseconds between releases while playing.
    static let stepMillis = 20
    private var running = false
    private var startTime: UInt64 = 0
    /// Input frames released since `startTime`.
    private var released = 0
    private var lastData: UInt64 = 0
    /// While idle: frames in hand, and since when that count has not changed.
    private var heldFrames = 0
    private var heldSince: UInt64 = 0
    private var input = PCMFormat(sampleRate: 48000, channels: 2)
    /// Frames in hand before starting: a period and 30 ms.
    private var startFrames = 0
    /// Idle with fewer than `startFrames` in hand: start anyway once nothing more has
    /// come for this long (a period and 100 ms: the render thread passes frames on
    /// once a period, so a shorter wait would start on the first few and run dry).
    private var holdNanoseconds: UInt64 = 100_000_000
    /// Above this the device runs ahead of the clock: release the excess at once.
    private var highFrames = 0

    private func run() {
        while !quit.load(ordering: .relaxed) {
            // Idle with a little in hand (a short resume, a short track): look again soon.
            let holding = !running && ring.readableFrames > 0
            let filling = !running && idleSilence.load(ordering: .relaxed)
            EventFD.wait(wake, timeoutNanoseconds: running || holding || filling ? Self.stepMillis * 1_000_000 : -1)
            let (input, period, request) = control.withLock { ($0.input, $0.periodFrames, $0.request) }
            if applied.load(ordering: .relaxed) != request, let input {
                apply(request: request, input: input, periodFrames: period)
            }
            guard enabled.load(ordering: .relaxed) else {
                ring.discardAll()
                closeFIFO()
                running = false
                setState(.disabled)
                continue
            }
            if state == .disabled { setState(.idle) }
            pace()
        }
        // Stopping (the engine shuts down): what the device played goes out too.
        if enabled.load(ordering: .relaxed) && fd >= 0 { release(ring.readableFrames) }
        closeFIFO()
    }

    /// Releases what is due by the clock (see "Pacing").
    private func pace() {
        let fill = ring.readableFrames
        let now = monotonicNanoseconds()
        let rate = Int64(input.sampleRate)
        if !running {
            if fill != heldFrames { heldFrames = fill; heldSince = now }
            // A period and a margin in hand; or less, when nothing more came for a period
            // and 100 ms (the last frames before a pause or the end of the last track).
            guard fill >= startFrames || (fill > 0 && now - heldSince > holdNanoseconds) else {
                idleFill(now)
                return
            }
            heldFrames = 0
            silenceStart = 0
            running = true
            startTime = now
            released = 0
            lastData = now
            writeSilence(frames: format.rate * Self.leadMillis / 1000)
        }
        let due = Int(FrameTime.rescaleFloor(Int64(now - startTime), rate, 1_000_000_000))
        var n = due - released
        if fill > highFrames { n = max(n, fill - startFrames) }
        n = min(n, fill)
        if n > 0 {
            release(n)
            released += n
            lastData = now
        }
        if due - released > input.sampleRate / 20 { released = due }  // ran dry: do not make it up in a burst
        if fill - max(n, 0) == 0 && now - lastData > 200_000_000 {
            running = false  // paused or stopped: idle until a period is in hand again
            setState(.idle)
        }
    }

    /// Idle silence (see ``setIdleSilence(_:)``): when it began (0: not sending), and
    /// the frames sent since.
    private var silenceStart: UInt64 = 0
    private var silenceSent = 0

    /// Hands the sink the silence due by the clock while idle, if someone listens.
    /// Straight to the sink, not through ``writeSilence(frames:)``: `send` would mark
    /// the feed `writing` while nothing plays.
    private func idleFill(_ now: UInt64) {
        guard let sink, idleSilence.load(ordering: .relaxed) else { silenceStart = 0; return }
        if silenceStart == 0 { silenceStart = now; silenceSent = 0 }
        let due = Int(FrameTime.rescaleFloor(Int64(now - silenceStart), Int64(format.rate), 1_000_000_000))
        // A starved thread catches up by at most 100 ms (no burst of silence).
        if due - silenceSent > format.rate / 10 { silenceSent = due - format.rate / 10 }
        guard due > silenceSent else { return }
        let frameBytes = format.bytesPerFrame
        let chunkFrames = min(scratchFrames * 8 * 4 / frameBytes, due - silenceSent)
        let raw = UnsafeMutableRawPointer(scratch)
        raw.initializeMemory(as: UInt8.self, repeating: 0, count: chunkFrames * frameBytes)
        while silenceSent < due {
            let n = min(chunkFrames, due - silenceSent)
            sink(raw, n * frameBytes)
            silenceSent += n
        }
    }

    /// Converts and writes `frames` frames from the ring.
    private func release(_ frames: Int) {
        var left = frames
        while left > 0 {
            let n = min(left, scratchFrames)
            ring.read(into: scratch, frames: n)
            left -= n
            guard let converter else { continue }
            let (bytes, out) = converter.convert(scratch, frames: n)
            if out > 0 { send(bytes, frames: out) }
        }
    }

    /// Writes `frames` frames of silence in the feed's format (not counted as written).
    private func writeSilence(frames: Int) {
        let bytes = frames * format.bytesPerFrame
        let raw = UnsafeMutableRawPointer(scratch)
        let capacity = scratchFrames * 8 * 4
        raw.initializeMemory(as: UInt8.self, repeating: 0, count: min(bytes, capacity))
        var left = frames
        let chunk = capacity / format.bytesPerFrame
        while left > 0 {
            let n = min(left, chunk)
            send(raw, frames: n, counted: false)
            left -= n
        }
    }

    /// Empties the ring (the render thread is stopped) and builds the converter.
    private func apply(request: UInt64, input: PCMFormat, periodFrames: Int) {
        ring.reset(channels: input.channels,
                   minimumCapacity: max(Self.ringFrames, 3 * periodFrames + input.sampleRate * 130 / 1000), retain: 0)
        self.input = input
        running = false
        startFrames = min(ring.capacity / 2, periodFrames + input.sampleRate * 30 / 1000)
        highFrames = min(ring.capacity * 3 / 4, startFrames + periodFrames + input.sampleRate / 10)
        holdNanoseconds = UInt64(FrameTime.rescale(Int64(periodFrames), 1_000_000_000, Int64(input.sampleRate))) + 100_000_000
        do {
            converter = try SampleConverter(input: input, output: format, maxInputFrames: scratchFrames)
            control.withLock { $0.lastError = nil }
        } catch {
            converter = nil
            report(error: error.message)
        }
        applied.store(request, ordering: .releasing)
    }

    /// Writes whole frames, at most `PIPE_BUF` bytes per call so each write is atomic.
    private func send(_ bytes: UnsafeRawPointer, frames: Int, counted: Bool = true) {
        if let sink {
            sink(bytes, frames * format.bytesPerFrame)
            if counted { written.add(frames, ordering: .relaxed) }
            setState(.writing)
            return
        }
        if fd < 0 && !openFIFO() {
            if counted { dropped.add(frames, ordering: .relaxed) }
            return
        }
        let frameBytes = format.bytesPerFrame
        let chunkFrames = max(1, Int(PIPE_BUF) / frameBytes)
        var done = 0
        while done < frames {
            let n = min(chunkFrames, frames - done)
            let r = Glibc.write(fd, bytes + done * frameBytes, n * frameBytes)
            if r == n * frameBytes {
                done += n
                writtenSinceEmptied += r
                continue
            }
            if r < 0 && errno == EINTR { continue }
            if (r < 0 && errno == EAGAIN) && !emptiedPipe {
                // Full: nobody reads, or too slowly. Throw away what waits in the pipe
                // (older audio) and write the new.
                let stale = emptyPipe()
                dropped.add(stale / frameBytes, ordering: .relaxed)
                emptiedPipe = true
                // Nothing taken since the last time: nobody is there. Some: a slow reader.
                setState(writtenSinceEmptied - stale < frameBytes ? .noReader : .full)
                writtenSinceEmptied = 0
                continue
            }
            // Still full right after emptying, or an error: drop the rest.
            if counted { dropped.add(frames - done, ordering: .relaxed) }
            if r < 0 && errno != EAGAIN {
                report(error: "write(\(path)) failed: \(String(cString: strerror(errno)))")
                closeFIFO()
                setState(.failed)
            }
            break
        }
        if counted { written.add(done, ordering: .relaxed) }
        if !emptiedPipe && done == frames {
            // Writing: a reader has taken something since the pipe was last emptied.
            let queued = Int(clinux_pipe_queued(readFD))
            if queued >= 0 && writtenSinceEmptied - queued >= frameBytes { setState(.writing) }
        }
        emptiedPipe = false
    }

    /// Set while one `send` has emptied the pipe, so it does so at most once.
    private var emptiedPipe = false
    /// Bytes written since the pipe was last emptied (or opened): what a reader took is
    /// this minus what was still there.
    private var writtenSinceEmptied = 0

    /// Reads everything waiting in the pipe through the feed's own read end; returns
    /// the bytes thrown away, rounded down to whole frames by the caller.
    private func emptyPipe() -> Int {
        var total = 0
        while true {
            let n = Glibc.read(readFD, scratch, scratchFrames * 8 * 4)
            if n > 0 { total += n; continue }
            if n < 0 && errno == EINTR { continue }
            return total
        }
    }

    /// Opens the FIFO for writing without blocking; creates it when missing. At most one
    /// attempt every 200 ms while nobody reads.
    private func openFIFO() -> Bool {
        let now = monotonicNanoseconds()
        guard now >= nextOpenAttempt else { return false }
        nextOpenAttempt = now + 200_000_000
        var st = stat()
        if PathBytes.stat(path, &st) != 0 {
            if PathBytes.withCPath(path, { mkfifo($0, 0o660) }) != 0 {
                if errno != EEXIST {
                    report(error: "mkfifo(\(path)) failed: \(String(cString: strerror(errno)))")
                    nextOpenAttempt = now + 5_000_000_000
                    setState(.failed)
                    return false
                }
            } else {
                // 0660 whatever the umask: the umask is process-wide, and the control
                // server and the library narrow it for a moment while they create their
                // socket and database, so mkfifo's mode alone came out 0600 when the
                // feed started at the same time (snapserver, in the group, then could not
                // open it: docs/multiroom.md's recipe).
                _ = PathBytes.withCPath(path) { chmod($0, 0o660) }
            }
        } else if (st.st_mode & S_IFMT) != S_IFIFO {
            report(error: "\(path) exists and is not a FIFO")
            nextOpenAttempt = now + 5_000_000_000
            setState(.failed)
            return false
        }
        // Our own read end first: then the write end opens whether or not anyone reads.
        let r = PathBytes.withCPath(path) { Glibc.open($0, O_RDONLY | O_NONBLOCK | O_CLOEXEC) }
        let w = r < 0 ? -1 : PathBytes.withCPath(path) { Glibc.open($0, O_WRONLY | O_NONBLOCK | O_CLOEXEC) }
        if r < 0 || w < 0 {
            report(error: "open(\(path)) failed: \(String(cString: strerror(errno)))")
            if r >= 0 { Glibc.close(r) }
            nextOpenAttempt = now + 5_000_000_000
            setState(.failed)
            return false
        }
        fd = w
        readFD = r
        writtenSinceEmptied = 0
        control.withLock { $0.lastError = nil }
        return true
    }

    private func closeFIFO() {
        guard fd >= 0 else { return }
        Glibc.close(fd)
        Glibc.close(readFD)
        fd = -1
        readFD = -1
        nextOpenAttempt = 0
    }

    private func report(error: String) {
        control.withLock { $0.lastError = error }
    }

    private func setState(_ s: FeedState) {
        let old = stateValue.exchange(s.rawValue, ordering: .relaxed)
        guard old != s.rawValue else { return }
        // A slow reader flips between writing and full many times a second: count the
        // drops, but only tell listeners when a reader comes or goes.
        let connected: Set<UInt8> = [FeedState.writing.rawValue, FeedState.full.rawValue]
        if connected.contains(old) && connected.contains(s.rawValue) { return }
        let onChange = control.withLock { $0.onChange }
        onChange?(name)
    }
}
