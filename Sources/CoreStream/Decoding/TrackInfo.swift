/// What the engine knows about an opened file.
public struct TrackInfo: Sendable, Equatable {
    /// The path as given.
    public var path: String
    /// FFmpeg's container name, e.g. `"flac"`, `"mov,mp4,m4a,3gp,3g2,mj2"`.
    public var container: String
    /// FFmpeg's decoder name, e.g. `"mp3float"`, `"flac"`, `"aac"`.
    public var codec: String
    /// The source's own sample rate; positions are frames at this rate.
    public var sampleRate: Int
    public var channels: Int
    /// The exact length in source frames, when the container states it or it could be
    /// measured at open; otherwise an estimate (see ``durationIsEstimate``) or nil.
    public var durationFrames: Int64?
    /// True when ``durationFrames`` is FFmpeg's bit-rate estimate (mp3 without a Xing
    /// header, ADTS AAC): playback then runs to the end of the data, whatever it says.
    public var durationIsEstimate: Bool
    /// Bits per second, when known.
    public var bitRate: Int?
    /// Bits per decoded sample for lossless sources (16, 24…), when known.
    public var bitsPerSample: Int?
    /// The device sample format that carries this source without loss and without
    /// waste: S16 for 8/16-bit integer sources, S32 for 24/32-bit, float for lossy
    /// codecs (they decode to float).
    public var preferredDeviceFormat: DeviceSampleFormat
    /// Tags with lower-cased keys (`title`, `artist`, `album`, …), stream tags over container tags.
    public var tags: [String: String]

    public var durationSeconds: Double? {
        durationFrames.map { FrameTime.seconds($0, rate: sampleRate) }
    }
}

/// An interleaved 32-bit float PCM layout: what the decoder delivers and the ring carries.
public struct PCMFormat: Hashable, Sendable, CustomStringConvertible {
    public var sampleRate: Int
    public var channels: Int
    public init(sampleRate: Int, channels: Int) {
        self.sampleRate = sampleRate
        self.channels = channels
    }
    public var description: String { "\(sampleRate) Hz, \(channels) ch" }
}
