import CLinux
#if canImport(Glibc)
import Glibc
#endif

/// The render thread's body: pulls periods from the ring and writes them to the output.
///
/// **Real-time rules** (JACK's list): nothing here allocates, locks, logs, awaits, builds
/// a `String` or copies an existential. Everything it needs is allocated in `init`, which
/// runs on the render thread itself (`PlaybackEngine.runRender`) before `run()` asks for
/// SCHED_FIFO and starts the loop: the allocations happen before the real-time part.
/// Problems are counted in the atomics of ``RenderShared`` and reported by other threads.
///
/// Thread: render only, `init` included. Real-time safe: `run()` yes; `init`/`deinit` no.
struct RenderLoop<Output: AudioOutput>: ~Copyable {
    let shared: RenderShared
    let output: Output
    let format: NegotiatedFormat

    private let channels: Int
    private let period: Int
    private let rampFrames: Int
    /// Frames the ring must hold before playback (re)starts.
    private let startThreshold: Int

    // Preallocated buffers.
    /// Float frames worked on at a time (gain, feeds' copy, conversion): a whole period
    /// for a float device, whose buffer it is; else `mixChunk` frames, converted one
    /// chunk after another into the period-sized `device` buffer (a 250 ms period of
    /// float stereo would be 88 KB).
    private let mix: UnsafeMutablePointer<Float>
    private let mixFrames: Int
    private static var mixChunk: Int { 2048 }
    /// One period in the device's format; for a float device, `mix` itself.
    private let device: UnsafeMutableRawPointer

    // Markers already taken from the queue, newest last (a small ring), so a rewind can
    // map re-read frames to their source position again.
    private let history: UnsafeMutablePointer<SegmentMarker>
    private let historyCapacity = 64
    private var historyCount = 0
    private var historyHead = 0  // index of the next slot to write

    // What was written to the device, newest last: (deviceStart, length, ringStart or -1 for silence).
    private let pieces: UnsafeMutablePointer<(device: Int, length: Int, ring: Int)>
    private let pieceCapacity = 256
    private var pieceCount = 0
    private var pieceHead = 0

    private var state = RenderState.starting
    private var deviceWritten = 0    // frames written to the device minus frames rewound
    private var gain: Float = 0
    private var gainTarget: Float = 1
    private var gainStep: Float
    /// The output level (``RenderShared/level``) applied now, where it is going, and by
    /// how much per frame: a linear ramp over `levelRampFrames` from wherever it was.
    private var level: Float
    private var levelTarget: Float
    private var levelStep: Float = 0
    private let levelRampFrames: Int
    /// The slow fade (``RenderShared/fadeTarget``): applied now, where it goes, how much
    /// per frame, and the serial taken last. Render thread only.
    private var fade: Float = 1
    private var fadeTarget: Float = 1
    private var fadeStep: Float = 0
    private var fadeSerial: UInt64 = 0
    /// Set by a flush: the next stream starts at its level, without a ramp.
    private var snapLevel = true
    /// Set where a new stream's first frame is taken (a gapless join): a level lower than
    /// the one applied is taken at once, so a loud track after a quiet one is at or under
    /// its own gain from its first frame (ramping down from the boundary, it started at
    /// the quiet one's higher gain: +2.3 dBFS measured, clipped; issue 43). A higher
    /// level still ramps up from the boundary: it cannot overshoot.
    private var joinedStream = false
    private var ackedFlush: UInt64 = 0
    private var ackedSplice: UInt64 = 0
    private var ackedReopen: UInt64 = 0
    /// Frames a splice leaves queued in the device: time for the reader to decode the
    /// new frames (a reverse block with its seek preroll) before the device runs dry.
    private let spliceKeep: Int
    private var generation: UInt64 = 0
    private var lowWaterSignalled = false
    private var pausedDeviceIdle = true
    /// A pause's ramp-out not yet written (frames): the device could not rewind and had no
    /// room for it. Written by ``idleWhilePaused()`` once it has; a resume before that
    /// goes on at full level with no ramp at all (the device is still playing what it
    /// holds, so nothing was cut). Render thread only.
    private var rampOwed = 0
    /// `deviceWritten` once a pause's ramp-out was written: the music has stopped being
    /// heard when the device has played up to here (what follows is silence or an
    /// announcement alone). Render thread only.
    private var pauseEndDevice = 0
    /// A drain's bounds (the end of a track, or of an announcement alone): see
    /// ``playedOut()``. Render thread only.
    private var drainBounds = DrainBounds()
    private var publishCountdown = 0
    /// Nothing has been written to the device since it was last dropped and prepared (or
    /// opened): a flush then has nothing to drop, and skips the reset. Through ALSA's
    /// pulse plugin a reset is a new PulseAudio stream (its prepare disconnects the old
    /// one and waits for the new one to be ready), and a play after a stop paid it a
    /// second time, for nothing (issue 25). Render thread only.
    private var deviceHoldsNothing = true

    // Feeds (``FeedOutput``): a copy of every frame written to the device, indexed by
    // device frame (`deviceWritten`), so frames can be passed on when the device has
    // played them. Only allocated when there are feeds.
    private let feeds: ContiguousArray<FeedOutput>
    private let played: UnsafeMutablePointer<Float>?
    /// The same before the volume, for feeds with ``FeedOutput/fixedVolume``, and the
    /// piece being mixed for it (a period or ``mixChunk``). Only allocated when a feed
    /// asks for it.
    private let playedFixed: UnsafeMutablePointer<Float>?
    private let fixedMix: UnsafeMutablePointer<Float>?
    /// ReplayGain alone (no volume) applied to `fixedMix` now, where it goes, and by
    /// how much per frame: as `level`.
    private var fixedLevel: Float = 1
    private var fixedLevelTarget: Float = 1
    private var fixedLevelStep: Float = 0
    /// Frames `played` holds, a power of two ≥ the device buffer plus a period.
    private let playedCapacity: Int
    /// Device frames up to here have been passed on to the feeds (or skipped: dropped
    /// by the device, never heard).
    private var fedUpTo = 0

    /// The announcement mixed over the music (Voice.swift).
    private var voice: VoiceMixer
    /// Voice-only periods were written while the music was not playing (stopped,
    /// between tracks): once the voice is over, the device plays them out and stops.
    private var voiceLeftDeviceRunning = false

    init(shared: RenderShared, output: Output, format: NegotiatedFormat, feeds: [FeedOutput] = []) {
        self.shared = shared
        self.output = output
        self.format = format
        channels = format.pcm.channels
        period = format.periodFrames
        rampFrames = max(16, format.pcm.sampleRate / 200)  // 5 ms
        gainStep = 1 / Float(max(16, format.pcm.sampleRate / 200))
        level = 1
        levelTarget = 1
        levelRampFrames = max(16, format.pcm.sampleRate / 50)  // 20 ms
        // What the ring must hold before a (re)start: enough that the device, once started,
        // does not run dry before the reader's next frames, which come at 100× real time or
        // more. Two periods were asked before: with the default 250 ms period that is
        // 0.5 s of audio decoded before the first frame is written (3–4 ms of FLAC of the
        // 4.4 ms median play → first frame while playing, issue 25). One period when a
        // period is 100 ms or more; short periods keep two (at 5 ms, one is a 5 ms margin).
        let tenth = format.pcm.sampleRate / 10
        startThreshold = min(format.periodFrames >= tenth ? format.periodFrames : 2 * format.periodFrames,
                             shared.ring.capacity - shared.ring.retain)
        mixFrames = format.sampleFormat == .float32 ? period : min(period, Self.mixChunk)
        mix = .allocate(capacity: mixFrames * channels)
        mix.initialize(repeating: 0, count: mixFrames * channels)
        if format.sampleFormat == .float32 {
            device = UnsafeMutableRawPointer(mix)
        } else {
            let bytes = period * channels * format.sampleFormat.bytesPerSample
            device = .allocate(byteCount: bytes, alignment: 16)
            device.initializeMemory(as: UInt8.self, repeating: 0, count: bytes)
        }
        voice = VoiceMixer(shared: shared.voice, channels: format.pcm.channels, capacity: mixFrames,
                           sampleRate: format.pcm.sampleRate)
        history = .allocate(capacity: 64)
        history.initialize(repeating: .empty, count: 64)
        pieces = .allocate(capacity: 256)
        pieces.initialize(repeating: (0, 0, -1), count: 256)
        ackedFlush = shared.flushAck.load(ordering: .relaxed)
        ackedSplice = shared.spliceAck.load(ordering: .relaxed)
        ackedReopen = shared.reopenAck.load(ordering: .relaxed)
        spliceKeep = max(format.periodFrames, format.pcm.sampleRate / 10)
        self.feeds = ContiguousArray(feeds)
        var cap = 1
        while cap < format.bufferFrames + 2 * format.periodFrames { cap <<= 1 }
        playedCapacity = cap
        if feeds.isEmpty {
            played = nil
        } else {
            played = .allocate(capacity: cap * format.pcm.channels)
            played!.initialize(repeating: 0, count: cap * format.pcm.channels)
        }
        if feeds.contains(where: \.fixedVolume) {
            playedFixed = .allocate(capacity: cap * format.pcm.channels)
            playedFixed!.initialize(repeating: 0, count: cap * format.pcm.channels)
            fixedMix = .allocate(capacity: mixFrames * format.pcm.channels)
            fixedMix!.initialize(repeating: 0, count: mixFrames * format.pcm.channels)
        } else {
            playedFixed = nil
            fixedMix = nil
        }
    }

    deinit {
        played?.deallocate()
        playedFixed?.deallocate()
        fixedMix?.deallocate()
        if device != UnsafeMutableRawPointer(mix) { device.deallocate() }
        mix.deallocate()
        history.deallocate()
        pieces.deallocate()
    }

    // MARK: - Loop

    mutating func run() {
        // Only an output with a deadline gets SCHED_FIFO. An unpaced one (a WAV file
        // rendered as fast as it comes) has none, and at priority 50 it ran ahead of
        // PulseAudio's own thread (RR 5) and of every normal thread on its core for the
        // length of a render: in a CI run with two test processes side by side, a pulse
        // recording in one lost frames and a library scan in the other never ended.
        shared.realtimeResult.store(output.isRealTime ? clinux_request_fifo(50) : -2, ordering: .relaxed)
        while !shared.quit.load(ordering: .relaxed) {
            if handleFlush() { continue }
            if handleSplice() { continue }
            if handleReopen() { continue }
            let wantPlaying = shared.wantPlaying.load(ordering: .relaxed)
            switch state {
            case .failed:
                voice.abandon()
                EventFD.wait(shared.renderWake, timeoutNanoseconds: -1)
            case .paused:
                if wantPlaying {
                    state = .starting
                    publishState()
                } else if voice.busy {
                    renderVoicePeriod()
                } else {
                    idleWhilePaused()
                }
            case .draining:
                drain()
            case .starting:
                if !wantPlaying {
                    state = .paused
                    publishState()
                    continue
                }
                start()
            case .running:
                if !wantPlaying {
                    pause()
                } else {
                    renderPeriod()
                }
            }
        }
        // Quitting right after a ramp-out (engine shutdown: SIGTERM, SIGINT): let the
        // device play the 1 ms kept and the 5 ms ramp before dropping its queue.
        // Dropping at once cut the fade wherever it had got to, at full level most
        // times (3 of 4 shutdowns in a test kept none of the ramp): a click on exit.
        if state == .paused && !pausedDeviceIdle { playOutQueue() }
        dropDevice()
    }

    /// Waits until the device has played what it holds, for at most 50 ms (a ramp-out
    /// is 6 ms; a device that does not move is not waited on). Only on the way out of
    /// the thread, never in the loop.
    private mutating func playOutQueue() {
        let deadline = monotonicNanoseconds() + 50_000_000
        while monotonicNanoseconds() < deadline {
            let queued = output.delay()
            if queued <= 0 { break }
            let ns = min(Int(FrameTime.rescale(Int64(queued), 1_000_000_000, Int64(format.pcm.sampleRate))) + 500_000, 10_000_000)
            var ts = timespec(tv_sec: 0, tv_nsec: ns)
            nanosleep(&ts, nil)
        }
        feedPlayed()
    }

    /// Drops what the device has queued, after passing on to the feeds what it played.
    /// Returns how many frames it dropped: the delay read just before the drop (a
    /// `wav:`/`null` device drops exactly that; a sound card's pointer may move a few
    /// frames more meanwhile).
    @discardableResult
    private mutating func dropDevice() -> Int {
        let queued = forgetDeviceQueue()
        resetDevice()
        return queued
    }

    /// The bookkeeping half of ``dropDevice()``: passes on to the feeds what the device
    /// played, and forgets what it still holds (the dropped frames are never heard).
    /// Returns how many frames that is.
    private mutating func forgetDeviceQueue() -> Int {
        feedPlayed()
        let queued = max(0, output.delay())
        fedUpTo = deviceWritten
        return queued
    }

    /// The device half of ``dropDevice()``: drops its queue and prepares it, unless it
    /// holds nothing written since the last time. Returns how long that took (ns, at
    /// least 1; 0 when skipped).
    @discardableResult
    private mutating func resetDevice() -> UInt64 {
        if deviceHoldsNothing { return 0 }
        let began = monotonicNanoseconds()
        output.drop()
        deviceHoldsNothing = true
        return max(1, monotonicNanoseconds() &- began)
    }

    /// Drops everything on a flush request from the reader (seek, stop, new track).
    private mutating func handleFlush() -> Bool {
        let request = shared.flushRequest.load(ordering: .acquiring)  // see the reader's state before its request
        guard request != ackedFlush else { return false }
        // A flush while stopping (`wantPlaying` off): ramp out first, as a pause does,
        // and let the device play the ramp (1 ms kept + 5 ms ramp) rather than drop it.
        // Dropping it cut from full level (a click), and how much of the ramp had been
        // heard by then depended on which thread ran first: 0 or 39 frames in
        // TransportCaptureTests under TSan.
        if state == .running && !shared.wantPlaying.load(ordering: .relaxed) { pause() }
        // Only a device that rewound to the ramp holds just the ramp. One that cannot rewind
        // (ALSA's pulse plugin) holds up to its whole buffer of the old stream ahead of
        // it: kept, a stop went on playing for up to 750 ms, and the next stream's first
        // frames waited for room behind it (33–70 ms through PulseAudio, issue 25).
        // Dropped at once, as MPD drops on stop.
        // `.starting` too: a stop's flush leaves that state with the ramp queued, and a
        // play right after it (the reader now flushes before it decodes) can come before
        // this thread has gone on to `.paused`; dropping then cut the ramp short.
        let rampQueued = (state == .paused || state == .starting) && !pausedDeviceIdle && format.canRewind
        if rampQueued {
            feedPlayed()
            // What the device still holds belongs to no ring frame any more: one piece
            // "not from the ring", so a later rewind counts it right.
            let queued = min(max(0, output.delay()), deviceWritten)
            pieces[0] = (deviceWritten - queued, queued, -1)
            pieceHead = 1
            pieceCount = queued > 0 ? 1 : 0
        } else {
            voice.takeBack(forgetDeviceQueue())
            pieceCount = 0
        }
        rampOwed = 0
        shared.ring.discardAll()
        shared.markers.removeAll()
        // The old audio is gone: a new stream starts at the level already set for it
        // (a new track's ReplayGain), not with a ramp from the old one.
        snapLevel = true
        fade = 1
        fadeTarget = 1
        historyCount = 0
        gain = 0
        state = state == .failed ? .failed : .starting
        lowWaterSignalled = false
        // With the ramp queued, a pause that follows waits for it to play, then drops.
        pausedDeviceIdle = !rampQueued
        drainBounds = DrainBounds()
        publishCountdown = 0
        ackedFlush = request
        shared.flushAck.store(request, ordering: .releasing)  // the ring is empty: the reader may refill
        EventFD.signal(shared.readerWake)
        publishState()
        // The device is reset only now, after the reader was let go: it decodes the new
        // stream's first frames while the device is reset, where it used to wait for the
        // reset. Through the pulse plugin a reset is a new PulseAudio stream, 0.9–1.8 ms
        // p50 (`device_reset_ms` on seeks, `scripts/bench-control`, 2026-11-26).
        shared.lastResetNanoseconds.store(rampQueued ? 0 : resetDevice(), ordering: .relaxed)
        return true
    }

    /// A splice request from the reader (loop or direction change): take back what the
    /// device has queued beyond `spliceKeep` (when it can rewind), tell the reader which
    /// frame was kept last, and empty the ring. The device keeps playing what it kept, so
    /// the reader's new frames follow it with no gap and no ramp.
    private mutating func handleSplice() -> Bool {
        let request = shared.spliceRequest.load(ordering: .acquiring)  // see the reader's state before its request
        guard request != ackedSplice else { return false }
        if state == .running || state == .draining {
            let rewindable = output.rewindable()
            if rewindable > spliceKeep {
                let got = output.rewind(min(rewindable - spliceKeep, shared.ring.retain))
                if got > 0 {
                    let ringBack = takeBack(deviceFrames: got)
                    shared.ring.rewind(min(ringBack, shared.ring.retain))
                    voice.takeBack(got)
                }
            }
            if state == .draining {
                // The end it was draining towards was spliced away.
                state = .running
                drainBounds = DrainBounds()
                publishState()
            }
        }
        if rampOwed > 0 { rampOwed = 0; gain = 0 }  // its frames are being replaced
        let kept = shared.ring.consumerIndex
        shared.spliceMarker.pointee = marker(forRing: kept - 1) ?? .empty
        shared.spliceRing.store(kept, ordering: .relaxed)
        shared.ring.discardAll()
        shared.markers.removeAll()
        lowWaterSignalled = false
        ackedSplice = request
        shared.spliceAck.store(request, ordering: .releasing)  // publishes spliceRing and spliceMarker
        EventFD.signal(shared.readerWake)
        return true
    }

    /// A reopen request from the reader (a next came after it had finished the stream).
    /// Accepted while the end is still ahead with at least `spliceKeep` (100 ms) left to
    /// play before it, ring and device: the reader then has that long to write the next's
    /// first frames. The end it was draining towards is gone, so it runs again, and the
    /// next's frames follow in the ring with nothing taken back. (A splice here left the
    /// device 100 ms to be refilled in for every short track, and under a loaded CPU it
    /// underran: 2 runs in 5 of 50 short tracks heard a period of silence and a ramp.
    /// Reopened with less left, a short track started after a stop underran the same
    /// way, 1 run in 5.) Refused, the end stands and the control side starts the next
    /// after it, as before.
    private mutating func handleReopen() -> Bool {
        let request = shared.reopenRequest.load(ordering: .acquiring)  // the reader's finish() before it
        guard request != ackedReopen else { return false }
        let end = shared.endIndex.load(ordering: .relaxed)
        var accept = shared.endedGeneration.load(ordering: .relaxed) != shared.streamGeneration.load(ordering: .relaxed)
        if accept && (state == .running || state == .draining) && output.isRealTime {
            accept = output.delay() + max(0, end - shared.ring.consumerIndex) >= spliceKeep
        }
        if accept {
            shared.endIndex.store(Int.max, ordering: .relaxed)
            if state == .draining {
                state = .running
                drainBounds = DrainBounds()
                publishState()
            }
            lowWaterSignalled = false
        }
        shared.reopenAccepted.store(accept, ordering: .relaxed)
        ackedReopen = request
        shared.reopenAck.store(request, ordering: .releasing)
        EventFD.signal(shared.readerWake)
        return true
    }

    /// Waits for the ring to hold enough to start, then starts with a ramp from silence.
    private mutating func start() {
        let available = shared.ring.readableFrames
        let atEnd = shared.ring.consumerIndex + available >= shared.endIndex.load(ordering: .acquiring)
        if available == 0 && atEnd {
            // Nothing left of this stream. A stream with no frame at all (played from its
            // end, reversed from 0) never drained: report its end here. Then sleep until
            // a command.
            let g = shared.streamGeneration.load(ordering: .relaxed)
            if shared.endedGeneration.load(ordering: .relaxed) != g {
                shared.endedGeneration.store(g, ordering: .releasing)
                EventFD.signal(shared.readerWake)
            }
            if voice.busy { renderVoicePeriod(); return }
            if voiceLeftDeviceRunning { settleAfterVoice(); return }
            EventFD.wait(shared.renderWake, timeoutNanoseconds: -1)
            return
        }
        if available < startThreshold && !atEnd && voice.busy {
            // The music is loading: the announcement goes on meanwhile.
            EventFD.signal(shared.readerWake)
            renderVoicePeriod()
            return
        }
        if available < startThreshold && !atEnd {
            shared.starving.store(true, ordering: .relaxed)
            // Re-check after raising the flag so a push in between is not missed.
            if shared.ring.readableFrames < startThreshold {
                EventFD.signal(shared.readerWake)
                EventFD.wait(shared.renderWake, timeoutNanoseconds: 200_000_000)
            }
            shared.starving.store(false, ordering: .relaxed)
            return
        }
        // Ramp in from silence when starting mid-stream (resume, seek, after an underrun);
        // a track that starts at its first frame starts exactly as it is.
        if rampOwed > 0 {
            // Resumed before the owed ramp-out was written: the device still plays what it
            // holds at full level, and this follows it at full level, with no gap.
            gain = 1
        } else if let m = shared.markers.peek(), m.ringIndex == shared.ring.consumerIndex, m.sourceFrame == 0 {
            gain = 1
        } else {
            gain = 0
        }
        rampOwed = 0
        gainTarget = 1
        state = .running
        voiceLeftDeviceRunning = false
        drainBounds = DrainBounds()
        publishCountdown = 0
        publishState()
    }

    /// Whether the device has room for a period now; if not, waits (up to 1 s, or a
    /// command) for it, or recovers the device, and returns false.
    private mutating func roomForAPeriod() -> Bool {
        let space = output.writable()
        if space < 0 { recover(space); return false }
        if space < period {
            let r = output.wait(frames: period, wakeDescriptor: shared.renderWake, timeoutNanoseconds: 1_000_000_000)
            if case .error(let e) = r { recover(Int(e)) }
            return false
        }
        return true
    }

    /// Writes one period when the device has room for it.
    private mutating func renderPeriod() {
        guard roomForAPeriod() else { return }
        let end = shared.endIndex.load(ordering: .acquiring)
        let consumer = shared.ring.consumerIndex
        let available = shared.ring.readableFrames
        var take = min(period, available)
        let reachesEnd = consumer + take >= end
        if reachesEnd { take = max(0, end - consumer) }
        var frames = period
        if take < period && !reachesEnd {
            // Short of data. While the device still has more than a period queued there is
            // no deadline yet: write what there is and wait for the reader. Only when the
            // device is about to starve (or for an unpaced output, never) pad with silence.
            let queued = output.isRealTime ? output.delay() : Int.max
            let safety = max(period / 4, format.pcm.sampleRate / 200)
            if queued > safety || !output.isRealTime {
                if take == 0 {
                    shared.starving.store(true, ordering: .relaxed)
                    if shared.ring.readableFrames == 0 {
                        EventFD.signal(shared.readerWake)
                        let slack = output.isRealTime
                            ? Int(FrameTime.rescale(Int64(queued - safety), 1_000_000_000, Int64(format.pcm.sampleRate)))
                            : 200_000_000
                        EventFD.wait(shared.renderWake, timeoutNanoseconds: max(slack, 100_000))
                    }
                    shared.starving.store(false, ordering: .relaxed)
                    return
                }
                frames = take
            } else {
                // The ring ran dry while playing: pad with silence and count it.
                shared.underruns.add(1, ordering: .relaxed)
                EventFD.signal(shared.readerWake)
            }
        } else if reachesEnd {
            frames = take
        }
        if frames > 0 {
            writeFrames(frames, fromRing: take)
        }
        if reachesEnd {
            state = .draining
            publishState()
        }
        signalLowWater()
    }

    /// Reads `fromRing` frames (padding to `frames` with silence), applies the gain ramp,
    /// converts and writes them. Records where they came from. `frames` ≤ a period.
    private mutating func writeFrames(_ frames: Int, fromRing: Int, startVoice: Bool = true) {
        let ringStart = shared.ring.consumerIndex
        if fromRing > 0 { takeMarkers(upTo: ringStart + 1) }
        if startVoice && voice.busy {
            let musicPlaying = fromRing > 0 && state == .running
            var musicFrame: Int64 = -1
            if musicPlaying && !voice.active, let m = marker(forRing: ringStart) { musicFrame = m.sourceFrame(atRing: ringStart) }
            voice.update(musicPlaying: musicPlaying, musicFrame: musicFrame)
        }
        let volume = Float(bitPattern: shared.level.load(ordering: .relaxed))
        let frameBytes = channels * format.sampleFormat.bytesPerSample
        var prepared = 0
        while prepared < frames {
            // A float device's buffer is `mix` itself, a whole period: one pass, or a
            // piece per stream when a marker falls inside it.
            var n = min(mixFrames, frames - prepared)
            if prepared < fromRing {
                // A stream's level (its ReplayGain) starts at its first frame: work up to
                // the next marker, and take it there.
                takeMarkers(upTo: ringStart + prepared + 1)
                if let m = shared.markers.peek(), m.ringIndex > ringStart + prepared, m.ringIndex < ringStart + prepared + n {
                    n = m.ringIndex - (ringStart + prepared)
                }
            }
            // A float device's buffer is `mix` itself: each piece goes in its place.
            let work = format.sampleFormat == .float32 ? mix + prepared * channels : mix
            let ringHere = max(0, min(n, fromRing - prepared))
            if ringHere > 0 { shared.ring.read(into: work, frames: ringHere) }
            if ringHere < n {
                (work + ringHere * channels).update(repeating: 0, count: (n - ringHere) * channels)
            }
            if let fixed = fixedMix { fixed.update(from: work, count: n * channels) }
            applyGain(work, frames: ringHere, fixed: fixedMix)
            if voice.active { voice.mix(work, frames: n, volume: volume, fixed: fixedMix) }
            if let p = played { keepPlayedCopy(p, from: work, at: deviceWritten + prepared, frames: n) }
            if let p = playedFixed, let fixed = fixedMix { keepPlayedCopy(p, from: fixed, at: deviceWritten + prepared, frames: n) }
            convert(work, frames: n, into: device + prepared * frameBytes)
            prepared += n
        }
        if shared.localMuted.load(ordering: .relaxed) {
            // The local output is disabled: it stays open as the feeds' clock, silent.
            device.initializeMemory(as: UInt8.self, repeating: 0, count: frames * channels * format.sampleFormat.bytesPerSample)
        }
        var done = 0
        while done < frames {
            let n = output.write(device + done * channels * format.sampleFormat.bytesPerSample, frames: frames - done)
            if n == -Int(EAGAIN) {
                _ = output.wait(frames: frames - done, wakeDescriptor: shared.renderWake, timeoutNanoseconds: 100_000_000)
                continue
            }
            if n < 0 {
                if recover(n) { continue }
                break
            }
            deviceHoldsNothing = false
            done += n
        }
        if fromRing > 0 {
            takeMarkers(upTo: ringStart + fromRing)
            record(ring: ringStart, length: fromRing)
        }
        if done > fromRing { record(ring: -1, length: done - fromRing) }
        feedPlayed()
        if fromRing < frames { gain = 0 }  // after an underrun, come back with a ramp
        // The device delay costs a lock round in some plugins (pulse): publish the heard
        // position on the first write after a change and then every 4th period; readers
        // interpolate in between.
        publishCountdown -= 1
        if publishCountdown <= 0 || state != .running {
            publishCountdown = 4
            publishHeard(advancing: true)
        }
    }

    /// One period of the announcement alone (no music is playing): silence with the
    /// clip mixed in, when the device has room.
    private mutating func renderVoicePeriod() {
        // A clip over a pause (announce in pause mode): the music's owed ramp-out goes
        // first, or the music would end cut where the device's queue ends, before the clip.
        if state == .paused && rampOwed > 0 && writeOwedRamp() { return }
        guard roomForAPeriod() else { return }
        writeFrames(period, fromRing: 0)
        // A device stopped by a pause or a drain starts only when its buffer fills; a
        // clip shorter than that would never be heard.
        output.startIfPrepared()
        if state == .paused {
            pausedDeviceIdle = false
            settlePauseIfHeard()
        } else {
            voiceLeftDeviceRunning = true
        }
    }

    /// After an announcement played with no music: let the device play it out, then
    /// stop it (as the end of a track does), rather than let it run dry.
    private mutating func settleAfterVoice() {
        guard playedOut() else { return }
        dropDevice()
        voiceLeftDeviceRunning = false
    }

    /// Whether the device has played what it was given, waiting one step if not (the
    /// caller returns to the loop, which answers a command first). Bounded by how long
    /// the queue takes to play plus 150 ms: some devices (ALSA's pulse plugin) keep
    /// reporting a delay once the stream has run dry. Once the delay reads zero it waits
    /// 20 ms more before the caller drops the device: the pulse plugin's delay is
    /// PulseAudio's latency interpolated between timing updates, and it read zero with
    /// the last 55 frames (1.1 ms) still in the server in a loaded CI run on 2026-11-27,
    /// so the drop cut the track's end. A device given nothing waits for nothing.
    private mutating func playedOut() -> Bool {
        let queued = output.delay()
        let now = monotonicNanoseconds()
        if drainBounds.deadline == 0 {
            drainBounds.deadline = now + UInt64(FrameTime.rescale(Int64(max(0, queued)), 1_000_000_000, Int64(format.pcm.sampleRate))) + 150_000_000
            drainBounds.tail = queued > 0 ? 20_000_000 : 0
        }
        if queued > 0 && now < drainBounds.deadline {
            let ns = Int(FrameTime.rescale(Int64(queued), 1_000_000_000, Int64(format.pcm.sampleRate)))
            EventFD.wait(shared.renderWake, timeoutNanoseconds: min(ns + 1_000_000, 100_000_000))
            feedPlayed()
            return false
        }
        if drainBounds.tail > 0 {
            if drainBounds.tailEnd == 0 { drainBounds.tailEnd = now + drainBounds.tail }
            if now < drainBounds.tailEnd {
                EventFD.wait(shared.renderWake, timeoutNanoseconds: Int(drainBounds.tailEnd - now))
                feedPlayed()
                return false
            }
        }
        drainBounds = DrainBounds()
        return true
    }

    /// Pause: take back what the device has queued but not played (when it can rewind),
    /// ramp out over 5 ms from the frame being heard, and stop.
    private mutating func pause() {
        feedPlayed()
        let rewindable = output.rewindable()
        if rewindable > 0 {
            // Leave ~1 ms the hardware may already be fetching, and take back no more
            // than the ring kept behind its read cursor (a device buffer longer than
            // that plays its oldest frames out before the ramp).
            let keep = min(rewindable, format.pcm.sampleRate / 1000)
            let got = output.rewind(min(rewindable - keep, shared.ring.retain))
            if got > 0 {
                let ringBack = takeBack(deviceFrames: got)
                shared.ring.rewind(min(ringBack, shared.ring.retain))
                voice.takeBack(got)
            }
        }
        // At most a period (the device buffer's unit; a period under 5 ms cuts the ramp short).
        // Two-argument mins: the variadic `min(_:_:_:_:)` builds an array of its
        // arguments, an allocation on this thread (RenderThreadTests found it here).
        let left = max(0, shared.endIndex.load(ordering: .acquiring) - shared.ring.consumerIndex)
        let take = min(min(rampFrames, period), min(shared.ring.readableFrames, left))
        if take > 0 && !format.canRewind && output.writable() < take {
            // A device that cannot rewind, and full (ALSA's pulse plugin right after a
            // start): the ramp would go behind everything it holds anyway. Writing it now
            // waited for room, 0.3–1.2 s in 100 ms steps through the plugin (it frees
            // room a period at a time), with every command (the stop's flush, the next
            // play) waiting behind it: that was the 299 ms outlier, and 36 of 60 stop →
            // play near 1 s (issue 25). Owed instead.
            rampOwed = take
        } else {
            rampOwed = 0
            gainTarget = 0
            if take > 0 { writeFrames(take, fromRing: take, startVoice: false) }
            gain = 0
        }
        gainTarget = 1
        state = .paused
        pausedDeviceIdle = false
        pauseEndDevice = deviceWritten
        publishState()
        // The device still plays the ramp (and, when it cannot rewind, what it holds):
        // the position goes on to the ramp's end, and no further. Until this report the
        // last one was up to 4 periods old, and status stood there while paused: 0.45 s
        // behind the frame where the sound stopped (issue 48).
        publishHeard(advancing: true)
    }

    /// Writes the pause's owed ramp-out if the device has room for it now; true if it did.
    private mutating func writeOwedRamp() -> Bool {
        let left = max(0, shared.endIndex.load(ordering: .acquiring) - shared.ring.consumerIndex)
        let take = min(rampOwed, min(shared.ring.readableFrames, left))
        let space = output.writable()
        if take > 0 && space >= take {
            rampOwed = 0
            gainTarget = 0
            writeFrames(take, fromRing: take, startVoice: false)
            gain = 0
            gainTarget = 1
            pauseEndDevice = deviceWritten
            publishHeard(advancing: true)
            return true
        }
        // Nothing left to ramp, or the device ran dry first (an underrun: its poll would
        // not wait): no ramp-out, and the resume ramps in from silence.
        if take == 0 || space < 0 { rampOwed = 0; gain = 0 }
        return false
    }

    /// While paused: let the device play out its queue (the ramp), then stop it.
    private mutating func idleWhilePaused() {
        if !pausedDeviceIdle {
            let queued = output.delay()
            if rampOwed > 0 && writeOwedRamp() { return }
            if queued > 0 {
                let ns = Int(FrameTime.rescale(Int64(queued), 1_000_000_000, Int64(format.pcm.sampleRate)))
                if rampOwed > 0 {
                    // Woken when the device has room (or by a command), to write the ramp.
                    _ = output.wait(frames: rampOwed, wakeDescriptor: shared.renderWake, timeoutNanoseconds: ns + 1_000_000)
                } else {
                    EventFD.wait(shared.renderWake, timeoutNanoseconds: ns + 1_000_000)
                }
                feedPlayed()
                // Still playing what it holds: the position moves on (to the limit).
                publishHeard(advancing: true)
                settlePauseIfHeard()
                return
            }
            if rampOwed > 0 { rampOwed = 0; gain = 0 }  // played out: the resume ramps in
            dropDevice()
            pausedDeviceIdle = true
            publishHeard(advancing: false)
        }
        settlePauseIfHeard()
        EventFD.wait(shared.renderWake, timeoutNanoseconds: -1)
    }

    /// Once the paused music's last frame has been heard (the device played the ramp-out,
    /// and what it held that could not be taken back): publishes the position standing
    /// there and settles the pause request, so the reader sends the `paused` event with
    /// the frame every later status reports. An announcement may go on playing alone.
    private mutating func settlePauseIfHeard() {
        let asked = shared.pauseRequest.load(ordering: .acquiring)
        guard state == .paused, rampOwed == 0, asked != shared.pauseSettled.load(ordering: .relaxed) else { return }
        if !pausedDeviceIdle && deviceWritten - max(0, output.delay()) < pauseEndDevice { return }
        publishHeard(advancing: false)
        shared.pauseSettled.store(asked, ordering: .releasing)  // after the position it settled on
        EventFD.signal(shared.readerWake)
    }

    /// After the last frame: wait until the device has played it, then report the end.
    private mutating func drain() {
        if voice.busy {
            // The music ended under an announcement: the clip plays on, then the end.
            drainBounds = DrainBounds()
            renderVoicePeriod()
            return
        }
        if drainBounds.deadline == 0 { output.startIfPrepared() }
        guard playedOut() else {
            publishHeard(advancing: true)
            return
        }
        dropDevice()
        publishHeard(advancing: false)
        shared.endedGeneration.store(generation, ordering: .releasing)
        state = .starting
        publishState()
        EventFD.signal(shared.readerWake)
    }

    /// Handles a negative errno from the device. Returns true when it can be used again.
    @discardableResult
    private mutating func recover(_ error: Int) -> Bool {
        if error == -Int(EPIPE) { shared.deviceXruns.add(1, ordering: .relaxed) }
        if error == -Int(ESTRPIPE) { shared.suspends.add(1, ordering: .relaxed) }
        let r = output.recover(error)
        fedUpTo = deviceWritten  // a restarted device lost its queue
        if r == 0 {
            gain = 0  // restart from silence with a ramp
            return true
        }
        shared.deviceError.store(r, ordering: .relaxed)
        state = .failed
        publishState()
        EventFD.signal(shared.readerWake)
        return false
    }

    // MARK: - Gain and conversion

    /// Multiplies each frame by the transport ramp (pause, resume, seek) times the
    /// output level, each moving linearly toward its target.
    @inline(__always)
    private mutating func applyGain(_ mix: UnsafeMutablePointer<Float>, frames: Int, fixed: UnsafeMutablePointer<Float>? = nil) {
        let rg = generation == shared.nextGeneration.load(ordering: .relaxed)
            ? shared.nextReplayGain.load(ordering: .relaxed) : shared.replayGain.load(ordering: .relaxed)
        let newLevel = Float(bitPattern: shared.level.load(ordering: .relaxed)) * Float(bitPattern: rg)
        let newFixed = Float(bitPattern: rg)
        Self.retarget(newLevel, snap: snapLevel || (joinedStream && newLevel < level),
                      &level, &levelTarget, &levelStep, rampFrames: levelRampFrames)
        // The fixed-volume copy's level: ReplayGain alone, with the same rules.
        Self.retarget(newFixed, snap: snapLevel || (joinedStream && newFixed < fixedLevel),
                      &fixedLevel, &fixedLevelTarget, &fixedLevelStep, rampFrames: levelRampFrames)
        snapLevel = false
        joinedStream = false
        let serial = shared.fadeSerial.load(ordering: .acquiring)
        if serial != fadeSerial {
            fadeSerial = serial
            fadeTarget = min(1, max(0, Float(bitPattern: shared.fadeTarget.load(ordering: .relaxed))))
            let frames = shared.fadeFrames.load(ordering: .relaxed)
            fadeStep = frames <= 0 ? 1 : 1 / Float(frames)
        }
        if let fixed {
            // Both copies in one pass: the same transport ramp and fade, each its level.
            var g = gain, l = level, lf = fixedLevel, d = fade
            let target = gainTarget, step = gainStep, lTarget = levelTarget, lStep = levelStep
            let fTarget = fixedLevelTarget, fStep = fixedLevelStep, dTarget = fadeTarget, dStep = fadeStep
            for f in 0..<frames {
                if g < target { g = min(target, g + step) } else if g > target { g = max(target, g - step) }
                if l < lTarget { l = min(lTarget, l + lStep) } else if l > lTarget { l = max(lTarget, l - lStep) }
                if lf < fTarget { lf = min(fTarget, lf + fStep) } else if lf > fTarget { lf = max(fTarget, lf - fStep) }
                if d < dTarget { d = min(dTarget, d + dStep) } else if d > dTarget { d = max(dTarget, d - dStep) }
                let factor = g * l * d, fixedFactor = g * lf * d
                let base = mix + f * channels, fixedBase = fixed + f * channels
                for c in 0..<channels { base[c] *= factor; fixedBase[c] *= fixedFactor }
            }
            gain = g; level = l; fixedLevel = lf; fade = d
            return
        }
        if gain == gainTarget && gain == 1 && level == levelTarget && fade == 1 && fadeTarget == 1 {
            if level == 1 { return }
            let n = frames * channels
            let l = level
            for i in 0..<n { mix[i] *= l }
            return
        }
        var g = gain, l = level
        let target = gainTarget, step = gainStep
        let lTarget = levelTarget, lStep = levelStep
        var d = fade
        let dTarget = fadeTarget, dStep = fadeStep
        for f in 0..<frames {
            if g < target { g = min(target, g + step) } else if g > target { g = max(target, g - step) }
            if l < lTarget { l = min(lTarget, l + lStep) } else if l > lTarget { l = max(lTarget, l - lStep) }
            if d < dTarget { d = min(dTarget, d + dStep) } else if d > dTarget { d = max(dTarget, d - dStep) }
            let factor = g * l * d
            let base = mix + f * channels
            for c in 0..<channels { base[c] *= factor }
        }
        gain = g
        level = l
        fade = d
    }

    /// A level's ramp toward `new`: taken at once (`snap`), or over `rampFrames` from
    /// wherever it is.
    @inline(__always)
    private static func retarget(_ new: Float, snap: Bool, _ value: inout Float, _ target: inout Float, _ step: inout Float,
                                 rampFrames: Int) {
        if snap {
            value = new
            target = new
        } else if new != target {
            target = new
            step = abs(new - value) / Float(rampFrames)
        }
    }

    @inline(__always)
    private func convert(_ mix: UnsafeMutablePointer<Float>, frames: Int, into destination: UnsafeMutableRawPointer) {
        let n = frames * channels
        switch format.sampleFormat {
        case .float32:
            break  // `device` is `mix`
        case .int32:
            SampleConversion.toInt32(mix, destination.assumingMemoryBound(to: Int32.self), count: n)
        case .int16:
            SampleConversion.toInt16(mix, destination.assumingMemoryBound(to: Int16.self), count: n)
        }
    }

    // MARK: - Feeds

    /// Keeps the frames about to be written at their device frame index.
    @inline(__always)
    private func keepPlayedCopy(_ p: UnsafeMutablePointer<Float>, from mix: UnsafeMutablePointer<Float>, at deviceFrame: Int, frames: Int) {
        var done = 0
        while done < frames {
            let slot = (deviceFrame + done) & (playedCapacity - 1)
            let n = min(frames - done, playedCapacity - slot)
            (p + slot * channels).update(from: mix + done * channels, count: n * channels)
            done += n
        }
    }

    /// Passes the frames the device has played since the last call on to the feeds.
    /// Real-time safe: `feeds[i]` retains a class reference (an atomic increment, no
    /// lock, no allocation); `push` is a lock-free ring write; the wake-up one
    /// `write(2)` to an eventfd per feed per call. Only called when there are feeds.
    private mutating func feedPlayed() {
        guard let p = played else { return }
        let queued = max(0, output.delay())
        let heard = max(0, deviceWritten - queued)
        if fedUpTo > deviceWritten { fedUpTo = deviceWritten }  // rewound below (cannot happen: rewinds take unplayed frames)
        if deviceWritten - fedUpTo > playedCapacity - format.periodFrames {
            fedUpTo = deviceWritten - (playedCapacity - format.periodFrames)  // overwritten already
        }
        guard heard > fedUpTo else { return }
        var i = 0
        while i < feeds.count {
            let feed = feeds[i]
            i += 1
            guard feed.enabled.load(ordering: .relaxed) else { continue }
            // No `??` here: in a debug build it is a generic call, and the first one
            // instantiates metadata under the runtime's lock (RenderThreadTests saw 7 locks).
            var source = p
            if feed.fixedVolume, let fixed = playedFixed { source = fixed }
            var at = fedUpTo
            while at < heard {
                let slot = at & (playedCapacity - 1)
                let n = min(heard - at, playedCapacity - slot)
                feed.push(source + slot * channels, frames: n)
                at += n
            }
            EventFD.signal(feed.wake)
        }
        fedUpTo = heard
    }

    // MARK: - Where frames came from

    /// Moves markers that start before `ringEnd` from the queue into the history.
    @inline(__always)
    private mutating func takeMarkers(upTo ringEnd: Int) {
        while let m = shared.markers.peek(), m.ringIndex < ringEnd {
            shared.markers.pop()
            history[historyHead] = m
            historyHead = (historyHead + 1) % historyCapacity
            historyCount = min(historyCount + 1, historyCapacity)
            if m.generation != generation {
                // The first frame of a new stream (play or seek) is about to be written.
                shared.firstWrittenTime.store(monotonicNanoseconds(), ordering: .relaxed)
                shared.firstWrittenGeneration.store(m.generation, ordering: .releasing)
                joinedStream = true
            }
            if m.snapsLevel { snapLevel = true }
            generation = m.generation
        }
    }

    /// The marker in force at ring frame `index`, if still known.
    @inline(__always)
    private func marker(forRing index: Int) -> SegmentMarker? {
        var i = 0
        while i < historyCount {
            let m = history[(historyHead - 1 - i + historyCapacity) % historyCapacity]
            if m.ringIndex <= index { return m }
            i += 1
        }
        return nil
    }

    @inline(__always)
    private mutating func record(ring: Int, length: Int) {
        pieces[pieceHead] = (deviceWritten, length, ring)
        pieceHead = (pieceHead + 1) % pieceCapacity
        pieceCount = min(pieceCount + 1, pieceCapacity)
        deviceWritten += length
    }

    /// Forgets the newest `deviceFrames` written frames (rewound out of the device) and
    /// returns how many of them came from the ring.
    private mutating func takeBack(deviceFrames: Int) -> Int {
        var left = deviceFrames
        var ringFrames = 0
        while left > 0 && pieceCount > 0 {
            let idx = (pieceHead - 1 + pieceCapacity) % pieceCapacity
            var p = pieces[idx]
            let n = min(left, p.length)
            if p.ring >= 0 { ringFrames += n }
            p.length -= n
            left -= n
            deviceWritten -= n
            if p.length == 0 {
                pieceHead = idx
                pieceCount -= 1
            } else {
                pieces[idx] = p
            }
        }
        return ringFrames
    }

    /// Publishes the source frame being heard now: the device frame
    /// `deviceWritten − delay`, mapped through the pieces and markers.
    private mutating func publishHeard(advancing: Bool) {
        let heardDevice = deviceWritten - output.delay()
        var ringIndex = shared.ring.consumerIndex
        var i = 0
        while i < pieceCount {
            let p = pieces[(pieceHead - 1 - i + pieceCapacity) % pieceCapacity]
            if p.device <= heardDevice && heardDevice < p.device + p.length {
                if p.ring >= 0 { ringIndex = p.ring + (heardDevice - p.device) }
                break
            }
            if p.ring >= 0 && p.device > heardDevice { ringIndex = p.ring }  // silence or older: next ring frame
            i += 1
        }
        guard let m = marker(forRing: ringIndex) else { return }
        // The device plays on while running and draining, and while paused until it has
        // played the ramp-out (and what it held): readers interpolate meanwhile.
        let moving = advancing && (state == .running || state == .draining || (state == .paused && !pausedDeviceIdle))
        // No interpolation past the last frame given to the device: a pause's ramp-out
        // or a track's end is where the position stops, not where the clock would say.
        var limit: Int64?
        let lastWritten = shared.ring.consumerIndex - 1
        if !m.isLoop, lastWritten >= ringIndex, let w = marker(forRing: lastWritten),
           w.generation == m.generation, w.direction == m.direction, !w.isLoop {
            let f = w.sourceFrame(atRing: lastWritten)
            limit = w.direction > 0 ? f + 1 : f
        } else if !m.isLoop, lastWritten < ringIndex {
            limit = m.sourceFrame(atRing: ringIndex)  // nothing of it written yet: it stands
        }
        shared.publishPosition(frame: m.sourceFrame(atRing: ringIndex), marker: m, ringIndex: ringIndex,
                               advancing: moving, limit: limit, at: monotonicNanoseconds())
    }

    private func publishState() {
        shared.state.store(state.rawValue, ordering: .relaxed)
    }

    private mutating func signalLowWater() {
        let fill = shared.ring.fillLevel
        if fill < shared.lowWater {
            if !lowWaterSignalled {
                lowWaterSignalled = true
                EventFD.signal(shared.readerWake)
            }
        } else {
            lowWaterSignalled = false
        }
    }
}

/// How long a drain may wait for the device to play out, in monotonic nanoseconds (0:
/// not yet set). Written by the render thread only.
struct DrainBounds {
    /// When the queue should have played, plus 150 ms.
    var deadline: UInt64 = 0
    /// How long to wait once the delay reads zero (0 when nothing was queued).
    var tail: UInt64 = 0
    /// When that wait ends (0: the delay has not yet read zero).
    var tailEnd: UInt64 = 0
}
