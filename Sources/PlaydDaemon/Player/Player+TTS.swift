import CoreStream
#if canImport(Glibc)
import Glibc
#endif

/// Home Assistant's text-to-speech through its stock MPD integration (issue 42).
///
/// HA plays any URL, its TTS clips included (`tts.speak`, `media_player.play_media`),
/// as `clear`, `add URL`, `play` on one connection: on MPD the music the household was
/// listening to is gone. playd recognises the clip by its URL (`announce.tts_urls`,
/// globs; the default matches HA's TTS proxy, `*/api/tts_proxy/*`) and plays it as an
/// announcement instead: the queue, the current entry, the position and the play
/// state from before the `clear` come back, and the clip plays over them (`tts_mode =
/// "pause"`: the music waits at the frame heard at the `clear` and goes on from it
/// after the clip; `"duck"`: it goes on under the clip, at `tts_duck_db`, from that
/// frame). The `clear` pauses the music (an exact frame) rather than stop it, and
/// status says stopped, as MPD's would; the pause becomes a stop once it has settled
/// unless the clip's `play` came first (Home Assistant sends the three within a few
/// milliseconds), which then goes on from it. Any other sequence, or a URL that
/// matches no pattern, is MPD's: the queue is replaced.
///
/// The three commands are recognised in the Player, whichever protocol sent them: a
/// `clear` starts the watch, an `add` of one matching URL to the emptied queue keeps
/// it, and a `play` of that entry ends it; any other command in between ends it (reads
/// are not commands). Control thread.
extension Player {
    /// What was there before a `clear`, while an `add` of a TTS clip and its `play`
    /// may follow.
    struct TTSWatch {
        var queue: PlayQueue
        /// The local file playing or paused at the `clear` (a stream is not resumed
        /// from a frame: it is played again from its queue entry, as MPD would).
        var track: String?
        /// Where it was heard then, in its frames (the frame the pause settled on, once
        /// it has).
        var frame: Int64
        var state: Transport.State
        /// The clip added after the `clear`; nil until then.
        var clip: String?
    }

    /// Whether `source` is a URL `announce.tts_urls` marks as a TTS clip.
    func isTTSClip(_ source: String) -> Bool {
        NetworkInput.isStreamURL(source) && config.ttsURLs.contains { fnmatch($0, source, 0) == 0 }
    }

    /// Runs `command` when it is a step of HA's TTS sequence, and returns its outcome;
    /// nil for any other command (which ends a watch; the caller runs it).
    func performTTSStep(_ command: Command) throws -> Outcome? {
        guard !config.ttsURLs.isEmpty else { ttsWatch = nil; return nil }
        switch command {
        case .clear:
            let s = engine.status()
            let local = s.track.flatMap { $0.isLive || NetworkInput.isStreamURL($0.path) ? nil : $0.path }
            let watch = TTSWatch(queue: queue, track: local, frame: s.positionFrames, state: s.state)
            clear()
            ttsWatch = watch
            return Outcome()
        case .add(let sources, .end) where ttsWatch?.clip == nil && ttsWatch != nil && queue.count == 0
                && sources.count == 1 && isTTSClip(sources[0]):
            let watch = ttsWatch
            let out = try run(command)  // added, as MPD would: a poll meanwhile sees it
            ttsWatch = watch
            ttsWatch?.clip = queue.entries.first?.path
            return out
        case .playQueue, .playIndex(0):
            guard ttsWatch?.clip != nil, queue.count == 1 else { break }
            try playTTS()
            return Outcome()
        case .playID(let id):
            guard ttsWatch?.clip != nil, queue.count == 1, queue.entries[0].id == id else { break }
            try playTTS()
            return Outcome()
        default:
            break
        }
        ttsWatch = nil
        if ttsPausedMusic != nil { stopTTSPause() }
        return nil
    }

    /// The music paused at the `clear` has stopped being heard: that frame is where it
    /// goes on after a clip; it stops now.
    func settleTTSPause() {
        let s = engine.status()
        if s.state == .paused { ttsWatch?.frame = s.positionFrames }
        stopTTSPause()
    }

    /// Stops the music paused at a `clear` (what the `clear` asked for).
    func stopTTSPause() {
        ttsPausedMusic = nil
        engine.stop()
        outputRecoveryTransport(.stop)
        saveState()
    }

    /// A pause at a `clear` that never settled (the output failed meanwhile): stopped
    /// after 2 s. From ``tick()``.
    func ttsTick() {
        if let since = ttsPausedMusic, monotonicNanoseconds() &- since > 2_000_000_000 { stopTTSPause() }
    }

    /// The queue and the music back as they were at the `clear`, and the clip over them.
    private func playTTS() throws {
        guard let watch = ttsWatch, let clip = watch.clip else { return }
        // The music's file opens off this thread: the request waits for it and runs
        // again (the watch is still there then). One that cannot be opened any more
        // stays stopped; the queue still comes back.
        var decoder: AudioDecoder?
        if let t = watch.track, watch.state != .stopped, ttsPausedMusic == nil {
            do {
                decoder = try openedFile(t)
            } catch let p as PlayerError where p.code == .workPending {
                throw p
            } catch {
                logger.warning("after a TTS clip, the music could not be played again", metadata: ["track.path": "\(t)", "error": "\(error)"])
            }
        }
        ttsWatch = nil
        let duck = config.ttsMode == "duck"
        queue = watch.queue
        pendingNext = nil
        var resumeAfter = false
        if ttsPausedMusic != nil {
            // Still in the engine, paused at the exact frame (HA's `add` and `play` come
            // a few ms after the `clear`, before the pause has settled): it goes on from
            // there.
            ttsPausedMusic = nil
            if duck { engine.resume() } else { resumeAfter = true }
        } else if let d = decoder {
            let playing = watch.state == .playing
            try engine.play(decoder: d, from: watch.frame, paused: !(duck && playing))
            resumeAfter = playing && !duck
        }
        queueChanged()
        var r = AnnounceRequest(source: clip)
        r.pause = !duck
        r.duckDB = config.ttsDuckDB
        logger.info("a TTS clip plays as an announcement; the queue is back", metadata: ["announcement": "\(clip)", "mode": "\(config.ttsMode)"])
        if announcements.current == nil {
            // resumeAfter: the music was playing; it waits paused at its frame and
            // resumes when the clip ends (keepPaused: as after an announcement that paused it).
            try start(r, keepPaused: resumeAfter)
        } else {
            announceWhenAdmitted(r) { [weak self] e in self?.refuseAnnouncement(clip, e) }
        }
    }
}
