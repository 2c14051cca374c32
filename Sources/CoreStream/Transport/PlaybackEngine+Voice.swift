import Logging
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Announcements: the second voice (see ``VoiceShared`` for the mix and its envelope).
extension PlaybackEngine {
    /// How an announcement is mixed.
    public struct Announcement: Sendable, Equatable {
        /// The music's level under the clip, dB (≤ 0).
        public var duckDB: Double = -18
        /// The clip's own gain, dB.
        public var gainDB: Double = 0
        /// Ramp down before the clip and up after it, milliseconds.
        public var downMillis = 150
        public var upMillis = 500
        /// The clip (chime included) is cut here: a live stream given as a clip would
        /// otherwise duck the music for ever.
        public var maxSeconds = 600
        public init() {}
    }

    /// One source of an announcement: a file or an http(s) URL (opened on the voice
    /// thread: a URL's connect may take its timeout), with the stream limits for a URL.
    public struct VoiceSource: Sendable {
        public var path: String
        public var stream: StreamOptions
        public init(path: String, stream: StreamOptions = StreamOptions()) {
            self.path = path
            self.stream = stream
        }
    }

    /// Starts an announcement: `sources` (a chime, then the clip) are opened and decoded
    /// one after the other on a voice thread, into the running device format, and mixed
    /// over the music by the render thread. Events: `announcementStarted` when the
    /// render thread starts it, `announcementEnded` when it is over (or could not be
    /// opened). One at a time: the caller queues (throws `.invalidArgument` while one
    /// runs). Returns the announcement's id. Thread: control side.
    @discardableResult
    public func announce(_ sources: [VoiceSource], label: String, options: Announcement) throws(StreamError) -> UInt64 {
        guard let pcm = control.withLock({ $0.negotiated?.pcm }) else {
            throw StreamError(.outputUnavailable, "no output is open for the announcement")
        }
        return try voiceControl.withLock { (v: inout VoiceControl) throws(StreamError) -> UInt64 in
            if let t = v.thread {
                guard v.finished.isSet else {
                    throw StreamError(.invalidArgument, "an announcement is playing: \(v.label)")
                }
                t.join()
            }
            v.lastID += 1
            let id = v.lastID
            v.id = id
            v.label = label
            v.cancels = sources.compactMap { $0.stream.cancel }
            v.finished = FinishedFlag()
            let reader = VoiceReader(voice: shared.voice, renderWake: shared.renderWake, id: id, label: label, format: pcm,
                                     options: options, sources: sources, logger: logger, onEvent: onEvent, finished: v.finished)
            let h = Handoff(reader)
            v.thread = PThread(name: "playd-voice") { h.value.run() }
            return id
        }
    }

    /// Stops the announcement playing (the clip fades out over 20 ms, the music ramps
    /// back up). Returns false when none was playing. Thread: control side.
    @discardableResult
    public func cancelAnnouncement() -> Bool {
        voiceControl.withLock { v in
            // Once per announcement: one already told to go is going (300 cancels in 30 ms
            // all answered ok for the one announcement they ended, issue 39).
            guard v.thread != nil, !v.finished.isSet, shared.voice.cancel.load(ordering: .relaxed) != v.id else { return false }
            shared.voice.cancel.store(v.id, ordering: .relaxed)
            // A URL still connecting (up to its timeout) or being read gives way.
            for c in v.cancels { c.cancel() }
            EventFD.signal(shared.renderWake)
            EventFD.signal(shared.voice.wake)
            return true
        }
    }

    /// Voice thread underruns so far (the clip's ring found empty before its end).
    public var voiceUnderruns: Int { shared.voice.underruns.load(ordering: .relaxed) }

    /// Ends the voice thread (shutdown).
    func stopVoice() {
        shared.voice.quit.store(true, ordering: .relaxed)
        EventFD.signal(shared.voice.wake)
        voiceControl.withLock { v in
            for c in v.cancels { c.cancel() }
            v.thread?.join()
            v.thread = nil
        }
    }
}

/// The engine's record of the voice thread. Protected by `voiceControl`; taken after
/// `control` when both are held, never before it.
struct VoiceControl {
    var thread: PThread?
    var id: UInt64 = 0
    var lastID: UInt64 = 0
    var label = ""
    /// The cancel flags of its URLs' stream options.
    var cancels: [StreamCancel] = []
    /// Set by the voice thread (release) as its last act.
    var finished = FinishedFlag()
}

/// A flag the voice thread sets when it is done, shared with the engine.
final class FinishedFlag: @unchecked Sendable {
    // @unchecked Sendable: one atomic.
    let flag = Atomic<Bool>(false)
    init() {}
    var isSet: Bool { flag.load(ordering: .acquiring) }
    func set() { flag.store(true, ordering: .releasing) }
}

/// The voice thread: opens the sources, fills the voice ring ahead of the render
/// thread, and reports the announcement's start and end. Thread: its own.
final class VoiceReader {
    let voice: VoiceShared
    let renderWake: Int32
    let id: UInt64
    let label: String
    let format: PCMFormat
    let options: PlaybackEngine.Announcement
    let sources: [PlaybackEngine.VoiceSource]
    let logger: Logger
    let onEvent: @Sendable (PlaybackEngine.Event) -> Void
    let finished: FinishedFlag
    /// Frames decoded at a time.
    static let chunk = 4096
    /// The ring: 32 Ki frames (0.7 s at 44.1 kHz) ahead of the render thread, and 16 Ki
    /// behind it for rewinds (a pause during the clip takes back what the device held).
    static let ringFrames = 1 << 15
    static let retainFrames = 1 << 14

    init(voice: VoiceShared, renderWake: Int32, id: UInt64, label: String, format: PCMFormat,
         options: PlaybackEngine.Announcement, sources: [PlaybackEngine.VoiceSource], logger: Logger,
         onEvent: @escaping @Sendable (PlaybackEngine.Event) -> Void, finished: FinishedFlag) {
        self.voice = voice
        self.renderWake = renderWake
        self.id = id
        self.label = label
        self.format = format
        self.options = options
        self.sources = sources
        self.logger = logger
        self.onEvent = onEvent
        self.finished = finished
    }

    var cancelled: Bool {
        voice.cancel.load(ordering: .relaxed) == id || voice.quit.load(ordering: .relaxed)
    }

    /// The last act: marked finished first, so the next announcement, started when
    /// this event arrives, finds the thread done (it only has to return).
    func end(cancelled: Bool, error: StreamError?) {
        finished.set()
        onEvent(.announcementEnded(id: id, label: label, cancelled: cancelled, error: error))
    }

    func run() {
        // Open every source first: a missing chime or an unreachable URL fails the whole
        // announcement before the music is touched.
        var decoders: [AudioDecoder] = []
        for source in sources {
            if cancelled { break }
            do {
                let d = try AudioDecoder(path: source.path, stream: source.stream)
                try d.setOutputFormat(format)
                decoders.append(d)
            } catch {
                // A connect given up because of a cancel is the cancel, not an error.
                if cancelled { end(cancelled: true, error: nil); return }
                logger.warning("announcement refused", metadata: ["announcement": "\(label)", "error": "\(error.message)"])
                end(cancelled: false, error: error)
                return
            }
        }
        if cancelled {
            end(cancelled: true, error: nil)
            return
        }
        // The previous announcement is done (the engine joined its thread, which ends
        // only after render stored `done`): render does not touch the ring now.
        let ring = voice.ring
        ring.reset(channels: format.channels, minimumCapacity: Self.ringFrames, retain: Self.retainFrames)
        voice.end.store(Int.max, ordering: .relaxed)
        voice.duck.store(Float(Loudness.linear(db: options.duckDB)).bitPattern, ordering: .relaxed)
        voice.gain.store(Float(Loudness.linear(db: options.gainDB)).bitPattern, ordering: .relaxed)
        voice.downFrames.store(max(1, format.sampleRate * options.downMillis / 1000), ordering: .relaxed)
        voice.upFrames.store(max(1, format.sampleRate * options.upMillis / 1000), ordering: .relaxed)

        let buffer = UnsafeMutablePointer<Float>.allocate(capacity: Self.chunk * format.channels)
        defer { buffer.deallocate() }
        var pending = 0       // frames in `buffer` not yet in the ring
        var current = 0       // index into `decoders`
        var ended = false     // every source decoded and written
        let start = ring.producerIndex
        let cap = max(1, options.maxSeconds) * format.sampleRate
        func fill() {
            while !ended {
                if pending == 0 {
                    let long = ring.producerIndex - start >= cap
                    if long {
                        logger.warning("announcement cut", metadata: ["announcement": "\(label)", "seconds": "\(options.maxSeconds)"])
                    }
                    if current == decoders.count || cancelled || long {
                        voice.end.store(ring.producerIndex, ordering: .releasing)
                        ended = true
                        decoders.removeAll()  // close the files and connections now
                        return
                    }
                    do {
                        pending = try decoders[current].read(into: buffer, capacity: Self.chunk)
                    } catch {
                        // A clip damaged half-way: what decoded plays, the rest is dropped.
                        logger.warning("announcement cut short", metadata: ["announcement": "\(label)", "error": "\(error.message)"])
                        pending = 0
                    }
                    if pending == 0 { current += 1; continue }
                }
                pending = min(pending, cap - (ring.producerIndex - start))
                guard ring.writableFrames >= pending else { return }
                ring.write(buffer, frames: pending)
                pending = 0
            }
        }
        // The first frames before render is asked to start, so the clip does not begin
        // with an underrun.
        fill()
        voice.request.store(id, ordering: .releasing)
        EventFD.signal(renderWake)
        var reportedStart = false
        while voice.done.load(ordering: .acquiring) != id && !voice.quit.load(ordering: .relaxed) {
            fill()
            if !reportedStart && voice.started.load(ordering: .acquiring) == id {
                reportedStart = true
                let f = voice.startMusicFrame.load(ordering: .relaxed)
                onEvent(.announcementStarted(id: id, label: label, musicFrame: f >= 0 ? f : nil))
            }
            if cancelled && !ended { fill() }
            EventFD.wait(voice.wake, timeoutNanoseconds: 50_000_000)
        }
        if !reportedStart && voice.started.load(ordering: .acquiring) == id {
            let f = voice.startMusicFrame.load(ordering: .relaxed)
            onEvent(.announcementStarted(id: id, label: label, musicFrame: f >= 0 ? f : nil))
        }
        let early = voice.doneEarly.load(ordering: .relaxed) || voice.quit.load(ordering: .relaxed)
        end(cancelled: early, error: nil)
    }
}
