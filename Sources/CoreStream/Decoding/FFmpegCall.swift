import CFFmpeg

/// Helpers that turn FFmpeg return codes into ``StreamError``s naming the call.
/// All FFmpeg calls in playd live in this folder.
enum FFmpegCall {
    static let eagain = cffmpeg_averror(EAGAIN)
    static let eof = cffmpeg_averror_eof()
    static let invalidData = cffmpeg_averror_invaliddata()
    static let noPTS = cffmpeg_nopts_value()

    /// FFmpeg's text for an error code (`av_strerror`).
    static func describe(_ code: Int32) -> String {
        var buffer = [CChar](repeating: 0, count: 128)
        cffmpeg_strerror(code, &buffer, buffer.count)
        return String(cString: buffer)
    }

    /// `"<file>: <call>() failed: <FFmpeg's message>"`.
    static func error(_ code: StreamError.Code, file: String, call: String, _ ret: Int32) -> StreamError {
        StreamError(code, "\(file): \(call)() failed: \(describe(ret))")
    }

    /// Finishes a resampler made by `swr_alloc_set_opts2`: mono to N channels at full
    /// level on every channel (as MPD; swresample's default mixes at −3 dB), then
    /// `swr_init`. Frees it and throws when `swr_init` fails.
    static func initResampler(_ swr: OpaquePointer, inChannels: Int, outChannels: Int, file: String) throws(StreamError) {
        if inChannels == 1 && outChannels > 1 {
            var matrix = [Double](repeating: 1, count: outChannels)
            swr_set_matrix(swr, &matrix, 1)
        }
        let ret = swr_init(swr)
        guard ret >= 0 else {
            var f: OpaquePointer? = swr
            swr_free(&f)
            throw error(.unsupportedFormat, file: file, call: "swr_init", ret)
        }
    }

    /// Silences libav*'s own logging once per process; playd reports errors itself.
    static let quietLogging: Void = { cffmpeg_set_log_quiet() }()
}

extension AVRational {
    var num64: Int64 { Int64(num) }
    var den64: Int64 { Int64(den) }
}
