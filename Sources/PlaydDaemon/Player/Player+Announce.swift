import CoreStream

/// Announcements over the music (the engine's second voice, Voice.swift): one plays at
/// a time, the others wait their turn. Control thread.
extension Player {
    /// One announcement as a client asked for it.
    public struct AnnounceRequest: Sendable, Equatable {
        /// The clip: a file (under the roots, as `play`) or an http(s) URL.
        public var source: String
        /// Played just before the clip, under the same duck.
        public var chime: String?
        /// The music's level under the clip, dB: −60…0.
        public var duckDB: Double = -18
        /// The clip's gain, dB: −30…12.
        public var gainDB: Double = 0
        /// Pause the music for the clip (it resumes from the same frame), rather than duck it.
        public var pause = false
        public init(source: String) { self.source = source }
    }

    /// What plays and what waits. Control thread.
    struct Announcements {
        var current: (id: UInt64, request: AnnounceRequest, resumeAfter: Bool)?
        var waiting: [AnnounceRequest] = []
        /// Requests from callers that cannot be answered later (a schedule, an MPD
        /// message, a TTS clip) whose clips are being checked off this thread, with what
        /// to do if they are refused (``announceWhenAdmitted(_:refused:)``).
        var admitting: [(request: AnnounceRequest, refused: (PlayerError) -> Void)] = []
    }

    /// Announcements waiting behind the current one, at most (a request beyond is refused).
    static let maxWaitingAnnouncements = 16
    /// The MPD channel clients `sendmessage` announcements to.
    public static let announceChannel = "announce"

    /// The announcement playing (nil: none), and how many wait.
    public var announcing: (request: AnnounceRequest, waiting: Int)? {
        announcements.current.map { ($0.request, announcements.waiting.count) }
    }

    /// Plays `r` now, or queues it; returns how many play before it (0: none).
    @discardableResult
    func announce(_ r: AnnounceRequest) throws -> Int {
        guard r.duckDB.isFinite, (-60...0).contains(r.duckDB) else {
            throw PlayerError(.invalidArgument, "duck \(r.duckDB) dB is outside −60…0")
        }
        guard r.gainDB.isFinite, (-30...12).contains(r.gainDB) else {
            throw PlayerError(.invalidArgument, "gain \(r.gainDB) dB is outside −30…12")
        }
        guard !r.source.isEmpty else { throw PlayerError(.badRequest, "the announcement needs a file or URL") }
        let checked = try admitClips(r)
        if announcements.current == nil {
            try start(checked)
            return 0
        }
        guard announcements.waiting.count < Self.maxWaitingAnnouncements else {
            throw PlayerError(.tooLarge, "\(Self.maxWaitingAnnouncements) announcements are waiting already")
        }
        announcements.waiting.append(checked)
        return announcements.waiting.count
    }

    /// Stops the announcement playing, with a ramp; the next waiting one follows.
    func cancelAnnouncement() throws {
        guard announcements.current != nil, engine.cancelAnnouncement() else {
            throw PlayerError(.notPlaying, "no announcement is playing")
        }
    }

    /// As ``announce(_:)`` for a caller that cannot be answered later (a schedule's
    /// announcement, an MPD message already answered, a TTS clip behind another
    /// announcement): while its clips are checked off this thread it waits here, and
    /// goes on, or is `refused`, when they have been.
    func announceWhenAdmitted(_ r: AnnounceRequest, refused: @escaping (PlayerError) -> Void) {
        do {
            _ = try announce(r)
        } catch let e as PlayerError where e.code == .workPending {
            // Capped as the waiting list is: an MPD client sending one message after
            // another while a mount hangs (each waits up to the 5 s guard).
            guard announcements.admitting.count < Self.maxWaitingAnnouncements else {
                refused(PlayerError(.tooLarge, "\(Self.maxWaitingAnnouncements) announcements are being checked already"))
                return
            }
            announcements.admitting.append((r, refused))
        } catch {
            refused(PlayerError(any: error))
        }
    }

    /// Runs the ``announceWhenAdmitted(_:refused:)`` requests again: those whose clips
    /// have been checked go on. From ``flush()``, while the reads of the turn are kept.
    func retryAdmittingAnnouncements() {
        guard !announcements.admitting.isEmpty else { return }
        let admitting = announcements.admitting
        announcements.admitting = []
        for a in admitting { announceWhenAdmitted(a.request, refused: a.refused) }
    }

    /// The request with its clips admitted as `play` admits one (roots, allowed hosts),
    /// each local one opened once so a missing or damaged clip is refused before anything
    /// is ducked. Off this thread (issue 38): a clip's realpath, stat and FFmpeg open
    /// on a hung mount never return, and on the control thread they stopped every
    /// client. Throws `workPending` until the check is back (``readOffThread``).
    private func admitClips(_ r: AnnounceRequest) throws -> AnnounceRequest {
        let given = [r.source] + (r.chime.map { [$0] } ?? [])
        let admission = self.admission
        let check: @Sendable () -> ReadOutcome<[String]> = {
            ReadOutcome {
                try given.map { clip in
                    let path = try admission.admit(clip)
                    if !NetworkInput.isStreamURL(path) { _ = try AudioDecoder(path: path) }
                    return path
                }
            }
        }
        // URLs only: nothing on a disk to wait for.
        let done = given.allSatisfy(NetworkInput.hasScheme)
            ? check() : try readOffThread("announce\0" + given.joined(separator: "\0"), what: "announcement \(r.source)", check)
        let paths = try done.result.get()
        var checked = r
        checked.source = paths[0]
        checked.chime = paths.count > 1 ? paths[1] : nil
        return checked
    }

    /// `keepPaused`: the music was paused for the announcement before this one (both
    /// in pause mode) and is resumed after this one instead.
    func start(_ r: AnnounceRequest, keepPaused: Bool = false) throws {
        // A URL gets the stream limits and a cancel flag of its own (a cancel or a
        // shutdown does not wait for its connect).
        let sources = ([r.chime].compactMap { $0 } + [r.source]).map { path in
            NetworkInput.isStreamURL(path) ? PlaybackEngine.VoiceSource(path: path, stream: streamOptions(StreamCancel()))
                                           : PlaybackEngine.VoiceSource(path: path)
        }
        var mix = PlaybackEngine.Announcement()
        mix.duckDB = r.duckDB
        mix.gainDB = r.gainDB
        // Pause mode: the music ramps out at an exact frame (the engine's pause) and
        // resumes from it after the clip.
        let resume = keepPaused || (r.pause && engine.status().state == .playing)
        if resume && !keepPaused { engine.pause() }
        do {
            let id = try engine.announce(sources, label: r.source, options: mix)
            announcements.current = (id, r, resume)
            logger.info("announcement", metadata: ["announcement": "\(r.source)", "mode": "\(r.pause ? "pause" : "duck")"])
        } catch {
            if resume { engine.resume() }
            throw error
        }
    }

    /// The engine's news of an announcement, on the control thread.
    func announcementEvent(_ e: PlaybackEngine.Event) {
        switch e {
        case .announcementStarted(let id, let label, let frame):
            guard announcements.current?.id == id else { return }
            emit(.announcementStarted(source: label, musicFrame: frame))
        case .announcementEnded(let id, let label, let cancelled, let error):
            guard let current = announcements.current, current.id == id else { return }
            announcements.current = nil
            // Back to playing only if nobody changed the state meanwhile; not between two
            // announcements that both pause it (the music would blip in between).
            var keepPaused = false
            if current.resumeAfter && engine.status().state == .paused {
                if announcements.waiting.first?.pause == true { keepPaused = true } else { engine.resume() }
            }
            emit(.announcementEnded(source: label, cancelled: error == nil && cancelled, error: error.map(PlayerError.init)))
            startWaiting(keepPaused: keepPaused)
        default:
            break
        }
    }

    private func startWaiting(keepPaused: Bool) {
        var keepPaused = keepPaused
        while announcements.current == nil && !announcements.waiting.isEmpty {
            let next = announcements.waiting.removeFirst()
            do {
                try start(next, keepPaused: keepPaused)
            } catch {
                keepPaused = false  // `start` resumed the music when it failed
                emit(.announcementEnded(source: next.source, cancelled: false, error: PlayerError(any: error)))
            }
        }
    }

    /// An announcement a protocol could not even read (MPD's `announce` channel, whose
    /// `sendmessage` has replied already): logged, and told to JSON subscribers.
    func refuseAnnouncement(_ text: String, _ error: PlayerError) {
        logger.warning("announcement refused", metadata: ["message": "\(text)", "error": "\(error.message)"])
        emit(.announcementEnded(source: text, cancelled: false, error: error))
    }
}
