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

    /// Seconds between attempts: quick at first (a sound server restarting), then
    /// sparse, so a device that stays away costs nothing.
    static let backoffSeconds: [UInt64] = [1, 2, 4, 8, 15, 30]
    static func delay(afterAttempts n: Int) -> UInt64 {
        backoffSeconds[min(n, backoffSeconds.count - 1)] * 1_000_000_000
    }
}

extension Player {
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
    /// (``retryOutputRecovery()``). A stream's URL is opened again off this thread too
    /// once the device is back (``openStream(_:entry:at:atSeconds:paused:)``): a radio
    /// from where it is now (it cannot seek back to what was heard), a file on a web
    /// server from the frame heard. Before, the engine opened it here, and a radio's
    /// "from the frame heard" was refused (`not_seekable`): the radio never came back.
    func outputRecoveryTick() {
        guard var r = recovery, monotonicNanoseconds() >= r.nextAttempt else { return }
        var opened: Result<AudioDecoder, StreamError>?
        if let path = r.resume?.path, !NetworkInput.isStreamURL(path) {
            if let done = openedFiles.removeValue(forKey: path) {
                opened = done.map(\.value)
            } else {
                do {
                    if openingFiles[path] == nil {
                        logger.notice("output recovery: the file to resume is opening first", metadata: ["track.path": "\(path)"])
                    }
                    guard let sync = try startOpening(path) else { return }  // under way
                    opened = .success(sync)
                } catch {
                    // Too many files opening already (hung mounts): this attempt resumes nothing.
                    opened = .failure(StreamError(.timedOut, (error as? PlayerError)?.message ?? "\(error)"))
                }
            }
        }
        r.attempts += 1
        do throws(StreamError) {
            // false: the user played something meanwhile and that reopened the device;
            // what was heard at the loss is no longer wanted.
            let reopened = try engine.recoverOutput()
            if reopened, let resume = r.resume {
                do throws(StreamError) {
                    switch opened {
                    case .success(let decoder):
                        try engine.play(decoder: decoder, from: resume.position, paused: resume.paused)
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
            r.nextAttempt = monotonicNanoseconds() + OutputRecovery.delay(afterAttempts: r.attempts)
            recovery = r
            logger.warning("output still unavailable", metadata: ["attempt": "\(r.attempts)", "error": "\(error.message)",
                                                                  "retry.in.s": "\(OutputRecovery.delay(afterAttempts: r.attempts) / 1_000_000_000)"])
        }
    }

    /// The attempt that waited for its file to open, in the turn the open finished (the
    /// turn's opens are dropped at its end). From ``flush()``.
    func retryOutputRecovery() {
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
