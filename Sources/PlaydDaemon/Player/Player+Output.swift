import CoreStream

/// The output device failed while playing (PulseAudio killed, a USB DAC unplugged):
/// what to resume and when to try again. Owned by the control thread.
struct OutputRecovery {
    var lostAt: UInt64
    var error: StreamError
    var attempts = 0
    var nextAttempt: UInt64
    /// What was heard when the device went: played again from there once it is back.
    var resume: (path: String, position: Int64, paused: Bool, loop: LoopRegion?, seekable: Bool)?
    /// An attempt is under way on its worker (``Player/outputReopened(_:)`` ends it):
    /// plays wait for it (``Player/awaitOutput()``), and the tick starts no other.
    var reopening = false
    /// The file to resume, opened for the attempt under way (nil: nothing to resume from
    /// a file, or a stream's URL, opened again once the device is back).
    var opened: Result<Handoff<AudioDecoder>, StreamError>?
    /// The attempt that just failed, kept to the end of its turn: the plays that waited
    /// for it are answered with it rather than start another (``Player/flush()``).
    var failedNow: StreamError?
    /// A client's play waits for the attempt under way: if the device comes back, that
    /// play is what plays, and what was heard at the loss is not resumed.
    var playWaiting = false
    /// When the attempt under way began, and whether it has run past
    /// `limits.open_timeout` (its plays were answered `timed_out`; the
    /// worker is still in the device's open, and no other attempt starts until it is back).
    var attemptStarted: UInt64 = 0
    var timedOut = false

    /// Seconds between attempts: quick at first (a sound server restarting), then
    /// sparse, so a device that stays away costs nothing.
    static let backoffSeconds: [UInt64] = [1, 2, 4, 8, 15, 30]
    static func delay(afterAttempts n: Int) -> UInt64 {
        backoffSeconds[min(n, backoffSeconds.count - 1)] * 1_000_000_000
    }
}

/// The device reopened on a worker for a play whose track is in another format
/// (``Player/awaitDevice(for:path:)``). Owned by the control thread.
struct FormatReopen {
    let path: String
    /// The track's decoder, kept for the play that runs again.
    let decoder: Handoff<AudioDecoder>
    /// The reopen's result once it is back (or timed out).
    var result: Result<Void, StreamError>?
    let startedAt: UInt64
}

extension Player {
    /// From the tick: a reopen under way for longer than `limits.open_timeout`
    /// (``openTimeoutNanoseconds``, as a file's open) answers the plays waiting for it
    /// with `timed_out`. A sound server that accepts the connection and never answers (a
    /// PulseAudio stopped while it restarts) holds the ALSA plugin's open for ever,
    /// measured with `aplay -D pulse`; the worker stays in the open (nothing can cancel
    /// it) and its result, if it ever comes, is taken as usual. Control thread.
    func reopenTimeoutTick() {
        let now = monotonicNanoseconds(), limit = openTimeoutNanoseconds
        if let f = formatReopen, f.result == nil, now &- f.startedAt > limit {
            formatReopen?.result = .failure(reopenTimedOut)
            formatReopenHung = true
            logger.warning("the output's reopen for a track's format did not end in time", metadata: ["track.path": "\(f.path)"])
            resumeParked()
        }
        if var r = recovery, r.reopening, !r.timedOut, now &- r.attemptStarted > limit {
            r.timedOut = true
            r.error = reopenTimedOut
            r.failedNow = reopenTimedOut
            // The plays that waited were answered: what was heard resumes once it is back.
            r.playWaiting = false
            recovery = r
            logger.warning("the output's reopen did not end in time", metadata: ["attempt": "\(r.attempts)"])
            resumeParked()
        }
    }

    var reopenTimedOut: StreamError {
        StreamError(.timedOut, "the output did not reopen within \(config.openTimeout) s (limits.open_timeout; a sound server that does not answer?)")
    }

    /// An `output_failed` error from the engine. Control thread.
    func outputLost(_ error: StreamError) {
        guard recovery == nil else { return }
        let s = engine.status()
        let now = monotonicNanoseconds()
        var r = OutputRecovery(lostAt: now, error: error, nextAttempt: now + OutputRecovery.delay(afterAttempts: 0))
        if let t = s.track, s.state != .stopped {
            r.resume = (t.path, s.positionFrames, s.state == .paused, s.loop, t.isSeekable)
        }
        recovery = r
        // As MPD does: the player pauses while its output is gone (status says so, with
        // `output_error`), and plays on by itself once it is back.
        if s.state == .playing { engine.pause() }
        logger.warning("output lost: retrying with backoff", metadata: ["error": "\(error.message)",
                                                                        "track.path": "\(r.resume?.path ?? "-")",
                                                                        "position.frames": "\(r.resume?.position ?? 0)"])
        emit(.outputLost(code: error.code.name, message: error.message,
                         retryMillis: Int64(OutputRecovery.delay(afterAttempts: 0) / 1_000_000)))
    }

    /// From the tick: one attempt when it is due. Control thread.
    ///
    /// The file to resume is opened off this thread first (issue 38): its open on this
    /// thread, on a mount whose reads hang, stopped every client once the device was
    /// back. Until it has opened no attempt is made; the turn in which it opens makes it
    /// (``retryOutputRecovery()``). The device's reopen then runs on a worker too
    /// (``PlaybackEngine/recoverOutput()``): a sound server that accepts the connection
    /// and never answers (a PulseAudio stopped while it restarts) hangs the ALSA plugin's
    /// open, and on this thread that stopped every client. Its result comes back in
    /// ``outputReopened(_:)``. A stream's URL is opened again off this thread once the
    /// device is back (``openStream(_:entry:at:atSeconds:paused:)``): a radio from where
    /// it is now (it cannot seek back to what was heard), a file on a web server from the
    /// frame heard. Before, the engine opened it here, and a radio's "from the frame
    /// heard" was refused (`not_seekable`): the radio never came back.
    /// `forPlay`: made now for a client's play (``awaitOutput()``), which plays instead
    /// of what was heard: the file to resume is not waited for.
    func outputRecoveryTick(forPlay: Bool = false) {
        guard var r = recovery, !r.reopening, forPlay || monotonicNanoseconds() >= r.nextAttempt else { return }
        var opened: Result<Handoff<AudioDecoder>, StreamError>?
        if !forPlay, let path = r.resume?.path, !NetworkInput.isStreamURL(path) {
            if let done = openedFiles.removeValue(forKey: path) {
                opened = done
            } else {
                do {
                    if openingFiles[path] == nil {
                        logger.notice("output recovery: the file to resume is opening first", metadata: ["track.path": "\(path)"])
                    }
                    guard let sync = try startOpening(path) else { return }  // under way
                    opened = .success(Handoff(sync))
                } catch {
                    // Too many files opening already (hung mounts): this attempt resumes nothing.
                    opened = .failure(StreamError(.timedOut, (error as? PlayerError)?.message ?? "\(error)"))
                }
            }
        }
        r.attempts += 1
        r.reopening = true
        r.timedOut = false
        r.attemptStarted = monotonicNanoseconds()
        // While it is under way `status` already counts it, so its `next_retry_ms` says
        // when the next would come if this one fails (set again from its failure): a
        // stale 0 here was read in a loaded CI run, as if the backoff had no delay.
        r.nextAttempt = r.attemptStarted + OutputRecovery.delay(afterAttempts: r.attempts)
        r.playWaiting = forPlay
        r.opened = opened
        recovery = r
        let engine = self.engine, post = self.post
        let attempt: @Sendable () -> Void = {
            let result = Result { () throws(StreamError) in try engine.recoverOutput() }
            post { [weak self] in self?.outputReopened(result) }
        }
        if !PThread.detached(name: "playd-reopen", attempt) {
            // No thread to be had (a thread limit): here, as before.
            outputReopened(Result { () throws(StreamError) in try engine.recoverOutput() })
        }
    }

    /// The attempt's result, on the control thread: the track heard resumed, or the next
    /// attempt scheduled; then the plays that waited for it run again.
    func outputReopened(_ result: Result<Bool, StreamError>) {
        ControlThread.check()
        guard var r = recovery, r.reopening else { return }
        r.reopening = false
        r.timedOut = false
        let opened = r.playWaiting ? nil : r.opened
        let resumeHeard = r.playWaiting ? nil : r.resume
        r.opened = nil
        r.playWaiting = false
        recovery = r
        defer {
            resumeParked()
            outputReopenEnded = true
        }
        do throws(StreamError) {
            // false: the user played something meanwhile and that reopened the device;
            // what was heard at the loss is no longer wanted.
            let reopened = try result.get()
            if reopened, let resume = resumeHeard {
                do throws(StreamError) {
                    switch opened {
                    case .success(let decoder):
                        try engine.play(decoder: decoder.value, from: resume.position, paused: resume.paused)
                    case .failure(let error):
                        throw error
                    case nil:
                        let entry = queue.currentEntry.flatMap { $0.path == resume.path ? $0.id : nil }
                        openStream(resume.path, entry: entry, at: resume.seekable ? resume.position : nil, paused: resume.paused)
                    }
                    if opened != nil {
                        if let l = resume.loop { try? engine.setLoop(l) }
                        queueNextInEngine()
                    }
                } catch where error.code == .outputUnavailable || error.code == .outputFailed {
                    throw error
                } catch {
                    // The device is back but the file is not (deleted meanwhile): say so, stop.
                    logger.warning("output back, but the track cannot be resumed", metadata: ["error": "\(error.message)"])
                    emit(.error(code: error.code.name, message: error.message))
                }
            }
            let ms = (monotonicNanoseconds() - r.lostAt) / 1_000_000
            recovery = nil
            logger.notice("output back", metadata: ["after.ms": "\(ms)", "attempts": "\(r.attempts)"])
            emit(.outputRestored(afterMillis: Int64(ms), attempts: r.attempts))
        } catch {
            r.error = error
            r.failedNow = error
            r.nextAttempt = monotonicNanoseconds() + OutputRecovery.delay(afterAttempts: r.attempts)
            recovery = r
            logger.warning("output still unavailable", metadata: ["attempt": "\(r.attempts)", "error": "\(error.message)",
                                                                  "retry.in.s": "\(OutputRecovery.delay(afterAttempts: r.attempts) / 1_000_000_000)"])
        }
    }

    /// For a request that would play while the output is lost (its play would reopen the
    /// device, on this thread): an attempt is made now on the worker, or the one under
    /// way awaited, and the request waits for it (`workPending`; ``resumeParked`` runs
    /// it again). Once the device is back it plays, and what was heard at the loss is
    /// not resumed (the request wins, as before). When the attempt fails, the request is
    /// answered with its error, as before, no other attempt is made for it, and what
    /// was heard is still resumed when the device is back. Control thread.
    func awaitOutput() throws {
        ControlThread.check()
        guard let r = recovery else { return }
        if let failed = r.failedNow { throw failed }
        // The attempt under way timed out and is still in the device's open: at once.
        if r.reopening && r.timedOut { throw r.error }
        if !r.reopening { outputRecoveryTick(forPlay: true) }
        guard recovery?.reopening == true else {
            if let failed = recovery?.failedNow { throw failed }
            return
        }
        recovery?.playWaiting = true
        throw PlayerError(.workPending, "waiting for the output to be reopened")
    }

    /// Before a request's play of `decoder` (opened from `path`): when its track needs
    /// the device in another format, the device is reopened on a worker first
    /// (``PlaybackEngine/openOutput(for:preferring:)``; issue 38: the open of a sound
    /// server that hangs stopped every client) and the request waits (`workPending`).
    /// Run again, it finds the decoder kept here (``keptDecoder(_:)``) and the device
    /// open in its format, or the reopen's error. A play of another track while one is
    /// under way waits for it too. Control thread.
    func awaitDevice(for decoder: AudioDecoder, path: String) throws {
        ControlThread.check()
        if let f = formatReopen {
            guard let result = f.result else {
                throw PlayerError(.workPending, "waiting for the output to be reopened")
            }
            formatReopen = nil
            if f.path == path {
                try result.get()
                if !engine.needsReopen(for: decoder) { return }
            }
        }
        guard recovery == nil, engine.needsReopen(for: decoder) else { return }
        if formatReopenHung { throw reopenTimedOut }
        let engine = self.engine, post = self.post
        let format = PCMFormat(sampleRate: decoder.info.sampleRate, channels: decoder.info.channels)
        let width = decoder.info.preferredDeviceFormat
        formatReopen = FormatReopen(path: path, decoder: Handoff(decoder), result: nil, startedAt: monotonicNanoseconds())
        let reopen: @Sendable () -> Void = {
            let result = Result { () throws(StreamError) in try engine.openOutput(for: format, preferring: width) }
            post { [weak self] in self?.formatReopened(path, result) }
        }
        guard PThread.detached(name: "playd-reopen", reopen) else {
            formatReopen = nil  // no thread to be had: the play reopens it here, as before
            return
        }
        throw PlayerError(.workPending, "waiting for the output to be reopened for \(format.sampleRate) Hz")
    }

    /// The decoder kept for `path` while the device was reopened for it. Control thread.
    func keptDecoder(_ path: String) -> AudioDecoder? {
        guard let f = formatReopen, f.path == path, f.result != nil else { return nil }
        return f.decoder.value
    }

    /// The worker's reopen is back: the requests waiting for it run again. Control thread.
    func formatReopened(_ path: String, _ result: Result<Void, StreamError>) {
        ControlThread.check()
        formatReopenHung = false  // one worker at a time: this one is back
        guard formatReopen?.path == path, formatReopen?.result == nil else { return }
        formatReopen?.result = result
        if case .failure(let e) = result {
            logger.warning("the output could not be reopened for a track's format", metadata: ["track.path": "\(path)", "error": "\(e.message)"])
        }
        resumeParked()
    }

    /// At the end of the turn the reopen came back in, after the sessions' requests ran
    /// again: a queue entry or a stream that waited without a session goes on; a reopen
    /// nobody took (its client hung up) leaves the engine stopped, since what played was
    /// let go of for it. From ``flush()``.
    func retryFormatReopen() {
        guard let f = formatReopen, f.result != nil else { return }
        if let a = autoPlay, a.awaited == f.path, let i = queue.index(ofID: a.start) {
            autoPlay = nil
            playEntryLater(i)
        }
        if let (serial, result) = deferredStreamOpen, streamOpening?.url == f.path {
            deferredStreamOpen = nil
            streamOpened(serial, result)
        }
        if let left = formatReopen, left.result != nil {
            formatReopen = nil
            if case .success = left.result { engine.stop() }
        }
    }

    /// What waited for the reopen without a session to run it again: a queue entry
    /// played by a track's end or a delete (``autoPlay``; a session's own request ran
    /// again first and took it), a stream that opened meanwhile (``deferredStreamOpen``).
    /// Control thread.
    private func resumeAfterReopen() {
        if let a = autoPlay, let i = queue.index(ofID: a.start) {
            autoPlay = nil
            playEntryLater(i)
        }
        if let (serial, result) = deferredStreamOpen {
            deferredStreamOpen = nil
            streamOpened(serial, result)
        }
    }

    /// The attempt that waited for its file to open, in the turn the open finished (the
    /// turn's opens are dropped at its end). From ``flush()``, which then forgets the
    /// failure of this turn's attempt.
    func retryOutputRecovery() {
        if outputReopenEnded {
            outputReopenEnded = false
            resumeAfterReopen()
        }
        if recovery?.failedNow != nil { recovery?.failedNow = nil }
        guard let path = recovery?.resume?.path, openedFiles[path] != nil else { return }
        outputRecoveryTick()
    }

    /// The engine's status, except that while the output is lost the position is the
    /// one heard when it went (what playback resumes from): the engine's own figure
    /// is meaningless once its device is gone.
    public func playerStatus() -> PlaybackEngine.Status {
        var s = engine.status()
        if let r = recovery?.resume, s.track?.path == r.path { s.positionFrames = r.position }
        if ttsPausedMusic != nil {
            // Cleared: stopped, as MPD says, while the music waits for a TTS clip.
            s.state = .stopped
            s.track = nil
            s.positionFrames = 0
        }
        return s
    }

    /// A transport request while the output is lost changes what happens when it is
    /// back: after `stop` (or `clear`) nothing resumes; after `pause`, `resume` or
    /// `toggle` it comes back in the state the player now shows. Control thread.
    func outputRecoveryTransport(_ command: Command.Transport) {
        guard var r = recovery, r.resume != nil else { return }
        let state = engine.status().state
        if command == .stop || state == .stopped {
            r.resume = nil
        } else {
            r.resume!.paused = state == .paused
        }
        recovery = r
    }

    /// The output's loss while it lasts: for `status.output_error` and MPD's `error:`.
    public var outputLoss: (error: StreamError, sinceMillis: Int64, attempts: Int, nextRetryMillis: Int64)? {
        guard let r = recovery else { return nil }
        let now = monotonicNanoseconds()
        return (r.error, Int64((now - r.lostAt) / 1_000_000), r.attempts,
                Int64(r.nextAttempt > now ? (r.nextAttempt - now) / 1_000_000 : 0))
    }
}
