import Logging
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// What is playing, as a snapshot any thread may take.
extension PlaybackEngine {
    public struct Status: Sendable {
        public var state: Transport.State
        public var track: TrackInfo?
        /// The stream `track` is heard in (a play, a seek, a track that followed): the
        /// generation ``setNext(path:crossfadeFor:)`` gave a queued track once its frames
        /// are heard, before the control side has taken in its events.
        public var generation: UInt64 = 0
        /// The source frame being heard.
        public var positionFrames: Int64
        public var output: NegotiatedFormat?
        public var underruns: Int
        public var deviceXruns: Int
        /// The output's failure (a negative errno from the device), 0 while it works.
        /// Set by the render thread; cleared when ``recoverOutput()`` reopens it.
        public var deviceError: Int
        public var corruptPackets: Int
        /// From the last `seek` (or `play`) call to its first frame written to the
        /// device, once that has happened.
        public var lastStartLatencyNanoseconds: UInt64?
        /// Of that: from the request to the new stream's first frames decoded (the seek
        /// and the codec's preroll included), and how long the device took to drop its
        /// queue and be prepared for them (0 when it held nothing). Present with
        /// `lastStartLatencyNanoseconds`.
        public var lastStartDecodeNanoseconds: UInt64?
        public var lastStartDeviceResetNanoseconds: UInt64?
        /// The direction set (a ping-pong loop turns round inside it on its own).
        public var direction: PlayDirection
        /// The loop region set, if any.
        public var loop: LoopRegion?
        /// Wraps heard since the region was set.
        public var loopPasses: Int64
        /// Volume, mute and ReplayGain settings.
        public var level: LevelSettings
        /// The current track's ReplayGain tags, and the gain applied from them (dB; nil
        /// when ReplayGain is off).
        public var replayGain: ReplayGainInfo
        public var replayGainAppliedDB: Double?
        /// The slow gain `[streams] normalize` applies to the stream playing, dB (nil:
        /// none). Decoded ahead of what is heard, by up to the ring.
        public var streamGainDB: Double?
        /// Wraps left (nil: forever, or no loop).
        public var loopRemaining: Int64? {
            guard let l = loop, let c = l.count else { return nil }
            return max(0, Int64(c) - loopPasses)
        }
        public var positionSeconds: Double {
            track.map { FrameTime.seconds(positionFrames, rate: $0.sampleRate) } ?? 0
        }
    }

    /// A snapshot of what is playing. Thread: any. Never waits for the render thread.
    public func status() -> Status {
        control.withLock { c in
            var position = c.pendingPosition
            let direction = c.direction
            var passes: Int64 = 0
            let heard = shared.readPosition()
            var current = (generation: c.generation, track: c.track)
            if let n = c.next, heard.generation == n.generation { current = (n.generation, n.info) }
            if heard.generation == current.generation, let track = current.track, let out = c.negotiated {
                position = heard.frame
                passes = heard.loopEpoch == c.loopEpoch ? heard.pass : 0
                // While the device plays: playing, and also paused or stopping until it
                // has played its ramp-out (the render thread says which).
                if heard.advancing && !heard.pingPong {
                    // Interpolate between the render thread's reports (one every 4 periods).
                    let elapsed = Int64(min(monotonicNanoseconds() &- heard.time, UInt64(out.periodFrames) * 6_000_000_000 / UInt64(out.pcm.sampleRate)))
                    let moved = FrameTime.rescaleFloor(elapsed, Int64(track.sampleRate), 1_000_000_000)
                    if heard.loopEnd > heard.loopStart {
                        let span = heard.loopEnd - heard.loopStart
                        let u = heard.direction == .forward ? position - heard.loopStart + moved
                                                            : heard.loopEnd - 1 - position + moved
                        position = heard.direction == .forward ? heard.loopStart + u % span : heard.loopEnd - 1 - u % span
                    } else {
                        position += heard.direction == .forward ? moved : -moved
                    }
                }
                let straight = heard.loopEnd <= heard.loopStart
                if straight, let limit = heard.limit {
                    position = heard.direction == .forward ? min(position, limit) : max(position, limit)
                }
                if straight, let last = c.lastReported, last.generation == heard.generation, last.direction == heard.direction {
                    position = heard.direction == .forward ? max(position, last.frame) : min(position, last.frame)
                }
                c.lastReported = straight ? (heard.generation, position, heard.direction) : nil
                position = max(0, position)
                if let d = track.durationFrames, !track.durationIsEstimate { position = min(position, d) }
            }
            var latency: UInt64?, decode: UInt64?, reset: UInt64?
            // Only for a stream the reader started itself (a play or a seek, with its
            // flush). A track that followed gaplessly was asked for by no request: the
            // latency counted from the play before it, minutes, and it had no reset.
            if shared.firstWrittenGeneration.load(ordering: .acquiring) == c.generation,
               shared.firstDecodedGeneration.load(ordering: .acquiring) == c.generation {
                latency = shared.firstWrittenTime.load(ordering: .relaxed) &- c.requestedAt
                decode = shared.firstDecodedTime.load(ordering: .relaxed) &- c.requestedAt
                reset = shared.lastResetNanoseconds.load(ordering: .relaxed)
            }
            var s = Status(state: c.transport.state, track: current.track, positionFrames: position,
                          output: c.negotiated,
                          underruns: shared.underruns.load(ordering: .relaxed),
                          deviceXruns: shared.deviceXruns.load(ordering: .relaxed),
                          deviceError: shared.deviceError.load(ordering: .relaxed),
                          corruptPackets: c.corruptPackets,
                          lastStartLatencyNanoseconds: latency,
                          lastStartDecodeNanoseconds: decode, lastStartDeviceResetNanoseconds: reset,
                          direction: direction, loop: c.loop, loopPasses: c.loop == nil ? 0 : passes,
                          level: c.level, replayGain: c.replayGain,
                          replayGainAppliedDB: Loudness.replayGain(c.replayGain, c.level).db)
            s.generation = current.generation
            let g = Double(bitPattern: shared.streamGainDB.load(ordering: .relaxed))
            if g.isFinite, current.track.map({ NetworkInput.isStreamURL($0.path) }) == true { s.streamGainDB = g }
            return s
        }
    }
}
