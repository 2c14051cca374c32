import CFFmpeg
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// The connection of one network stream and, for a stream that cannot seek (a live
/// radio, a server without byte ranges), a bounded byte buffer between it and the
/// demuxer, filled by a thread of its own.
///
/// Why a thread: without it the reader thread reads the socket itself, so a network
/// hiccup of a second is a second of silence as soon as the PCM ring (a fraction of a
/// second) runs dry; with it, `StreamOptions.bufferBytes` (128 KiB: 8 s of a
/// 128 kbit/s radio) absorb it. The buffer is allocated once, so memory stays flat for
/// a stream that never ends. Before the demuxer probes, `prefillBytes` are gathered
/// (status `buffering` with a percentage).
///
/// A seekable HTTP file (byte ranges and a length) is read on demand like a local file
/// (`isBuffered` false): the demuxer reads the connection directly, on the reader
/// thread, so seeks stay exact and nothing is fetched that is not played.
///
/// Threads: made on the opening thread; then the fetch thread writes bytes in, and
/// the thread using the decoder (opener, then reader) reads them out through the
/// demuxer's AVIOContext. Shared fields are under `lock`; the bytes themselves are a
/// single-producer/single-consumer ring (the producer writes only the free part, the
/// consumer reads only the filled part, and `count` under the lock hands them over).
final class NetworkBuffer: @unchecked Sendable {
    let url: String
    /// Whether a fetch thread fills a buffer (the connection cannot seek).
    let isBuffered: Bool

    // Set at open, then read-only.
    /// The connection (``HTTPSource``, libcurl). Direct mode: its AVIOContext is read
    /// by the demuxer, and `close()` closes it. Buffered: owned by the fetch thread,
    /// which closes it.
    private var source: HTTPSource? = nil
    /// The demuxer's AVIOContext: `source` itself, or one reading the buffer.
    private(set) var demuxerIO: UnsafeMutablePointer<AVIOContext>? = nil
    /// The connection's length in bytes (Content-Length), or -1.
    private let size: Int64
    /// `icy-name` from the response headers.
    let stationName: String?
    private let sourceInterrupt: SourceInterrupt
    /// The interrupt of the thread reading through the demuxer (a command for the
    /// reader breaks off a wait for bytes).
    private let readerInterrupt: StreamInterrupt
    private let capacity: Int
    private let storage: UnsafeMutableRawBufferPointer

    // Under `lock`.
    private let lock = ConditionLock()
    private var head = 0
    private var count = 0
    private var written: Int64 = 0
    private var consumed: Int64 = 0
    /// 0 while the fetch thread runs; then AVERROR_EOF or the error it ended with.
    private var ended: Int32 = 0
    /// ICY titles that arrived with bytes not yet read: (first byte, title), oldest first.
    private var pendingTitles: [(at: Int64, title: String)] = []
    /// The title of the bytes read last.
    private var title: String?

    /// Interrupts the connection's blocking calls: the buffer closing, the opener's
    /// cancel, and in direct mode (or while opening) the reader's own interrupt.
    /// `follow` is set on the opening thread before the fetch thread starts.
    final class SourceInterrupt: @unchecked Sendable {
        let abort = Atomic<Bool>(false)
        let cancel: StreamCancel?
        var follow: StreamInterrupt?
        init(cancel: StreamCancel?, follow: StreamInterrupt?) { self.cancel = cancel; self.follow = follow }
        var shouldAbort: Bool {
            abort.load(ordering: .relaxed) || cancel?.isCancelled == true || follow?.shouldAbort == true
        }
    }

    /// Connects to `url` (within `interrupt`'s deadline) and, when the connection
    /// cannot seek, starts the fetch thread and waits for the prefill.
    init(url: String, options: StreamOptions, interrupt: StreamInterrupt) throws(StreamError) {
        self.url = url
        readerInterrupt = interrupt
        sourceInterrupt = SourceInterrupt(cancel: options.cancel, follow: interrupt)
        capacity = max(4096, min(options.bufferBytes, 64 << 20))
        let interruptSource = sourceInterrupt
        let src = try HTTPSource(url: url, allowedHosts: options.allowedHosts, timeoutSeconds: options.timeoutSeconds,
                                 shouldAbort: { interruptSource.shouldAbort }) { code in
            NetworkInput.error(url, code, interrupt: interrupt, call: "connect")
        }
        source = src
        size = src.length
        stationName = src.stationName
        isBuffered = !src.seekable
        guard isBuffered else {
            storage = UnsafeMutableRawBufferPointer(start: nil, count: 0)
            demuxerIO = src.io
            return
        }
        storage = .allocate(byteCount: capacity, alignment: 16)
        // From here on a failure must undo the fetch thread: `close()` in the throws below.
        guard let ioBuffer = av_malloc(32_768)?.assumingMemoryBound(to: UInt8.self),
              let demux = avio_alloc_context(ioBuffer, 32_768, 0, Unmanaged.passUnretained(self).toOpaque(),
                                              NetworkBuffer.readCallback, nil, NetworkBuffer.seekCallback) else {
            src.close()
            source = nil
            throw StreamError(.internalError, "\(url): avio_alloc_context() failed")
        }
        demux.pointee.seekable = 0
        demuxerIO = demux
        // The fetch thread answers only to the buffer and the opener's cancel: a command
        // for the reader is not a reason to drop the connection.
        sourceInterrupt.follow = nil
        let handoff = Handoff(src)
        source = nil  // the fetch thread's from here on
        let started = PThread.detached(name: "playd-net") { [self] in fetchLoop(handoff.value) }
        guard started else {
            sourceInterrupt.follow = interrupt
            src.close()
            close()
            throw StreamError(.internalError, "\(url): no thread for the network buffer")
        }
        do throws(StreamError) {
            try prefill(bytes: max(0, min(options.prefillBytes, capacity)), options: options)
        } catch {
            close()
            throw error
        }
    }

    deinit {
        if isBuffered { storage.deallocate() }
    }

    /// Stops the fetch thread (it closes the connection when its read gives way) and
    /// frees the demuxer's AVIOContext. Call once, after the demuxer is closed.
    func close() {
        sourceInterrupt.abort.store(true, ordering: .relaxed)
        lock.withLock { lock.broadcast() }
        if isBuffered {
            if let d = demuxerIO {
                av_freep(&d.pointee.buffer)
                var p: UnsafeMutablePointer<AVIOContext>? = d
                avio_context_free(&p)
            }
        } else if let s = source {
            s.close()
            source = nil
        }
        demuxerIO = nil
    }

    // MARK: - Fetch thread

    private func fetchLoop(_ src: HTTPSource) {
        var lastTitle: String?
        var lastTitleCheck: UInt64 = 0
        var result: Int32 = 0
        while !sourceInterrupt.abort.load(ordering: .relaxed) {
            // The free run after the filled part (one contiguous piece).
            let (tail, space): (Int, Int) = lock.withLock {
                while count == capacity && !sourceInterrupt.shouldAbort { lock.wait(nanoseconds: 100_000_000) }
                let tail = (head + count) % capacity
                return (tail, min(capacity - count, capacity - tail, 16_384))
            }
            if sourceInterrupt.shouldAbort { result = cffmpeg_averror_exit(); break }
            let n = src.read(storage.baseAddress!.advanced(by: tail).assumingMemoryBound(to: UInt8.self), space)
            if n == 0 { continue }
            if n < 0 { result = n; break }
            // A new ICY block: its title belongs to the bytes after it, which are these.
            var newTitle: String?
            let now = monotonicNanoseconds()
            if now &- lastTitleCheck > 250_000_000 {
                lastTitleCheck = now
                if let t = src.title, t != lastTitle { lastTitle = t; newTitle = t }
            }
            lock.withLock {
                if let t = newTitle {
                    if pendingTitles.count >= 16 { pendingTitles.removeFirst() }
                    pendingTitles.append((written, t))
                }
                count += Int(n)
                written += Int64(n)
                lock.broadcast()
            }
        }
        src.close()
        lock.withLock {
            ended = result == 0 ? cffmpeg_averror_eof() : result
            lock.broadcast()
        }
    }

    // MARK: - The demuxer's side

    private static let readCallback: @convention(c) (UnsafeMutableRawPointer?, UnsafeMutablePointer<UInt8>?, Int32) -> Int32 = { opaque, buf, size in
        guard let opaque, let buf, size > 0 else { return cffmpeg_averror(EINVAL) }
        return Unmanaged<NetworkBuffer>.fromOpaque(opaque).takeUnretainedValue().read(buf, Int(size))
    }

    /// Only the length is known (a file from a server without byte ranges, so the
    /// demuxer can tell its duration); the buffer cannot seek.
    private static let seekCallback: @convention(c) (UnsafeMutableRawPointer?, Int64, Int32) -> Int64 = { opaque, _, whence in
        guard let opaque, whence & AVSEEK_SIZE != 0 else { return Int64(cffmpeg_averror(ENOSYS)) }
        let size = Unmanaged<NetworkBuffer>.fromOpaque(opaque).takeUnretainedValue().size
        return size >= 0 ? size : Int64(cffmpeg_averror(ENOSYS))
    }

    /// The server ended the response cleanly and every byte was read: HTTP's
    /// terminating chunk or its Content-Length reached (FFmpeg's http says EOF). A
    /// connection that broke first, a radio's included (no length, not chunked: FFmpeg
    /// says EIO, "Stream ends prematurely"), is not an end but a reason to reconnect.
    /// Measured with `scripts/test-httpd`: `/chunked/` ends in EOF, `/live/` in EIO.
    /// Thread: the one using the decoder.
    var endedCleanly: Bool {
        lock.withLock { count == 0 && ended == cffmpeg_averror_eof() && !sourceInterrupt.abort.load(ordering: .relaxed) }
    }

    /// Up to `size` buffered bytes; waits while there are none (a command for the
    /// reader breaks the wait off). Thread: the one using the decoder.
    private func read(_ buf: UnsafeMutablePointer<UInt8>, _ size: Int) -> Int32 {
        lock.withLock {
            while count == 0 {
                if ended != 0 { return ended }
                if readerInterrupt.shouldAbort || sourceInterrupt.abort.load(ordering: .relaxed) { return cffmpeg_averror_exit() }
                lock.wait(nanoseconds: 50_000_000)
            }
            let n = min(size, count, capacity - head)
            buf.update(from: storage.baseAddress!.advanced(by: head).assumingMemoryBound(to: UInt8.self), count: n)
            head = (head + n) % capacity
            count -= n
            consumed += Int64(n)
            while let first = pendingTitles.first, first.at < consumed {
                title = first.title
                pendingTitles.removeFirst()
            }
            lock.broadcast()
            return Int32(n)
        }
    }

    /// Waits until `bytes` are buffered, the stream ended, or the open's deadline (then
    /// it goes on with what came), reporting the percentage as it grows.
    private func prefill(bytes: Int, options: StreamOptions) throws(StreamError) {
        guard bytes > 0 else { options.onPrefill?(100); return }
        var reported = -1
        while true {
            let (have, end) = lock.withLock { () -> (Int, Int32) in
                if count < bytes && ended == 0 && !readerInterrupt.shouldAbort { lock.wait(nanoseconds: 100_000_000) }
                return (count, ended)
            }
            let percent = min(100, have * 100 / bytes)
            if percent != reported { reported = percent; options.onPrefill?(percent) }
            if have >= bytes || end != 0 { return }
            if readerInterrupt.shouldAbort {
                if readerInterrupt.cancel?.isCancelled == true || readerInterrupt.abort.load(ordering: .relaxed) {
                    throw StreamError(.ioError, "\(url): cancelled")
                }
                if have > 0 || readerInterrupt.mailbox?.abandoning.load(ordering: .relaxed) == true { return }
                throw StreamError(.timedOut, "\(url): no audio arrived within the timeout")
            }
        }
    }

    // MARK: - ICY

    /// The title of the audio read last (buffered), or the connection's last ICY block.
    func currentTitle() -> String? {
        if isBuffered { return lock.withLock { title } }
        return source?.title
    }
}

/// A pthread mutex with a condition variable on the monotonic clock. Not for the
/// render thread.
final class ConditionLock: @unchecked Sendable {
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let cond = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)

    init() {
        pthread_mutex_init(mutex, nil)
        var attr = pthread_condattr_t()
        pthread_condattr_init(&attr)
        pthread_condattr_setclock(&attr, CLOCK_MONOTONIC)
        pthread_cond_init(cond, &attr)
        pthread_condattr_destroy(&attr)
    }

    deinit {
        pthread_cond_destroy(cond)
        pthread_mutex_destroy(mutex)
        cond.deallocate()
        mutex.deallocate()
    }

    func withLock<T>(_ body: () throws -> T) rethrows -> T {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body()
    }

    /// With the lock held: waits for a broadcast or `nanoseconds`.
    func wait(nanoseconds: UInt64) {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        let total = UInt64(ts.tv_nsec) + nanoseconds
        ts.tv_sec += Int(total / 1_000_000_000)
        ts.tv_nsec = Int(total % 1_000_000_000)
        pthread_cond_timedwait(cond, mutex, &ts)
    }

    /// With the lock held: wakes every waiter.
    func broadcast() { pthread_cond_broadcast(cond) }
}
