import CFFmpeg
#if canImport(Glibc)
import Glibc
#endif

/// Measuring a file once it is open: frame 0, the exact length, truncation.
extension AudioDecoder {
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

    func measure() throws(StreamError) -> (frames: Int64?, isEstimate: Bool) {
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
        if holdsPacket, let held = heldPacket { av_packet_unref(held); holdsPacket = false }
        guard byteSeek(to: ts0) || avformat_seek_file(fmt, streamIndex, Int64.min, ts0, ts0, 0) >= 0 else {
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
