import CFFmpeg
#if canImport(Glibc)
import Glibc
#endif

/// An FFmpeg encoder and muxer writing one audio stream to a file: PCM in WAV, FLAC,
/// or AAC in M4A (with the encoder delay in an edit list, so decoders trim it).
///
/// Takes interleaved float frames and converts them with ``SampleConversion``, the
/// render thread's own conversion. Thread: one at a time.
final class Encoder {
    let name: String
    var fallbacks: [String] = []
    private let path: String
    private var output: UnsafeMutablePointer<AVFormatContext>?
    private var context: UnsafeMutablePointer<AVCodecContext>?
    private let stream: UnsafeMutablePointer<AVStream>
    private let frame: UnsafeMutablePointer<AVFrame>
    private let packet: UnsafeMutablePointer<AVPacket>
    private let channels: Int
    private let sampleFormat: AVSampleFormat
    /// Frames per encoder frame (AAC: 1024; PCM and FLAC take any size up to this).
    private let frameSize: Int
    private let variableSize: Bool
    /// Float frames waiting to fill a whole encoder frame.
    private var staged: [Float] = []
    private var pts: Int64 = 0

    /// Whether the cover art went in (FLAC PICTURE, MP4 `covr`).
    private(set) var coverWritten = false
    /// Why a cover the input has did not go in; nil when it did or there was none.
    private(set) var coverDropped: String?

    init(options: ExportOptions, format: PCMFormat, bits: ExportOptions.Bits, path: String, tags: [String: String],
         cover: (mime: String, bytes: [UInt8], width: Int32, height: Int32)?) throws(StreamError) {
        _ = FFmpegCall.quietLogging
        self.path = path
        channels = format.channels
        func fail(_ call: String, _ ret: Int32) -> StreamError {
            FFmpegCall.error(.ioError, file: options.output, call: call, ret)
        }
        let muxer: String
        var codec: UnsafePointer<AVCodec>?
        var fmt = AV_SAMPLE_FMT_S16
        var rawBits: Int32 = 0
        var tried: [String] = []
        switch options.format {
        case .wav:
            muxer = "wav"
            switch bits {
            case .s16: codec = avcodec_find_encoder(AV_CODEC_ID_PCM_S16LE); fmt = AV_SAMPLE_FMT_S16
            case .s24: codec = avcodec_find_encoder(AV_CODEC_ID_PCM_S24LE); fmt = AV_SAMPLE_FMT_S32; rawBits = 24
            case .f32: codec = avcodec_find_encoder(AV_CODEC_ID_PCM_F32LE); fmt = AV_SAMPLE_FMT_FLT
            }
        case .flac:
            muxer = "flac"
            codec = avcodec_find_encoder(AV_CODEC_ID_FLAC)
            fmt = bits == .s16 ? AV_SAMPLE_FMT_S16 : AV_SAMPLE_FMT_S32
            rawBits = bits == .s16 ? 16 : 24
        case .m4a:
            muxer = "ipod"
            for name in options.aacEncoders {
                if let c = avcodec_find_encoder_by_name(name) { codec = c; break }
                tried.append(name)
            }
            fmt = AV_SAMPLE_FMT_FLTP
        }
        guard let encoder = codec else {
            throw StreamError(.unsupportedCodec, "export: FFmpeg has no encoder for \(options.format.rawValue) (tried \(tried.joined(separator: ", ")))")
        }
        fallbacks = tried
        name = String(cString: encoder.pointee.name)
        sampleFormat = fmt

        var out: UnsafeMutablePointer<AVFormatContext>?
        var ret = avformat_alloc_output_context2(&out, nil, muxer, path)
        guard ret >= 0, let oc = out else { throw fail("avformat_alloc_output_context2", ret) }
        output = oc
        guard let st = avformat_new_stream(oc, nil), let cc = avcodec_alloc_context3(encoder),
              let f = av_frame_alloc(), let pkt = av_packet_alloc() else {
            avformat_free_context(oc)
            throw StreamError(.internalError, "export: out of memory setting up \(name)")
        }
        stream = st
        context = cc
        frame = f
        packet = pkt
        cc.pointee.sample_rate = Int32(format.sampleRate)
        av_channel_layout_default(&cc.pointee.ch_layout, Int32(format.channels))
        cc.pointee.sample_fmt = fmt
        cc.pointee.time_base = AVRational(num: 1, den: Int32(format.sampleRate))
        if rawBits > 0 { cc.pointee.bits_per_raw_sample = rawBits }
        if options.format == .m4a { cc.pointee.bit_rate = Int64(options.bitRate) }
        if (oc.pointee.oformat.pointee.flags & AVFMT_GLOBALHEADER) != 0 {
            cc.pointee.flags |= Int32(AV_CODEC_FLAG_GLOBAL_HEADER)
        }
        ret = avcodec_open2(cc, encoder, nil)
        guard ret >= 0 else { throw StreamError(.unsupportedFormat, "export: avcodec_open2(\(name)) failed: \(FFmpegCall.describe(ret))") }
        variableSize = (encoder.pointee.capabilities & Int32(AV_CODEC_CAP_VARIABLE_FRAME_SIZE)) != 0 || cc.pointee.frame_size == 0
        frameSize = cc.pointee.frame_size > 0 ? Int(cc.pointee.frame_size) : 4096
        ret = avcodec_parameters_from_context(st.pointee.codecpar, cc)
        guard ret >= 0 else { throw fail("avcodec_parameters_from_context", ret) }
        st.pointee.time_base = cc.pointee.time_base
        for (k, v) in tags where !k.hasPrefix("replaygain_") || options.sampleRate == nil {
            av_dict_set(&oc.pointee.metadata, k, v, 0)
        }
        // Cover art as an attached-picture stream, where the container holds one.
        var picture: UnsafeMutablePointer<AVStream>?
        if let art = cover, options.format != .wav,
           let id = art.mime == "image/png" ? AV_CODEC_ID_PNG : art.mime == "image/jpeg" ? AV_CODEC_ID_MJPEG : nil,
           let ps = avformat_new_stream(oc, nil) {
            ps.pointee.codecpar.pointee.codec_type = AVMEDIA_TYPE_VIDEO
            ps.pointee.codecpar.pointee.codec_id = id
            ps.pointee.codecpar.pointee.width = art.width
            ps.pointee.codecpar.pointee.height = art.height
            ps.pointee.disposition = AV_DISPOSITION_ATTACHED_PIC
            ps.pointee.time_base = AVRational(num: 1, den: 90_000)
            picture = ps
        }
        ret = PathBytes.withCPath(path) { avio_open(&oc.pointee.pb, $0, AVIO_FLAG_WRITE) }
        guard ret >= 0 else { throw fail("avio_open", ret) }
        // M4A: the movie timescale defaults to 1000 Hz, and the edit list that trims the
        // encoder delay and the end padding is written in it, so a region came out a few
        // frames off (429,974 frames declared as 429,975; 1,001 as 970). In the track's
        // own rate it is exact to the frame.
        var muxerOptions: OpaquePointer?
        if options.format == .m4a { av_dict_set(&muxerOptions, "movie_timescale", "\(format.sampleRate)", 0) }
        ret = avformat_write_header(oc, &muxerOptions)
        av_dict_free(&muxerOptions)
        guard ret >= 0 else { throw fail("avformat_write_header", ret) }
        if let ps = picture, let art = cover, let pkt = av_packet_alloc() {
            var p: UnsafeMutablePointer<AVPacket>? = pkt
            defer { av_packet_free(&p) }
            ret = av_new_packet(pkt, Int32(art.bytes.count))
            if ret >= 0 {
                art.bytes.withUnsafeBufferPointer { pkt.pointee.data.update(from: $0.baseAddress!, count: $0.count) }
                pkt.pointee.stream_index = ps.pointee.index
                pkt.pointee.flags |= AV_PKT_FLAG_KEY
                ret = av_interleaved_write_frame(oc, pkt)
                coverWritten = ret >= 0
            }
            if !coverWritten { coverDropped = "writing the picture failed: \(FFmpegCall.describe(ret))" }
        } else if let art = cover {
            coverDropped = options.format == .wav
                ? "WAV has no place for a picture"
                : "the picture is \(art.mime); \(options.format.rawValue.uppercased()) takes PNG or JPEG"
        }
    }

    deinit {
        var f: UnsafeMutablePointer<AVFrame>? = frame
        av_frame_free(&f)
        var p: UnsafeMutablePointer<AVPacket>? = packet
        av_packet_free(&p)
        avcodec_free_context(&context)
        if let oc = output {
            if oc.pointee.pb != nil { avio_closep(&oc.pointee.pb) }
            avformat_free_context(oc)
        }
    }

    /// Encodes `frames` interleaved float frames.
    func encode(_ samples: UnsafePointer<Float>, frames: Int) throws(StreamError) {
        if variableSize && staged.isEmpty {
            // PCM and FLAC take any frame count: no staging copy.
            var offset = 0
            while offset < frames {
                let n = min(frameSize, frames - offset)
                try send(samples + offset * channels, frames: n)
                offset += n
            }
            return
        }
        staged.append(contentsOf: UnsafeBufferPointer(start: samples, count: frames * channels))
        let whole = staged.count / channels / frameSize * frameSize
        guard whole > 0 else { return }
        var offset = 0
        while offset < whole {
            try sendStaged(offset: offset, frames: frameSize)
            offset += frameSize
        }
        staged.removeFirst(whole * channels)
    }

    /// Encodes what is left, drains the encoder and writes the trailer.
    func finish() throws(StreamError) {
        let left = staged.count / channels
        if left > 0 { try sendStaged(offset: 0, frames: left) }
        staged.removeAll()
        try drain(flush: true)
        let ret = av_write_trailer(output)
        guard ret >= 0 else { throw FFmpegCall.error(.ioError, file: path, call: "av_write_trailer", ret) }
        guard let oc = output else { return }
        let closed = avio_closep(&oc.pointee.pb)
        guard closed >= 0 else { throw FFmpegCall.error(.ioError, file: path, call: "avio_close", closed) }
    }

    private func sendStaged(offset: Int, frames: Int) throws(StreamError) {
        try staged.withUnsafeBufferPointer { (all) throws(StreamError) in  // `send` does not touch `staged`
            try send(all.baseAddress! + offset * channels, frames: frames)
        }
    }

    private func send(_ src: UnsafePointer<Float>, frames: Int) throws(StreamError) {
        guard let cc = context else { return }
        av_frame_unref(frame)
        frame.pointee.nb_samples = Int32(frames)
        frame.pointee.format = sampleFormat.rawValue
        frame.pointee.sample_rate = cc.pointee.sample_rate
        av_channel_layout_copy(&frame.pointee.ch_layout, &cc.pointee.ch_layout)
        var ret = av_frame_get_buffer(frame, 0)
        guard ret >= 0 else { throw FFmpegCall.error(.internalError, file: path, call: "av_frame_get_buffer", ret) }
        do {
            let n = frames * channels
            switch sampleFormat {
            case AV_SAMPLE_FMT_S16:
                SampleConversion.toInt16(src, UnsafeMutableRawPointer(frame.pointee.data.0!).assumingMemoryBound(to: Int16.self), count: n)
            case AV_SAMPLE_FMT_S32:
                SampleConversion.toInt32(src, UnsafeMutableRawPointer(frame.pointee.data.0!).assumingMemoryBound(to: Int32.self), count: n)
            case AV_SAMPLE_FMT_FLT:
                UnsafeMutableRawPointer(frame.pointee.data.0!).assumingMemoryBound(to: Float.self).update(from: src, count: n)
            default:  // FLTP
                for c in 0..<channels {
                    let plane = UnsafeMutableRawPointer(frame.pointee.extended_data[c]!).assumingMemoryBound(to: Float.self)
                    for i in 0..<frames { plane[i] = src[i * channels + c] }
                }
            }
        }
        frame.pointee.pts = pts
        pts += Int64(frames)
        ret = avcodec_send_frame(cc, frame)
        guard ret >= 0 else { throw FFmpegCall.error(.internalError, file: path, call: "avcodec_send_frame", ret) }
        try drain(flush: false)
    }

    private func drain(flush: Bool) throws(StreamError) {
        guard let cc = context else { return }
        if flush { _ = avcodec_send_frame(cc, nil) }
        while true {
            let ret = avcodec_receive_packet(cc, packet)
            if ret == FFmpegCall.eagain || ret == FFmpegCall.eof { return }
            guard ret >= 0 else { throw FFmpegCall.error(.internalError, file: path, call: "avcodec_receive_packet", ret) }
            av_packet_rescale_ts(packet, cc.pointee.time_base, stream.pointee.time_base)
            packet.pointee.stream_index = stream.pointee.index
            let w = av_interleaved_write_frame(output, packet)
            guard w >= 0 else { throw FFmpegCall.error(.ioError, file: path, call: "av_interleaved_write_frame", w) }
        }
    }
}
