import CoreStream
import Dispatch

/// `play PATH` of a local file opens it off the control thread (issue 38): FFmpeg's
/// open, probe and exact-length tail decode read the file, and on a hung FUSE or NFS
/// mount that read never returns. On the control thread it stopped every client and
/// the watchdog killed playd. The request waits instead (``PlayerError/Code/workPending``,
/// as a folder `add` does) while the other clients are served, and is answered when the
/// file has opened, when it could not, or after `limits.open_timeout`.
extension Player {
    /// How long a `play` waits for its file to open, or for the output's reopen, before
    /// it is answered `timed_out`: `limits.open_timeout` (30 s by default; range-checked
    /// to 1…3600 s when read, so no overflow here). The thread reading a file cannot be
    /// stopped (a thread in a FUSE request waits for the answer, for any program); what
    /// it opens late is dropped.
    var openTimeoutNanoseconds: UInt64 { UInt64(config.openTimeout) * 1_000_000_000 }
    /// Opens in flight at once: each one stuck on a hung mount keeps its thread.
    static let maxFileOpens = 8

    /// The decoder for `path` once it has opened off this thread; throws `workPending`
    /// until then (the session asks again when ``resumeParked`` runs), and the open's
    /// typed error after. Control thread.
    func openedFile(_ path: String) throws -> AudioDecoder {
        ControlThread.check()
        if let kept = keptDecoder(path) { return kept }
        if let done = openedFiles.removeValue(forKey: path) { return try done.get().value }
        if let sync = try startOpening(path) { return sync }
        throw PlayerError(.workPending, "playing \(path): waiting for the file to open")
    }

    /// Throws `workPending` until `path` has opened (or failed to), leaving the result
    /// for the ``openedFile(_:)`` that follows in the same run. For a request that must
    /// wait before it changes anything: run again, it would change it twice. Control
    /// thread.
    func awaitOpened(_ path: String) throws {
        ControlThread.check()
        guard openedFiles[path] == nil else { return }
        if let sync = try startOpening(path) { openedFiles[path] = .success(Handoff(sync)); return }
        throw PlayerError(.workPending, "waiting for \(path) to open")
    }

    /// Starts the open of `path` off this thread unless it is under way; returns the
    /// decoder when no thread could be had and it was opened here.
    func startOpening(_ path: String) throws -> AudioDecoder? {
        if openingFiles[path] == nil {
            guard openingFiles.count < Self.maxFileOpens else {
                throw PlayerError(.stream(.timedOut), "\(path): \(Self.maxFileOpens) files are still opening (a hung disk or network mount?); try again later")
            }
            let post = self.post
            let onOpener = !fileOpenerBusy
            // Measured loudness in use and none for this file: measured (or read from the
            // index) before it plays when that takes under a second (issue 43).
            let level = engine.status().level
            let measure = level.replayGain != .off && level.source != .tags && !loudness.isKnown(path)
            let source = level.source, loudness = self.loudness
            let open: @Sendable () -> Void = {
                let result = Result { () throws(StreamError) in Handoff(try AudioDecoder(path: path)) }
                if measure, case .success(let d) = result, source == .measured || ReplayGainInfo(tags: d.value.info.tags).isEmpty {
                    loudness.measureBeforePlay(path)
                }
                post { [weak self] in
                    if onOpener { self?.fileOpenerBusy = false }
                    self?.fileOpened(path, result)
                }
            }
            if onOpener {
                fileOpenerBusy = true
                // The opener thread is free: the open runs there (one thread kept while
                // opens follow each other, rather than one made for each).
                fileOpener.submit(open)
            } else if !PThread.detached(name: "playd-open-file", open) {
                // The opener is still at one, perhaps on a hung mount: this one gets a
                // thread of its own rather than wait behind it. No thread to be had (a thread
                // limit): open here, as before.
                return try AudioDecoder(path: path)
            }
            openingFiles[path] = monotonicNanoseconds()
        }
        return nil
    }

    /// The saved track's open at start, on a thread of its own, waited for up to
    /// `graceSeconds` (before READY=1): a file on a disk that answers opens in
    /// milliseconds and plays at once, as it did when it was opened here; one on a hung
    /// mount is left to finish later, its result posted as ``startOpening(_:)``'s
    /// (``fileOpened(_:_:)``), and nil is returned. No thread to be had: opened here.
    /// Control thread.
    func openAtStart(_ path: String, graceSeconds: Double) throws(StreamError) -> AudioDecoder? {
        final class Rendezvous: Sendable {
            let state = Locked<(result: Result<Handoff<AudioDecoder>, StreamError>?, late: Bool)>((nil, false))
            let arrived = DispatchSemaphore(value: 0)
        }
        let r = Rendezvous()
        let post = self.post
        openingFiles[path] = monotonicNanoseconds()
        let started = PThread.detached(name: "playd-open-file") {
            let result = Result { () throws(StreamError) in Handoff(try AudioDecoder(path: path)) }
            let late = r.state.withLock { s -> Bool in s.result = result; return s.late }
            r.arrived.signal()
            if late { post { [weak self] in self?.fileOpened(path, result) } }
        }
        guard started else {
            openingFiles[path] = nil
            return try AudioDecoder(path: path)
        }
        _ = r.arrived.wait(timeout: .now() + graceSeconds)
        let inTime = r.state.withLock { s -> Result<Handoff<AudioDecoder>, StreamError>? in
            if s.result == nil { s.late = true }
            return s.result
        }
        guard let result = inTime else { return nil }
        openingFiles[path] = nil
        return try result.get().value
    }

    /// An open finished: its result waits for the sessions resumed in this turn
    /// (``flush()`` drops it after). One that timed out meanwhile is dropped.
    func fileOpened(_ path: String, _ result: Result<Handoff<AudioDecoder>, StreamError>) {
        ControlThread.check()
        guard let since = openingFiles.removeValue(forKey: path) else {
            logger.debug("a file opened after its time; dropped", metadata: ["track.path": "\(path)"])
            return
        }
        logger.debug("file opened", metadata: ["track.path": "\(path)", "ms": "\((monotonicNanoseconds() &- since) / 1_000_000)",
                                               "ok": "\((try? result.get()) != nil)"])
        openedFiles[path] = result
        resumeParked()
    }

    /// Answers the opens that have waited too long with `timed_out`. From ``tick()``,
    /// which runs after the turn's sessions and before its ``flush()`` (which drops
    /// `openedFiles`): the failure is posted, so it arrives at the start of the next turn
    /// as an open's result does, and the parked play is resumed in that turn and answered.
    /// Set here, it was dropped unread and the play started the same open again: a play
    /// on a hung mount was never answered (every `open_timeout`, one more thread in it).
    func fileOpenTick() {
        let now = monotonicNanoseconds()
        // The saved track at start is waited for as long as it takes (a NAS booting).
        for (path, since) in openingFiles where now &- since > openTimeoutNanoseconds && path != restoreOpening?.file {
            openingFiles[path] = nil
            let failure = StreamError(.timedOut, "\(path): the file did not open within \(config.openTimeout) s (limits.open_timeout; a hung disk or network mount?)")
            logger.warning("a file did not open in time", metadata: ["track.path": "\(path)"])
            post { [weak self] in
                self?.openedFiles[path] = .failure(failure)
                self?.resumeParked()
            }
        }
    }
}
