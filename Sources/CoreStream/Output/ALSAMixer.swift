import CALSA

/// A hardware volume control: an ALSA simple mixer element (`Master`, `PCM`, …) on a
/// device (`default`, `hw:0`, `pulse`). MPD's `mixer_type "hardware"`.
///
/// The volume 0–100 maps linearly onto the element's raw range, as `amixer sset 40%`
/// does. Thread: the control side only (never the render thread).
public final class ALSAMixer: VolumeControl, @unchecked Sendable {
    public var kind: String { "hardware" }
    // @unchecked Sendable: used from one thread at a time (the daemon's control thread).
    public let device: String
    public let control: String
    private var handle: OpaquePointer?
    private let element: OpaquePointer
    private let low: Int
    private let high: Int

    public init(device: String, control: String) throws(StreamError) {
        calsa_silence_library_errors()
        self.device = device
        self.control = control
        func fail(_ call: String, _ ret: Int32) -> StreamError {
            StreamError(.outputUnavailable, "mixer \(device): \(call)() failed: \(String(cString: snd_strerror(ret)))")
        }
        var h: OpaquePointer?
        var ret = snd_mixer_open(&h, 0)
        guard ret >= 0, let mixer = h else { throw fail("snd_mixer_open", ret) }
        var ok = false
        defer { if !ok { snd_mixer_close(mixer) } }
        ret = snd_mixer_attach(mixer, device)
        guard ret >= 0 else { throw fail("snd_mixer_attach", ret) }
        ret = snd_mixer_selem_register(mixer, nil, nil)
        guard ret >= 0 else { throw fail("snd_mixer_selem_register", ret) }
        ret = snd_mixer_load(mixer)
        guard ret >= 0 else { throw fail("snd_mixer_load", ret) }
        var sid: OpaquePointer?
        guard snd_mixer_selem_id_malloc(&sid) >= 0, let id = sid else { throw fail("snd_mixer_selem_id_malloc", -12) }
        defer { snd_mixer_selem_id_free(id) }
        snd_mixer_selem_id_set_index(id, 0)
        snd_mixer_selem_id_set_name(id, control)
        guard let e = snd_mixer_find_selem(mixer, id), snd_mixer_selem_has_playback_volume(e) != 0 else {
            var names: [String] = []
            var e = snd_mixer_first_elem(mixer)
            while let el = e {
                if snd_mixer_selem_has_playback_volume(el) != 0 { names.append(String(cString: snd_mixer_selem_get_name(el))) }
                e = snd_mixer_elem_next(el)
            }
            throw StreamError(.outputUnavailable, "mixer \(device): no playback volume control named '\(control)' (there are: \(names.isEmpty ? "none" : names.joined(separator: ", ")))")
        }
        var lo = 0, hi = 0
        ret = snd_mixer_selem_get_playback_volume_range(e, &lo, &hi)
        guard ret >= 0, hi > lo else { throw fail("snd_mixer_selem_get_playback_volume_range", min(ret, -22)) }
        handle = mixer
        element = e
        low = lo
        high = hi
        ok = true
    }

    deinit { if let h = handle { snd_mixer_close(h) } }

    /// Sets every playback channel to `percent` of the range.
    public func setVolume(_ percent: Int) throws(StreamError) {
        let p = min(100, max(0, percent))
        let raw = low + ((high - low) * p + 50) / 100
        let ret = snd_mixer_selem_set_playback_volume_all(element, raw)
        guard ret >= 0 else {
            throw StreamError(.outputFailed, "mixer \(device) \(control): snd_mixer_selem_set_playback_volume_all() failed: \(String(cString: snd_strerror(ret)))")
        }
    }

    /// The volume now (someone else may have changed it), 0–100.
    public func volume() -> Int? {
        if let h = handle { _ = snd_mixer_handle_events(h) }
        var raw = 0
        guard snd_mixer_selem_get_playback_volume(element, SND_MIXER_SCHN_FRONT_LEFT, &raw) >= 0 else { return nil }
        return ((raw - low) * 100 + (high - low) / 2) / (high - low)
    }
}

/// A volume outside playd's samples, set from the control side: an ALSA mixer
/// (`volume.mixer = "hardware"`) or the PipeWire stream's own (`"pipewire"`).
public protocol VolumeControl: AnyObject {
    /// `hardware` or `pipewire`, as `status` shows the mixer.
    var kind: String { get }
    /// Sets it to `percent` (0–100).
    func setVolume(_ percent: Int) throws(StreamError)
    /// What it is now, 0–100, if it can be read.
    func volume() -> Int?
}

/// The PipeWire stream's own volume (`volume.mixer = "pipewire"`), as desktop mixers
/// show it: playd's 0–100 on the cubic scale pavucontrol and wpctl use (50 % is
/// 0.125 in amplitude). Remembered across a reconnect or a new stream (set again when
/// the stream is made). Control side.
public final class PipeWireVolume: VolumeControl, @unchecked Sendable {
    // @unchecked Sendable: used from the daemon's control thread only.
    public var kind: String { "pipewire" }
    private let engine: PlaybackEngine
    private var percent = 100

    public init(engine: PlaybackEngine) throws(StreamError) {
        self.engine = engine
    }

    public func setVolume(_ percent: Int) throws(StreamError) {
        let p = min(100, max(0, percent))
        try engine.setOutputVolume(Float(p * p * p) / 1_000_000)
        self.percent = p
    }

    public func volume() -> Int? { percent }
}
