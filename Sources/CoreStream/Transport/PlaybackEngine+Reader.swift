import Logging
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// What the reader reports (ReaderLoop calls these holding no lock).
extension PlaybackEngine: ReaderHost {
    func readerHeardNext(generation: UInt64, info: TrackInfo) -> (ended: String, endedGeneration: UInt64, started: TrackInfo)? {
        control.withLock { c in
            guard let old = c.track, c.transport.state != .stopped else { return nil }
            let oldGeneration = c.generation
            if let n = c.next, n.generation == generation {
                c.next = nil
            } else {
                // Replaced or cleared too late: heard all the same.
                guard c.supersededNext.contains(generation) else { return nil }
            }
            c.supersededNext.removeAll()
            c.track = info
            c.generation = generation
            c.loop = nil
            c.corruptPackets = 0
            // In reverse the next track plays from its end (ReaderLoop.switchToNext).
            c.pendingPosition = c.direction == .reverse ? info.durationFrames ?? 0 : 0
            c.replayGain = gainInfo(info, c.level)
            applyLevel(c)
            return (old.path, oldGeneration, info)
        }
    }

    func readerPauseSettled(_ serial: UInt64) -> Bool {
        control.withLock { c in
            guard serial == c.pauseSerial, !c.pauseAnnounced, c.transport.state == .paused else { return false }
            c.pauseAnnounced = true
            return true
        }
    }

    func readerLoopRegion() -> LoopRegion? {
        control.withLock { $0.loop }
    }

    func readerHeardEnd(generation: UInt64) -> String? {
        control.withLock { c in
            guard generation == c.generation, c.transport.state != .stopped else { return nil }
            _ = c.transport.on(.ended)
            c.next = nil
            let p = c.track?.path
            c.pendingPosition = c.direction == .reverse ? 0 : c.track?.durationFrames ?? c.pendingPosition
            c.loop = nil
            return p
        }
    }

    func readerCorruptPackets(_ total: Int) {
        control.withLock { $0.corruptPackets = total }
    }
}
