import Synchronization

/// A lock-free single-producer / single-consumer ring of interleaved `Float` frames.
///
/// ## Contract
/// - Exactly **one producer thread** (the reader) calls the producer methods and
///   exactly **one consumer thread** (the render thread) calls the consumer methods.
///   The identities cannot be interchanged while the ring is in use.
/// - Capacity is a power of two, in frames; a frame is `channels` samples.
/// - `reset(channels:minimumCapacity:retain:)` is **not** thread-safe: call it only
///   while neither side runs. It is the only writer of
///   `capacity`, `retain`, `channels` and the storage; the caller hands the ring to the
///   producer and consumer threads afterwards through something that orders memory
///   (thread creation, a mutex-protected command queue).
/// - Storage is allocated and pre-faulted in `init` and in `reset` (when the frame
///   width or the size changes); the producer and consumer methods never allocate.
///
/// ## Layout
/// The cursors are monotonically increasing frame counts (an `Int` does not wrap in
/// practice: 2^63 frames is millions of years at 192 kHz); a slot is `cursor & mask`.
/// ```
///   consumer may rewind into      readable (produced,        writable
///   this "retained" history       not yet consumed)
///  ┌────────────────────────┬───────────────────────────┬─────────────────────┐
///  │ retained (≤ retain)    │ ████████████████████████  │ free                │
///  └────────────────────────┴───────────────────────────┴─────────────────────┘
///                           ^ read                      ^ write
///  writable = capacity − retain − (write − read)
/// ```
/// The producer never overwrites the `retain` frames just behind `read`, so the consumer
/// may move `read` back by up to `retain` frames (``rewind(_:)``) — how the render
/// thread takes back audio it had queued in the device but that was never heard, when
/// it pauses.
///
/// ## Memory ordering
/// - Producer: loads `read` with **acquire** (the consumer's reads of those slots
///   happen-before our overwrite), copies samples, stores `write` with **release**
///   (publishes the samples).
/// - Consumer: loads `write` with **acquire** (sees the samples the producer
///   published), copies samples, stores `read` with **release** (hands the slots back).
/// - A rewind stores a smaller `read` with **release**. A producer that still works
///   from the older, larger `read` writes at most up to `oldRead + capacity − retain`,
///   which lands in slots before `oldRead − retain`; the rewind never goes further
///   back than `retain`, so the frames it re-reads are intact.
///
/// Thread safety is per method below ("Thread: producer / consumer / any").
public final class FrameRing: @unchecked Sendable {
    // @unchecked Sendable: the only mutable state shared between threads is the two
    // atomic cursors; `storage` slots are owned by exactly one side at a time as
    // decided by those cursors (see "Memory ordering").

    /// Frames the ring holds, a power of two. Changed only by a reset.
    public private(set) var capacity: Int
    /// Frames behind the read cursor that the producer leaves intact for ``rewind(_:)``.
    /// Changed only by a reset.
    public private(set) var retain: Int
    /// Samples per frame. Changed only by a reset.
    public private(set) var channels: Int

    private var mask: Int
    private var storage: UnsafeMutablePointer<Float>

    /// Written by the producer only (release); read by both.
    private let writeCursor = Atomic<Int>(0)
    /// Written by the consumer only (release); read by both.
    private let readCursor = Atomic<Int>(0)

    /// - Parameters:
    ///   - minimumCapacity: frames; rounded up to a power of two.
    ///   - retain: frames kept behind the read cursor for rewinds; must be below capacity.
    ///   - channels: samples per frame (``reset(channels:minimumCapacity:retain:)`` may change it).
    public init(minimumCapacity: Int, retain: Int = 0, channels: Int) {
        precondition(minimumCapacity > 0 && retain >= 0 && channels > 0)
        let cap = Self.capacity(minimumCapacity, retain)
        self.capacity = cap
        self.mask = cap - 1
        self.retain = retain
        self.channels = channels
        storage = Self.allocateStorage(cap * channels)
    }

    private static func capacity(_ minimumCapacity: Int, _ retain: Int) -> Int {
        var cap = 1
        while cap < minimumCapacity + retain { cap <<= 1 }
        return cap
    }

    /// Allocates and pre-faults every page now, so the render thread takes no page
    /// faults on its first pass.
    private static func allocateStorage(_ samples: Int) -> UnsafeMutablePointer<Float> {
        let p = UnsafeMutablePointer<Float>.allocate(capacity: samples)
        p.initialize(repeating: 0, count: samples)
        return p
    }

    deinit { storage.deallocate() }

    /// Empties the ring and sets the frame width, the size and the retained history,
    /// reallocating only when the storage size changes. **Not thread-safe**: call only
    /// while neither the producer nor the consumer is running.
    public func reset(channels: Int, minimumCapacity: Int, retain: Int) {
        precondition(channels > 0 && minimumCapacity > 0 && retain >= 0)
        let cap = Self.capacity(minimumCapacity, retain)
        if channels * cap != self.channels * capacity {
            storage.deallocate()
            storage = Self.allocateStorage(cap * channels)
        }
        self.channels = channels
        self.capacity = cap
        self.mask = cap - 1
        self.retain = retain
        writeCursor.store(0, ordering: .relaxed)
        readCursor.store(0, ordering: .relaxed)
    }

    // MARK: Producer

    /// The producer's own cursor: the index the next written frame will have.
    /// Thread: producer. Real-time safe: yes.
    public var producerIndex: Int { writeCursor.load(ordering: .relaxed) }

    /// Frames the producer may write now. Thread: producer. Real-time safe: yes.
    public var writableFrames: Int {
        let w = writeCursor.load(ordering: .relaxed)  // our own cursor
        let r = readCursor.load(ordering: .acquiring)   // consumer's reads of slots happen-before we reuse them
        return Swift.max(0, capacity - retain - (w - r))
    }

    /// Copies `frames` interleaved frames in. The caller must not write more than a
    /// ``writableFrames`` it read earlier. Thread: producer. Real-time safe: yes.
    public func write(_ source: UnsafePointer<Float>, frames: Int) {
        let w = writeCursor.load(ordering: .relaxed)
        // Not `frames <= writableFrames`: the consumer may have rewound since the caller
        // asked (by at most `retain`), which shrinks `writableFrames` while the write is
        // still safe. What must hold is that no unread frame is overwritten.
        precondition(frames >= 0 && w + frames - readCursor.load(ordering: .acquiring) <= capacity, "ring overflow")
        copy(frames: frames, at: w) { dst, src, n in dst.update(from: source + src, count: n) }
        writeCursor.store(w + frames, ordering: .releasing)  // publish the samples
    }

    // MARK: Consumer

    /// The consumer's own cursor: the index of the next frame to read.
    /// Thread: consumer. Real-time safe: yes.
    public var consumerIndex: Int { readCursor.load(ordering: .relaxed) }

    /// Frames available to read. Thread: consumer. Real-time safe: yes.
    public var readableFrames: Int {
        let w = writeCursor.load(ordering: .acquiring)  // see the samples the producer published
        return w - readCursor.load(ordering: .relaxed)
    }

    /// Frames available to read, as seen from any thread (a snapshot; for monitoring).
    /// Thread: any. Real-time safe: yes.
    public var fillLevel: Int {
        writeCursor.load(ordering: .relaxed) - readCursor.load(ordering: .relaxed)
    }

    /// Copies `frames` frames out and consumes them. Precondition: `frames <= readableFrames`.
    /// Thread: consumer. Real-time safe: yes.
    public func read(into destination: UnsafeMutablePointer<Float>, frames: Int) {
        precondition(frames >= 0 && frames <= readableFrames, "ring underflow")
        let r = readCursor.load(ordering: .relaxed)
        copy(frames: frames, at: r) { ring, dst, n in (destination + dst).update(from: ring, count: n) }
        readCursor.store(r + frames, ordering: .releasing)  // hand the slots back to the producer
    }

    /// Drops every readable frame. Thread: consumer. Real-time safe: yes.
    public func discardAll() {
        let w = writeCursor.load(ordering: .acquiring)
        readCursor.store(w, ordering: .releasing)
    }

    /// Moves the read cursor back by `frames` so they will be read again.
    /// Precondition: `frames <= retain`, and the frames were consumed since the last
    /// ``discardAll()`` (they are then still intact, see "Memory ordering").
    /// Thread: consumer. Real-time safe: yes.
    public func rewind(_ frames: Int) {
        precondition(frames >= 0 && frames <= retain, "rewind beyond the retained history")
        readCursor.store(readCursor.load(ordering: .relaxed) - frames, ordering: .releasing)
    }

    // MARK: Copying

    /// Calls `body(ringPointer, offsetInCallerSamples, sampleCount)` once or twice,
    /// splitting the copy at the end of the storage.
    @inline(__always)
    private func copy(frames: Int, at cursor: Int,
                      _ body: (UnsafeMutablePointer<Float>, Int, Int) -> Void) {
        guard frames > 0 else { return }
        let slot = cursor & mask
        let first = Swift.min(frames, capacity - slot)
        body(storage + slot * channels, 0, first * channels)
        if first < frames {
            body(storage, first * channels, (frames - first) * channels)
        }
    }
}
