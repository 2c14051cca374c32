import Foundation
import Testing
@testable import CoreStream

/// The render thread's half of the second voice (VoiceMixer), driven block by block
/// over music of constant 1.0, so each output sample is the music's envelope plus the
/// clip: checked against the table in Voice.swift, and for continuity when cancelled.
@Suite("The voice's envelope, frame by frame", .checksSomething, .tags(.addressSanitizer))
struct VoiceEnvelopeTests {
    static let (down, up, block) = (100, 200, 10)
    static let duck: Float = 0.125

    /// Mono music of 1.0 for `frames` frames with `clip` announced; `cancelAt` (a block
    /// boundary) cancels it there. Returns the output and whether it ended early.
    static func run(clip: [Float], frames: Int, cancelAt: Int? = nil, musicPlaying: Bool = true) -> (out: [Float], early: Bool, done: Bool) {
        let shared = VoiceShared()
        var mixer = VoiceMixer(shared: shared, channels: 1, capacity: block, sampleRate: 1000)
        shared.ring.reset(channels: 1, minimumCapacity: 4096, retain: 1024)
        clip.withUnsafeBufferPointer { shared.ring.write($0.baseAddress!, frames: clip.count) }
        shared.end.store(shared.ring.producerIndex, ordering: .releasing)
        shared.duck.store(duck.bitPattern, ordering: .relaxed)
        shared.gain.store(Float(1).bitPattern, ordering: .relaxed)
        shared.downFrames.store(down, ordering: .relaxed)
        shared.upFrames.store(up, ordering: .relaxed)
        shared.request.store(1, ordering: .releasing)
        var out: [Float] = []
        var buffer = [Float](repeating: 0, count: block)
        for start in stride(from: 0, to: frames, by: block) {
            if start == cancelAt { shared.cancel.store(1, ordering: .relaxed) }
            for i in 0..<block { buffer[i] = musicPlaying ? 1 : 0 }
            mixer.update(musicPlaying: musicPlaying, musicFrame: Int64(start))
            buffer.withUnsafeMutableBufferPointer { mixer.mix($0.baseAddress!, frames: block, volume: 1) }
            out += buffer
        }
        return (out, shared.doneEarly.load(ordering: .relaxed), shared.done.load(ordering: .acquiring) == 1)
    }

    @Test func theEnvelopeIsTheTable() {
        let clip = [Float](repeating: 0.5, count: 300)
        let r = Self.run(clip: clip, frames: 1000)
        let (d, l, u, g) = (Self.down, clip.count, Self.up, Double(Self.duck))
        var worst = 0.0
        for (n, v) in r.out.enumerated() {
            let expected: Double
            if n < d { expected = 1 - (1 - g) * Double(n) / Double(d) }
            else if n < d + l { expected = g + 0.5 }
            else if n < d + l + u { expected = g + (1 - g) * Double(n - d - l) / Double(u) }
            else { expected = 1 }
            worst = max(worst, abs(Double(v) - expected))
        }
        #expect(worst <= 1e-6, "largest difference \(worst)")
        #expect(r.done && !r.early)
    }

    /// A cancel at any point leaves no step larger than the steepest ramp's (or the
    /// clip's 20 ms fade), and the music back at full level.
    @Test(arguments: [30, 60, 90, 150, 250, 400, 500])
    func aCancelNeverSteps(at frame: Int) {
        // A smooth hump (0 at both ends), so every step larger than its own comes from
        // the envelope or the fade.
        let clip = (0..<300).map { Float(0.5 * sin(Double.pi * Double($0) / 300)) }
        let r = Self.run(clip: clip, frames: 1200, cancelAt: frame)
        let ramp = Double(1 - Self.duck) / Double(Self.down)
        let fade = 0.5 / 20.0 + 0.5 * Double.pi / 300
        var largest = 0.0
        for i in 1..<r.out.count { largest = max(largest, abs(Double(r.out[i] - r.out[i - 1]))) }
        #expect(largest <= max(ramp, fade) + 1e-5, "a step of \(largest) when cancelled at frame \(frame)")
        #expect(r.out.last == 1, "back at full level")
        #expect(r.done)
        // Cancelled before the end of the clip: early; during the ramp up after it, the
        // clip was heard whole: not.
        #expect(r.early == (frame < Self.down + clip.count))
    }

    /// With no music playing the clip starts at once and ends with no ramps.
    @Test func aloneTheClipStartsAtOnce() {
        let clip = (0..<300).map { Float($0 % 7) / 10 }
        let r = Self.run(clip: clip, frames: 400, musicPlaying: false)
        #expect(Array(r.out.prefix(300)) == clip)
        #expect(r.out.dropFirst(300).allSatisfy { $0 == 0 })
        #expect(r.done && !r.early)
    }

    /// Cancelled while alone: the clip fades out over 20 ms (20 frames here) and ends early.
    @Test func aloneACancelFadesTheClipOut() {
        let clip = [Float](repeating: 0.5, count: 300)
        let r = Self.run(clip: clip, frames: 400, cancelAt: 100, musicPlaying: false)
        #expect(Array(r.out.prefix(100)) == Array(clip.prefix(100)))
        let fade = (0..<20).map { 0.5 * (1 - Float($0) / 20) }
        #expect(zip(r.out[100..<120], fade).allSatisfy { abs($0 - $1) <= 1e-6 }, "\(Array(r.out[100..<120]))")
        #expect(r.out.dropFirst(120).allSatisfy { $0 == 0 })
        #expect(r.done && r.early)
    }
}
