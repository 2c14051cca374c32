import CFFmpeg
#if canImport(Glibc)
import Glibc
#endif

/// Radio streams: ICY titles and reconnecting after a dropped connection.
extension AudioDecoder {
    // MARK: - Network streams

    /// Reports a changed ICY title, looking at most 4 times a second (the block is a
    /// string copy out of the http protocol).
    func checkStreamTitle(_ fmt: UnsafeMutablePointer<AVFormatContext>) {
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
    func reconnect(after ret: Int32) throws(StreamError) -> Bool {
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
}
