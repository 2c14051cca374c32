import CFFmpeg
#if canImport(Glibc)
import Glibc
#endif

/// Decodes one audio file on demand, sample-exact, converting to an interleaved
/// `Float` client format (like `ExtAudioFile`'s client data format): with libswresample
/// when it resamples, remixes or meets an unusual sample format, else directly (S16,
/// S32 and float, with swresample's own formulas).
///
/// - Frame 0 is the first real sample: encoder delay is skipped and end padding trimmed
///   where the container says so (LAME/Xing, MP4 edit lists, Opus pre-skip).
/// - ``seek(to:)`` is exact: the next frame delivered is source frame N.
/// - Memory: one packet, one decoded frame and the swresample state (when there is
///   one); nothing grows with the file.
///
/// Thread: one thread at a time (the reader thread once playback starts). Not real-time safe.
public final class AudioDecoder {
    public private(set) var info: TrackInfo
    /// Corrupt packets skipped so far (counted, not fatal).
    public private(set) var corruptPackets = 0
    /// The source frame that the next ``read(into:capacity:)`` delivers first.
    public private(set) var position: Int64 = 0
    /// The client format delivered by ``read(into:capacity:)``.
    public private(set) var outputFormat: PCMFormat

    // FFmpeg state, owned by this object.
    private var formatContext: UnsafeMutablePointer<AVFormatContext>?
    private var codecContext: UnsafeMutablePointer<AVCodecContext>?
    private let packet: UnsafeMutablePointer<AVPacket>
    private let frame: UnsafeMutablePointer<AVFrame>
    private var resampler: OpaquePointer?
    private var stream: UnsafeMutablePointer<AVStream>
    private var streamIndex: Int32
    /// Decoder threads asked for at open (see `init`).
    private let threads: Int
    private var timeBase: AVRational
    /// A network stream's interrupt (nil for a local file): its blocking calls give way
    /// to a command for the reader, an abort, or a deadline.
    let interrupt: StreamInterrupt?
    private let streamOptions: StreamOptions
    /// Called on the reading thread with a network stream's news (set by the engine's
    /// reader when it takes the decoder; by the owner of a decoder read directly).
    public var onStreamEvent: ((StreamEvent) -> Void)?
    /// The last ICY title reported, and when the block was last looked at.
    private var lastTitle: String?
    private var lastTitleCheck: UInt64 = 0
    /// Times a dropped live stream was connected again.
    public private(set) var reconnects = 0
    private let rate: Int

    /// The stream timestamp of source frame 0 (the first sample of a straight decode).
    private var originPTS: Int64 = 0
    /// Frames that must not be delivered: the end of the real audio (end padding trim).
    private var endLimit: Int64?
    /// Frames of decode preroll the codec needs before a seek target.
    private let basePreroll: Int64
    /// What a seek decodes ahead of its target at least (source frames).
    var seekPrerollFrames: Int64 { basePreroll }
    /// Frames are placed by counting decoded samples from an anchor, not by their own
    /// timestamps: FFmpeg 5.1's Ogg demuxer stamps Vorbis packets from a parse of block
    /// sizes that puts a long-to-short transition frame 448 frames late (2048/256-sample
    /// blocks; measured on a 60 s mix with transients: 57 of 337 seeks landed 17 to 448
    /// frames off, and loop and reverse cuts at such frames too). The decoded samples
    /// themselves are continuous, so counting gives the ffmpeg CLI's frame numbers.
    private var placesByCount: Bool
    /// With `placesByCount`: the frame being placed is known to sit where counting says.
    /// True from the first frame after an open; after a seek, from the first frame whose
    /// timestamp agrees with the count from the one before (a misplaced frame never
    /// agrees with either neighbour, and two never follow each other).
    private var anchored = false

    // The decoded frame being consumed.
    private var pendingIndex: Int64 = 0     // source index of frame sample 0
    private var pendingCount = 0            // valid samples in `frame`
    private var pendingOffset = 0           // samples already delivered
    private var nextIndexHint: Int64?       // for frames without timestamps
    private var demuxerAtEOF = false
    private var decoderDrained = false
    private var resamplerDrained = false
    /// swresample was flushed at a read limit: it must restart before more input.
    private var resamplerFlushedAtLimit = false
    private var consecutiveErrors = 0
    /// True between a seek and the next read: seeking there again is a no-op (and keeps
    /// codec state such as AAC's noise RNG identical to a straight decode).
    private var positionedBySeek = false
    /// Timestamp of the first packet read (for the truncation check).
    private var firstPacketPTS: Int64?
    /// End (pts + duration) of the last packet read.
    private var lastPacketEnd: Int64?

    private let inputPlanes: UnsafeMutablePointer<UnsafePointer<UInt8>?>
    private let isPlanar: Bool
    private let bytesPerSample: Int
    private var resampling: Bool { outputFormat.sampleRate != rate }
    /// The decoded sample format while this object converts it to float itself instead
    /// of swresample: same rate, same channel count, and a format whose conversion is
    /// exact (S16, S32 or float, packed or planar). swresample computes the same values
    /// (an integer-to-float conversion times a power of two; the decode tests compare
    /// with the ffmpeg CLI bit for bit) but holds ~90 KiB of state and adds a call per
    /// frame. nil: swresample converts.
    private var directFormat: AVSampleFormat?

    /// Opens `path`, validates it (see ``StreamError/Code``), and prepares to deliver
    /// frames in `format` (default: the source's own rate and channel count).
    ///
    /// Thread: any. Real-time safe: no (file I/O, allocation).
    /// - Parameter threads: decoder threads (frame threading where the codec has it);
    ///   1 for playback, which needs no more, 0 (one per core) for batch work like export.
    ///
    /// An `http://` or `https://` URL is opened as a network stream (``NetworkInput``,
    /// with `stream`'s timeouts): a live one (no length, not seekable) plays forward
    /// from where it is joined and reconnects when it drops.
    public init(path: String, outputFormat requested: PCMFormat? = nil, threads: Int = 1,
                stream streamOptions: StreamOptions = StreamOptions()) throws(StreamError) {
        self.threads = threads
        self.streamOptions = streamOptions
        _ = FFmpegCall.quietLogging
        let remote = NetworkInput.isStreamURL(path)
        let interrupt = remote ? StreamInterrupt(cancel: streamOptions.cancel) : nil
        self.interrupt = interrupt
        let fmt = try Self.openInput(path, interrupt: interrupt, options: streamOptions)
        // From here on, `fmt` is closed by the failure path or by deinit.
        var opened = false
        defer { if !opened { var c: UnsafeMutablePointer<AVFormatContext>? = fmt; MediaInput.close(&c) } }

        interrupt?.deadline = monotonicNanoseconds() + UInt64(max(0.1, min(streamOptions.timeoutSeconds, 3600)) * 1e9)
        var ret = avformat_find_stream_info(fmt, nil)
        interrupt?.deadline = 0
        if ret < 0 {
            if let i = interrupt { throw NetworkInput.error(path, ret, interrupt: i, call: "avformat_find_stream_info") }
            throw StreamError(.corrupt, "\(path): avformat_find_stream_info() failed: \(FFmpegCall.describe(ret))")
        }
        // Live: no length and no seeking (an Icecast mount); an HTTP file with a
        // Content-Length and a duration seeks with Range requests like a local file.
        let live = remote && fmt.pointee.duration <= 0
        let seekable = !remote || (fmt.pointee.pb != nil && fmt.pointee.pb.pointee.seekable != 0)
        let containerName = String(cString: fmt.pointee.iformat.pointee.name)

        var decoderPtr: UnsafePointer<AVCodec>?
        ret = av_find_best_stream(fmt, AVMEDIA_TYPE_AUDIO, -1, -1, &decoderPtr, 0)
        if ret < 0 {
            let streams = Self.describeStreams(fmt)
            if ret == cffmpeg_averror_decoder_not_found() {
                throw StreamError(.unsupportedCodec, "\(path): no decoder for its audio stream (\(streams))")
            }
            if Self.isStillImage(fmt) {
                throw StreamError(.notAudio, "\(path): is an image (\(containerName)), not audio")
            }
            if fmt.pointee.nb_streams == 0 || Self.hasOnlyEmptyAudio(fmt) {
                throw StreamError(.notAudio, "\(path): \(containerName) container with no streams, not audio")
            }
            throw StreamError(.noAudioStream, "\(path): has no audio stream (streams: \(streams))")
        }
        streamIndex = ret
        let st = fmt.pointee.streams[Int(ret)]!
        stream = st
        timeBase = st.pointee.time_base
        for i in 0..<Int(fmt.pointee.nb_streams) where i != Int(ret) {
            fmt.pointee.streams[i]!.pointee.discard = AVDISCARD_ALL
        }
        if av_stream_get_side_data(st, AV_PKT_DATA_ENCRYPTION_INIT_INFO, nil) != nil {
            throw StreamError(.encrypted, "\(path): the audio is encrypted (DRM/CENC) and cannot be decoded")
        }
        guard let decoder = decoderPtr else {
            throw StreamError(.unsupportedCodec, "\(path): no decoder for \(Self.describeStreams(fmt))")
        }

        guard let cc = avcodec_alloc_context3(decoder) else {
            throw StreamError(.internalError, "\(path): avcodec_alloc_context3() returned NULL")
        }
        var codecOwned = false
        defer { if !codecOwned { var c: UnsafeMutablePointer<AVCodecContext>? = cc; avcodec_free_context(&c) } }
        ret = avcodec_parameters_to_context(cc, st.pointee.codecpar)
        guard ret >= 0 else { throw FFmpegCall.error(.corrupt, file: path, call: "avcodec_parameters_to_context", ret) }
        // With pkt_timebase set, libavcodec moves frame timestamps past the samples it
        // skips (encoder delay), so timestamps and sample positions stay consistent.
        cc.pointee.pkt_timebase = st.pointee.time_base
        Self.setThreads(cc, threads)
        ret = avcodec_open2(cc, decoder, nil)
        guard ret >= 0 else { throw FFmpegCall.error(.unsupportedCodec, file: path, call: "avcodec_open2", ret) }

        let sourceRate = Int(cc.pointee.sample_rate)
        let sourceChannels = Int(cc.pointee.ch_layout.nb_channels)
        guard sourceRate > 0, sourceChannels > 0 else {
            throw StreamError(.corrupt, "\(path): audio stream declares \(sourceRate) Hz, \(sourceChannels) channels")
        }
        guard sourceChannels <= 32 else {
            throw StreamError(.unsupportedFormat, "\(path): \(sourceChannels) channels (at most 32 supported)")
        }
        rate = sourceRate

        guard let pkt = av_packet_alloc(), let frm = av_frame_alloc() else {
            throw StreamError(.internalError, "\(path): av_packet_alloc()/av_frame_alloc() returned NULL")
        }
        packet = pkt
        frame = frm
        inputPlanes = .allocate(capacity: 32)
        inputPlanes.initialize(repeating: nil, count: 32)
        formatContext = fmt
        codecContext = cc
        opened = true
        codecOwned = true
        // From here on, deinit frees everything.

        isPlanar = av_sample_fmt_is_planar(cc.pointee.sample_fmt) != 0
        bytesPerSample = Int(av_get_bytes_per_sample(cc.pointee.sample_fmt))

        let codecName = String(cString: decoder.pointee.name)
        basePreroll = Self.preroll(codecID: decoder.pointee.id, stream: st, rate: sourceRate)
        // A live stream's timestamps restart at a reconnect: count frames there too.
        placesByCount = decoder.pointee.id == AV_CODEC_ID_VORBIS || live
        outputFormat = requested ?? PCMFormat(sampleRate: sourceRate, channels: sourceChannels)

        var bits: Int? = nil
        let raw = Int(st.pointee.codecpar.pointee.bits_per_raw_sample)
        if raw > 0 { bits = raw }
        let bitRate = st.pointee.codecpar.pointee.bit_rate > 0
            ? Int(st.pointee.codecpar.pointee.bit_rate)
            : (fmt.pointee.bit_rate > 0 ? Int(fmt.pointee.bit_rate) : nil)

        // Provisional info; the length is settled by `measure()` below.
        info = TrackInfo(path: path, container: containerName, codec: codecName,
                         sampleRate: sourceRate, channels: sourceChannels,
                         durationFrames: nil, durationIsEstimate: true,
                         bitRate: bitRate, bitsPerSample: bits,
                         preferredDeviceFormat: Self.deviceFormat(for: cc.pointee.sample_fmt),
                         tags: Self.readTags(fmt, st), cover: Self.findCover(fmt)?.art)

        try configureResampler()
        info.isSeekable = seekable && !live
        if live {
            info.isLive = true
            info.stationName = NetworkInput.stationName(fmt)
            if let name = info.stationName, info.tags["name"] == nil { info.tags["name"] = name }
            // Frame 0 is the first frame decoded; it stays pending for the first read.
            guard try decodeNextFrame() else {
                throw StreamError(.corrupt, "\(path): no audio frame could be decoded from the stream (\(corruptPackets) bad packets)")
            }
            originPTS = 0
            pendingIndex = 0
            nextIndexHint = Int64(pendingCount)
            anchored = true
            lastTitle = NetworkInput.streamTitle(fmt)
            info.streamTitle = lastTitle
            return
        }
        let measured = try measure()
        info.durationFrames = measured.frames
        info.durationIsEstimate = measured.isEstimate
        // Measuring decoded the tail; a fresh codec makes the decode from frame 0 identical
        // to a straight decode (AAC's noise substitution, for one, carries an RNG state).
        try reopenCodec()
        try seek(to: 0)
    }

    /// A local file through ``MediaInput``, a stream URL through ``NetworkInput``.
    private static func openInput(_ path: String, interrupt: StreamInterrupt?,
                                  options: StreamOptions) throws(StreamError) -> UnsafeMutablePointer<AVFormatContext> {
        if let i = interrupt { return try NetworkInput.open(path, options: options, interrupt: i) }
        return try MediaInput.open(path)
    }

    private static func setThreads(_ cc: UnsafeMutablePointer<AVCodecContext>, _ threads: Int) {
        cc.pointee.thread_count = Int32(max(0, threads))
        if threads != 1 { cc.pointee.thread_type = FF_THREAD_FRAME }
    }

    /// Replaces the codec context with a fresh one (same parameters).
    private func reopenCodec() throws(StreamError) {
        guard let old = codecContext, let codec = old.pointee.codec else { return }
        guard let cc = avcodec_alloc_context3(codec) else {
            throw StreamError(.internalError, "\(info.path): avcodec_alloc_context3() returned NULL")
        }
        var ret = avcodec_parameters_to_context(cc, stream.pointee.codecpar)
        if ret >= 0 {
            cc.pointee.pkt_timebase = stream.pointee.time_base
            Self.setThreads(cc, threads)
            ret = avcodec_open2(cc, codec, nil)
        }
        guard ret >= 0 else {
            var c: UnsafeMutablePointer<AVCodecContext>? = cc
            avcodec_free_context(&c)
            throw FFmpegCall.error(.unsupportedCodec, file: info.path, call: "avcodec_open2", ret)
        }
        var o: UnsafeMutablePointer<AVCodecContext>? = old
        avcodec_free_context(&o)
        codecContext = cc
    }

    deinit {
        if let r = resampler { var s: OpaquePointer? = r; swr_free(&s) }
        var p: UnsafeMutablePointer<AVPacket>? = packet
        av_packet_free(&p)
        var f: UnsafeMutablePointer<AVFrame>? = frame
        av_frame_free(&f)
        var cc = codecContext
        avcodec_free_context(&cc)
        var fc = formatContext
        MediaInput.close(&fc)
        inputPlanes.deallocate()
    }

    // MARK: - Reading

    /// Decodes and converts up to `capacity` frames into `destination` (interleaved,
    /// ``outputFormat``). Returns the number of frames written; 0 means end of stream.
    ///
    /// Thread: the decoder's owner. Real-time safe: no.
    ///
    /// With `limit`, reading stops before source frame `limit` (a loop end or the end of a
    /// reverse block) and the decoder stays there: the next call without a limit goes on
    /// from `limit` exactly. When resampling, what swresample still holds is flushed at
    /// the limit, and the resampler restarts if reading goes on past it.
    public func read(into destination: UnsafeMutablePointer<Float>, capacity: Int, limit: Int64? = nil) throws(StreamError) -> Int {
        var produced = 0
        let channels = outputFormat.channels
        positionedBySeek = false
        if resamplerFlushedAtLimit && limit.map({ position < $0 }) ?? true {
            try configureResampler()
        }
        while produced < capacity {
            if let l = limit, position >= l {
                if resampling && !resamplerFlushedAtLimit {
                    var out: UnsafeMutablePointer<UInt8>? = UnsafeMutableRawPointer(destination + produced * channels)
                        .assumingMemoryBound(to: UInt8.self)
                    let room = capacity - produced
                    let got = Int(max(0, swr_convert(resampler, &out, Int32(room), nil, 0)))
                    produced += got
                    // A full room may leave more to flush on the next call.
                    if got < room { resamplerFlushedAtLimit = true }
                }
                break
            }
            if pendingOffset >= pendingCount {
                if try !decodeNextFrame() {
                    if resampling && !resamplerDrained {
                        // Drain what swresample still holds or the last ~17 frames are lost.
                        var out: UnsafeMutablePointer<UInt8>? = UnsafeMutableRawPointer(destination + produced * channels)
                            .assumingMemoryBound(to: UInt8.self)
                        let got = swr_convert(resampler, &out, Int32(capacity - produced), nil, 0)
                        if got > 0 { produced += Int(got) }
                        if got <= 0 { resamplerDrained = true }
                        continue
                    }
                    break
                }
                continue
            }
            var count = pendingCount - pendingOffset
            let start = pendingIndex + Int64(pendingOffset)
            if let end = endLimit {
                let left = end - start
                if left <= 0 { pendingOffset = pendingCount; decoderDrained = true; demuxerAtEOF = true; continue }
                count = Int(min(Int64(count), left))
            }
            if let l = limit { count = Int(min(Int64(count), max(0, l - start))) }
            let room = capacity - produced
            if resampling {
                // Feed no more input than the output room can take now.
                let fits = Int(FrameTime.rescaleFloor(Int64(room), Int64(rate), Int64(outputFormat.sampleRate))) - 16
                count = min(count, max(fits, 0))
                if count == 0 {
                    // Let swresample hand over what it buffered, into the room left. With
                    // input planes and no samples, not nil: a nil input is a flush, which
                    // ends the stream inside swresample (its tail, then zeros), and the
                    // next input started over: a click at nearly every read's end, 0.77 of
                    // full scale on a 16 kHz clip played at 44.1 kHz (AnnouncementCaptureTests).
                    let planes = isPlanar ? Int(frame.pointee.ch_layout.nb_channels) : 1
                    for p in 0..<planes { inputPlanes[p] = UnsafePointer(frame.pointee.extended_data[p]!) }
                    var out: UnsafeMutablePointer<UInt8>? = UnsafeMutableRawPointer(destination + produced * channels)
                        .assumingMemoryBound(to: UInt8.self)
                    let got = swr_convert(resampler, &out, Int32(room), inputPlanes, 0)
                    if got > 0 { produced += Int(got) }
                    break
                }
            } else {
                count = min(count, room)
            }
            let got = try convert(offset: pendingOffset, count: count,
                                  into: destination + produced * channels, room: room)
            produced += got
            pendingOffset += count
            position = start + Int64(count)
        }
        return produced
    }

    /// Converts `count` samples of the pending frame from `offset`.
    private func convert(offset: Int, count: Int, into out: UnsafeMutablePointer<Float>, room: Int) throws(StreamError) -> Int {
        let channels = Int(frame.pointee.ch_layout.nb_channels)
        if let direct = directFormat {
            if frame.pointee.format == direct.rawValue && channels == outputFormat.channels {
                convertDirectly(direct, offset: offset, count: count, channels: channels, into: out)
                return count
            }
            // The decoder changed its output mid-stream: let swresample handle it.
            try configureResampler(directAllowed: false)
        }
        let planes = isPlanar ? channels : 1
        let stride = isPlanar ? bytesPerSample : bytesPerSample * channels
        for p in 0..<planes {
            inputPlanes[p] = UnsafePointer(frame.pointee.extended_data[p]! + offset * stride)
        }
        var outPtr: UnsafeMutablePointer<UInt8>? = UnsafeMutableRawPointer(out).assumingMemoryBound(to: UInt8.self)
        let got = swr_convert(resampler, &outPtr, Int32(room), inputPlanes, Int32(count))
        if got < 0 { throw FFmpegCall.error(.internalError, file: info.path, call: "swr_convert", got) }
        return Int(got)
    }

    /// `count` frames of the pending frame from `offset`, to interleaved float, with
    /// swresample's formulas: x / 2¹⁵ (S16), x / 2³¹ (S32, the integer rounded to float
    /// first), a copy (float).
    private func convertDirectly(_ format: AVSampleFormat, offset: Int, count: Int, channels: Int,
                                 into out: UnsafeMutablePointer<Float>) {
        let planes = frame.pointee.extended_data!
        @inline(__always)
        func interleave<T>(_ type: T.Type, _ convert: (T) -> Float) {
            if av_sample_fmt_is_planar(format) != 0 {
                for c in 0..<channels {
                    let src = UnsafeRawPointer(planes[c]!).assumingMemoryBound(to: T.self) + offset
                    for i in 0..<count { out[i * channels + c] = convert(src[i]) }
                }
            } else {
                let src = UnsafeRawPointer(planes[0]!).assumingMemoryBound(to: T.self) + offset * channels
                for i in 0..<(count * channels) { out[i] = convert(src[i]) }
            }
        }
        switch format {
        case AV_SAMPLE_FMT_S16, AV_SAMPLE_FMT_S16P:
            interleave(Int16.self) { Float($0) * (1 / 32768) }
        case AV_SAMPLE_FMT_S32, AV_SAMPLE_FMT_S32P:
            interleave(Int32.self) { Float($0) * (1 / 2_147_483_648) }
        default:  // FLT, FLTP
            interleave(Float.self) { $0 }
        }
    }

    /// Decodes the next frame into `frame`, placing it by its timestamp.
    /// Returns false at end of stream.
    private func decodeNextFrame() throws(StreamError) -> Bool {
        // avcodec_receive_frame() unrefs `frame` first, whatever it returns.
        pendingCount = 0
        pendingOffset = 0
        while true {
            // Fetched each time round: a reconnect replaces both.
            guard let cc = codecContext, let fmt = formatContext else { return false }
            var ret = avcodec_receive_frame(cc, frame)
            if ret >= 0 {
                consecutiveErrors = 0
                let n = Int(frame.pointee.nb_samples)
                let ts = frame.pointee.best_effort_timestamp
                var index: Int64
                if ts != FFmpegCall.noPTS {
                    // A timestamp whose frame index does not fit (a hostile header or
                    // packet) cannot be placed: counted and skipped like a bad packet.
                    guard let i = indexForTimestamp(ts) else { corruptPackets += 1; continue }
                    index = i
                    if placesByCount, let hint = nextIndexHint {
                        if anchored {
                            index = hint
                        } else if i == hint {
                            // Two frames in a row agree: neither is a misplaced one.
                            anchored = true
                        }
                    }
                } else if let hint = nextIndexHint {
                    index = hint
                } else {
                    continue  // cannot place it (only right after a seek): it is preroll anyway
                }
                if Int(frame.pointee.ch_layout.nb_channels) != info.channels || Int(frame.pointee.sample_rate) != rate {
                    // A mid-stream format change: count it and skip, as a corrupt packet.
                    corruptPackets += 1
                    continue
                }
                pendingIndex = index
                pendingCount = n
                pendingOffset = 0
                nextIndexHint = index + Int64(n)
                return true
            }
            if ret == FFmpegCall.eof { decoderDrained = true; return false }
            if ret != FFmpegCall.eagain {
                try countCorrupt(ret, call: "avcodec_receive_frame")
                continue
            }
            // The decoder wants input.
            if demuxerAtEOF {
                ret = avcodec_send_packet(cc, nil)   // enter draining mode
                if ret < 0 && ret != FFmpegCall.eof { decoderDrained = true; return false }
                continue
            }
            ret = av_read_frame(fmt, packet)
            if ret < 0 {
                if info.isLive, try reconnect(after: ret) { continue }
                // EOF or a read error at the end: drain the decoder either way.
                demuxerAtEOF = true
                continue
            }
            defer { av_packet_unref(packet) }
            if interrupt != nil { checkStreamTitle(fmt) }
            if packet.pointee.stream_index != streamIndex { continue }
            if packet.pointee.pts != FFmpegCall.noPTS {
                if firstPacketPTS == nil { firstPacketPTS = packet.pointee.pts }
                let (end, overflow) = packet.pointee.pts.addingReportingOverflow(max(0, packet.pointee.duration))
                lastPacketEnd = overflow ? packet.pointee.pts : end
            }
            if av_packet_get_side_data(packet, AV_PKT_DATA_ENCRYPTION_INFO, nil) != nil {
                throw StreamError(.encrypted, "\(info.path): the audio is encrypted (DRM/CENC) and cannot be decoded")
            }
            ret = avcodec_send_packet(cc, packet)
            if ret < 0 && ret != FFmpegCall.eagain {
                try countCorrupt(ret, call: "avcodec_send_packet")
            }
        }
    }

    /// Counts a corrupt packet; too many in a row means the stream is not decodable.
    private func countCorrupt(_ ret: Int32, call: String) throws(StreamError) {
        corruptPackets += 1
        consecutiveErrors += 1
        if consecutiveErrors > 500 {
            throw StreamError(.corrupt, "\(info.path): \(call)() failed \(consecutiveErrors) times in a row: \(FFmpegCall.describe(ret))")
        }
    }

    /// Source frame index of a stream timestamp, relative to frame 0.
    /// nil when it does not fit in ±``FrameTime/maxFrames``: timestamps, time bases and
    /// rates come from the file, and a hostile one must not make the arithmetic trap.
    @inline(__always)
    private func indexForTimestamp(_ ts: Int64) -> Int64? {
        let (delta, overflow) = ts.subtractingReportingOverflow(originPTS)
        guard !overflow, let i = FrameTime.checkedRescale(delta, timeBase.num64 * Int64(rate), timeBase.den64),
              abs(i) <= FrameTime.maxFrames else { return nil }
        return i
    }

    /// Stream timestamp of a source frame index (≥ 0); throws for a time base under
    /// which it does not fit.
    @inline(__always)
    private func timestampForIndex(_ index: Int64) throws(StreamError) -> Int64 {
        let scale = timeBase.num64 * Int64(rate)
        guard scale > 0, index >= 0 else { throw StreamError(.corrupt, "\(info.path): time base \(timeBase.num)/\(timeBase.den) is unusable") }
        let product = index.magnitude.multipliedFullWidth(by: UInt64(timeBase.den64))
        guard product.high < UInt64(scale) else {
            throw StreamError(.corrupt, "\(info.path): frame \(index) has no timestamp under time base \(timeBase.num)/\(timeBase.den)")
        }
        let (offset, overflow) = originPTS.addingReportingOverflow(FrameTime.rescaleFloor(index, timeBase.den64, scale))
        guard !overflow else { throw StreamError(.corrupt, "\(info.path): timestamps out of range") }
        return offset
    }

    // MARK: - Output format

    /// Changes the client format (rate, channels). Takes effect from the current position.
    public func setOutputFormat(_ format: PCMFormat) throws(StreamError) {
        guard format != outputFormat else { return }
        outputFormat = format
        try configureResampler()
    }

    private func configureResampler(directAllowed: Bool = true) throws(StreamError) {
        guard let cc = codecContext else { return }
        if let r = resampler { var s: OpaquePointer? = r; swr_free(&s); resampler = nil }
        resamplerDrained = false
        resamplerFlushedAtLimit = false
        let format = cc.pointee.sample_fmt
        let exact: Bool
        switch format {
        case AV_SAMPLE_FMT_S16, AV_SAMPLE_FMT_S16P, AV_SAMPLE_FMT_S32, AV_SAMPLE_FMT_S32P, AV_SAMPLE_FMT_FLT, AV_SAMPLE_FMT_FLTP:
            exact = true
        default:
            exact = false
        }
        if directAllowed && exact && !resampling && Int(cc.pointee.ch_layout.nb_channels) == outputFormat.channels {
            directFormat = format
            return
        }
        directFormat = nil
        var inLayout = AVChannelLayout()
        if cc.pointee.ch_layout.order == AV_CHANNEL_ORDER_UNSPEC {
            av_channel_layout_default(&inLayout, cc.pointee.ch_layout.nb_channels)
        } else {
            av_channel_layout_copy(&inLayout, &cc.pointee.ch_layout)
        }
        defer { av_channel_layout_uninit(&inLayout) }
        var outLayout = AVChannelLayout()
        if Int(inLayout.nb_channels) == outputFormat.channels {
            av_channel_layout_copy(&outLayout, &inLayout)
        } else {
            av_channel_layout_default(&outLayout, Int32(outputFormat.channels))
        }
        defer { av_channel_layout_uninit(&outLayout) }
        var swr: OpaquePointer?
        let ret = swr_alloc_set_opts2(&swr, &outLayout, AV_SAMPLE_FMT_FLT, Int32(outputFormat.sampleRate),
                                      &inLayout, cc.pointee.sample_fmt, cc.pointee.sample_rate, 0, nil)
        guard ret >= 0, let s = swr else {
            throw FFmpegCall.error(.unsupportedFormat, file: info.path, call: "swr_alloc_set_opts2", ret)
        }
        try FFmpegCall.initResampler(s, inChannels: Int(inLayout.nb_channels), outChannels: outputFormat.channels, file: info.path)
        resampler = s
    }

    // MARK: - Describing

    private static func describeStreams(_ fmt: UnsafeMutablePointer<AVFormatContext>) -> String {
        var parts: [String] = []
        for i in 0..<Int(fmt.pointee.nb_streams) {
            let par = fmt.pointee.streams[i]!.pointee.codecpar!
            let type = av_get_media_type_string(par.pointee.codec_type).map { String(cString: $0) } ?? "unknown"
            let name = String(cString: avcodec_get_name(par.pointee.codec_id))
            parts.append("\(type) \(name)")
        }
        return parts.isEmpty ? "none" : parts.joined(separator: ", ")
    }

    private static func deviceFormat(for f: AVSampleFormat) -> DeviceSampleFormat {
        switch f {
        case AV_SAMPLE_FMT_U8, AV_SAMPLE_FMT_U8P, AV_SAMPLE_FMT_S16, AV_SAMPLE_FMT_S16P: return .int16
        case AV_SAMPLE_FMT_S32, AV_SAMPLE_FMT_S32P: return .int32
        default: return .float32
        }
    }

    /// Audio streams that FFmpeg guessed from the name but could not read a rate or
    /// channel count from: random bytes with an audio extension.
    private static func hasOnlyEmptyAudio(_ fmt: UnsafeMutablePointer<AVFormatContext>) -> Bool {
        var sawAudio = false
        for i in 0..<Int(fmt.pointee.nb_streams) {
            let par = fmt.pointee.streams[i]!.pointee.codecpar!
            guard par.pointee.codec_type == AVMEDIA_TYPE_AUDIO else { return false }
            if par.pointee.sample_rate > 0 && par.pointee.ch_layout.nb_channels > 0 { return false }
            sawAudio = true
        }
        return sawAudio
    }

    private static func isStillImage(_ fmt: UnsafeMutablePointer<AVFormatContext>) -> Bool {
        let name = String(cString: fmt.pointee.iformat.pointee.name)
        if name.hasSuffix("_pipe") || name == "image2" { return true }
        guard fmt.pointee.nb_streams == 1 else { return false }
        let st = fmt.pointee.streams[0]!
        return st.pointee.codecpar.pointee.codec_type == AVMEDIA_TYPE_VIDEO
            && (st.pointee.disposition & AV_DISPOSITION_ATTACHED_PIC) != 0
    }

    /// The first attached picture stream and its art description.
    private static func findCover(_ fmt: UnsafeMutablePointer<AVFormatContext>) -> (stream: UnsafeMutablePointer<AVStream>, art: CoverArt)? {
        for i in 0..<Int(fmt.pointee.nb_streams) {
            let st = fmt.pointee.streams[i]!
            guard (st.pointee.disposition & AV_DISPOSITION_ATTACHED_PIC) != 0, st.pointee.attached_pic.size > 0 else { continue }
            let mime: String
            switch st.pointee.codecpar.pointee.codec_id {
            case AV_CODEC_ID_MJPEG: mime = "image/jpeg"
            case AV_CODEC_ID_PNG: mime = "image/png"
            case AV_CODEC_ID_GIF: mime = "image/gif"
            case AV_CODEC_ID_BMP: mime = "image/bmp"
            case AV_CODEC_ID_WEBP: mime = "image/webp"
            default: mime = "application/octet-stream"
            }
            return (st, CoverArt(mime: mime, size: Int(st.pointee.attached_pic.size)))
        }
        return nil
    }

    /// Tags, format and an approximate duration without opening a codec or measuring:
    /// for listing a queue and indexing a library. nil when the file cannot be read as
    /// media with an audio stream.
    public static func probe(path: String) -> ProbedTrack? {
        _ = FFmpegCall.quietLogging
        guard let fmt = try? MediaInput.open(path) else { return nil }
        var ctx: UnsafeMutablePointer<AVFormatContext>? = fmt
        defer { MediaInput.close(&ctx) }
        guard avformat_find_stream_info(fmt, nil) >= 0 else { return nil }
        let index = av_find_best_stream(fmt, AVMEDIA_TYPE_AUDIO, -1, -1, nil, 0)
        guard index >= 0 else { return nil }
        let duration = fmt.pointee.duration > 0 ? Double(fmt.pointee.duration) / Double(AV_TIME_BASE) : nil
        let stream = fmt.pointee.streams[Int(index)]!
        let par = stream.pointee.codecpar!
        let sampleFormat = AVSampleFormat(rawValue: par.pointee.format)
        let width: String
        if par.pointee.bits_per_raw_sample > 0 {
            width = "\(par.pointee.bits_per_raw_sample)"
        } else if [AV_SAMPLE_FMT_FLT, AV_SAMPLE_FMT_FLTP, AV_SAMPLE_FMT_DBL, AV_SAMPLE_FMT_DBLP].contains(sampleFormat) {
            width = "f"
        } else {
            width = "\(max(8, av_get_bytes_per_sample(sampleFormat) * 8))"
        }
        return ProbedTrack(tags: readTags(fmt, stream), durationSeconds: duration,
                           codec: String(cString: avcodec_get_name(par.pointee.codec_id)),
                           sampleRate: Int(par.pointee.sample_rate), channels: Int(par.pointee.ch_layout.nb_channels),
                           sampleWidth: width)
    }

    /// The embedded cover art's type and bytes, or nil when the file has none.
    /// Opens the file on its own (call it on a control thread, not the reader's).
    public static func coverArt(path: String) throws(StreamError) -> (mime: String, bytes: [UInt8])? {
        try coverPicture(path: path).map { ($0.mime, $0.bytes) }
    }

    /// The cover art with its pixel size (a muxer that embeds it needs the size).
    static func coverPicture(path: String) throws(StreamError) -> (mime: String, bytes: [UInt8], width: Int32, height: Int32)? {
        _ = FFmpegCall.quietLogging
        let fmt = try MediaInput.open(path)
        var ctx: UnsafeMutablePointer<AVFormatContext>? = fmt
        defer { MediaInput.close(&ctx) }
        guard let (st, art) = findCover(fmt) else { return nil }
        if st.pointee.codecpar.pointee.width <= 0 || st.pointee.codecpar.pointee.height <= 0 {
            // An ID3v2 APIC frame carries no pixel size (a FLAC PICTURE block does), and
            // the FLAC and MP4 muxers refuse a picture without one: let libavformat
            // decode the picture to learn it.
            _ = avformat_find_stream_info(fmt, nil)
        }
        let pkt = st.pointee.attached_pic
        return (art.mime, Array(UnsafeBufferPointer(start: pkt.data, count: Int(pkt.size))),
                st.pointee.codecpar.pointee.width, st.pointee.codecpar.pointee.height)
    }

    private static func readTags(_ fmt: UnsafeMutablePointer<AVFormatContext>,
                                 _ st: UnsafeMutablePointer<AVStream>) -> [String: String] {
        var tags: [String: String] = [:]
        for dict in [fmt.pointee.metadata, st.pointee.metadata] {
            var entry: UnsafeMutablePointer<AVDictionaryEntry>? = nil
            while let e = av_dict_get(dict, "", entry, AV_DICT_IGNORE_SUFFIX) {
                tags[String(cString: e.pointee.key).lowercased()] = String(cString: e.pointee.value)
                entry = e
            }
        }
        return tags
    }

    /// Frames decoded ahead of a seek target so the codec state is right at the target:
    /// MP3's bit reservoir spans several frames, AAC and Vorbis overlap windows, Opus
    /// declares `seek_preroll`. PCM and FLAC/ALAC frames are independent.
    private static func preroll(codecID: AVCodecID, stream: UnsafeMutablePointer<AVStream>, rate: Int) -> Int64 {
        switch codecID {
        case AV_CODEC_ID_MP3, AV_CODEC_ID_MP2, AV_CODEC_ID_MP1:
            // main_data_begin reaches up to 511 bytes back: at 32 kbit/s (96-byte frames)
            // that is 6 frames, plus one for the IMDCT overlap. Measured: 4 frames left
            // the first two frames after a seek wrong on a 48 kHz mono VBR file.
            return 1152 * 10
        case AV_CODEC_ID_AAC:
            // AAC-LC needs the previous frame for the MDCT overlap: with three frames a
            // file without noise substitution is bit-exact after every seek (334 of 334
            // targets). Bands coded as noise (PNS; FFmpeg's own encoder turns it on) take
            // their values from the decoder's random generator, whose state only a
            // decode from the start reproduces: no preroll makes those exact.
            return 1024 * 3
        case AV_CODEC_ID_VORBIS:
            return 4096
        case AV_CODEC_ID_OPUS:
            // RFC 7845 asks for at least 80 ms (the declared seek_preroll, 3840), which
            // leaves the CELT state's slow-decaying energy predictor visibly cold:
            // measured on a 60 s mix at 364 seek targets against the CLI's continuous
            // decode, max error 0.078 at 80 ms, 0.0059 at 160 ms, 1.7e-5 at 320 ms,
            // 1.0e-6 at 400 ms, bit-exact from 600 ms. 400 ms keeps errors 100× under
            // the 1e-4 promise for a decode of 20 frames more than 80 ms would take.
            let declared = Int64(stream.pointee.codecpar.pointee.seek_preroll)
            return FrameTime.convert(max(declared, 19_200), from: 48000, to: rate)
        default:
            let name = String(cString: avcodec_get_name(codecID))
            return name.hasPrefix("pcm_") || name == "flac" || name == "alac" || name == "wavpack" ? 0 : 4096
        }
    }

    // MARK: - Seeking

    /// Positions the decoder so that the next frame delivered is source frame `target`
    /// (clamped to the end of the stream).
    ///
    /// FFmpeg seeks land on packet (MP3, AAC), page (Ogg) or frame (FLAC) boundaries
    /// and codecs need warm-up, so: seek to `target − preroll`, flush the codec, decode,
    /// place each frame by its timestamp, and drop the samples before `target`. If the
    /// first frame lands after `target − preroll`, widen the preroll and try again.
    ///
    /// Thread: the decoder's owner. Real-time safe: no.
    public func seek(to target: Int64) throws(StreamError) {
        guard formatContext != nil, codecContext != nil else { return }
        if !info.isSeekable && target != 0 {
            guard target == position else {
                throw StreamError(.notSeekable, "\(info.path): \(info.isLive ? "a live stream" : "the server does not take Range requests, so this stream") cannot seek")
            }
            return
        }
        if info.isLive { return }
        let target = max(0, endLimit.map { min(target, $0) } ?? target)
        if positionedBySeek && target == position { return }
        defer { positionedBySeek = true }
        var preroll = basePreroll
        var attempts = 0
        while true {
            attempts += 1
            let seekFrame = max(0, target - preroll)
            let ts = try timestampForIndex(seekFrame)
            var ret: Int32 = 0
            if seekFrame == 0 {
                // From the very start, read the file afresh rather than seek: after an Ogg
                // seek to the start, Vorbis frames come out in other sizes and with other
                // timestamps than in the straight decode that defined frame 0.
                try restartFromBeginning()
            } else {
                ret = avformat_seek_file(formatContext, streamIndex, Int64.min, ts, ts, 0)
                if ret < 0 {
                    ret = av_seek_frame(formatContext, streamIndex, ts, AVSEEK_FLAG_BACKWARD)
                }
            }
            if ret < 0 {
                // Some demuxers refuse targets in the last frames (FLAC without a seek
                // table: its last frame is shorter). Seek earlier and decode forward.
                if seekFrame > 0 && attempts < 12 {
                    preroll = min(target, max(preroll * 2, Int64(rate) / 2))
                    continue
                }
                throw FFmpegCall.error(.ioError, file: info.path, call: "avformat_seek_file", ret)
            }
            if let c = codecContext { avcodec_flush_buffers(c) }
            pendingCount = 0
            pendingOffset = 0
            nextIndexHint = nil
            anchored = seekFrame == 0  // a fresh decode's first frame is frame 0
            demuxerAtEOF = false
            decoderDrained = false
            consecutiveErrors = 0
            if resampling { try configureResampler() }
            resamplerDrained = false

            guard try decodeNextFrame() else {
                // Nothing at or after the seek point: we are at the end.
                position = target
                return
            }
            if pendingIndex > seekFrame && seekFrame > 0 && attempts < 12 {
                // Landed after where warm-up must begin: widen the preroll and retry.
                preroll = max(preroll * 2, 4096)
                if preroll > target { preroll = target }
                continue
            }
            // Decode forward to the frame that holds `target`, then drop what precedes it.
            while pendingIndex + Int64(pendingCount) <= target {
                guard try decodeNextFrame() else { position = target; return }
            }
            if placesByCount && !anchored && seekFrame > 0 && attempts < 12 {
                // Reached the target before two frames agreed on where they are.
                preroll = min(target, max(preroll * 2, 4096))
                continue
            }
            pendingOffset = Int(max(0, target - pendingIndex))
            position = max(target, pendingIndex)
            return
        }
    }

    /// The frame after the last one, found by decoding: for a track whose length is only
    /// an estimate (MP3 without a Xing header, ADTS AAC), where reverse playback must
    /// start. Seeks a little before the estimate and decodes to the end, stepping back
    /// further while the estimate lies beyond the audio. Leaves the decoder at the end.
    ///
    /// Thread: the decoder's owner. Real-time safe: no.
    public func decodedEnd() throws(StreamError) -> Int64 {
        if !info.durationIsEstimate, let d = info.durationFrames { return d }
        if info.isLive { throw StreamError(.notSeekable, "\(info.path): a live stream has no end to play back from") }
        let scratch = UnsafeMutablePointer<Float>.allocate(capacity: 4096 * outputFormat.channels)
        defer { scratch.deallocate() }
        var back = Int64(rate) * 2
        var from = max(0, (info.durationFrames ?? 0) - back)
        while true {
            try seek(to: from)
            var got: Int64 = 0
            while true {
                let n = try read(into: scratch, capacity: 4096)
                if n == 0 { break }
                got += Int64(n)
            }
            if got > 0 || from == 0 { return position }
            back *= 2
            from = max(0, from - back)
        }
    }

    /// Opens the file and the codec again, so decoding restarts exactly as the straight
    /// decode from the first packet.
    private func restartFromBeginning() throws(StreamError) {
        // The same checks as the first open: the name may lead elsewhere by now.
        let fmt = try Self.openInput(info.path, interrupt: interrupt, options: streamOptions)
        var ctx: UnsafeMutablePointer<AVFormatContext>? = fmt
        let ret = avformat_find_stream_info(fmt, nil)
        guard ret >= 0, Int(streamIndex) < Int(fmt.pointee.nb_streams) else {
            MediaInput.close(&ctx)
            throw FFmpegCall.error(.ioError, file: info.path, call: "avformat_find_stream_info", min(ret, -1))
        }
        var old = formatContext
        MediaInput.close(&old)
        formatContext = fmt
        stream = fmt.pointee.streams[Int(streamIndex)]!
        try reopenCodec()
    }

    // MARK: - Network streams

    /// Reports a changed ICY title, looking at most 4 times a second (the block is a
    /// string copy out of the http protocol).
    private func checkStreamTitle(_ fmt: UnsafeMutablePointer<AVFormatContext>) {
        let now = monotonicNanoseconds()
        guard now &- lastTitleCheck > 250_000_000 else { return }
        lastTitleCheck = now
        let title = NetworkInput.streamTitle(fmt)
        guard title != lastTitle, title != nil else { return }
        lastTitle = title
        onStreamEvent?(.title(title))
    }

    /// A live stream dropped (`ret`, or the server ended it): connects again, with
    /// backoff 1, 2, 4, 8, 8 … s, up to `reconnectAttempts` times. Returns false when
    /// it gave up or a command for the reader broke off the wait (the caller ends the
    /// stream). The codec is kept when the format is the same (a radio switching
    /// bitrate); another rate or channel count ends the stream, as a local track does.
    private func reconnect(after ret: Int32) throws(StreamError) -> Bool {
        guard let interrupt, streamOptions.reconnectAttempts > 0 else { return false }
        func brokenOff() -> Bool {
            interrupt.abort.load(ordering: .relaxed) || interrupt.cancel?.isCancelled == true
                || interrupt.mailbox?.abandoning.load(ordering: .relaxed) == true
        }
        if brokenOff() { return false }
        let cause = ret == FFmpegCall.eof ? "the server ended the stream"
            : NetworkInput.error(info.path, ret, interrupt: interrupt, call: "av_read_frame").message
        for attempt in 1...streamOptions.reconnectAttempts {
            onStreamEvent?(.reconnecting(attempt: attempt, cause: cause))
            let until = monotonicNanoseconds() + UInt64(min(8, 1 << min(attempt - 1, 3))) * 1_000_000_000
            while monotonicNanoseconds() < until {
                if brokenOff() { return false }
                usleep(20_000)
            }
            guard let fmt = try? NetworkInput.open(info.path, options: streamOptions, interrupt: interrupt) else {
                if brokenOff() { return false }
                continue
            }
            var ctx: UnsafeMutablePointer<AVFormatContext>? = fmt
            interrupt.deadline = monotonicNanoseconds() + UInt64(max(0.1, min(streamOptions.timeoutSeconds, 3600)) * 1e9)
            let found = avformat_find_stream_info(fmt, nil)
            interrupt.deadline = 0
            let index = found < 0 ? found : av_find_best_stream(fmt, AVMEDIA_TYPE_AUDIO, -1, -1, nil, 0)
            guard index >= 0, let st = fmt.pointee.streams[Int(index)] else {
                MediaInput.close(&ctx)
                continue
            }
            let par = st.pointee.codecpar!
            guard Int(par.pointee.sample_rate) == rate, Int(par.pointee.ch_layout.nb_channels) == info.channels else {
                MediaInput.close(&ctx)
                logger?("reconnected, but the stream is now \(par.pointee.sample_rate) Hz, \(par.pointee.ch_layout.nb_channels) channels")
                return false
            }
            let sameCodec = par.pointee.codec_id == stream.pointee.codecpar.pointee.codec_id
            var old = formatContext
            MediaInput.close(&old)
            formatContext = fmt
            stream = st
            streamIndex = index
            timeBase = st.pointee.time_base
            for i in 0..<Int(fmt.pointee.nb_streams) where i != Int(index) { fmt.pointee.streams[i]!.pointee.discard = AVDISCARD_ALL }
            if sameCodec { avcodec_flush_buffers(codecContext) } else { try reopenCodec() }
            demuxerAtEOF = false
            decoderDrained = false
            reconnects += 1
            onStreamEvent?(.reconnected)
            return true
        }
        return false
    }

    /// A line for the log from inside the decoder (set by the reader; nil: silent).
    var logger: ((String) -> Void)?

    // MARK: - Measuring

    /// Settles frame 0 and the exact length, and detects truncation.
    ///
    /// The first decoded frame's timestamp defines frame 0 (after the codec's own
    /// encoder-delay skip). When the container states a duration, the last seconds are
    /// decoded once: the end of the last frame is the exact length (the codec trims MP3
    /// and Opus end padding; MP4 edit lists give the clamp), and packets ending well
    /// before the stated end mean the file is truncated.
    /// The longest length taken from an estimate (the bitrate and the size): a week.
    static let longestEstimateSeconds: Int64 = 7 * 86_400

    private func measure() throws(StreamError) -> (frames: Int64?, isEstimate: Bool) {
        guard let fmt = formatContext else { return (nil, true) }
        guard try decodeNextFrame() else {
            throw StreamError(.corrupt, "\(info.path): no audio frame could be decoded (\(corruptPackets) bad packets)")
        }
        let ts = frame.pointee.best_effort_timestamp
        originPTS = ts != FFmpegCall.noPTS ? ts : (firstPacketPTS ?? 0)
        try FileCheck.checkRIFFLength(info.path, container: info.container)

        let estimated = fmt.pointee.duration_estimation_method == AVFMT_DURATION_FROM_BITRATE
        let streamDuration = stream.pointee.duration
        // A file on a server that takes no Range requests cannot be seeked: its tail is
        // reached only by downloading all of it, and the open waited for that (a slow
        // server's file never started; issue 42). Its container's length stands, as an
        // estimate (no truncation check), as MPD plays such a file.
        if estimated || !info.isSeekable || streamDuration == FFmpegCall.noPTS || streamDuration <= 0 {
            // An estimate past a week is a header's word, not a length: a server's
            // Content-Length of 10^12 made it 62,499,999 s (issue 39). Unknown instead.
            if fmt.pointee.duration > 0,
               let frames = FrameTime.checkedRescale(fmt.pointee.duration, Int64(rate), Int64(AV_TIME_BASE)),
               frames <= FrameTime.maxFrames, frames / Int64(rate) <= Self.longestEstimateSeconds {
                return (frames, true)
            }
            return (nil, true)
        }
        // Packets should reach `firstPacket + duration`; frame 0 sits at `start_time`
        // (after the encoder delay), so the real audio ends at most at `start + duration`.
        let streamStart = stream.pointee.start_time != FFmpegCall.noPTS ? stream.pointee.start_time : originPTS
        let startTS = firstPacketPTS ?? streamStart
        // Header values: checked, so a hostile duration is an error and not a trap.
        let (declaredEndTS, o1) = startTS.addingReportingOverflow(streamDuration)
        let (clampTS, o2) = max(streamStart, startTS).addingReportingOverflow(streamDuration)
        guard !o1, !o2, let clamp = indexForTimestamp(clampTS), clamp >= 0 else {
            throw StreamError(.corrupt, "\(info.path): the container declares a duration out of range (\(streamDuration) in \(timeBase.num)/\(timeBase.den))")
        }

        // Decode the tail once: from half a second (and the codec's preroll) before the
        // declared end. It was 2 s until 2026-11-26, which made this decode most of an
        // open and so of play → first frame (2 s of FLAC is 2.3 ms of CPU, of Opus 7.5
        // ms); the seek lands before the last packet either way, and a file cut short
        // still ends before the declared end by more than the tolerance below.
        let tail = Int64(rate) / 2 + basePreroll
        let probeFrom = max(0, clamp - tail)
        var ts0 = try timestampForIndex(probeFrom)
        if probeFrom == 0 { ts0 = min(originPTS, startTS) }
        guard avformat_seek_file(fmt, streamIndex, Int64.min, ts0, ts0, 0) >= 0 else {
            endLimit = clamp
            return (clamp, false)
        }
        avcodec_flush_buffers(codecContext)
        pendingCount = 0; pendingOffset = 0; nextIndexHint = nil; anchored = probeFrom == 0
        demuxerAtEOF = false; decoderDrained = false
        lastPacketEnd = nil
        var lastFrameEnd: Int64 = 0
        while try decodeNextFrame() {
            lastFrameEnd = max(lastFrameEnd, pendingIndex + Int64(pendingCount))
        }
        let packetTolerance = max(Int64(timeBase.den) / Int64(max(timeBase.num, 1)) / 10, 1)  // 0.1 s in stream units
        if lastPacketEnd == nil && probeFrom > 0 {
            // Not one packet from there on: the data ends before the tail begins (an MP4
            // whose sample table points past the end of the file). Before the tail was
            // cut to half a second this went unnoticed for a cut longer than the tail.
            let want = FrameTime.seconds(clamp, rate: rate)
            throw StreamError(.truncated, "\(info.path): truncated: the container declares \(formatSeconds(want)) s of audio but the data ends before \(formatSeconds(FrameTime.seconds(probeFrom, rate: rate))) s")
        }
        if let end = lastPacketEnd, end < declaredEndTS - packetTolerance {
            let have = FrameTime.seconds(max(0, indexForTimestamp(end) ?? 0), rate: rate)
            let want = FrameTime.seconds(clamp, rate: rate)
            throw StreamError(.truncated, "\(info.path): truncated: the container declares \(formatSeconds(want)) s of audio but the data ends at \(formatSeconds(have)) s")
        }
        // MP4 declares the real length in its edit list and FFmpeg 5.1 decodes the end
        // padding past it: clamp. Ogg's last granule position is what the decode ends
        // on, and the declared duration is wrong for a stream that starts before zero
        // (a stream-copied cut of an Opus file: 14,088 frames short for one starting at
        // −14,400), so there the decode's end stands.
        let declaredIsExact = info.container != "ogg"
        let exact = lastFrameEnd > 0 ? (declaredIsExact ? min(lastFrameEnd, clamp) : lastFrameEnd) : clamp
        endLimit = exact
        return (exact, false)
    }
}
