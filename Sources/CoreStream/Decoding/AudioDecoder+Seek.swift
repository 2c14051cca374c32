import CFFmpeg
#if canImport(Glibc)
import Glibc
#endif

/// Exact seeking: the next frame delivered is the one asked for.
extension AudioDecoder {
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
                ret = seekFile(to: ts)
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

    /// Moves the demuxer to a packet at or before timestamp `ts` (as near as it can).
    /// An HTTP FLAC file goes by bytes (``byteSeek(to:)``).
    func seekFile(to ts: Int64) -> Int32 {
        if holdsPacket, let held = heldPacket { av_packet_unref(held); holdsPacket = false }
        if byteSeek(to: ts) { return 0 }
        let ret = avformat_seek_file(formatContext, streamIndex, Int64.min, ts, ts, 0)
        return ret >= 0 ? ret : av_seek_frame(formatContext, streamIndex, ts, AVSEEK_FLAG_BACKWARD)
    }

    /// For a FLAC file over HTTP (byte ranges, a length): an interpolation search on
    /// bytes. Each step reads a few KB after the byte it tries and finds the first
    /// frame header there (``FLACFrameHeader``), until a frame starts at most half a
    /// second before `ts`; the demuxer then goes to that frame's byte. FFmpeg's FLAC
    /// demuxer has no index (without a seek table) and bisects: it read the file's end
    /// again, then each step was a new request whose parser wanted about ten frames (54
    /// KB of a 415 kbit/s FLAC) before it named one. From a server at 4× real time a
    /// seek took 10–14 requests and 1.2–1.9 s; now 0.37 s (MPD: 0.20 s; `scripts/bench-http`). The
    /// frame landed on is kept (``heldPacket``) and decoded first; its timestamp is
    /// checked against the header's, and ``seek(to:)`` decodes forward from it as from
    /// any seek. False for a local file, where bisection costs nothing, for any other
    /// demuxer, or when a step fails (then FFmpeg's own seek runs).
    func byteSeek(to ts: Int64) -> Bool {
        guard interrupt != nil, info.container == "flac", let fmt = formatContext, let pb = fmt.pointee.pb,
              let start = firstPacketPos, let startTS = firstPacketPTS else { return false }
        let size = avio_size(pb)
        let (endTS, overflow) = startTS.addingReportingOverflow(stream.pointee.duration)
        guard size > start, stream.pointee.duration > 0, !overflow, ts >= startTS, ts < endTS else { return false }
        if heldPacket == nil { heldPacket = av_packet_alloc() }
        guard let held = heldPacket else { return false }
        let second = max(1, Int64(timeBase.den) / Int64(max(timeBase.num, 1)))
        // 64 KiB read after each byte tried: a frame of 4,096 samples of 16-bit stereo
        // is at most 16 KiB. A step that finds no header there (a rare larger frame)
        // counts as past the target, and the search goes lower or leaves it to FFmpeg.
        let scratch = UnsafeMutableRawBufferPointer.allocate(byteCount: 65_536, alignment: 1)
        defer { scratch.deallocate() }
        var lo = (pos: start, ts: startTS), hi = (pos: size, ts: endTS)
        for _ in 0..<24 {
            // Where `ts` lies if the bytes between the bounds are spread evenly, less a
            // quarter of a second: landing just before costs a little decoding, just
            // after a step.
            let span = Double(hi.pos - lo.pos) / Double(max(1, hi.ts - lo.ts))
            let guess = Double(lo.pos) + (Double(ts - lo.ts) - Double(second) / 4) * span
            let at = guess.isFinite ? min(max(lo.pos, Int64(max(0, min(guess, Double(Int64.max / 2))))), hi.pos - 1) : lo.pos
            guard let frame = flacFrame(after: at, before: hi.pos, pb: pb, scratch: scratch, within: startTS..<endTS) else {
                // No frame between `at` and the upper bound: the target is before `at`.
                guard at > lo.pos else { return false }
                hi = (at, hi.ts)
                continue
            }
            if frame.ts <= ts && (ts - frame.ts <= second / 2 || frame.pos == lo.pos) {
                return land(on: frame, held: held)
            }
            if frame.ts <= ts {
                guard frame.pos > lo.pos else { return land(on: frame, held: held) }
                lo = frame
            } else {
                guard at > lo.pos else { return false }  // already at the lower bound
                hi = (at, frame.ts)
            }
        }
        return false
    }

    /// The demuxer at the frame `frame` found, with its first packet read and kept;
    /// false if the packet is not that frame (then FFmpeg's own seek runs).
    private func land(on frame: (pos: Int64, ts: Int64), held: UnsafeMutablePointer<AVPacket>) -> Bool {
        guard av_seek_frame(formatContext, -1, frame.pos, AVSEEK_FLAG_BYTE) >= 0 else { return false }
        for _ in 0..<4 {
            guard av_read_frame(formatContext, held) >= 0 else { return false }
            if held.pointee.stream_index == streamIndex && held.pointee.pts != FFmpegCall.noPTS {
                guard held.pointee.pts == frame.ts else { av_packet_unref(held); return false }
                holdsPacket = true
                return true
            }
            av_packet_unref(held)
        }
        return false
    }

    /// The first FLAC frame that starts at or after byte `at` (and before `limit`),
    /// read straight from the connection: its byte and first sample. Nil when none
    /// starts in the 64 KiB after `at`, or its sample is outside `within`.
    private func flacFrame(after at: Int64, before limit: Int64, pb: UnsafeMutablePointer<AVIOContext>,
                           scratch: UnsafeMutableRawBufferPointer, within: Range<Int64>) -> (pos: Int64, ts: Int64)? {
        guard avio_seek(pb, at, SEEK_SET) >= 0, let base = scratch.baseAddress else { return nil }
        // STREAMINFO (the codec's extradata, 34 bytes): bytes 2-3 the largest block size.
        let par = stream.pointee.codecpar!
        let blockSize: Int? = par.pointee.extradata_size >= 34 && par.pointee.extradata != nil
            ? Int(par.pointee.extradata[2]) << 8 | Int(par.pointee.extradata[3]) : nil
        var filled = 0, scanned = 0
        while filled < scratch.count {
            let n = avio_read_partial(pb, base.advanced(by: filled).assumingMemoryBound(to: UInt8.self),
                                      Int32(min(8192, scratch.count - filled)))
            let ended = n <= 0
            if !ended { filled += Int(n) }
            // A header is at most 16 bytes: scan where one fits, all of it at the end.
            let bytes = UnsafeRawBufferPointer(start: base, count: filled)
            let scanTo = ended ? filled : max(scanned, filled - 16)
            var from = scanned
            while let h = FLACFrameHeader.first(in: UnsafeRawBufferPointer(rebasing: bytes[0..<min(filled, scanTo + 16)]), from: from,
                                                streamBlockSize: blockSize),
                  h.offset < scanTo {
                let pos = at + Int64(h.offset)
                if pos >= limit { return nil }
                if within.contains(h.firstSample) { return (pos, h.firstSample) }
                from = h.offset + 1  // a sync code in audio bytes whose CRC happened to fit
            }
            scanned = scanTo
            if ended { break }
        }
        return nil
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
    func restartFromBeginning() throws(StreamError) {
        if holdsPacket, let held = heldPacket { av_packet_unref(held); holdsPacket = false }
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
}
