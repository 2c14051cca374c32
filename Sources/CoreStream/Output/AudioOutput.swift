/// The sample format a device accepts, into which the render thread converts.
public enum DeviceSampleFormat: String, Sendable {
    case float32 = "FLOAT_LE"
    case int32 = "S32_LE"
    case int16 = "S16_LE"

    public var bytesPerSample: Int {
        switch self {
        case .float32, .int32: return 4
        case .int16: return 2
        }
    }
}

/// What an output ended up running at.
public struct NegotiatedFormat: Sendable, Equatable, CustomStringConvertible {
    /// The device (or file) actually opened, e.g. `"default"`, `"plughw:0"`, `"null"`.
    public var device: String
    /// Rate and channel count the render thread delivers.
    public var pcm: PCMFormat
    public var sampleFormat: DeviceSampleFormat
    /// Frames per period: the render thread writes this many at a time.
    public var periodFrames: Int
    /// Frames the device buffer holds.
    public var bufferFrames: Int
    /// Devices tried before this one, with why each failed.
    public var fallbacks: [String]
    /// Whether ``AudioOutput/rewind(_:)`` really takes queued frames back. When it
    /// cannot (ALSA's external plugins, e.g. pulse), the engine keeps no history behind
    /// the ring's read cursor: nothing could be rewound into it.
    public var canRewind: Bool = true

    public var description: String {
        "\(device) \(sampleFormat.rawValue) \(pcm.sampleRate) Hz \(pcm.channels) ch, period \(periodFrames), buffer \(bufferFrames)"
    }
}

extension AudioOutput {
    /// Opens preferring 32-bit float.
    public func open(_ requested: PCMFormat) throws(StreamError) -> NegotiatedFormat {
        try open(requested, preferring: .float32)
    }
}

/// What `wait` reports.
public enum OutputWaitResult: Sendable, Equatable {
    /// At least the requested frames are writable.
    case ready
    /// The wake-up descriptor fired (a command for the render thread).
    case woken
    /// Timed out with nothing to report.
    case timeout
    /// The device reported an error (negative errno).
    case error(Int32)
}

/// A place the render thread writes audio to: an ALSA PCM, a paced null sink, a WAV file.
///
/// The calls mirror a non-blocking ALSA PCM so the render loop is written once.
///
/// Thread safety: ``open(_:)`` and ``close()`` are called by the engine's control side
/// while the render thread is not running; every other method is called only by the
/// render thread. Real-time safety: ``open(_:)`` and ``close()`` no; every other method
/// yes (no allocation, no lock; the only system calls are the device's own).
public protocol AudioOutput: AnyObject {
    /// The spec this output was made from, for reports.
    var spec: String { get }
    /// False for outputs that take audio as fast as it comes (an unpaced WAV file):
    /// the render thread then waits for data instead of writing silence.
    var isRealTime: Bool { get }

    /// Opens the device for `requested`, negotiating what it accepts; `preferring` is
    /// the sample format tried first (the source's own width, so a 16-bit file goes out
    /// as S16: half the bytes, and still bit-exact).
    func open(_ requested: PCMFormat, preferring: DeviceSampleFormat) throws(StreamError) -> NegotiatedFormat
    /// Closes the device. Safe to call when not open.
    func close()

    /// Frames writable now, or a negative errno (`-EPIPE` underrun, `-ESTRPIPE` suspended).
    func writable() -> Int
    /// Sleeps until `frames` are writable, `wakeDescriptor` is readable, or `timeoutNanoseconds`.
    func wait(frames: Int, wakeDescriptor: Int32, timeoutNanoseconds: Int) -> OutputWaitResult
    /// Writes interleaved samples in the negotiated sample format. Returns frames written
    /// or a negative errno.
    func write(_ samples: UnsafeRawPointer, frames: Int) -> Int
    /// Frames written but not yet heard.
    func delay() -> Int
    /// Discards everything queued at once and gets ready for new writes.
    func drop()
    /// Frames that ``rewind(_:)`` can take back now (0 if the device cannot).
    func rewindable() -> Int
    /// Takes back up to `frames` queued frames, newest first; returns how many.
    func rewind(_ frames: Int) -> Int
    /// Starts playback of what is queued if the device waits for more before starting
    /// (a stream shorter than the start threshold).
    func startIfPrepared()
    /// Recovers from a negative errno returned by another call. Returns 0 when the device
    /// is usable again, or the errno that stays (e.g. `-ENODEV`).
    func recover(_ error: Int) -> Int
}
