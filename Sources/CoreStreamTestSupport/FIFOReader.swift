import Foundation
import Synchronization
import CoreStream
#if canImport(Glibc)
import Glibc
#endif

/// Reads a FIFO on its own thread, as Snapcast's `pipe://` source does, and keeps
/// every byte with the time it arrived. It can start late, stall (stop reading while
/// keeping the FIFO open) and go away, to test how a feed copes.
public final class FIFOReader: @unchecked Sendable {
    // @unchecked Sendable: everything mutable is inside `state` (`Locked`).
    public let path: String
    private struct State {
        var bytes: [UInt8] = []
        /// (seconds since start, total bytes so far) after each read.
        var arrivals: [(Double, Int)] = []
        var stalled = false
        var stop = false
        var done = false
    }
    private let state = Locked(State())
    private let started = Date()
    private var thread: Thread?

    /// Creates the FIFO if missing; it is removed when the reader goes away.
    public init(path: String) throws {
        self.path = path
        if mkfifo(path, 0o600) != 0 && errno != EEXIST {
            throw FixtureError("mkfifo(\(path)): \(String(cString: strerror(errno)))")
        }
    }

    /// Opens the FIFO for reading and reads until ``close()``.
    public func start() {
        let fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC)
        precondition(fd >= 0, "open(\(path)) failed: \(errno)")
        let t = Thread { [self] in
            var buffer = [UInt8](repeating: 0, count: 65536)
            while true {
                let (stop, stalled) = state.withLock { ($0.stop, $0.stalled) }
                if stalled && !stop { usleep(2_000); continue }
                let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
                // Closing: take what is still in the pipe, then stop.
                if stop && n <= 0 { break }
                if n > 0 {
                    let t = Date().timeIntervalSince(started)
                    state.withLock { s in
                        s.bytes += buffer[0..<n]
                        s.arrivals.append((t, s.bytes.count))
                    }
                } else {
                    usleep(2_000)  // no data yet (EAGAIN), or no writer (EOF)
                }
            }
            Glibc.close(fd)
            state.withLock { $0.done = true }
        }
        thread = t
        t.start()
    }

    /// Stops reading but keeps the FIFO open, so it fills up; false resumes.
    public func stall(_ on: Bool) { state.withLock { $0.stalled = on } }

    /// Reads what is left in the pipe, then stops and closes the FIFO.
    public func close() {
        state.withLock { $0.stop = true }
        while !state.withLock({ $0.done }) && thread != nil { usleep(1_000) }
        thread = nil
    }

    public var byteCount: Int { state.withLock { $0.bytes.count } }
    public var bytes: [UInt8] { state.withLock { $0.bytes } }
    /// Bytes that arrived between `from` and `to` seconds after the reader was made.
    public func bytesArrived(from: Double, to: Double) -> Int {
        state.withLock { s in
            let before = s.arrivals.last(where: { $0.0 < from })?.1 ?? 0
            let upTo = s.arrivals.last(where: { $0.0 < to })?.1 ?? 0
            return upTo - before
        }
    }
    public var secondsSinceStart: Double { Date().timeIntervalSince(started) }

    /// The bytes as interleaved 16-bit little-endian samples.
    public var int16Samples: [Int16] {
        let b = bytes
        return b.withUnsafeBytes { raw in
            Array(raw.bindMemory(to: Int16.self).prefix(b.count / 2)).map { Int16(littleEndian: $0) }
        }
    }

    deinit {
        close()
        unlink(path)
    }
}
