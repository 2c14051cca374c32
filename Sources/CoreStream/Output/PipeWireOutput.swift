import CPipeWire
#if canImport(Glibc)
import Glibc
#endif

/// `pipewire` / `pipewire:TARGET`: a stream of playd's own on a PipeWire server, through
/// libpipewire (no ALSA plugin in between).
///
/// One connection and one stream for the daemon's life: a seek, a pause, a new track
/// never reconnect (through ALSA's pulse plugin every prepare made a new stream). A
/// track in another rate or channel count switches the stream's format in place (it is
/// deactivated, given the new format and `node.rate`, and activated: the same node), so
/// the graph switches to the track's rate where its `default.clock.allowed-rates`
/// allow (no resampling in playd or PipeWire). MPD's pipewire output makes a new node
/// on a rate change.
///
/// Threads: the render thread writes into a ring that PipeWire's data thread reads in
/// its process callback; they share three frame counters and an eventfd (see
/// `cpipewire.h`). The render thread can take back what the callback has not yet
/// claimed (at most one graph cycle, ~43 ms, is beyond reach), so a pause ramps out at
/// once as on a rewindable card. open/close and stream properties run on the control
/// side under libpipewire's thread-loop lock, which the render thread never takes; a
/// format switch swaps the ring behind a gate the callback checks (it sends silence
/// while the gate is held, and the switch waits for a callback in progress to end).
///
/// When the server goes away (killed, restarted) every render-thread call returns
/// `-ENODEV`: the engine reports the output failed and the daemon's recovery opens it
/// again, which reconnects (as for an unplugged ALSA device).
public final class PipeWireOutput: AudioOutput {
    public let spec: String
    public var isRealTime: Bool { true }
    /// The node to play to, or empty for the default sink.
    public let target: String
    /// The server's socket (`remote=`): a name in the runtime folder or an absolute
    /// path, e.g. a user's `/run/user/1000/pipewire-0` for playd run as a system
    /// service; empty for the usual lookup (PIPEWIRE_REMOTE, else `pipewire-0` in
    /// PIPEWIRE_RUNTIME_DIR or XDG_RUNTIME_DIR).
    public let remote: String
    let bufferTimeMicros: Int
    let periodTimeMicros: Int

    // Control side: made by open, freed by deinit or when the server failed.
    private var connection: OpaquePointer?
    private var pollDescriptors: UnsafeMutablePointer<pollfd>

    public init(spec: String, target: String, remote: String = "", bufferTimeMicros: Int, periodTimeMicros: Int) {
        self.spec = spec
        self.target = target
        self.remote = remote
        self.bufferTimeMicros = bufferTimeMicros
        self.periodTimeMicros = periodTimeMicros
        pollDescriptors = .allocate(capacity: 2)
        pollDescriptors.initialize(repeating: pollfd(), count: 2)
    }

    deinit {
        if let c = connection { playd_pw_free(c) }
        pollDescriptors.deallocate()
    }

    /// A C message buffer's text, up to its NUL.
    private static func text(_ buffer: [CChar]) -> String {
        String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// Whether a PipeWire server answers for this user (the `auto` output's choice).
    public static var serverAnswers: Bool { playd_pw_available() != 0 }

    /// Float first (the graph's own format: 16 and 24-bit samples convert to it
    /// exactly), else what was asked for.
    public func open(_ requested: PCMFormat, preferring: DeviceSampleFormat) throws(StreamError) -> NegotiatedFormat {
        guard requested.sampleRate >= 8000, requested.sampleRate <= 768_000,
              requested.channels >= 1, requested.channels <= 64 else {
            throw StreamError(.outputUnavailable, "pipewire: \(requested.sampleRate) Hz \(requested.channels) ch is out of range")
        }
        var message = [CChar](repeating: 0, count: 256)
        if let c = connection, playd_pw_error(c) != 0 {
            // The server went away: a new connection (the old one's thread loop stops).
            playd_pw_free(c)
            connection = nil
        }
        if connection == nil {
            guard let c = playd_pw_new(target, remote, &message, message.count) else {
                throw StreamError(.outputUnavailable, "pipewire: " + Self.text(message))
            }
            connection = c
            // A new connection (the first, or after the server went away) starts at the
            // volume set last.
            if volume != 1 { _ = playd_pw_set_volume(c, volume) }
        }
        let rate = requested.sampleRate
        let ringFrames = max(256, Int(FrameTime.rescale(Int64(bufferTimeMicros), Int64(rate), 1_000_000)))
        let period = max(64, min(ringFrames / 2, Int(FrameTime.rescale(Int64(periodTimeMicros), Int64(rate), 1_000_000))))
        let format: DeviceSampleFormat = .float32
        let r = playd_pw_open(connection, UInt32(rate), UInt32(requested.channels), Int32(PLAYD_PW_F32),
                              UInt32(ringFrames), &message, message.count)
        guard r == 0 else { throw StreamError(.outputUnavailable, "pipewire: " + Self.text(message)) }
        return NegotiatedFormat(device: target.isEmpty ? "pipewire" : "pipewire:\(target)", pcm: requested,
                                sampleFormat: format, periodFrames: period, bufferFrames: ringFrames,
                                fallbacks: [], canRewind: true)
    }

    public func close() {
        if let c = connection { playd_pw_close(c) }
    }

    public func writable() -> Int {
        guard let c = connection else { return -Int(EBADFD) }
        return playd_pw_writable(c)
    }

    public func wait(frames: Int, wakeDescriptor: Int32, timeoutNanoseconds: Int) -> OutputWaitResult {
        guard let c = connection else { return .error(-EBADFD) }
        let fd = playd_pw_arm(c, frames)
        if fd < 0 {
            let e = playd_pw_error(c)
            return e != 0 ? .error(e) : .ready
        }
        pollDescriptors[0] = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        pollDescriptors[1] = pollfd(fd: wakeDescriptor, events: Int16(POLLIN), revents: 0)
        let ms = Int32(min(timeoutNanoseconds / 1_000_000 + 1, Int(Int32.max)))
        let n = poll(pollDescriptors, 2, ms)
        playd_pw_disarm(c)
        if n < 0 { return errno == EINTR ? .timeout : .error(-errno) }
        if pollDescriptors[1].revents & Int16(POLLIN) != 0 {
            EventFD.drain(wakeDescriptor)
            return .woken
        }
        let e = playd_pw_error(c)
        if e != 0 { return .error(e) }
        return playd_pw_writable(c) >= frames ? .ready : .timeout
    }

    public func write(_ samples: UnsafeRawPointer, frames: Int) -> Int {
        guard let c = connection else { return -Int(EBADFD) }
        return playd_pw_write(c, samples, frames)
    }

    public func delay() -> Int {
        guard let c = connection else { return 0 }
        return playd_pw_delay(c)
    }

    public func drop() {
        guard let c = connection else { return }
        _ = playd_pw_rewind(c, Int.max)
    }

    public func rewindable() -> Int {
        guard let c = connection else { return 0 }
        return playd_pw_rewindable(c)
    }

    public func rewind(_ frames: Int) -> Int {
        guard let c = connection else { return 0 }
        return playd_pw_rewind(c, frames)
    }

    /// The stream runs from open on; nothing waits for a threshold.
    public func startIfPrepared() {}

    /// Nothing to restart: an empty ring is played as silence. What stays is the
    /// server's failure.
    public func recover(_ error: Int) -> Int {
        guard let c = connection else { return -Int(EBADFD) }
        let e = playd_pw_error(c)
        return e != 0 ? Int(e) : 0
    }

    /// The stream's media properties (`media.title`, `media.artist`, `media.album`,
    /// `media.name`), as pw-dump and desktop mixers show them. Control side.
    public func setMedia(artist: String?, title: String?, album: String?) {
        guard let c = connection else { return }
        let media = [artist ?? "", title ?? "", album ?? ""]
        guard media != lastMedia else { return }  // each event would otherwise message the server
        lastMedia = media
        playd_pw_set_media(c, artist, title, album)
    }
    private var lastMedia: [String] = []
    /// The stream's own volume, set by ``setVolume(_:)``. Control side.
    private var volume: Float = 1

    /// The stream's own volume (0…1 amplitude), set now and on every stream made later.
    /// Control side.
    public func setVolume(_ amplitude: Float) throws(StreamError) {
        guard amplitude >= 0, amplitude <= 1 else { throw StreamError(.invalidArgument, "pipewire: volume \(amplitude) is not 0…1") }
        guard let c = connection else { throw StreamError(.outputUnavailable, "pipewire: not connected") }
        volume = amplitude
        let r = playd_pw_set_volume(c, amplitude)
        guard r >= 0 else { throw StreamError(.outputFailed, "pipewire: setting the stream's volume failed (\(String(cString: strerror(-r))))") }
    }

    /// Silence inserted because the ring ran dry mid-cycle. Any thread.
    public var underruns: Int { connection.map { Int(playd_pw_underruns($0)) } ?? 0 }
}
