import CALSA
#if canImport(Glibc)
import Glibc
#endif

/// Playback through an ALSA PCM (`alsa:DEVICE`), with a fallback chain.
///
/// Opens non-blocking and waits with `poll()` on the PCM's descriptors plus the render
/// thread's wake-up eventfd, so a command reaches the render thread at once even with a
/// long buffer. All ALSA calls in playd live in this folder.
public final class ALSAOutput: AudioOutput {
    public let spec: String
    public var isRealTime: Bool { true }

    /// Devices to try in order, e.g. `["hw:0", "plughw:0", "default"]`.
    public let chain: [String]
    /// Requested device buffer and period, microseconds.
    public let bufferTimeMicros: Int
    public let periodTimeMicros: Int

    // Owned by the control side while closed, by the render thread while open.
    private var pcm: OpaquePointer?
    private var pollDescriptors: UnsafeMutablePointer<pollfd>
    private var pollCount = 0
    private var negotiated: NegotiatedFormat?
    /// Whether snd_pcm_rewind really takes frames back. External plugins (ioplug and
    /// extplug, e.g. the pulse plugin) accept a rewind but have already handed the
    /// frames on: measured here, a pause through pulse then repeated 0.48 s of audio.
    private var canRewind = false
    /// ALSA's pulse plugin: its prepare disconnects the PulseAudio stream (the server
    /// drops what it holds) and connects a new one, so a drop before it (a cork and a
    /// flush, two more round trips to the server) buys nothing. Prepared alone, a seek's
    /// reset took 0.9–1.8 ms p50 on five codecs where drop and prepare took 1.4–3.0
    /// (`scripts/bench-control`, `device_reset_ms`, 2026-11-26). Every other device is
    /// dropped first: a running sound card refuses to be prepared (EBUSY), and
    /// PipeWire's plugin keeps its stream.
    private var preparesByReconnecting = false

    public init(spec: String, chain: [String], bufferTimeMicros: Int = 500_000, periodTimeMicros: Int = 125_000) {
        precondition(!chain.isEmpty)
        self.spec = spec
        self.chain = chain
        self.bufferTimeMicros = bufferTimeMicros
        self.periodTimeMicros = periodTimeMicros
        pollDescriptors = .allocate(capacity: 17)
        pollDescriptors.initialize(repeating: pollfd(), count: 17)
        calsa_silence_library_errors()
    }

    deinit {
        close()
        pollDescriptors.deallocate()
    }

    /// The usual fallback chain for a device name: `hw:X` → `plughw:X` → `default`;
    /// any other name → that name, then `default`.
    public static func fallbackChain(for device: String) -> [String] {
        var chain = [device]
        if device.hasPrefix("hw:") { chain.append("plug" + device) }
        if device != "default" { chain.append("default") }
        return chain
    }

    public func open(_ requested: PCMFormat, preferring: DeviceSampleFormat) throws(StreamError) -> NegotiatedFormat {
        close()
        var failures: [String] = []
        for device in chain {
            do {
                var result = try openDevice(device, requested, preferring)
                result.fallbacks = failures
                negotiated = result
                // The open PCM no longer needs alsa-lib's parsed configuration tree;
                // the next snd_pcm_open reads it again. (The engine trims the heap
                // once a play has opened its output and file.)
                _ = snd_config_update_free_global()
                return result
            } catch {
                failures.append("\(device): \(error.message)")
            }
        }
        throw StreamError(.outputUnavailable, "no ALSA device could be opened: " + failures.joined(separator: "; "))
    }

    private func check(_ ret: Int32, _ call: String, _ device: String) throws(StreamError) {
        if ret < 0 {
            throw StreamError(.outputUnavailable, "\(call)() failed: \(String(cString: snd_strerror(ret)))")
        }
    }

    private func openDevice(_ device: String, _ requested: PCMFormat, _ preferred: DeviceSampleFormat) throws(StreamError) -> NegotiatedFormat {
        var handle: OpaquePointer?
        try check(snd_pcm_open(&handle, device, SND_PCM_STREAM_PLAYBACK, SND_PCM_NONBLOCK), "snd_pcm_open", device)
        guard let pcm = handle else { throw StreamError(.outputUnavailable, "snd_pcm_open() returned no handle") }
        var ok = false
        defer { if !ok { snd_pcm_close(pcm) } }

        var hwp: OpaquePointer?
        try check(snd_pcm_hw_params_malloc(&hwp), "snd_pcm_hw_params_malloc", device)
        defer { snd_pcm_hw_params_free(hwp) }
        try check(snd_pcm_hw_params_any(pcm, hwp), "snd_pcm_hw_params_any", device)
        try check(snd_pcm_hw_params_set_access(pcm, hwp, SND_PCM_ACCESS_RW_INTERLEAVED), "snd_pcm_hw_params_set_access", device)

        // The source's own width first, then float, then the integer formats DACs take.
        let all: [(DeviceSampleFormat, snd_pcm_format_t)] = [
            (.float32, SND_PCM_FORMAT_FLOAT_LE), (.int32, SND_PCM_FORMAT_S32_LE), (.int16, SND_PCM_FORMAT_S16_LE),
        ]
        let candidates = all.filter { $0.0 == preferred } + all.filter { $0.0 != preferred }
        guard let chosen = candidates.first(where: { snd_pcm_hw_params_test_format(pcm, hwp, $0.1) == 0 }) else {
            throw StreamError(.outputUnavailable, "snd_pcm_hw_params_test_format(): none of FLOAT_LE, S32_LE, S16_LE accepted")
        }
        try check(snd_pcm_hw_params_set_format(pcm, hwp, chosen.1), "snd_pcm_hw_params_set_format", device)

        var channels = UInt32(requested.channels)
        if snd_pcm_hw_params_set_channels(pcm, hwp, channels) < 0 {
            try check(snd_pcm_hw_params_set_channels_near(pcm, hwp, &channels), "snd_pcm_hw_params_set_channels_near", device)
        }
        // Never let a hw: device resample behind our back; plug devices may.
        if device.hasPrefix("hw:") { _ = snd_pcm_hw_params_set_rate_resample(pcm, hwp, 0) }
        var rate = UInt32(requested.sampleRate)
        var dir: Int32 = 0
        try check(snd_pcm_hw_params_set_rate_near(pcm, hwp, &rate, &dir), "snd_pcm_hw_params_set_rate_near", device)
        var bufferTime = UInt32(bufferTimeMicros)
        try check(snd_pcm_hw_params_set_buffer_time_near(pcm, hwp, &bufferTime, &dir), "snd_pcm_hw_params_set_buffer_time_near", device)
        var periodTime = UInt32(periodTimeMicros)
        try check(snd_pcm_hw_params_set_period_time_near(pcm, hwp, &periodTime, &dir), "snd_pcm_hw_params_set_period_time_near", device)
        try check(snd_pcm_hw_params(pcm, hwp), "snd_pcm_hw_params", device)

        var bufferFrames: snd_pcm_uframes_t = 0
        var periodFrames: snd_pcm_uframes_t = 0
        try check(snd_pcm_hw_params_get_buffer_size(hwp, &bufferFrames), "snd_pcm_hw_params_get_buffer_size", device)
        try check(snd_pcm_hw_params_get_period_size(hwp, &periodFrames, &dir), "snd_pcm_hw_params_get_period_size", device)

        var swp: OpaquePointer?
        try check(snd_pcm_sw_params_malloc(&swp), "snd_pcm_sw_params_malloc", device)
        defer { snd_pcm_sw_params_free(swp) }
        try check(snd_pcm_sw_params_current(pcm, swp), "snd_pcm_sw_params_current", device)
        // Start as soon as one period is queued; wake when a period is free.
        try check(snd_pcm_sw_params_set_start_threshold(pcm, swp, periodFrames), "snd_pcm_sw_params_set_start_threshold", device)
        try check(snd_pcm_sw_params_set_avail_min(pcm, swp, periodFrames), "snd_pcm_sw_params_set_avail_min", device)
        try check(snd_pcm_sw_params(pcm, swp), "snd_pcm_sw_params", device)

        let count = Int(snd_pcm_poll_descriptors_count(pcm))
        guard count > 0 && count <= 16 else {
            throw StreamError(.outputUnavailable, "snd_pcm_poll_descriptors_count() returned \(count)")
        }
        _ = snd_pcm_poll_descriptors(pcm, pollDescriptors, UInt32(count))
        pollCount = count
        try check(snd_pcm_prepare(pcm), "snd_pcm_prepare", device)
        let type = snd_pcm_type(pcm)
        canRewind = type != SND_PCM_TYPE_IOPLUG && type != SND_PCM_TYPE_EXTPLUG
        preparesByReconnecting = type == SND_PCM_TYPE_IOPLUG && Self.pluginName(pcm).contains("PulseAudio")
        self.pcm = pcm
        ok = true
        return NegotiatedFormat(device: device, pcm: PCMFormat(sampleRate: Int(rate), channels: Int(channels)),
                                sampleFormat: chosen.0, periodFrames: Int(periodFrames),
                                bufferFrames: Int(bufferFrames), fallbacks: [], canRewind: canRewind)
    }

    public func close() {
        if let p = pcm {
            snd_pcm_drop(p)
            snd_pcm_close(p)
            pcm = nil
        }
        pollCount = 0
    }

    /// The corresponding ALSA function is `snd_pcm_avail_update`.
    public func writable() -> Int {
        guard let p = pcm else { return -Int(EBADFD) }
        return Int(snd_pcm_avail_update(p))
    }

    /// Polls the PCM's descriptors and `wakeDescriptor` together.
    /// The corresponding ALSA functions are `snd_pcm_poll_descriptors_revents` and `poll`.
    public func wait(frames: Int, wakeDescriptor: Int32, timeoutNanoseconds: Int) -> OutputWaitResult {
        guard let p = pcm else { return .error(-EBADFD) }
        // The caller has just seen fewer than `frames` writable (writable()), so no
        // second avail_update here: with the pulse plugin every call takes its lock.
        // A PCM that is prepared but not started never becomes writable by itself.
        if snd_pcm_state(p) == SND_PCM_STATE_PREPARED { return .ready }
        pollDescriptors[pollCount] = pollfd(fd: wakeDescriptor, events: Int16(POLLIN), revents: 0)
        let ms = Int32(min(timeoutNanoseconds / 1_000_000 + 1, Int(Int32.max)))
        let n = poll(pollDescriptors, nfds_t(pollCount + 1), ms)
        if n == 0 { return .timeout }
        if n < 0 { return errno == EINTR ? .timeout : .error(-errno) }
        if pollDescriptors[pollCount].revents & Int16(POLLIN) != 0 {
            EventFD.drain(wakeDescriptor)
            return .woken
        }
        var revents: UInt16 = 0
        let r = snd_pcm_poll_descriptors_revents(p, pollDescriptors, UInt32(pollCount), &revents)
        if r < 0 { return .error(r) }
        if revents & UInt16(POLLERR) != 0 {
            let s = snd_pcm_state(p)
            if s == SND_PCM_STATE_XRUN { return .error(-EPIPE) }
            if s == SND_PCM_STATE_SUSPENDED { return .error(-ESTRPIPE) }
            if s == SND_PCM_STATE_DISCONNECTED { return .error(-ENODEV) }
            return .error(-EIO)
        }
        return revents & UInt16(POLLOUT) != 0 ? .ready : .timeout
    }

    /// The corresponding ALSA function is `snd_pcm_writei`.
    public func write(_ samples: UnsafeRawPointer, frames: Int) -> Int {
        guard let p = pcm else { return -Int(EBADFD) }
        return Int(snd_pcm_writei(p, samples, snd_pcm_uframes_t(frames)))
    }

    /// The corresponding ALSA function is `snd_pcm_delay`.
    public func delay() -> Int {
        guard let p = pcm else { return 0 }
        let state = snd_pcm_state(p)
        // Not running: nothing is being played out (an XRUN has emptied the queue; a
        // prepared PCM plays nothing until started).
        if state != SND_PCM_STATE_RUNNING && state != SND_PCM_STATE_DRAINING && state != SND_PCM_STATE_PREPARED { return 0 }
        var d: snd_pcm_sframes_t = 0
        if snd_pcm_delay(p, &d) < 0 { return 0 }
        return max(0, Int(d))
    }

    /// The corresponding ALSA functions are `snd_pcm_drop` and `snd_pcm_prepare`
    /// (through the pulse plugin `snd_pcm_prepare` alone: see `preparesByReconnecting`).
    public func drop() {
        guard let p = pcm else { return }
        if !preparesByReconnecting { snd_pcm_drop(p) }
        snd_pcm_prepare(p)
    }

    /// An external plugin's own name ("ALSA <-> PulseAudio PCM I/O Plugin"): the first
    /// line of `snd_pcm_dump` (`snd_pcm_info` gives the device's name, "pulse" or
    /// "default"); "" when it cannot be read. Only at open.
    private static func pluginName(_ pcm: OpaquePointer) -> String {
        var out: OpaquePointer?
        guard snd_output_buffer_open(&out) == 0, let out else { return "" }
        defer { snd_output_close(out) }
        guard snd_pcm_dump(pcm, out) == 0 else { return "" }
        var text: UnsafeMutablePointer<CChar>?
        let n = snd_output_buffer_string(out, &text)
        guard let text, n > 0 else { return "" }
        let bytes = UnsafeRawBufferPointer(start: text, count: min(n, 200))
        return String(decoding: bytes.prefix { $0 != 10 }, as: UTF8.self)
    }

    /// The corresponding ALSA function is `snd_pcm_rewindable`.
    public func rewindable() -> Int {
        guard let p = pcm, canRewind else { return 0 }
        return max(0, Int(snd_pcm_rewindable(p)))
    }

    /// The corresponding ALSA function is `snd_pcm_rewind`.
    public func rewind(_ frames: Int) -> Int {
        guard let p = pcm, frames > 0 else { return 0 }
        return max(0, Int(snd_pcm_rewind(p, snd_pcm_uframes_t(frames))))
    }

    /// The corresponding ALSA function is `snd_pcm_start`.
    public func startIfPrepared() {
        guard let p = pcm, snd_pcm_state(p) == SND_PCM_STATE_PREPARED else { return }
        snd_pcm_start(p)
    }

    /// `-EPIPE` (underrun): prepare. `-ESTRPIPE` (system suspend): resume, then prepare if
    /// the device cannot resume. Anything else stays.
    /// The corresponding ALSA functions are `snd_pcm_prepare` and `snd_pcm_resume`.
    public func recover(_ error: Int) -> Int {
        guard let p = pcm else { return -Int(EBADFD) }
        switch Int32(-error) {
        case EPIPE:
            return Int(min(0, snd_pcm_prepare(p)))
        case ESTRPIPE:
            var r: Int32 = -EAGAIN
            var tries = 0
            while r == -EAGAIN && tries < 100 {
                r = snd_pcm_resume(p)
                if r == -EAGAIN { var ts = timespec(tv_sec: 0, tv_nsec: 10_000_000); nanosleep(&ts, nil) }
                tries += 1
            }
            if r < 0 { r = snd_pcm_prepare(p) }
            return Int(min(0, r))
        case EAGAIN:
            return 0
        default:
            return error
        }
    }
}
