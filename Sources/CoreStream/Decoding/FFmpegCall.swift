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

    /// Silences libav*'s own logging once per process; playd reports errors itself.
    static let quietLogging: Void = { cffmpeg_set_log_quiet() }()
}

extension AVRational {
    var num64: Int64 { Int64(num) }
    var den64: Int64 { Int64(den) }
}
