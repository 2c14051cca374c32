import Foundation
import Testing
import CoreStream
import CoreStreamTestSupport
#if canImport(Glibc)
import Glibc
#endif

@Suite("FrameRing and SPSCQueue", .checksSomething, .tags(.threadSanitizer, .addressSanitizer))
struct RingTests {
    @Test(arguments: [(1, 1), (100, 2), (4096, 2), (5000, 8)])
    func capacityIsAPowerOfTwo(_ requested: Int, _ channels: Int) {
        let ring = FrameRing(minimumCapacity: requested, channels: channels)
        #expect(ring.capacity >= requested)
        #expect(ring.capacity & (ring.capacity - 1) == 0)
        #expect(ring.writableFrames == ring.capacity)
    }

    @Test func wrapsAroundAndKeepsOrder() {
        let ring = FrameRing(minimumCapacity: 8, channels: 2)
        var next: Float = 0
        var expect: Float = 0
        var buf = [Float](repeating: 0, count: 16)
        for round in 0..<50 {
            let n = (round % 5) + 1
            for i in 0..<(n * 2) { buf[i] = next; next += 1 }
            ring.write(buf, frames: n)
            var out = [Float](repeating: -1, count: n * 2)
            ring.read(into: &out, frames: n)
            for v in out { #expect(v == expect); expect += 1 }
        }
    }

    /// The engine resizes the ring when an output opens: no history for a device that
    /// cannot rewind. Each row: (channels, minimum, retain) → capacity and room.
    @Test(arguments: [(2, 32768, 32768, 65536), (2, 32768, 0, 32768), (1, 100, 20, 128), (8, 4096, 0, 4096)])
    func resetResizesAndEmpties(_ channels: Int, _ minimum: Int, _ retain: Int, _ capacity: Int) {
        let ring = FrameRing(minimumCapacity: 1000, retain: 500, channels: 2)
        let junk = [Float](repeating: 1, count: 200 * 2)
        ring.write(junk, frames: 200)
        ring.reset(channels: channels, minimumCapacity: minimum, retain: retain)
        #expect(ring.capacity == capacity)
        #expect(ring.retain == retain)
        #expect(ring.channels == channels)
        #expect(ring.readableFrames == 0)
        #expect(ring.writableFrames == capacity - retain)
        // Fill it to the brim and read it all back in order, across the wrap.
        for round in 0..<3 {
            let n = ring.writableFrames
            let data = (0..<(n * channels)).map { Float(round * 1_000_000 + $0) }
            ring.write(data, frames: n)
            var out = [Float](repeating: -1, count: n * channels)
            ring.read(into: &out, frames: n)
            #expect(out == data)
        }
    }

    @Test func retainedFramesSurviveARewind() {
        let ring = FrameRing(minimumCapacity: 16, retain: 8, channels: 1)
        #expect(ring.writableFrames == ring.capacity - 8)
        let data = (0..<ring.writableFrames).map(Float.init)
        ring.write(data, frames: data.count)
        var out = [Float](repeating: 0, count: 10)
        ring.read(into: &out, frames: 10)
        // The producer may now write 10 more, but not into the 8 retained behind `read`.
        let more = [Float](repeating: -1, count: ring.writableFrames)
        ring.write(more, frames: more.count)
        ring.rewind(8)
        var again = [Float](repeating: 0, count: 8)
        ring.read(into: &again, frames: 8)
        #expect(again == Array(data[2..<10]))
    }

    /// A producer and a consumer thread hammer the ring with a counting sequence; every
    /// frame must arrive once, in order, with both channels intact. Run under TSan by
    /// `scripts/test` (`swift test --sanitize=thread --filter RingTests`).
    @Test func concurrentProducerAndConsumer() {
        let ring = FrameRing(minimumCapacity: 1024, retain: 128, channels: 2)
        let total = 300_000
        let consumer = OSThread { () -> Bool in
            var expected: Float = 0
            let buf = UnsafeMutablePointer<Float>.allocate(capacity: 512 * 2)
            defer { buf.deallocate() }
            var received = 0
            var ok = true
            var step = 0
            while received < total {
                let n = min(ring.readableFrames, 1 + (step % 500))
                step += 1
                if n == 0 { sched_yield(); continue }
                ring.read(into: buf, frames: n)
                for f in 0..<n {
                    if buf[2 * f] != expected || buf[2 * f + 1] != -expected { ok = false }
                    expected += 1
                    if expected == 1_048_576 { expected = 0 }
                }
                received += n
                // Exercise rewind: take back a few frames sometimes and re-read them.
                if step % 97 == 0 && n >= 4 {
                    ring.rewind(4)
                    ring.read(into: buf, frames: 4)
                    let first = expected - 4 < 0 ? expected - 4 + 1_048_576 : expected - 4
                    if buf[0] != first { ok = false }
                }
            }
            return ok
        }
        let producer = OSThread { () -> Bool in
            var value: Float = 0
            let buf = UnsafeMutablePointer<Float>.allocate(capacity: 700 * 2)
            defer { buf.deallocate() }
            var sent = 0
            var step = 0
            while sent < total {
                let n = min(ring.writableFrames, 1 + (step * 7 % 700), total - sent)
                step += 1
                if n == 0 { sched_yield(); continue }
                for f in 0..<n {
                    buf[2 * f] = value
                    buf[2 * f + 1] = -value
                    value += 1
                    if value == 1_048_576 { value = 0 }
                }
                ring.write(buf, frames: n)
                sent += n
            }
            return true
        }
        #expect(producer.join())
        #expect(consumer.join())
    }

    @Test func queuePreservesOrderAcrossThreads() {
        let q = SPSCQueue<Int>(minimumCapacity: 16, filler: 0)
        let n = 50_000
        let consumer = OSThread { () -> Bool in
            var expected = 0
            while expected < n {
                if let v = q.pop() {
                    if v != expected { return false }
                    expected += 1
                } else { sched_yield() }
            }
            return true
        }
        var i = 0
        while i < n { if q.push(i) { i += 1 } else { sched_yield() } }
        #expect(consumer.join())
    }
}

/// A real thread (not a task on the cooperative pool, which has as many threads as
/// cores: two spinning tasks there can starve the ones they wait for).
final class OSThread<T: Sendable>: @unchecked Sendable {
    // @unchecked Sendable: `result` is written by the thread before `done` is signalled
    // and read only after waiting on `done`.
    private var result: T?
    private let done = DispatchSemaphore(value: 0)
    init(_ body: @escaping @Sendable () -> T) {
        let t = Thread { [self] in
            self.result = body()
            self.done.signal()
        }
        t.start()
    }
    func join() -> T {
        done.wait()
        return result!
    }
}
