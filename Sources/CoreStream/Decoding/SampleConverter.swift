import CFFmpeg

/// Converts interleaved float frames (the render thread's format) into another rate,
/// channel count and integer width with libswresample: what a feed output (Snapcast's
/// `48000:16:2`) needs when the local device runs at the file's own rate.
///
/// Thread: one thread at a time (a feed thread). Allocates only in `init`.
final class SampleConverter {
    let input: PCMFormat
    let output: FeedFormat
    /// Most input frames one ``convert(_:frames:)`` call takes.
    let maxInputFrames: Int
    private var swr: OpaquePointer?
    private let buffer: UnsafeMutableRawPointer
    private let bufferFrames: Int

    init(input: PCMFormat, output: FeedFormat, maxInputFrames: Int = 4096) throws(StreamError) {
        self.input = input
        self.output = output
        self.maxInputFrames = maxInputFrames
        var inLayout = AVChannelLayout(), outLayout = AVChannelLayout()
        av_channel_layout_default(&inLayout, Int32(input.channels))
        av_channel_layout_default(&outLayout, Int32(output.channels))
        defer { av_channel_layout_uninit(&inLayout); av_channel_layout_uninit(&outLayout) }
        let outFormat = output.bits == 16 ? AV_SAMPLE_FMT_S16 : AV_SAMPLE_FMT_S32
        var s: OpaquePointer?
        let ret = swr_alloc_set_opts2(&s, &outLayout, outFormat, Int32(output.rate),
                                      &inLayout, AV_SAMPLE_FMT_FLT, Int32(input.sampleRate), 0, nil)
        guard ret >= 0, let swr = s else {
            throw FFmpegCall.error(.unsupportedFormat, file: "feed \(output)", call: "swr_alloc_set_opts2", ret)
        }
        try FFmpegCall.initResampler(swr, inChannels: input.channels, outChannels: output.channels, file: "feed \(output)")
        self.swr = swr
        // Room for the largest call: the rate ratio plus swresample's filter delay.
        bufferFrames = Int(FrameTime.rescale(Int64(maxInputFrames), Int64(output.rate), Int64(input.sampleRate))) + 512
        buffer = .allocate(byteCount: bufferFrames * output.bytesPerFrame, alignment: 16)
    }

    deinit {
        swr_free(&swr)
        buffer.deallocate()
    }

    /// Converts up to ``maxInputFrames`` frames; returns the converted bytes (valid until
    /// the next call) and their frame count. With resampling the count follows the rate
    /// ratio, with a few frames held back in the filter until the next call.
    func convert(_ samples: UnsafePointer<Float>, frames: Int) -> (bytes: UnsafeRawPointer, frames: Int) {
        precondition(frames <= maxInputFrames)
        var inPlane: UnsafePointer<UInt8>? = UnsafeRawPointer(samples).assumingMemoryBound(to: UInt8.self)
        var outPlane: UnsafeMutablePointer<UInt8>? = buffer.assumingMemoryBound(to: UInt8.self)
        let got = swr_convert(swr, &outPlane, Int32(bufferFrames), &inPlane, Int32(frames))
        return (UnsafeRawPointer(buffer), Int(max(0, got)))
    }
}
