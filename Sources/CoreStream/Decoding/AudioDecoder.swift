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
///
/// This file opens and decodes; the other concerns are beside it, one file each:
/// AudioDecoder+Seek (exact seeking), +Measure (frame 0, length, truncation), +Probe
/// (streams, tags, cover art without playing), +Network (ICY titles, reconnecting).
/// The FFmpeg state below is internal to CoreStream so that they can reach it.
public final class AudioDecoder {
    public internal(set) var info: TrackInfo
    /// Corrupt packets skipped so far (counted, not fatal).
    public internal(set) var corruptPackets = 0
    /// The source frame that the next ``read(into:capacity:)`` delivers first.
    public internal(set) var position: Int64 = 0
    /// The client format delivered by ``read(into:capacity:)``.
    public internal(set) var outputFormat: PCMFormat

    // FFmpeg state, owned by this object.
    var formatContext: UnsafeMutablePointer<AVFormatContext>?
    var codecContext: UnsafeMutablePointer<AVCodecContext>?
    let packet: UnsafeMutablePointer<AVPacket>
    let frame: UnsafeMutablePointer<AVFrame>
    var resampler: OpaquePointer?
    var stream: UnsafeMutablePointer<AVStream>
    var streamIndex: Int32
    /// Decoder threads asked for at open (see `init`).
    let threads: Int
    var timeBase: AVRational
    /// A network stream's interrupt (nil for a local file): its blocking calls give way
    /// to a command for the reader, an abort, or a deadline.
    let interrupt: StreamInterrupt?
    let streamOptions: StreamOptions
    /// Called on the reading thread with a network stream's news (set by the engine's
    /// reader when it takes the decoder; by the owner of a decoder read directly).
    public var onStreamEvent: ((StreamEvent) -> Void)?
    /// The last ICY title reported, and when the block was last looked at.
    var lastTitle: String?
    var lastTitleCheck: UInt64 = 0
    /// Times a dropped live stream was connected again.
    public internal(set) var reconnects = 0
    let rate: Int

    /// The stream timestamp of source frame 0 (the first sample of a straight decode).
    var originPTS: Int64 = 0
    /// Frames that must not be delivered: the end of the real audio (end padding trim).
    var endLimit: Int64?
    /// Frames of decode preroll the codec needs before a seek target.
    let basePreroll: Int64
    /// What a seek decodes ahead of its target at least (source frames).
    var seekPrerollFrames: Int64 { basePreroll }
    /// Frames are placed by counting decoded samples from an anchor, not by their own
    /// timestamps: FFmpeg 5.1's Ogg demuxer stamps Vorbis packets from a parse of block
    /// sizes that puts a long-to-short transition frame 448 frames late (2048/256-sample
    /// blocks; measured on a 60 s mix with transients: 57 of 337 seeks landed 17 to 448
    /// frames off, and loop and reverse cuts at such frames too). The decoded samples
    /// themselves are continuous, so counting gives the ffmpeg CLI's frame numbers.
    var placesByCount: Bool
    /// With `placesByCount`: the frame being placed is known to sit where counting says.
    /// True from the first frame after an open; after a seek, from the first frame whose
    /// timestamp agrees with the count from the one before (a misplaced frame never
    /// agrees with either neighbour, and two never follow each other).
    var anchored = false

    // The decoded frame being consumed.
    var pendingIndex: Int64 = 0     // source index of frame sample 0
    var pendingCount = 0            // valid samples in `frame`
    var pendingOffset = 0           // samples already delivered
    var nextIndexHint: Int64?       // for frames without timestamps
    var demuxerAtEOF = false
    var decoderDrained = false
    var resamplerDrained = false
    /// swresample was flushed at a read limit: it must restart before more input.
    var resamplerFlushedAtLimit = false
    var consecutiveErrors = 0
    /// True between a seek and the next read: seeking there again is a no-op (and keeps
    /// codec state such as AAC's noise RNG identical to a straight decode).
    var positionedBySeek = false
    /// Timestamp of the first packet read (for the truncation check).
    var firstPacketPTS: Int64?
    /// Byte offset of the first packet read: where the audio starts, for a seek by
    /// bytes (``byteSeek(to:)``).
    var firstPacketPos: Int64?
    /// A packet a byte seek read to learn where it landed, decoded before the next
    /// one read (allocated by the first such seek).
    var heldPacket: UnsafeMutablePointer<AVPacket>?
    var holdsPacket = false
    /// End (pts + duration) of the last packet read.
    var lastPacketEnd: Int64?

    let inputPlanes: UnsafeMutablePointer<UnsafePointer<UInt8>?>
    let isPlanar: Bool
    let bytesPerSample: Int
    var resampling: Bool { outputFormat.sampleRate != rate }
    /// The decoded sample format while this object converts it to float itself instead
    /// of swresample: same rate, same channel count, and a format whose conversion is
    /// exact (S16, S32 or float, packed or planar). swresample computes the same values
    /// (an integer-to-float conversion times a power of two; the decode tests compare
    /// with the ffmpeg CLI bit for bit) but holds ~90 KiB of state and adds a call per
    /// frame. nil: swresample converts.
    var directFormat: AVSampleFormat?

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
        if raw > 0 {
            bits = raw
        } else if av_get_exact_bits_per_sample(decoder.pointee.id) > 0, Self.deviceFormat(for: cc.pointee.sample_fmt) != .float32 {
            // Integer PCM (WAV, AIFF) leaves the raw width unset: the stored one is the
            // source's (MPD says 44100:16:2 for a 16-bit WAV; float PCM stays "f").
            let coded = Int(st.pointee.codecpar.pointee.bits_per_coded_sample)
            bits = (1...32).contains(coded) ? coded : nil
        }
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
    static func openInput(_ path: String, interrupt: StreamInterrupt?,
                                  options: StreamOptions) throws(StreamError) -> UnsafeMutablePointer<AVFormatContext> {
        if let i = interrupt { return try NetworkInput.open(path, options: options, interrupt: i) }
        return try MediaInput.open(path)
    }

    static func setThreads(_ cc: UnsafeMutablePointer<AVCodecContext>, _ threads: Int) {
        cc.pointee.thread_count = Int32(max(0, threads))
        if threads != 1 { cc.pointee.thread_type = FF_THREAD_FRAME }
    }

    /// Replaces the codec context with a fresh one (same parameters).
    func reopenCodec() throws(StreamError) {
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
        var h = heldPacket
        av_packet_free(&h)
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
    func convert(offset: Int, count: Int, into out: UnsafeMutablePointer<Float>, room: Int) throws(StreamError) -> Int {
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
    func convertDirectly(_ format: AVSampleFormat, offset: Int, count: Int, channels: Int,
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
    func decodeNextFrame() throws(StreamError) -> Bool {
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
            if holdsPacket, let held = heldPacket {
                holdsPacket = false
                av_packet_move_ref(packet, held)
                ret = 0
            } else {
                ret = av_read_frame(fmt, packet)
            }
            if ret < 0 {
                // A response without a length that the server ended cleanly (a TTS clip
                // sent chunked, 3 s of it played for 18 s when reconnected) is the end
                // of the track; only a broken connection is reconnected.
                if info.isLive, !MediaInput.endedCleanly(fmt), try reconnect(after: ret) { continue }
                // EOF or a read error at the end: drain the decoder either way.
                demuxerAtEOF = true
                continue
            }
            defer { av_packet_unref(packet) }
            if interrupt != nil { checkStreamTitle(fmt) }
            if packet.pointee.stream_index != streamIndex { continue }
            if packet.pointee.pts != FFmpegCall.noPTS {
                if firstPacketPTS == nil {
                    firstPacketPTS = packet.pointee.pts
                    if packet.pointee.pos >= 0 { firstPacketPos = packet.pointee.pos }
                }
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
    func countCorrupt(_ ret: Int32, call: String) throws(StreamError) {
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
    func indexForTimestamp(_ ts: Int64) -> Int64? {
        let (delta, overflow) = ts.subtractingReportingOverflow(originPTS)
        guard !overflow, let i = FrameTime.checkedRescale(delta, timeBase.num64 * Int64(rate), timeBase.den64),
              abs(i) <= FrameTime.maxFrames else { return nil }
        return i
    }

    /// Stream timestamp of a source frame index (≥ 0); throws for a time base under
    /// which it does not fit.
    @inline(__always)
    func timestampForIndex(_ index: Int64) throws(StreamError) -> Int64 {
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

    func configureResampler(directAllowed: Bool = true) throws(StreamError) {
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

    /// A line for the log from inside the decoder (set by the reader; nil: silent).
    var logger: ((String) -> Void)?
}
