import CCurl
import CFFmpeg
#if canImport(Glibc)
import Glibc
#endif

/// One HTTP(S) connection of a network stream, through libcurl, read by the demuxer as
/// an AVIOContext (or by ``NetworkInput/fetch(_:limit:options:)``).
///
/// Why not FFmpeg's http protocol: FFmpeg 5.1 follows up to 8 redirects inside its open
/// with no hook per hop, so a 302 from an allowed host led to any other before playd
/// could check it, and it keeps `Set-Cookie` and `Icy-*` header lines, unbounded, until
/// its timeout (130–216 MB measured, issue 39). Here redirects are not followed by the
/// transport: each hop's URL is checked (http or https, a host `streams.allowed_hosts`
/// allows) before it is connected to, at most ``maxRedirects`` of them, and a response
/// head is refused past ``ICYText/maxHeaderBytes``; only the fields playd uses are kept
/// (``ICYText/ResponseHead``). ICY metadata blocks are taken out of the audio here
/// (``ICYText/Deinterleaver``), as FFmpeg's http did.
///
/// What stays as with FFmpeg's http: `Icy-MetaData: 1` and `Range: bytes=N-` on every
/// request, byte-range seeks when the server offers ranges and a length, the same error
/// codes (the AVERROR of an HTTP status; EOF only for a clean end: a length reached or
/// the terminating chunk; EIO for a connection that closed without either, as a radio
/// that dropped), a read with nothing arriving for the timeout giving ETIMEDOUT.
/// What differs: certificates are verified (FFmpeg 5.1's `tls_verify` is off).
///
/// Thread: one at a time (the opener, then the fetch or reader thread it is handed to).
/// The transfer runs on curl's multi interface, driven from `read`: no thread of its
/// own, and every wait is at most 50 ms before `shouldAbort` is asked again.
final class HTTPSource {
    /// Redirects followed for one request (FFmpeg's http followed 8).
    static let maxRedirects = 8
    /// Body bytes held between curl and the reader; past it the transfer pauses.
    static let capacity = 64 * 1024

    private static let global: Bool = curl_global_init(Int(CURL_GLOBAL_DEFAULT)) == CURLE_OK

    /// The URL asked for, and the one the connection ended at after its redirects.
    let requested: String
    private(set) var url: String
    /// The last response's head (the one whose body is read).
    private(set) var head = ICYText.ResponseHead()
    /// The resource's length in bytes, or -1.
    private(set) var length: Int64 = -1
    /// Byte ranges and a length: the demuxer may seek.
    private(set) var seekable = false
    /// The demuxer's view of this connection. Freed by ``close()``.
    private(set) var io: UnsafeMutablePointer<AVIOContext>?

    private let allowedHosts: [String]
    private let shouldAbort: () -> Bool
    private let timeoutNanoseconds: UInt64
    private let easy: UnsafeMutableRawPointer
    private let multi: UnsafeMutableRawPointer
    private var requestHeaders: UnsafeMutablePointer<curl_slist>?
    private var aliases: UnsafeMutablePointer<curl_slist>?
    private var added = false

    // The transfer under way.
    private var icy: ICYText.Deinterleaver?
    private var pending: [UInt8] = []
    private var pendingStart = 0
    private var paused = false
    private var finished: CURLcode?
    private var headTooLarge = false
    /// Bytes of the response body received (ICY blocks included), against its length.
    private var bodyBytes: Int64 = 0
    /// Body bytes still to drop before `position` (a server that answered a range with
    /// the whole resource).
    private var discard: Int64 = 0
    /// The offset of the next byte `read` returns.
    private var position: Int64 = 0
    private var lastProgress: UInt64 = 0

    /// Connects to `url`, following and checking its redirects, up to the response head.
    /// `error` turns an AVERROR into the caller's typed error (HTTP status, timeout,
    /// cancel); a hop to a URL not allowed is `stream_not_allowed`, a head past
    /// ``ICYText/maxHeaderBytes`` is `too_large`.
    init(url: String, allowedHosts: [String], timeoutSeconds: Double, shouldAbort: @escaping () -> Bool,
         error: (Int32) -> StreamError) throws(StreamError) {
        requested = url
        self.url = url
        self.allowedHosts = allowedHosts
        self.shouldAbort = shouldAbort
        timeoutNanoseconds = UInt64(max(0.1, min(timeoutSeconds, 3600)) * 1e9)
        guard HTTPSource.global, let e = curl_easy_init(), let m = curl_multi_init() else {
            throw StreamError(.internalError, "\(url): libcurl could not start")
        }
        easy = e
        multi = m
        pending.reserveCapacity(HTTPSource.capacity + Int(CURL_MAX_WRITE_SIZE))
        configure()
        do throws(StreamError) {
            try request(from: 0, error: error)
        } catch {
            close()
            throw error
        }
        guard let buffer = av_malloc(32_768)?.assumingMemoryBound(to: UInt8.self),
              let ctx = avio_alloc_context(buffer, 32_768, 0, Unmanaged.passUnretained(self).toOpaque(),
                                           HTTPSource.readCallback, nil, HTTPSource.seekCallback) else {
            close()
            throw StreamError(.internalError, "\(url): avio_alloc_context() failed")
        }
        ctx.pointee.seekable = seekable ? AVIO_SEEKABLE_NORMAL : 0
        io = ctx
    }

    deinit { close() }

    /// Ends the transfer and frees the connection and the AVIOContext. Idempotent.
    func close() {
        if let ctx = io {
            av_freep(&ctx.pointee.buffer)
            var p: UnsafeMutablePointer<AVIOContext>? = ctx
            avio_context_free(&p)
            io = nil
        }
        guard !closed else { return }
        closed = true
        if added { curl_multi_remove_handle(multi, easy) }
        added = false
        curl_easy_cleanup(easy)
        curl_multi_cleanup(multi)
        curl_slist_free_all(requestHeaders)
        curl_slist_free_all(aliases)
    }
    private var closed = false

    /// The ICY `StreamTitle` of the last metadata block, or nil.
    var title: String? { icy?.lastBlock.flatMap(ICYText.streamTitle) }
    /// `icy-name` of the response.
    var stationName: String? { head.stationName }

    // MARK: - Requests

    private func configure() {
        let me = Unmanaged.passUnretained(self).toOpaque()
        ccurl_set_long(easy, CURLOPT_NOSIGNAL, 1)
        ccurl_set_long(easy, CURLOPT_FOLLOWLOCATION, 0)  // each hop is checked here
        ccurl_set_string(easy, CURLOPT_PROTOCOLS_STR, "http,https")
        ccurl_set_long(easy, CURLOPT_HTTP_VERSION, CURL_HTTP_VERSION_1_1)
        ccurl_set_string(easy, CURLOPT_USERAGENT, "playd")
        ccurl_set_long(easy, CURLOPT_CONNECTTIMEOUT_MS, Int(timeoutNanoseconds / 1_000_000))
        ccurl_set_long(easy, CURLOPT_TCP_KEEPALIVE, 1)
        requestHeaders = curl_slist_append(nil, "Icy-MetaData: 1")
        ccurl_set_list(easy, CURLOPT_HTTPHEADER, requestHeaders)
        // SHOUTcast 1 answers "ICY 200 OK" for "HTTP/1.0 200 OK".
        aliases = curl_slist_append(nil, "ICY 200")
        ccurl_set_list(easy, CURLOPT_HTTP200ALIASES, aliases)
        ccurl_set_data_callback(easy, CURLOPT_HEADERFUNCTION, HTTPSource.headerCallback)
        ccurl_set_pointer(easy, CURLOPT_HEADERDATA, me)
        ccurl_set_data_callback(easy, CURLOPT_WRITEFUNCTION, HTTPSource.bodyCallback)
        ccurl_set_pointer(easy, CURLOPT_WRITEDATA, me)
        ccurl_set_progress_callback(easy, HTTPSource.progressCallback)
        ccurl_set_pointer(easy, CURLOPT_XFERINFODATA, me)
        ccurl_set_long(easy, CURLOPT_NOPROGRESS, 0)
    }

    /// Requests the resource from byte `offset`, following redirects (each checked), up
    /// to a 2xx response's head.
    private func request(from offset: Int64, error: (Int32) -> StreamError) throws(StreamError) {
        var current = url
        for hop in 0...HTTPSource.maxRedirects {
            if hop > 0 { try checkHop(current) }
            try start(current, from: offset, error: error)
            if (300..<400).contains(head.status) {
                var raw: UnsafeMutablePointer<CChar>?
                guard ccurl_get_string(easy, CURLINFO_REDIRECT_URL, &raw) == CURLE_OK, let r = raw else {
                    throw error(cffmpeg_averror_http_other_4xx())
                }
                current = String(cString: r)
                continue
            }
            guard (200..<300).contains(head.status) else { throw error(HTTPSource.statusError(head.status)) }
            url = current
            let total = head.status == 206 ? head.rangeTotal ?? head.contentLength.map { $0 + offset } : head.contentLength
            length = total ?? -1
            seekable = head.acceptsRanges || head.status == 206
            seekable = seekable && length > 0 && head.metaInterval == nil
            if head.status == 200 && offset > 0 { discard = offset }
            position = offset
            return
        }
        throw StreamError(.ioError, "\(requested): more than \(HTTPSource.maxRedirects) redirects")
    }

    /// A redirect's target must be a stream URL on an allowed host, before it is
    /// connected to.
    private func checkHop(_ next: String) throws(StreamError) {
        guard NetworkInput.isStreamURL(next), let host = NetworkInput.host(next),
              NetworkInput.hostAllowed(host, allowedHosts) else {
            let why = NetworkInput.isStreamURL(next) ? "whose host is not in streams.allowed_hosts" : "which is not http or https"
            throw StreamError(.streamNotAllowed, "\(requested): the server redirected to \(next.prefix(512)), \(why)")
        }
    }

    /// Starts one request and runs it until its head is complete.
    private func start(_ target: String, from offset: Int64, error: (Int32) -> StreamError) throws(StreamError) {
        if added { curl_multi_remove_handle(multi, easy); added = false }
        head = ICYText.ResponseHead()
        icy = nil
        pending.removeAll(keepingCapacity: true)
        pendingStart = 0
        paused = false
        finished = nil
        headTooLarge = false
        bodyBytes = 0
        discard = 0
        lastProgress = monotonicNanoseconds()
        ccurl_set_string(easy, CURLOPT_URL, target)
        ccurl_set_string(easy, CURLOPT_RANGE, "\(offset)-")
        guard curl_multi_add_handle(multi, easy) == CURLM_OK else {
            throw StreamError(.internalError, "\(requested): curl_multi_add_handle() failed")
        }
        added = true
        while !(head.complete && head.status >= 200) {
            if let f = finished { throw headError(f, error: error) }
            if let code = pump() { throw error(code) }
        }
        if let m = head.metaInterval, (200..<300).contains(head.status) { icy = ICYText.Deinterleaver(interval: m) }
    }

    private func headError(_ code: CURLcode, error: (Int32) -> StreamError) -> StreamError {
        if headTooLarge {
            return StreamError(.tooLarge, "\(requested): the server's response headers passed \(ICYText.maxHeaderBytes / 1024) KiB")
        }
        return error(HTTPSource.averror(code))
    }

    /// One step of the transfer: runs curl, waits up to 50 ms for the socket when
    /// nothing is buffered. Returns an AVERROR when the transfer must stop here (cancel,
    /// deadline, nothing arriving within the timeout).
    private func pump() -> Int32? {
        if shouldAbort() { return cffmpeg_averror_exit() }
        var running: Int32 = 0
        curl_multi_perform(multi, &running)
        var left: Int32 = 0
        while let msg = curl_multi_info_read(multi, &left) {
            if msg.pointee.msg == CURLMSG_DONE { finished = msg.pointee.data.result }
        }
        if finished == nil && pendingCount == 0 {
            curl_multi_poll(multi, nil, 0, 50, nil)
        }
        if paused { lastProgress = monotonicNanoseconds() }  // waiting for the reader, not the server
        if finished == nil && monotonicNanoseconds() &- lastProgress > timeoutNanoseconds {
            return cffmpeg_averror(ETIMEDOUT)
        }
        return nil
    }

    private var pendingCount: Int { pending.count - pendingStart }

    // MARK: - Reading

    /// Up to `size` bytes of the body; waits (in 50 ms steps) while there are none.
    func read(_ buf: UnsafeMutablePointer<UInt8>, _ size: Int) -> Int32 {
        while pendingCount == 0 {
            if let f = finished { return endCode(f) }
            if let code = pump() { return code }
        }
        let n = min(size, pendingCount)
        pending.withUnsafeBufferPointer { p in buf.update(from: p.baseAddress! + pendingStart, count: n) }
        pendingStart += n
        position += Int64(n)
        if pendingStart == pending.count {
            pending.removeAll(keepingCapacity: true)
            pendingStart = 0
        } else if pendingStart >= HTTPSource.capacity / 2 {
            pending.removeFirst(pendingStart)
            pendingStart = 0
        }
        if paused && pendingCount < HTTPSource.capacity / 2 {
            paused = false
            curl_easy_pause(easy, ccurl_pause_continue)  // may deliver at once, and pause again
        }
        return Int32(n)
    }

    /// The server closed the connection after a body with neither a length nor chunks
    /// (HTTP/1.0's way to end a response, and a dropped radio's): `read` says EIO.
    var closedWithoutLength: Bool { finished == CURLE_OK && !head.chunked && head.contentLength == nil }

    /// How the transfer's end reads: EOF only when the body is known to be whole.
    private func endCode(_ code: CURLcode) -> Int32 {
        guard code == CURLE_OK else { return HTTPSource.averror(code) }
        if head.chunked { return cffmpeg_averror_eof() }
        if let l = head.contentLength { return bodyBytes >= l ? cffmpeg_averror_eof() : cffmpeg_averror(EIO) }
        return cffmpeg_averror(EIO)  // closed without a length: a radio that dropped
    }

    /// Moves to byte `target`: within what is buffered, or with a new ranged request.
    private func seek(to target: Int64) -> Int64 {
        guard target >= 0, length < 0 || target <= length else { return Int64(cffmpeg_averror(EINVAL)) }
        if target == position { return position }
        if target > position && target - position <= Int64(pendingCount) {
            pendingStart += Int(target - position)
            position = target
            return position
        }
        guard seekable else { return Int64(cffmpeg_averror(ENOSYS)) }
        do throws(StreamError) {
            try request(from: target) { code in StreamError(.ioError, "\(requested): seek failed (\(FFmpegCall.describe(code)))") }
        } catch {
            return Int64(cffmpeg_averror(EIO))
        }
        return position
    }

    // MARK: - Callbacks

    private static let headerCallback: ccurl_data_callback = { data, size, count, opaque in
        guard let opaque, let data else { return 0 }
        let me = Unmanaged<HTTPSource>.fromOpaque(opaque).takeUnretainedValue()
        let n = size * count
        guard me.head.take(UnsafeRawBufferPointer(start: data, count: n)) else {
            me.headTooLarge = true
            return 0  // curl ends the transfer (CURLE_WRITE_ERROR)
        }
        me.lastProgress = monotonicNanoseconds()
        return n
    }

    private static let bodyCallback: ccurl_data_callback = { data, size, count, opaque in
        guard let opaque, let data else { return 0 }
        let me = Unmanaged<HTTPSource>.fromOpaque(opaque).takeUnretainedValue()
        return me.body(UnsafeRawBufferPointer(start: data, count: size * count))
    }

    private func body(_ bytes: UnsafeRawBufferPointer) -> Int {
        // A redirect's or an error's body is not audio.
        guard (200..<300).contains(head.status) else { return bytes.count }
        if pendingCount >= HTTPSource.capacity {
            paused = true
            return ccurl_writefunc_pause
        }
        lastProgress = monotonicNanoseconds()
        bodyBytes += Int64(bytes.count)
        func keep(_ b: UnsafeRawBufferPointer) {
            var b = b
            if discard > 0 {
                let d = Int(min(discard, Int64(b.count)))
                discard -= Int64(d)
                b = UnsafeRawBufferPointer(rebasing: b[d...])
            }
            pending.append(contentsOf: b)
        }
        if var d = icy {
            d.feed(bytes, audio: keep)
            icy = d
        } else {
            keep(bytes)
        }
        return bytes.count
    }

    private static let progressCallback: ccurl_progress_callback = { opaque, _, _, _, _ in
        guard let opaque else { return 0 }
        return Unmanaged<HTTPSource>.fromOpaque(opaque).takeUnretainedValue().shouldAbort() ? 1 : 0
    }

    private static let readCallback: @convention(c) (UnsafeMutableRawPointer?, UnsafeMutablePointer<UInt8>?, Int32) -> Int32 = { opaque, buf, size in
        guard let opaque, let buf, size > 0 else { return cffmpeg_averror(EINVAL) }
        return Unmanaged<HTTPSource>.fromOpaque(opaque).takeUnretainedValue().read(buf, Int(size))
    }

    private static let seekCallback: @convention(c) (UnsafeMutableRawPointer?, Int64, Int32) -> Int64 = { opaque, offset, whence in
        guard let opaque else { return Int64(cffmpeg_averror(EINVAL)) }
        let me = Unmanaged<HTTPSource>.fromOpaque(opaque).takeUnretainedValue()
        if whence & AVSEEK_SIZE != 0 { return me.length >= 0 ? me.length : Int64(cffmpeg_averror(ENOSYS)) }
        switch whence & ~AVSEEK_FORCE {
        case SEEK_SET: return me.seek(to: offset)
        case SEEK_CUR: return me.seek(to: me.position &+ offset)
        case SEEK_END where me.length >= 0: return me.seek(to: me.length &+ offset)
        default: return Int64(cffmpeg_averror(ENOSYS))
        }
    }

    // MARK: - Error codes

    /// An HTTP error status as FFmpeg's http protocol reported it.
    static func statusError(_ status: Int) -> Int32 {
        switch status {
        case 400: return cffmpeg_averror_http_bad_request()
        case 401: return cffmpeg_averror_http_unauthorized()
        case 403: return cffmpeg_averror_http_forbidden()
        case 404: return cffmpeg_averror_http_not_found()
        case 400..<500: return cffmpeg_averror_http_other_4xx()
        default: return cffmpeg_averror_http_server_error()
        }
    }

    /// A curl failure as the AVERROR FFmpeg's network protocols gave for it.
    static func averror(_ code: CURLcode) -> Int32 {
        switch code {
        case CURLE_ABORTED_BY_CALLBACK: return cffmpeg_averror_exit()
        case CURLE_OPERATION_TIMEDOUT: return cffmpeg_averror(ETIMEDOUT)
        case CURLE_COULDNT_CONNECT: return cffmpeg_averror(ECONNREFUSED)
        case CURLE_RECV_ERROR, CURLE_SEND_ERROR, CURLE_GOT_NOTHING: return cffmpeg_averror(ECONNRESET)
        default: return cffmpeg_averror(EIO)  // a name that does not resolve, TLS, a broken response
        }
    }
}
