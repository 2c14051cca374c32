import CoreStream

/// The play queue: a pure value (no files, no engine), tested without threads.
///
/// Entries keep a stable `id` for as long as they are in the queue, whatever is moved
/// or removed around them (MPD's song ids). `current` is the index of the entry being
/// played (or loaded, paused); which entry follows is decided by `successor`, from the
/// repeat, shuffle and consume options.
public struct PlayQueue: Sendable, Equatable {
    public struct Entry: Sendable, Equatable {
        public let id: Int
        public var path: String
        /// MPD's priority (0…255): in random mode, higher ones play first.
        public var priority = 0
    }

    /// MPD's `single`: after the current entry, stop (repeat off) or play it again
    /// (repeat on). `oneshot` does that once and turns itself off (MPD 0.21).
    public enum Single: String, Sendable, CaseIterable {
        case off, on, oneshot
    }

    public private(set) var entries: [Entry] = []
    /// Index in `entries` of the entry playing, if any.
    public private(set) var current: Int?
    /// MPD's `repeat`: after the last entry, start again from the first.
    public var repeats = false
    /// MPD's `single`.
    public var single = Single.off
    /// Remove each entry once it has played.
    public var consume = false
    /// Play in `order` (a permutation of the ids) instead of queue order.
    public private(set) var shuffle = false
    private(set) var order: [Int] = []
    private(set) var nextID = 1
    private var rng: SplitMix64

    public init(seed: UInt64 = 0x5EED) { rng = SplitMix64(seed: seed) }

    public var count: Int { entries.count }
    public func index(ofID id: Int) -> Int? { entries.firstIndex { $0.id == id } }
    public var currentEntry: Entry? { current.map { entries[$0] } }

    // MARK: - Editing

    /// Appends `paths` (or inserts them at `index`); returns their ids.
    @discardableResult
    public mutating func add(_ paths: [String], at index: Int? = nil) -> [Int] {
        let at = min(max(0, index ?? entries.count), entries.count)
        let new = paths.map { p -> Entry in
            defer { nextID += 1 }
            return Entry(id: nextID, path: p)
        }
        entries.insert(contentsOf: new, at: at)
        if let c = current, c >= at { current = c + new.count }
        if shuffle {
            // New entries play in random places after the current one.
            for e in new {
                let from = (current.flatMap { c in order.firstIndex(of: entries[c].id) } ?? -1) + 1
                order.insert(e.id, at: from + Int(random() % UInt64(order.count - from + 1)))
            }
        }
        return new.map(\.id)
    }

    /// Inserts `paths` right after the current entry ("play next"); returns their ids.
    @discardableResult
    public mutating func insertNext(_ paths: [String]) -> [Int] {
        let ids = add(paths, at: current.map { $0 + 1 } ?? 0)
        if shuffle, let c = current, let at = order.firstIndex(of: entries[c].id) {
            order.removeAll { ids.contains($0) }
            order.insert(contentsOf: ids, at: at + 1)
        }
        return ids
    }

    /// Removes the entry at `index`. Returns whether it was the current one (which then
    /// is none: the caller decides what plays).
    @discardableResult
    public mutating func remove(at index: Int) -> Bool {
        guard entries.indices.contains(index) else { return false }
        let id = entries.remove(at: index).id
        order.removeAll { $0 == id }
        guard let c = current else { return false }
        if c == index { current = nil; return true }
        if c > index { current = c - 1 }
        return false
    }

    /// Moves the entry at `from` to `to` (both indices in the queue before the move).
    public mutating func move(from: Int, to: Int) {
        guard entries.indices.contains(from), entries.indices.contains(to) else { return }
        let currentID = currentEntry?.id
        let e = entries.remove(at: from)
        entries.insert(e, at: to)
        current = currentID.flatMap { index(ofID: $0) }
    }

    /// Sets the priority of the entries at `indices`; in random mode, what is still to
    /// play after the current entry is ordered by priority, highest first (as MPD:
    /// equal priorities keep their random order).
    public mutating func setPriority(_ priority: Int, at indices: [Int]) {
        for i in indices where entries.indices.contains(i) { entries[i].priority = min(max(priority, 0), 255) }
        guard shuffle else { return }
        let from = (current.flatMap { c in order.firstIndex(of: entries[c].id) } ?? -1) + 1
        guard from < order.count else { return }
        let prio = Dictionary(uniqueKeysWithValues: entries.map { ($0.id, $0.priority) })
        let rest = order[from...].enumerated().sorted { a, b in
            let (pa, pb) = (prio[a.element] ?? 0, prio[b.element] ?? 0)
            return pa != pb ? pa > pb : a.offset < b.offset
        }.map(\.element)
        order.replaceSubrange(from..., with: rest)
    }

    /// The entries at `i` and `j` change places.
    public mutating func swap(_ i: Int, _ j: Int) {
        guard entries.indices.contains(i), entries.indices.contains(j) else { return }
        let currentID = currentEntry?.id
        entries.swapAt(i, j)
        current = currentID.flatMap { index(ofID: $0) }
    }

    /// The entries in `range` in a new random order (Fisher–Yates from the queue's
    /// generator). With `keepingPlayingFirst`, the current entry, if it is in the
    /// range, moves to its start and the rest is shuffled after it (as MPD does).
    public mutating func shuffle(_ range: Range<Int>, keepingPlayingFirst: Bool) {
        guard range.lowerBound >= 0, range.upperBound <= entries.count, range.count > 1 else { return }
        let currentID = currentEntry?.id
        var lo = range.lowerBound
        if keepingPlayingFirst, let c = current, range.contains(c) {
            entries.swapAt(lo, c)
            lo += 1
        }
        if range.upperBound - lo > 1 {
            for i in stride(from: range.upperBound - 1, to: lo, by: -1) {
                entries.swapAt(i, lo + Int(random() % UInt64(i - lo + 1)))
            }
        }
        current = currentID.flatMap { index(ofID: $0) }
    }

    public mutating func clear() {
        entries = []
        order = []
        current = nil
    }

    public mutating func setCurrent(_ index: Int?) {
        current = index.flatMap { entries.indices.contains($0) ? $0 : nil }
    }

    public mutating func setShuffle(_ on: Bool) {
        shuffle = on
        guard on else { order = []; return }
        var rest = entries.map(\.id)
        if let c = currentEntry { rest.removeAll { $0 == c.id } }
        for i in stride(from: rest.count - 1, to: 0, by: -1) {
            rest.swapAt(i, Int(random() % UInt64(i + 1)))
        }
        order = (currentEntry.map { [$0.id] } ?? []) + rest
    }

    // MARK: - Order

    /// The index of the entry that plays after the one at `index` (the current when
    /// nil). `manual` is a `next` request: repeat-one does not hold it back.
    public func successor(of index: Int? = nil, manual: Bool = false) -> Int? {
        guard !entries.isEmpty else { return nil }
        guard let from = index ?? current else { return shuffle ? self.index(ofID: order[0]) : 0 }
        // Single: the same entry again with repeat, else nothing (playback stops).
        if single != .off && !manual { return repeats ? from : nil }
        if shuffle {
            guard let at = order.firstIndex(of: entries[from].id) else { return nil }
            if at + 1 < order.count { return self.index(ofID: order[at + 1]) }
            return repeats && (at > 0 || !consume) ? self.index(ofID: order[0]) : nil
        }
        if from + 1 < entries.count { return from + 1 }
        // With consume, the first entry finishing is the last one left: MPD stops there
        // (`Queue::GetNextOrder`); "again from the top" was the same entry, which played
        // on for ever once it was handed to the engine gaplessly (issue 38's sweep).
        return repeats && (from > 0 || !consume) ? 0 : nil
    }

    /// The index of the entry before the current one (`prev`).
    public func predecessor() -> Int? {
        guard let from = current else { return nil }
        if shuffle {
            guard let at = order.firstIndex(of: entries[from].id) else { return nil }
            if at > 0 { return index(ofID: order[at - 1]) }
            return repeats ? index(ofID: order[order.count - 1]) : nil
        }
        if from > 0 { return from - 1 }
        return repeats ? entries.count - 1 : nil
    }

    /// The current entry finished playing and `next` plays now: with consume, the
    /// finished one leaves the queue; a `single oneshot` has been used. Returns the
    /// new index of `next`.
    @discardableResult
    public mutating func advance(to next: Int?) -> Int? {
        if single == .oneshot { single = .off }
        var target = next
        if consume, let c = current, target != c {
            let id = target.map { entries[$0].id }
            remove(at: c)
            target = id.flatMap { index(ofID: $0) }
        }
        current = target
        return target
    }

    /// Restores a saved queue.
    public init(entries: [Entry], current: Int?, repeats: Bool, single: Single, shuffle: Bool, consume: Bool,
                seed: UInt64 = 0x5EED) {
        rng = SplitMix64(seed: seed)
        self.entries = entries
        self.nextID = (entries.map(\.id).max() ?? 0) + 1
        self.current = current.flatMap { entries.indices.contains($0) ? $0 : nil }
        self.repeats = repeats
        self.single = single
        self.consume = consume
        setShuffle(shuffle)
    }

    private mutating func random() -> UInt64 { rng.next() }
}
