import CFFmpeg
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// "Listen here" (issue 45): what the local output plays, encoded for HTTP listeners.
///
/// Fed by a tap feed (``FeedOutput/init(tapNamed:format:sink:)``): the same frames a
/// Snapcast FIFO gets, when the local device plays them (so music, cross-fades,
/// announcements and the volume, paced by the device or the paced null output), as
/// 48000:16:2. One encoder per format serves every listener of it, and runs only
/// while one listens. Each encoded unit (an Ogg page, a few MP3 frames, a WAV chunk)
/// goes to every listener's own bounded queue; a listener whose queue passes
/// ``maxQueueBytes(_:)`` is dropped (closed), so a stalled phone never slows the others
/// or grows memory. A new listener gets the format's header and the last
/// `bufferMillis` of units at once (its player starts without waiting), then live ones.
///
/// Titles: MP3 listeners that ask get ICY metadata; the Ogg streams (Opus, FLAC) carry
/// them as chained Ogg comments, as MPD's httpd output does for Vorbis and Opus: at a
/// title change the encoder is drained (its last short frame included, so no sample is
/// lost), its logical stream ended (an EOS page), and a new one begins with a new
/// serial and an OpusTags/Vorbis-comment header naming ARTIST and TITLE. Its timestamps
/// go on from the old stream's, so players see one timeline. A listener that joins
/// afterwards gets the new chain's header and only the new chain's backlog.
///
/// Threads: ``push(_:bytes:)`` on the feed thread; ``attach(_:icy:)``, ``Listener/next(max:)``
/// and ``detach(_:)`` on the HTTP connections' threads; ``setTitle(artist:title:)`` on
/// the control thread. `state` is the one lock; a listener's queue has its own.
public final class StreamHub: @unchecked Sendable {
    // @unchecked Sendable: everything mutable is behind `state` or a Listener's lock.

    public enum Format: String, CaseIterable, Sendable {
        case opus, mp3, flac, wav
        /// The HTTP path: `/stream.opus` …
        public var path: String { "/stream." + rawValue }
        public var contentType: String {
            switch self {
            case .opus: return "audio/ogg; codecs=opus"
            case .mp3: return "audio/mpeg"
            case .flac: return "audio/ogg; codecs=flac"
            case .wav: return "audio/wav"
            }
        }
        /// Bytes a second, about (the queue caps scale with it).
        var bytesPerSecond: Int {
            switch self {
            case .opus, .mp3: return 16_000
            case .flac: return 120_000
            case .wav: return 192_000
            }
        }
    }

    /// The PCM the tap delivers.
    public static let pcm = FeedFormat(rate: 48000, bits: 16, channels: 2)
    public let formats: [Format]
    public let maxListeners: Int
    public let bufferMillis: Int

    /// A listener's queue may hold this much before it is dropped: four times the
    /// buffer, at least 64 KiB (a phone on Wi-Fi stalls for a moment and catches up).
    func maxQueueBytes(_ f: Format) -> Int { max(64 * 1024, f.bytesPerSecond * bufferMillis * 4 / 1000) }

    private struct PerFormat {
        var encoder: StreamEncoder
        /// The last `bufferMillis` of units, for a listener that joins.
        var backlog: [[UInt8]] = []
        var backlogBytes = 0
    }
    private struct State {
        var listeners: [ObjectIdentifier: Listener] = [:]
        var encoders: [Format: PerFormat] = [:]
        /// `closeAll` has run: no listener joins after it (the daemon stops, and a
        /// late one would hold its connection's thread, which the stop waits for).
        var closed = false
    }
    private let state = Mutex(State())
    /// What the control thread and the connections read or set (counts, the title,
    /// the last error): its own lock, held for a moment, never while encoding; the
    /// feed thread holds `state` through each encode.
    private struct Shown {
        var listeners = 0
        var dropped = 0
        var lastError: String?
        var tags = StreamTags()
    }
    private let shown = Mutex(Shown())

    /// Told when the first listener joins (true) and the last leaves (false), outside
    /// the hub's locks, on that listener's connection thread: the daemon hands it to the
    /// tap feed (``FeedOutput/setIdleSilence(_:)``), which feeds listeners silence while
    /// nothing plays. Set once by the daemon before the listen server starts.
    private let listening = Mutex<(@Sendable (Bool) -> Void)?>(nil)
    public func onListening(_ handler: @escaping @Sendable (Bool) -> Void) { listening.withLock { $0 = handler } }
    private func tellListening(_ on: Bool) {
        listening.withLock { $0 }?(on)
    }

    public init(formats: [Format], maxListeners: Int, bufferMillis: Int) {
        self.formats = formats
        self.maxListeners = maxListeners
        self.bufferMillis = bufferMillis
    }

    /// Listeners now, listeners dropped for falling behind, the last encoder error.
    public var counts: (listeners: Int, dropped: Int, error: String?) {
        shown.withLock { ($0.listeners, $0.dropped, $0.lastError) }
    }

    /// What plays, for ICY metadata ("Artist - Title") and the Ogg chains' comments;
    /// both nil when stopped. Control thread.
    public func setTitle(artist: String?, title: String?) {
        shown.withLock { $0.tags = StreamTags(artist: artist, title: title) }
    }

    var tags: StreamTags { shown.withLock { $0.tags } }

    /// The formats whose encoder runs now (one has a listener). Tests.
    var runningEncoders: Set<Format> { state.withLock { Set($0.encoders.keys) } }

    public enum AttachError: Error, Equatable { case notEnabled, full, encoder(String) }

    /// A new listener of `format`, its first bytes queued (header and backlog).
    public func attach(_ format: Format, icy: Bool) throws(AttachError) -> Listener {
        guard formats.contains(format) else { throw .notEnabled }
        let result: Result<(Listener, Bool), AttachError> = state.withLock { s in
            guard !s.closed else { return .failure(.full) }
            guard s.listeners.count < maxListeners else { return .failure(.full) }
            if s.encoders[format] == nil {
                do throws(StreamError) {
                    s.encoders[format] = PerFormat(encoder: try StreamEncoder(format, tags: tags))
                } catch {
                    shown.withLock { $0.lastError = error.message }
                    return .failure(.encoder(error.message))
                }
            }
            let l = Listener(hub: self, format: format, icy: icy, cap: maxQueueBytes(format))
            let f = s.encoders[format]!
            l.append(f.encoder.header)
            for unit in f.backlog { l.append(unit) }
            s.listeners[ObjectIdentifier(l)] = l
            let n = s.listeners.count
            shown.withLock { $0.listeners = n }
            return .success((l, n == 1))
        }
        let (l, first) = try result.get()
        if first { tellListening(true) }
        return l
    }

    /// The listener has gone (its connection closed). The last one of a format stops
    /// that format's encoder.
    public func detach(_ l: Listener) {
        l.close()
        let last = state.withLock { s -> Bool in
            guard s.listeners.removeValue(forKey: ObjectIdentifier(l)) != nil else { return false }
            let n = s.listeners.count
            shown.withLock { $0.listeners = n }
            if !s.listeners.values.contains(where: { $0.format == l.format }) { s.encoders[l.format] = nil }
            return n == 0
        }
        if last { tellListening(false) }
    }

    /// Ends every listener (the daemon stops).
    public func closeAll() {
        for l in state.withLock({ s -> [Listener] in s.closed = true; return Array(s.listeners.values) }) { l.close() }
    }

    /// PCM the device played (48000:16:2, little-endian). Feed thread.
    public func push(_ pcm: UnsafeRawPointer, bytes: Int) {
        let now = tags
        state.withLock { s in
            guard !s.listeners.isEmpty else { return }
            for format in Array(s.encoders.keys) {
                var units: [[UInt8]] = []
                do throws(StreamError) {
                    if format.chains, s.encoders[format]!.encoder.tags != now {
                        // A new chain: the old one's last bytes, the new one's header.
                        let old = s.encoders[format]!.encoder
                        units = try old.finish()
                        let next = try StreamEncoder(format, tags: now, startingAt: old.nextPTS)
                        units.append(next.header)
                        s.encoders[format] = PerFormat(encoder: next)
                    }
                    units += try s.encoders[format]!.encoder.encode(pcm, bytes: bytes)
                } catch {
                    shown.withLock { $0.lastError = error.message }
                    continue
                }
                guard !units.isEmpty else { continue }
                let limit = Format.bytesForMillis(format, bufferMillis)
                for unit in units {
                    s.encoders[format]!.backlog.append(unit)
                    s.encoders[format]!.backlogBytes += unit.count
                }
                while s.encoders[format]!.backlogBytes > limit, s.encoders[format]!.backlog.count > 1 {
                    s.encoders[format]!.backlogBytes -= s.encoders[format]!.backlog.removeFirst().count
                }
                for l in s.listeners.values where l.format == format {
                    for unit in units where !l.append(unit) {
                        shown.withLock { $0.dropped += 1 }
                        break
                    }
                }
            }
        }
    }

    /// One HTTP listener: its queue of encoded bytes, and the ICY metadata it asked for.
    public final class Listener: @unchecked Sendable {
        // @unchecked: `queue` is behind its Mutex; the semaphore is thread-safe;
        // `sinceMeta`/`sentTitle` are the connection thread's.
        public let format: Format
        /// ICY metadata every ``metaInterval`` bytes of audio (MP3 only).
        public let icy: Bool
        public static let metaInterval = 8192
        private unowned let hub: StreamHub
        private let cap: Int
        private let queue = Mutex<(bytes: [UInt8], start: Int, closed: Bool)>(([], 0, false))
        private var semaphore = sem_t()
        private var sinceMeta = 0
        private var sentTitle = ""

        init(hub: StreamHub, format: Format, icy: Bool, cap: Int) {
            self.hub = hub
            self.format = format
            self.icy = icy && format == .mp3
            self.cap = cap
            sem_init(&semaphore, 0, 0)
        }
        deinit { sem_destroy(&semaphore) }

        /// Queues a unit; false (and closed) when the queue would pass its cap.
        @discardableResult
        func append(_ unit: [UInt8]) -> Bool {
            let ok = queue.withLock { q -> Bool in
                guard !q.closed else { return true }
                if q.bytes.count - q.start + unit.count > cap {
                    q.closed = true
                    q.bytes = []
                    q.start = 0
                    return false
                }
                if q.start > 64 * 1024 { q.bytes.removeFirst(q.start); q.start = 0 }
                q.bytes += unit
                return true
            }
            sem_post(&semaphore)
            return ok
        }

        public func close() {
            queue.withLock { $0.closed = true }
            sem_post(&semaphore)
        }

        /// Up to `max` bytes to send, waiting for them; nil when the listener is closed
        /// (dropped, or the daemon stops). Connection thread.
        public func next(max: Int) -> [UInt8]? {
            while true {
                let room = icy ? min(max - 1 - 16 * 255, Self.metaInterval - sinceMeta) : max
                let got: [UInt8]?? = queue.withLock { q in
                    if q.closed { return .some(nil) }
                    let n = Swift.min(room, q.bytes.count - q.start)
                    guard n > 0 else { return nil }
                    let chunk = Array(q.bytes[q.start..<q.start + n])
                    q.start += n
                    return .some(chunk)
                }
                if let g = got {
                    guard var bytes = g else { return nil }
                    if icy {
                        sinceMeta += bytes.count
                        if sinceMeta == Self.metaInterval {
                            bytes += metadataBlock()
                            sinceMeta = 0
                        }
                    }
                    return bytes
                }
                var deadline = timespec()
                clock_gettime(CLOCK_REALTIME, &deadline)
                deadline.tv_sec += 1
                _ = sem_timedwait(&semaphore, &deadline)
            }
        }

        /// ICY's block: a length byte (×16), then `StreamTitle='…';` padded with zeros;
        /// a single 0 when the title has not changed since the last block.
        private func metadataBlock() -> [UInt8] {
            let title = hub.tags.icy
            guard title != sentTitle else { return [0] }
            sentTitle = title
            // A quote would end the value early: ICY has no escape for it.
            var text = Array("StreamTitle='\(String(title.map { $0 == "'" ? "’" : $0 }))';".utf8)
            if text.count > 16 * 255 { text = Array(text.prefix(16 * 255)) }
            let blocks = (text.count + 15) / 16
            return [UInt8(blocks)] + text + [UInt8](repeating: 0, count: blocks * 16 - text.count)
        }
    }
}

extension StreamHub.Format {
    static func bytesForMillis(_ f: StreamHub.Format, _ ms: Int) -> Int { f.bytesPerSecond * ms / 1000 }
    /// Ogg formats carry titles as chained streams.
    var chains: Bool { self == .opus || self == .flac }
}

/// The artist and title a listen stream names.
struct StreamTags: Equatable {
    var artist: String?
    var title: String?
    /// ICY's one string: "Artist - Title", or what there is.
    var icy: String { [artist, title].compactMap { $0 }.joined(separator: " - ") }
}

/// One format's encoder: PCM (48000:16:2) in, the container's bytes out in units a
/// listener may start at (Ogg pages, MP3 frames, WAV chunks). FFmpeg's encoders and
/// muxers write into memory through a custom AVIO context. Thread: one at a time (the
/// hub's lock).
final class StreamEncoder: @unchecked Sendable {
    // @unchecked Sendable: used only under the hub's lock, one thread at a time.
    let format: StreamHub.Format
    /// What this chain's comment header names (Ogg), or the tags when it began.
    let tags: StreamTags
    /// What a listener gets first: the container's header (Ogg's header pages, WAV's
    /// RIFF header with the largest sizes, nothing for MP3).
    private(set) var header: [UInt8] = []
    private var output: UnsafeMutablePointer<AVFormatContext>?
    private var context: UnsafeMutablePointer<AVCodecContext>?
    private var frame: UnsafeMutablePointer<AVFrame>?
    private var packet: UnsafeMutablePointer<AVPacket>?
    private var frameSize = 0
    private var planar = false
    /// Interleaved S16 frames waiting to fill an encoder frame.
    private var staged: [Int16] = []
    private var pts: Int64 = 0
    /// What the muxer wrote since the last unit was taken.
    fileprivate var written: [UInt8] = []

    /// The next frame's timestamp, 48 kHz samples from the first chain's start.
    var nextPTS: Int64 { pts }

    /// `startingAt`: the previous chain's end, so a new chain's timestamps go on
    /// (a player sees one timeline, not a jump back to zero).
    init(_ format: StreamHub.Format, tags: StreamTags = StreamTags(), startingAt: Int64 = 0) throws(StreamError) {
        self.format = format
        self.tags = tags
        self.pts = startingAt
        guard format != .wav else {
            header = Self.wavHeader()
            return
        }
        _ = FFmpegCall.quietLogging
        let rate = StreamHub.pcm.rate
        let (codecName, muxer, sampleFormat): (String, String, AVSampleFormat) = switch format {
        case .opus: ("libopus", "ogg", AV_SAMPLE_FMT_S16)
        case .mp3: ("libmp3lame", "mp3", AV_SAMPLE_FMT_S16P)
        case .flac: ("flac", "ogg", AV_SAMPLE_FMT_S16)
        case .wav: ("", "", AV_SAMPLE_FMT_S16)
        }
        guard let codec = avcodec_find_encoder_by_name(codecName) else {
            throw StreamError(.unsupportedCodec, "listen stream: FFmpeg has no \(codecName) encoder")
        }
        var oc: UnsafeMutablePointer<AVFormatContext>?
        guard avformat_alloc_output_context2(&oc, nil, muxer, nil) >= 0, let oc,
              let st = avformat_new_stream(oc, nil), let cc = avcodec_alloc_context3(codec),
              let f = av_frame_alloc(), let p = av_packet_alloc() else {
            throw StreamError(.internalError, "listen stream: setting up \(codecName) failed")
        }
        output = oc; context = cc; frame = f; packet = p
        planar = sampleFormat == AV_SAMPLE_FMT_S16P
        cc.pointee.sample_rate = Int32(rate)
        av_channel_layout_default(&cc.pointee.ch_layout, 2)
        cc.pointee.sample_fmt = sampleFormat
        cc.pointee.time_base = AVRational(num: 1, den: Int32(rate))
        if format != .flac { cc.pointee.bit_rate = 128_000 }
        if (oc.pointee.oformat.pointee.flags & AVFMT_GLOBALHEADER) != 0 { cc.pointee.flags |= Int32(AV_CODEC_FLAG_GLOBAL_HEADER) }
        var ret = avcodec_open2(cc, codec, nil)
        guard ret >= 0 else { throw StreamError(.unsupportedFormat, "listen stream: opening \(codecName) failed: \(FFmpegCall.describe(ret))") }
        frameSize = cc.pointee.frame_size > 0 ? Int(cc.pointee.frame_size) : 1152
        guard avcodec_parameters_from_context(st.pointee.codecpar, cc) >= 0 else {
            throw StreamError(.internalError, "listen stream: codec parameters")
        }
        st.pointee.time_base = cc.pointee.time_base
        // The chain's comment header (OpusTags, or FLAC's Vorbis comment block). Text
        // from tags and radios is outside text: the comment format counts its bytes,
        // so a newline or quote cannot break it; it is held to 1 KiB a field.
        if format.chains {
            if let a = tags.artist { av_dict_set(&st.pointee.metadata, "ARTIST", String(decoding: a.utf8.prefix(1024), as: UTF8.self), 0) }
            if let t = tags.title { av_dict_set(&st.pointee.metadata, "TITLE", String(decoding: t.utf8.prefix(1024), as: UTF8.self), 0) }
        }
        let size: Int32 = 4096
        guard let buffer = av_malloc(Int(size)) else { throw StreamError(.internalError, "listen stream: out of memory") }
        let me = Unmanaged.passUnretained(self).toOpaque()
        oc.pointee.pb = avio_alloc_context(buffer.assumingMemoryBound(to: UInt8.self), size, 1, me, nil, { opaque, data, count in
            guard let opaque, let data, count > 0 else { return 0 }
            let e = Unmanaged<StreamEncoder>.fromOpaque(opaque).takeUnretainedValue()
            e.written.append(contentsOf: UnsafeBufferPointer(start: data, count: Int(count)))
            return count
        }, nil)
        guard oc.pointee.pb != nil else { throw StreamError(.internalError, "listen stream: avio_alloc_context") }
        // Ogg: a page every 100 ms rather than every second (the muxer's default), so a
        // page's wait is not the stream's latency. MP3: no ID3 tag or Xing frame (the
        // stream has no end to describe).
        var options: OpaquePointer?
        if muxer == "ogg" { av_dict_set(&options, "page_duration", "100000", 0) }
        if muxer == "mp3" { av_dict_set(&options, "id3v2_version", "0", 0); av_dict_set(&options, "write_xing", "0", 0) }
        av_dict_set(&options, "flush_packets", "1", 0)
        ret = avformat_write_header(oc, &options)
        av_dict_free(&options)
        guard ret >= 0 else { throw StreamError(.internalError, "listen stream: \(muxer) header: \(FFmpegCall.describe(ret))") }
        avio_flush(oc.pointee.pb)
        header = written
        written = []
    }

    deinit {
        av_frame_free(&frame)
        av_packet_free(&packet)
        avcodec_free_context(&context)
        if let oc = output {
            if let pb = oc.pointee.pb {
                av_free(pb.pointee.buffer)
                var p: UnsafeMutablePointer<AVIOContext>? = pb
                avio_context_free(&p)
                oc.pointee.pb = nil
            }
            avformat_free_context(oc)
        }
    }

    /// WAV with the largest sizes (a stream has no end): players read on.
    static func wavHeader() -> [UInt8] {
        let f = StreamHub.pcm
        func le32(_ v: UInt32) -> [UInt8] { [UInt8(v & 0xff), UInt8(v >> 8 & 0xff), UInt8(v >> 16 & 0xff), UInt8(v >> 24)] }
        func le16(_ v: UInt16) -> [UInt8] { [UInt8(v & 0xff), UInt8(v >> 8)] }
        let blockAlign = UInt16(f.bytesPerFrame)
        return Array("RIFF".utf8) + le32(0xFFFF_FFFF) + Array("WAVEfmt ".utf8) + le32(16) + le16(1) + le16(UInt16(f.channels))
            + le32(UInt32(f.rate)) + le32(UInt32(f.rate) * UInt32(blockAlign)) + le16(blockAlign) + le16(UInt16(f.bits))
            + Array("data".utf8) + le32(0xFFFF_FFFF)
    }

    /// Encodes `bytes` of interleaved S16 stereo; the units the muxer wrote.
    func encode(_ pcm: UnsafeRawPointer, bytes: Int) throws(StreamError) -> [[UInt8]] {
        let count = bytes / 2
        if format == .wav {
            return [Array(UnsafeRawBufferPointer(start: pcm, count: count * 2))]
        }
        staged.append(contentsOf: UnsafeBufferPointer(start: pcm.assumingMemoryBound(to: Int16.self), count: count))
        var units: [[UInt8]] = []
        while staged.count >= frameSize * 2 {
            try send(frames: frameSize)
            staged.removeFirst(frameSize * 2)
            if !written.isEmpty { units.append(written); written = [] }
        }
        return units
    }

    /// Ends this chain: the staged frames (a last short frame), the encoder's delayed
    /// packets, and the muxer's trailer (Ogg's EOS page). The encoder is not used after.
    func finish() throws(StreamError) -> [[UInt8]] {
        guard format != .wav, let cc = context, let p = packet, let oc = output else { return [] }
        if !staged.isEmpty {
            try send(frames: staged.count / 2)
            staged.removeAll()
        }
        var ret = avcodec_send_frame(cc, nil)
        guard ret >= 0 else { throw StreamError(.internalError, "listen stream: draining: \(FFmpegCall.describe(ret))") }
        try writePackets(cc, p, oc)
        ret = av_write_trailer(oc)
        guard ret >= 0 else { throw StreamError(.internalError, "listen stream: trailer: \(FFmpegCall.describe(ret))") }
        avio_flush(oc.pointee.pb)
        defer { written = [] }
        return written.isEmpty ? [] : [written]
    }

    private func send(frames: Int) throws(StreamError) {
        guard let cc = context, let f = frame, let p = packet, let oc = output else { return }
        f.pointee.nb_samples = Int32(frames)
        f.pointee.format = cc.pointee.sample_fmt.rawValue
        f.pointee.sample_rate = cc.pointee.sample_rate
        av_channel_layout_copy(&f.pointee.ch_layout, &cc.pointee.ch_layout)
        var ret = av_frame_get_buffer(f, 0)
        guard ret >= 0 else { throw StreamError(.internalError, "listen stream: av_frame_get_buffer: \(FFmpegCall.describe(ret))") }
        defer { av_frame_unref(f) }
        staged.withUnsafeBufferPointer { src in
            if planar {
                let l = f.pointee.data.0!.withMemoryRebound(to: Int16.self, capacity: frames) { $0 }
                let r = f.pointee.data.1!.withMemoryRebound(to: Int16.self, capacity: frames) { $0 }
                for i in 0..<frames { l[i] = src[2 * i]; r[i] = src[2 * i + 1] }
            } else {
                f.pointee.data.0!.withMemoryRebound(to: Int16.self, capacity: frames * 2) { dst in
                    dst.update(from: src.baseAddress!, count: frames * 2)
                }
            }
        }
        f.pointee.pts = pts
        pts += Int64(frames)
        ret = avcodec_send_frame(cc, f)
        guard ret >= 0 else { throw StreamError(.internalError, "listen stream: avcodec_send_frame: \(FFmpegCall.describe(ret))") }
        try writePackets(cc, p, oc)
        avio_flush(oc.pointee.pb)
    }

    private func writePackets(_ cc: UnsafeMutablePointer<AVCodecContext>, _ p: UnsafeMutablePointer<AVPacket>,
                              _ oc: UnsafeMutablePointer<AVFormatContext>) throws(StreamError) {
        while true {
            var ret = avcodec_receive_packet(cc, p)
            if ret < 0 { break }
            p.pointee.stream_index = 0
            av_packet_rescale_ts(p, cc.pointee.time_base, oc.pointee.streams[0]!.pointee.time_base)
            ret = av_write_frame(oc, p)
            av_packet_unref(p)
            guard ret >= 0 else { throw StreamError(.internalError, "listen stream: av_write_frame: \(FFmpegCall.describe(ret))") }
        }
    }
}
