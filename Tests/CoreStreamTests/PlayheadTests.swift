import Testing
@testable import CoreStream

/// The loop/reverse planner, without decoding: which source frames come out, in
/// which order, and whether the segment markers map every ring frame back to them.
@Suite("Playhead: loop regions, ping-pong and reverse", .checksSomething)
struct PlayheadTests {
    /// Emits up to `limit` frames, `maxFrames` per step. Also records, per emitted
    /// frame, the marker in force and the step's pass count.
    struct Emission {
        var frames: [Int64] = []
        var passes: [Int64] = []
        var markers: [SegmentMarker] = []
        var ended = false

        mutating func run(_ head: inout Playhead, limit: Int, maxFrames: Int) {
            while frames.count < limit {
                guard let step = head.next(maxFrames: min(maxFrames, limit - frames.count)) else { ended = true; return }
                if let shape = step.newRun {
                    markers.append(SegmentMarker(ringIndex: frames.count, firstFrame: step.firstFrame,
                                                 direction: step.direction, shape: shape, pass: step.pass,
                                                 generation: 1, sourceRate: 48000, deviceRate: 48000))
                }
                for i in 0..<step.count {
                    frames.append(step.direction == .forward ? step.start + Int64(i) : step.start + Int64(step.count - 1 - i))
                    passes.append(step.pass)
                }
            }
        }

        /// Every emitted frame must be what the marker in force says it is.
        func checkMarkers(sourceLocation: SourceLocation = #_sourceLocation) {
            guard !frames.isEmpty else { return }
            #expect(markers.first?.ringIndex == 0, "no marker before the first frame", sourceLocation: sourceLocation)
            var m = 0
            for i in frames.indices {
                while m + 1 < markers.count && markers[m + 1].ringIndex <= i { m += 1 }
                let mapped = markers[m].sourceFrame(atRing: i)
                if mapped != frames[i] {
                    Issue.record("ring \(i): marker says \(mapped), emitted \(frames[i]) (marker \(markers[m]))",
                                 sourceLocation: sourceLocation)
                    return
                }
                if markers[m].pass(atRing: i) != passes[i] {
                    Issue.record("ring \(i): marker pass \(markers[m].pass(atRing: i)), planner \(passes[i]) marker \(markers[m]) frames \(frames[markers[m].ringIndex...i])",
                                 sourceLocation: sourceLocation)
                    return
                }
            }
        }
    }

    static func seq(_ parts: [ClosedRange<Int64>]) -> [Int64] { parts.flatMap { Array($0) } }
    static func down(_ from: Int64, _ to: Int64) -> [Int64] { Array(stride(from: from, through: to, by: -1)) }

    struct Case: Sendable, CustomStringConvertible {
        var name: String
        var start: Int64
        var direction: PlayDirection
        var loop: LoopRegion?
        var length: Int64?
        var expected: [Int64]
        var ends: Bool
        var description: String { name }
    }

    static let cases: [Case] = [
        Case(name: "forward to the end", start: 3, direction: .forward, loop: nil, length: 6,
             expected: [3, 4, 5], ends: true),
        Case(name: "loop entered from before A", start: 8, direction: .forward,
             loop: LoopRegion(start: 10, end: 13), length: 100,
             expected: [8, 9, 10, 11, 12, 10, 11, 12, 10, 11], ends: false),
        Case(name: "count 1 wraps once then plays on", start: 10, direction: .forward,
             loop: LoopRegion(start: 10, end: 13, count: 1), length: 16,
             expected: [10, 11, 12, 10, 11, 12, 13, 14, 15], ends: true),
        Case(name: "count 0 never wraps", start: 11, direction: .forward,
             loop: LoopRegion(start: 10, end: 13, count: 0), length: 15,
             expected: [11, 12, 13, 14], ends: true),
        Case(name: "one-frame loop", start: 4, direction: .forward,
             loop: LoopRegion(start: 5, end: 6), length: 100,
             expected: [4, 5, 5, 5, 5], ends: false),
        Case(name: "reverse to frame 0", start: 5, direction: .reverse, loop: nil, length: 100,
             expected: [4, 3, 2, 1, 0], ends: true),
        Case(name: "reverse into a loop from above", start: 15, direction: .reverse,
             loop: LoopRegion(start: 10, end: 13), length: 100,
             expected: [14, 13, 12, 11, 10, 12, 11, 10, 12], ends: false),
        Case(name: "reverse below the region never reaches it", start: 4, direction: .reverse,
             loop: LoopRegion(start: 10, end: 13), length: 100,
             expected: [3, 2, 1, 0], ends: true),
        Case(name: "ping-pong", start: 10, direction: .forward,
             loop: LoopRegion(start: 10, end: 14, pingPong: true), length: 100,
             expected: [10, 11, 12, 13, 12, 11, 10, 11, 12, 13, 12], ends: false),
        Case(name: "ping-pong count 1 then reverse to 0", start: 2, direction: .forward,
             loop: LoopRegion(start: 2, end: 5, count: 1, pingPong: true), length: 100,
             expected: [2, 3, 4, 3, 2, 1, 0], ends: true),
        Case(name: "ping-pong of two frames", start: 7, direction: .forward,
             loop: LoopRegion(start: 7, end: 9, pingPong: true), length: 100,
             expected: [7, 8, 7, 8, 7, 8], ends: false),
        Case(name: "loop of the whole track (repeat one)", start: 0, direction: .forward,
             loop: LoopRegion(start: 0, end: 4), length: 4,
             expected: [0, 1, 2, 3, 0, 1, 2, 3, 0], ends: false),
    ]

    @Test(arguments: cases, [1, 2, 7])
    func emitsTheExpectedFrames(_ c: Case, maxFrames: Int) {
        var head = Playhead(position: c.start, direction: c.direction, loop: c.loop, length: c.length)
        var e = Emission()
        e.run(&head, limit: c.expected.count, maxFrames: maxFrames)
        #expect(Array(e.frames.prefix(c.expected.count)) == c.expected)
        if c.ends {
            e.run(&head, limit: c.expected.count + 1, maxFrames: maxFrames)
            #expect(e.ended && e.frames.count == c.expected.count, "should end after \(c.expected)")
        }
        e.checkMarkers()
    }

    @Test func directionChangeTurnsAtTheLastFrameWithoutRepeatingIt() {
        var head = Playhead(position: 0, length: 100)
        var e = Emission()
        e.run(&head, limit: 5, maxFrames: 5)          // 0…4
        head.setDirection(.reverse)
        e.run(&head, limit: 100, maxFrames: 3)        // 3…0
        #expect(e.frames == [0, 1, 2, 3, 4, 3, 2, 1, 0])
        #expect(e.ended)
        var back = Playhead(position: 10, direction: .reverse, length: 100)
        var f = Emission()
        f.run(&back, limit: 3, maxFrames: 3)          // 9, 8, 7
        back.setDirection(.forward)
        f.run(&back, limit: 6, maxFrames: 2)          // 8, 9, 10
        #expect(f.frames == [9, 8, 7, 8, 9, 10])
    }

    @Test func settingARegionThePlayheadIsPastJumpsToItsStart() {
        var head = Playhead(position: 20, length: 100)
        head.setLoop(LoopRegion(start: 10, end: 13))
        var e = Emission()
        e.run(&head, limit: 6, maxFrames: 4)
        #expect(e.frames == [10, 11, 12, 10, 11, 12])
        e.checkMarkers()
    }

    @Test func aPassInProgressFinishesBeforeANewRegionTakesOver() {
        var head = Playhead(position: 10, loop: LoopRegion(start: 10, end: 20), length: 100)
        var e = Emission()
        e.run(&head, limit: 5, maxFrames: 5)          // 10…14
        head.setLoop(LoopRegion(start: 30, end: 33))
        e.run(&head, limit: 16, maxFrames: 4)
        #expect(e.frames == [10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 30, 31, 32, 30, 31, 32])
        e.checkMarkers()
    }

    @Test func clearingTheLoopPlaysOnPastItsEnd() {
        var head = Playhead(position: 10, loop: LoopRegion(start: 10, end: 13), length: 100)
        var e = Emission()
        e.run(&head, limit: 4, maxFrames: 4)          // 10 11 12 10
        head.setLoop(nil)
        e.run(&head, limit: 8, maxFrames: 4)
        #expect(e.frames == [10, 11, 12, 10, 11, 12, 13, 14])
        e.checkMarkers()
    }

    @Test func resumeAfterASpliceContinuesThePassAndItsCount() {
        // The reader planned three wraps ahead; the splice took back all but the first
        // four frames heard (10 11 12 10, one wrap): the count left must be 1, not 0.
        var head = Playhead(position: 10, loop: LoopRegion(start: 10, end: 13, count: 2), length: 100)
        var e = Emission()
        e.run(&head, limit: 12, maxFrames: 3)
        let kept = 4
        var m = 0
        while m + 1 < e.markers.count && e.markers[m + 1].ringIndex <= kept - 1 { m += 1 }
        let marker = e.markers[m]
        head.resume(after: marker.sourceFrame(atRing: kept - 1), direction: marker.direction(atRing: kept - 1),
                    shape: marker.shape, pass: marker.pass(atRing: kept - 1))
        var f = Emission()
        f.run(&head, limit: 7, maxFrames: 3)
        #expect(f.frames == [11, 12, 10, 11, 12, 13, 14])
    }

    /// Random interleavings of steps and commands: the markers must always describe
    /// what was emitted, whatever the planner did.
    @Test(arguments: 0..<40)
    func markersFollowRandomCommandSequences(seed: Int) {
        var rng = SplitMix(seed: UInt64(seed))
        let length: Int64 = 200
        var head = Playhead(position: Int64(rng.next() % 200), length: length)
        var e = Emission()
        for _ in 0..<30 {
            let before = e.frames.count
            e.run(&head, limit: before + Int(rng.next() % 40), maxFrames: 1 + Int(rng.next() % 9))
            if e.ended { break }
            if rng.next() % 2 == 0 && !e.frames.isEmpty {
                // A splice: the last frames planned were never heard; resume after the
                // one kept, as the reader does, from what the marker in force says.
                let kept = max(1, e.frames.count - Int(rng.next() % 30))
                e.frames.removeSubrange(kept...)
                e.passes.removeSubrange(kept...)
                e.markers.removeAll { $0.ringIndex >= kept }
                let m = e.markers.last!
                head.resume(after: m.sourceFrame(atRing: kept - 1), direction: m.direction(atRing: kept - 1),
                            shape: m.shape, pass: m.pass(atRing: kept - 1))
            }
            switch rng.next() % 4 {
            case 0:
                let a = Int64(rng.next() % 190)
                let b = a + 1 + Int64(rng.next() % 12)
                let count: Int? = rng.next() % 3 == 0 ? Int(rng.next() % 3) : nil
                head.setLoop(LoopRegion(start: a, end: b, count: count, pingPong: rng.next() % 2 == 0))
            case 1: head.setLoop(nil)
            case 2: head.setDirection(head.direction.flipped)
            default: break
            }
        }
        e.checkMarkers()
        for f in e.frames { #expect(f >= 0 && f < length) }
    }
}

/// A small seeded generator, so failures reproduce.
struct SplitMix {
    var state: UInt64
    init(seed: UInt64) { state = seed &+ 0x9E37_79B9_7F4A_7C15 }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
