import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// The second voice: an announcement mixed over the music by the render thread.
///
/// A voice thread (``VoiceReader``) decodes the clip, already converted to the running
/// device format, into its own ring; the render thread (``VoiceMixer``) ducks the music
/// and adds the clip, sample by sample, with no allocation or lock. Its gain envelope is
/// an exact function of the frame index from the start of the announcement:
///
///     frames 0 ..< D          music × (1 − (1 − g)·k/D)       (k = 0 … D−1)   ramp down
///     clip frames 0 ..< L     music × g + clip × c·v                           the clip
///     frames 0 ..< U after    music × (g + (1 − g)·k/U)                         ramp up
///
/// g: the duck gain (`--duck`, dB → linear), c: the clip's gain (`--gain`), v: the
/// output volume (software volume and mute; not ReplayGain, which is the music's own),
/// D and U the ramps (150 ms and 500 ms by default). When the music is not playing
/// (paused, stopped, between tracks) the clip starts at once and ends without a ramp.
///
/// Every field says who writes it.
public final class VoiceShared: @unchecked Sendable {
    // @unchecked Sendable: mutable state is in atomics and the SPSC ring, whose own
    // contract covers one producer (the voice thread) and one consumer (render).

    /// Clip frames, voice thread → render. Resized by the voice thread only while no
    /// voice is running (`done == request`), before it publishes the next request.
    public let ring = FrameRing(minimumCapacity: 1, channels: 1)
    /// Wakes the voice thread: render consumed frames or finished. Any thread signals.
    public let wake = EventFD.make()
    /// The announcement to start: stored by the voice thread (release) after the ring
    /// holds its first frames and the parameters below are set.
    public let request = Atomic<UInt64>(0)
    /// The announcement to stop early (with a ramp). Written by the control side.
    public let cancel = Atomic<UInt64>(0)
    /// The last announcement render has finished with (release), or abandoned.
    public let done = Atomic<UInt64>(0)
    /// Whether `done` ended by `cancel` or abandonment rather than at the clip's end.
    public let doneEarly = Atomic<Bool>(false)
    /// Ring index after the clip's last frame, `Int.max` until the decoder reached its
    /// end. Written by the voice thread (release) after its last write.
    public let end = Atomic<Int>(Int.max)
    /// The music's source frame where the announcement began (-1: no music playing).
    /// Written by render before it signals `wake` for the start.
    public let startMusicFrame = Atomic<Int64>(-1)
    /// The announcement render has started (release, after `startMusicFrame`).
    public let started = Atomic<UInt64>(0)
    /// Parameters of `request`: linear gains as `Float` bits, ramps in device frames.
    /// Written by the voice thread before `request` (which publishes them).
    public let duck = Atomic<UInt32>(Float(1).bitPattern)
    public let gain = Atomic<UInt32>(Float(1).bitPattern)
    public let downFrames = Atomic<Int>(1)
    public let upFrames = Atomic<Int>(1)
    /// Set at shutdown: the voice thread stops waiting. Written by the control side.
    public let quit = Atomic<Bool>(false)
    /// Times render found the clip's ring empty before its end (voice underruns).
    public let underruns = Atomic<Int>(0)

    public init() {}
    deinit { _ = close(wake) }
}

/// The render thread's side of the voice. Real-time safe: every method but `init`.
/// Thread: render only.
struct VoiceMixer: ~Copyable {
    private let shared: VoiceShared
    private let channels: Int
    /// Clip frames read from the ring, at most `capacity` at a time.
    private let buffer: UnsafeMutablePointer<Float>
    private let capacity: Int
    /// Frames of the fade a cancel gives the clip (20 ms).
    private let fadeFrames: Int

    private enum Phase { case down, clip, fade, up }
    private var acked: UInt64
    private var cancelled: UInt64
    private(set) var active = false
    private var id: UInt64 = 0
    private var phase = Phase.down
    /// Frames into the phase.
    private var k = 0
    private var duck: Float = 1
    private var gain: Float = 1
    private var down = 1
    private var up = 1
    /// Whether the music has played during this voice: when not, the clip starts and
    /// ends without ramps.
    private var withMusic = true
    /// The voice was cancelled (it ends early, after its ramps).
    private var wasCancelled = false

    init(shared: VoiceShared, channels: Int, capacity: Int, sampleRate: Int) {
        self.shared = shared
        self.channels = channels
        self.capacity = capacity
        fadeFrames = max(16, sampleRate / 50)
        buffer = .allocate(capacity: capacity * channels)
        buffer.initialize(repeating: 0, count: capacity * channels)
        // A request the previous render thread never finished (the output was reopened)
        // is abandoned: its voice thread sees it done.
        let r = shared.request.load(ordering: .acquiring)
        acked = r
        cancelled = shared.cancel.load(ordering: .relaxed)
        if shared.done.load(ordering: .relaxed) != r {
            shared.doneEarly.store(true, ordering: .relaxed)
            shared.done.store(r, ordering: .releasing)
            EventFD.signal(shared.wake)
        }
    }

    deinit { buffer.deallocate() }

    /// A voice is playing or waiting to start: render keeps writing periods for it
    /// even when the music is not playing.
    var busy: Bool { active || shared.request.load(ordering: .relaxed) != acked }

    /// Starts a requested voice (with `musicFrame`, the music's source frame about to
    /// be written, or -1) and takes a cancel. Called before each block is mixed.
    mutating func update(musicPlaying: Bool, musicFrame: Int64) {
        let r = shared.request.load(ordering: .acquiring)  // the parameters and first frames before it
        if r != acked {
            acked = r
            if active { finish(early: true) }  // superseded (the engine waits for done; defensive)
            id = r
            active = true
            duck = Float(bitPattern: shared.duck.load(ordering: .relaxed))
            gain = Float(bitPattern: shared.gain.load(ordering: .relaxed))
            down = max(1, shared.downFrames.load(ordering: .relaxed))
            up = max(1, shared.upFrames.load(ordering: .relaxed))
            withMusic = musicPlaying
            wasCancelled = false
            phase = musicPlaying ? .down : .clip
            k = 0
            shared.startMusicFrame.store(musicPlaying ? musicFrame : -1, ordering: .relaxed)
            shared.started.store(r, ordering: .releasing)
            EventFD.signal(shared.wake)
        }
        guard active else { return }
        if musicPlaying { withMusic = true }
        let c = shared.cancel.load(ordering: .relaxed)
        if c != cancelled {
            cancelled = c
            if c == id { cancelNow() }
        }
    }

    private mutating func cancelNow() {
        // During the ramp up the clip was heard whole: that one ends as usual.
        wasCancelled = phase == .down || phase == .clip
        switch phase {
        case .down:
            // Up from the level reached: g + (1 − g)·k'/U = 1 − (1 − g)·k/D, so
            // k' = U·(D − k)/D (a cancel early in the ramp down is nearly back up).
            k = min(max(0, Int((Float(down - k) / Float(down) * Float(up)).rounded())), up)
            phase = .up
        case .clip:
            if shared.end.load(ordering: .acquiring) == shared.ring.consumerIndex {
                wasCancelled = false  // the clip's last frame is out already: nothing cut
                phase = withMusic ? .up : .fade
            } else {
                phase = .fade
            }
            k = 0
        case .fade, .up:
            break
        }
        if !withMusic && phase == .up { finish(early: true) }
    }

    /// Ducks `frames` frames of `mix` and adds the clip. `volume`: the output volume
    /// (linear, 0 when muted).
    /// `fixed`: the fixed-volume feeds' copy of the same frames, ducked and mixed the
    /// same way with the clip at its own gain, without the volume.
    mutating func mix(_ mix: UnsafeMutablePointer<Float>, frames: Int, volume: Float, fixed: UnsafeMutablePointer<Float>? = nil) {
        var f = 0
        while active && f < frames {
            let at = mix + f * channels
            // Not `fixed.map`: a generic call in a debug build, whose first use takes the
            // runtime's metadata lock on this thread.
            var at2: UnsafeMutablePointer<Float>?
            if let fixed { at2 = fixed + f * channels }
            switch phase {
            case .down:
                let n = min(frames - f, down - k)
                let step = (1 - duck) / Float(down)
                for j in 0..<n {
                    let e = 1 - step * Float(k + j)
                    for c in 0..<channels { at[j * channels + c] *= e }
                    if let at2 { for c in 0..<channels { at2[j * channels + c] *= e } }
                }
                f += n
                k += n
                if k == down { phase = .clip; k = 0 }
            case .clip, .fade:
                let end = shared.end.load(ordering: .acquiring)
                let ring = shared.ring
                let left = end == Int.max ? Int.max : end - ring.consumerIndex
                if left <= 0 || (phase == .fade && k >= fadeFrames) {
                    ring.discardAll()
                    // (A cancel has set `wasCancelled`; a clip that ran out has not.)
                    if withMusic { phase = .up; k = 0 } else { finish(early: false) }
                    continue
                }
                var n = min(min(frames - f, capacity), min(ring.readableFrames, left))
                if phase == .fade { n = min(n, fadeFrames - k) }
                if n == 0 {
                    // The clip's ring ran dry before its end: the music stays ducked and
                    // the clip waits (counted; the voice thread is woken).
                    shared.underruns.add(1, ordering: .relaxed)
                    EventFD.signal(shared.wake)
                    for j in 0..<(frames - f) { for c in 0..<channels { at[j * channels + c] *= duck } }
                    if let at2 { for j in 0..<((frames - f) * channels) { at2[j] *= duck } }
                    f = frames
                    continue
                }
                ring.read(into: buffer, frames: n)
                let g = gain * volume
                if phase == .clip {
                    for j in 0..<(n * channels) { at[j] = at[j] * duck + buffer[j] * g }
                    if let at2 { for j in 0..<(n * channels) { at2[j] = at2[j] * duck + buffer[j] * gain } }
                } else {
                    for j in 0..<n {
                        let ramp = 1 - Float(k + j) / Float(fadeFrames)
                        let fade = g * ramp
                        for c in 0..<channels { at[j * channels + c] = at[j * channels + c] * duck + buffer[j * channels + c] * fade }
                        if let at2 { for c in 0..<channels { at2[j * channels + c] = at2[j * channels + c] * duck + buffer[j * channels + c] * gain * ramp } }
                    }
                }
                f += n
                k += n
                EventFD.signal(shared.wake)  // room for the voice thread
            case .up:
                let n = min(frames - f, up - k)
                let step = (1 - duck) / Float(up)
                for j in 0..<n {
                    let e = duck + step * Float(k + j)
                    for c in 0..<channels { at[j * channels + c] *= e }
                    if let at2 { for c in 0..<channels { at2[j * channels + c] *= e } }
                }
                f += n
                k += n
                if k == up { finish(early: false) }
            }
        }
    }

    /// The device took back `frames` frames it had not played (a pause or a splice
    /// rewinds, a flush drops): step the voice back so they are heard again, as far as
    /// the ring kept them.
    mutating func takeBack(_ frames: Int) {
        guard active, frames > 0 else { return }
        switch phase {
        case .down:
            k = max(0, k - frames)
        case .clip, .fade:
            let r = min(min(frames, k), shared.ring.retain)
            shared.ring.rewind(r)
            k -= r
            if k == 0 && frames > r && phase == .clip && withMusic {
                phase = .down
                k = max(0, down - (frames - r))
            }
        case .up:
            k = max(0, k - frames)
        }
    }

    /// The render thread stops (failed device): the voice ends now.
    mutating func abandon() {
        if shared.request.load(ordering: .acquiring) != acked {
            acked = shared.request.load(ordering: .relaxed)
            id = acked
            active = true
        }
        if active { finish(early: true) }
    }

    private mutating func finish(early: Bool) {
        active = false
        shared.ring.discardAll()
        shared.doneEarly.store(early || wasCancelled, ordering: .relaxed)
        shared.done.store(id, ordering: .releasing)
        EventFD.signal(shared.wake)
    }
}
