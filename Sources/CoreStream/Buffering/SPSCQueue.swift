import Synchronization

/// A bounded lock-free single-producer / single-consumer queue of plain values.
///
/// Used for small control records that travel alongside the audio (segment markers
/// from the reader to the render thread). Same contract and orderings as ``FrameRing``:
/// one producer, one consumer, never interchanged; producer loads `head` with acquire
/// and publishes `tail` with release; consumer loads `tail` with acquire and publishes
/// `head` with release. ``reset()`` only while neither side runs.
public final class SPSCQueue<Element: BitwiseCopyable>: @unchecked Sendable {
    // @unchecked Sendable: slots are owned by one side at a time, as decided by the
    // two atomic cursors.
    public let capacity: Int
    private let mask: Int
    private let slots: UnsafeMutablePointer<Element>
    /// Written by the producer only.
    private let tail = Atomic<Int>(0)
    /// Written by the consumer only.
    private let head = Atomic<Int>(0)

    public init(minimumCapacity: Int, filler: Element) {
        var cap = 1
        while cap < minimumCapacity { cap <<= 1 }
        capacity = cap
        mask = cap - 1
        slots = .allocate(capacity: cap)
        slots.initialize(repeating: filler, count: cap)
    }

    deinit { slots.deallocate() }

    /// Appends; returns false when full. Thread: producer. Real-time safe: yes.
    @discardableResult
    public func push(_ element: Element) -> Bool {
        let t = tail.load(ordering: .relaxed)
        let h = head.load(ordering: .acquiring)  // consumer finished with the slot we reuse
        guard t - h < capacity else { return false }
        slots[t & mask] = element
        tail.store(t + 1, ordering: .releasing)  // publish the element
        return true
    }

    /// The oldest element without removing it. Thread: consumer. Real-time safe: yes.
    public func peek() -> Element? {
        let h = head.load(ordering: .relaxed)
        guard tail.load(ordering: .acquiring) > h else { return nil }  // see the published element
        return slots[h & mask]
    }

    /// Removes the oldest element. Thread: consumer. Real-time safe: yes.
    @discardableResult
    public func pop() -> Element? {
        let h = head.load(ordering: .relaxed)
        guard tail.load(ordering: .acquiring) > h else { return nil }
        let e = slots[h & mask]
        head.store(h + 1, ordering: .releasing)  // hand the slot back
        return e
    }

    /// Drops every element. Thread: consumer. Real-time safe: yes.
    public func removeAll() {
        head.store(tail.load(ordering: .acquiring), ordering: .releasing)
    }

    /// Not thread-safe: only while neither side runs.
    public func reset() {
        head.store(0, ordering: .relaxed)
        tail.store(0, ordering: .relaxed)
    }
}
