import CFFmpeg
#if canImport(Glibc)
import Glibc
#endif

/// Describing a file without playing it: its streams, tags, cover art and codec
/// preroll (AudioDecoder.swift opens and decodes; this is what `probe` and the
/// listings read).
extension AudioDecoder {
    // MARK: - Describing

    static func describeStreams(_ fmt: UnsafeMutablePointer<AVFormatContext>) -> String {
        var parts: [String] = []
        for i in 0..<Int(fmt.pointee.nb_streams) {
            let par = fmt.pointee.streams[i]!.pointee.codecpar!
            let type = av_get_media_type_string(par.pointee.codec_type).map { String(cString: $0) } ?? "unknown"
            let name = String(cString: avcodec_get_name(par.pointee.codec_id))
            parts.append("\(type) \(name)")
        }
        return parts.isEmpty ? "none" : parts.joined(separator: ", ")
    }

    static func deviceFormat(for f: AVSampleFormat) -> DeviceSampleFormat {
        switch f {
        case AV_SAMPLE_FMT_U8, AV_SAMPLE_FMT_U8P, AV_SAMPLE_FMT_S16, AV_SAMPLE_FMT_S16P: return .int16
        case AV_SAMPLE_FMT_S32, AV_SAMPLE_FMT_S32P: return .int32
        default: return .float32
        }
    }

    /// Audio streams that FFmpeg guessed from the name but could not read a rate or
    /// channel count from: random bytes with an audio extension.
    static func hasOnlyEmptyAudio(_ fmt: UnsafeMutablePointer<AVFormatContext>) -> Bool {
        var sawAudio = false
        for i in 0..<Int(fmt.pointee.nb_streams) {
            let par = fmt.pointee.streams[i]!.pointee.codecpar!
            guard par.pointee.codec_type == AVMEDIA_TYPE_AUDIO else { return false }
            if par.pointee.sample_rate > 0 && par.pointee.ch_layout.nb_channels > 0 { return false }
            sawAudio = true
        }
        return sawAudio
    }

    static func isStillImage(_ fmt: UnsafeMutablePointer<AVFormatContext>) -> Bool {
        let name = String(cString: fmt.pointee.iformat.pointee.name)
        if name.hasSuffix("_pipe") || name == "image2" { return true }
        guard fmt.pointee.nb_streams == 1 else { return false }
        let st = fmt.pointee.streams[0]!
        return st.pointee.codecpar.pointee.codec_type == AVMEDIA_TYPE_VIDEO
            && (st.pointee.disposition & AV_DISPOSITION_ATTACHED_PIC) != 0
    }

    /// The first attached picture stream and its art description.
    static func findCover(_ fmt: UnsafeMutablePointer<AVFormatContext>) -> (stream: UnsafeMutablePointer<AVStream>, art: CoverArt)? {
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

    static func readTags(_ fmt: UnsafeMutablePointer<AVFormatContext>,
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
    static func preroll(codecID: AVCodecID, stream: UnsafeMutablePointer<AVStream>, rate: Int) -> Int64 {
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
}
