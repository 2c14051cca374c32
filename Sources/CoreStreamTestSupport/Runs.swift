/// Building expected captures from a reference decode, and reading a capture back as
/// runs of reference frames (for loops and reverse playback).
public enum Runs {
    /// A run of reference frames: `[start, end)` forward, or `end − 1` down to `start`.
    public struct Run: Equatable, CustomStringConvertible, Sendable {
        public var start: Int
        public var end: Int
        public var reverse: Bool
        public init(_ start: Int, _ end: Int, reverse: Bool = false) {
            self.start = start
            self.end = end
            self.reverse = reverse
        }
        public var count: Int { end - start }
        public var description: String { reverse ? "\(end - 1)↓\(start)" : "\(start)…\(end - 1)" }
    }

    /// The reference's frames laid out as `runs` say, interleaved.
    public static func expected(_ reference: [Float], channels: Int, _ runs: [Run]) -> [Float] {
        var out: [Float] = []
        out.reserveCapacity(runs.reduce(0) { $0 + $1.count } * channels)
        for r in runs {
            if r.reverse {
                for f in stride(from: r.end - 1, through: r.start, by: -1) {
                    out.append(contentsOf: reference[(f * channels)..<((f + 1) * channels)])
                }
            } else {
                out.append(contentsOf: reference[(r.start * channels)..<(r.end * channels)])
            }
        }
        return out
    }

    /// Splits `capture` into maximal runs of consecutive reference frames (forward or
    /// reverse), matching frames bit for bit. A capture frame found nowhere in the
    /// reference (silence padding, a ramp) becomes a run with `start == -1`. Where a
    /// frame occurs several times in the reference, the candidate that continues
    /// longest is taken.
    public static func decompose(_ capture: [Float], reference: [Float], channels: Int) -> [Run] {
        func key(_ a: [Float], _ f: Int) -> [UInt32] {
            (0..<channels).map { a[f * channels + $0].bitPattern }
        }
        let refFrames = reference.count / channels
        var index: [[UInt32]: [Int]] = [:]
        for f in 0..<refFrames { index[key(reference, f), default: []].append(f) }
        func same(_ c: Int, _ r: Int) -> Bool {
            guard r >= 0 && r < refFrames else { return false }
            for ch in 0..<channels where capture[c * channels + ch].bitPattern != reference[r * channels + ch].bitPattern {
                return false
            }
            return true
        }
        let frames = capture.count / channels
        var runs: [Run] = []
        var c = 0
        while c < frames {
            guard let candidates = index[key(capture, c)] else {
                if let last = runs.last, last.start == -1 { runs[runs.count - 1].end += 1 } else { runs.append(Run(-1, -1 + 1)) }
                c += 1
                continue
            }
            // The candidate and direction that continue longest.
            var best = (length: 0, start: 0, step: 1)
            for r in candidates.prefix(64) {
                for step in [1, -1] {
                    var n = 0
                    while c + n < frames && same(c + n, r + n * step) { n += 1 }
                    if n > best.length { best = (n, r, step) }
                }
            }
            let n = best.length
            if best.step == 1 {
                runs.append(Run(best.start, best.start + n))
            } else {
                runs.append(Run(best.start - n + 1, best.start + 1, reverse: true))
            }
            c += n
        }
        return runs
    }
}
