import Synchronization

/// Where a run of ring frames came from: ring frame `ringIndex` is source frame
/// `sourceFrame` of the stream `generation`, and later ring frames follow it at
/// `sourceRate`/`deviceRate`.
public struct SegmentMarker: BitwiseCopyable, Sendable, Equatable {
    public var ringIndex: Int
    public var sourceFrame: Int64
    public var generation: UInt64
    public var sourceRate: Int32
    public var deviceRate: Int32

    /// The source frame of ring frame `index` (≥ `ringIndex`). Real-time safe.
    @inline(__always)
    public func sourceFrame(atRing index: Int) -> Int64 {
        let offset = Int64(index - ringIndex)
        if sourceRate == deviceRate { return sourceFrame + offset }
        return sourceFrame + FrameTime.rescaleFloor(offset, Int64(sourceRate), Int64(deviceRate))
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

    /// Wakes the render thread (commands, data after a starvation). Any thread signals.
    public let renderWake: Int32
    /// Wakes the reader thread (low water, flush acknowledged, end of stream, commands).
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
    /// The last unrecoverable device error (negative errno), 0 if none. Written by render.
    public let deviceError = Atomic<Int>(0)
    /// The generation whose last frame the device has played. Written by render (release).
    public let endedGeneration = Atomic<UInt64>(0)
    /// pthread_setschedparam(SCHED_FIFO) result on the render thread: 0 granted, else the
    /// errno; -1 before the thread started. Written by render once.
    public let realtimeResult = Atomic<Int32>(-1)
    /// When the first frame of generation `firstWrittenGeneration` went to the device
    /// (CLOCK_MONOTONIC ns). Render stores the time (relaxed), then the generation
    /// (release); readers load the generation (acquire), then the time.
    public let firstWrittenTime = Atomic<UInt64>(0)
    public let firstWrittenGeneration = Atomic<UInt64>(0)

    // The heard position, published by render with a sequence lock so readers get a
    // consistent (frame, time, generation) triple without ever blocking the writer.
    private let positionSequence = Atomic<UInt64>(0)
    private let positionFrame = Atomic<Int64>(0)
    private let positionTime = Atomic<UInt64>(0)
    private let positionGeneration = Atomic<UInt64>(0)
    private let positionAdvancing = Atomic<Bool>(false)

    /// Ring frames below which render wakes the reader.
    public let lowWater: Int

    public init(ringFrames: Int, retainFrames: Int, channels: Int, lowWater: Int) {
        ring = FrameRing(minimumCapacity: ringFrames, retain: retainFrames, channels: channels)
        markers = SPSCQueue(minimumCapacity: 256, filler: .empty)
        renderWake = EventFD.make()
        readerWake = EventFD.make()
        self.lowWater = lowWater
    }

    deinit {
        _ = close(renderWake)
        _ = close(readerWake)
    }

    /// The heard position. Thread: render only. Real-time safe: yes.
    ///
    /// Seqlock writer: odd sequence (relaxed) + release fence so the data stores cannot
    /// move above it; data stores (relaxed); even sequence (release) publishes them.
    @inline(__always)
    func publishPosition(frame: Int64, generation: UInt64, advancing: Bool, at time: UInt64) {
        let s = positionSequence.load(ordering: .relaxed)
        positionSequence.store(s &+ 1, ordering: .relaxed)
        atomicMemoryFence(ordering: .releasing)
        positionFrame.store(frame, ordering: .relaxed)
        positionTime.store(time, ordering: .relaxed)
        positionGeneration.store(generation, ordering: .relaxed)
        positionAdvancing.store(advancing, ordering: .relaxed)
        positionSequence.store(s &+ 2, ordering: .releasing)
    }

    /// A consistent snapshot of the heard position. Thread: any. Never blocks the writer;
    /// retries while a write is in progress.
    ///
    /// Seqlock reader: sequence (acquire), data (relaxed), acquire fence, sequence again;
    /// equal and even means the data is one write's.
    public func readPosition() -> (frame: Int64, time: UInt64, generation: UInt64, advancing: Bool) {
        while true {
            let s1 = positionSequence.load(ordering: .acquiring)
            if s1 & 1 == 1 { continue }
            let f = positionFrame.load(ordering: .relaxed)
            let t = positionTime.load(ordering: .relaxed)
            let g = positionGeneration.load(ordering: .relaxed)
            let a = positionAdvancing.load(ordering: .relaxed)
            atomicMemoryFence(ordering: .acquiring)
            if positionSequence.load(ordering: .relaxed) == s1 { return (f, t, g, a) }
        }
    }
}

#if canImport(Glibc)
import Glibc
#endif
