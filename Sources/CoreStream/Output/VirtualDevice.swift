#if canImport(Glibc)
import Glibc
#endif

/// A sound card made of a clock: the `null` and `wav:` outputs.
///
/// It has a buffer like a device: written frames are queued and "played" at the real
/// rate by CLOCK_MONOTONIC; played frames are handed to the sink (discarded, or appended
/// to a WAV file). Because queued frames are still in memory, it can be rewound like a
/// hardware PCM, so pause behaves exactly as on a rewindable card. Unpaced, every write
/// is played at once.
///
/// Thread: open/close on the control side; the rest on the render thread only.
public class VirtualDevice: AudioOutput {
    public let spec: String
    public let paced: Bool
    public var isRealTime: Bool { paced }
    let bufferTimeMicros: Int
    let periodTimeMicros: Int

    // Render-thread state (after open).
    private var rate = 0
    private var channels = 0
    private var bufferFrames = 0
    private var queue: UnsafeMutablePointer<Float>?
    private var written = 0      // frames accepted since open
    private var committed = 0    // frames played (handed to the sink)
    private var started = false
    private var startTime: UInt64 = 0
    private var startBase = 0    // `committed` when the clock started

    init(spec: String, paced: Bool, bufferTimeMicros: Int, periodTimeMicros: Int) {
        self.spec = spec
        self.paced = paced
        self.bufferTimeMicros = bufferTimeMicros
        self.periodTimeMicros = periodTimeMicros
    }

    deinit { queue?.deallocate() }

    /// The device name reported in the negotiated format.
    var deviceName: String { spec }

    /// Called with frames as they are played. Thread: render. Must be real-time safe
    /// except for the file write of `WAVOutput`.
    func sink(_ samples: UnsafePointer<Float>, frames: Int) {}

    /// Prepares the sink (a file) for `format`. Control side.
    func openSink(_ format: PCMFormat) throws(StreamError) {}
    /// Finishes the sink. Control side.
    func closeSink() {}

    /// Always float: the `wav:` capture holds exactly what was rendered.
    public func open(_ requested: PCMFormat, preferring: DeviceSampleFormat) throws(StreamError) -> NegotiatedFormat {
        close()
        rate = requested.sampleRate
        channels = requested.channels
        bufferFrames = max(64, Int(FrameTime.rescale(Int64(bufferTimeMicros), Int64(rate), 1_000_000)))
        let period = max(16, Int(FrameTime.rescale(Int64(periodTimeMicros), Int64(rate), 1_000_000)))
        queue?.deallocate()
        queue = .allocate(capacity: bufferFrames * channels)
        queue!.initialize(repeating: 0, count: bufferFrames * channels)
        written = 0; committed = 0; started = false
        try openSink(requested)
        return NegotiatedFormat(device: deviceName, pcm: requested, sampleFormat: .float32,
                                periodFrames: min(period, bufferFrames), bufferFrames: bufferFrames, fallbacks: [])
    }

    public func close() {
        if queue != nil {
            advance()
            // Whatever is still queued would have been played by a real device that drains.
            flushAll()
            closeSink()
        }
    }

    /// Plays everything queued now (close, or unpaced).
    private func flushAll() {
        play(upTo: written)
        started = false
    }

    /// Moves the clock: hands every frame played by now to the sink.
    @inline(__always)
    private func advance() {
        guard paced, started else { return }
        let elapsed = monotonicNanoseconds() &- startTime
        let due = startBase + Int(FrameTime.rescaleFloor(Int64(elapsed), Int64(rate), 1_000_000_000))
        play(upTo: min(due, written))
        if committed == written { started = false }  // ran dry: the clock stops like a device would
    }

    private func play(upTo target: Int) {
        guard let q = queue else { return }
        while committed < target {
            let slot = committed % bufferFrames
            let n = min(target - committed, bufferFrames - slot)
            sink(q + slot * channels, frames: n)
            committed += n
        }
    }

    public func writable() -> Int {
        advance()
        return bufferFrames - (written - committed)
    }

    public func wait(frames: Int, wakeDescriptor: Int32, timeoutNanoseconds: Int) -> OutputWaitResult {
        let free = writable()
        if free >= frames { return .ready }
        // Time until enough frames have played, but not past the caller's timeout.
        let needed = Int64(frames - free)
        let ns = Int(FrameTime.rescale(needed, 1_000_000_000, Int64(rate))) + 50_000
        if EventFD.wait(wakeDescriptor, timeoutNanoseconds: min(ns, timeoutNanoseconds)) { return .woken }
        return writable() >= frames ? .ready : .timeout
    }

    public func write(_ samples: UnsafeRawPointer, frames: Int) -> Int {
        guard let q = queue else { return -Int(EBADFD) }
        let src = samples.assumingMemoryBound(to: Float.self)
        if !paced {
            // Played the moment it is written: straight to the sink, no queue copy.
            sink(src, frames: frames)
            written += frames
            committed = written
            return frames
        }
        let n = min(frames, writable())
        var done = 0
        while done < n {
            let slot = (written + done) % bufferFrames
            let chunk = min(n - done, bufferFrames - slot)
            (q + slot * channels).update(from: src + done * channels, count: chunk * channels)
            done += chunk
        }
        written += n
        if !started && n > 0 {
            started = true
            startTime = monotonicNanoseconds()
            startBase = committed
        }
        return n
    }

    public func delay() -> Int {
        advance()
        return written - committed
    }

    public func drop() {
        // No clock advance first: what `delay()` said just before is what is dropped
        // (the render thread steps the announcement's voice back by exactly that).
        written = committed
        started = false
    }

    public func rewindable() -> Int {
        advance()
        return written - committed
    }

    public func rewind(_ frames: Int) -> Int {
        let n = min(frames, rewindable())
        written -= n
        if written == committed { started = false }
        return n
    }

    /// The clock starts on the first write; nothing waits for a threshold.
    public func startIfPrepared() {}

    public func recover(_ error: Int) -> Int { 0 }
}

/// `null`: discards audio, paced by a clock like a sound card (the no-hardware default);
/// `null?pace=off` takes audio as fast as it comes.
public final class NullOutput: VirtualDevice {
    public init(paced: Bool = true, bufferTimeMicros: Int = 500_000, periodTimeMicros: Int = 125_000) {
        super.init(spec: paced ? "null" : "null?pace=off", paced: paced,
                   bufferTimeMicros: bufferTimeMicros, periodTimeMicros: periodTimeMicros)
    }
}
