import CoreStream
import PlaydProtocol

/// MPD's crossfade and MixRamp, decided here per join and done by the engine
/// (``Crossfade``: the overlap, its curves, and where it falls back to gapless).
///
/// - `crossfade N` (whole seconds, 0 off): the last N seconds of a track and the first N
///   of the next overlap with equal-power curves; not between consecutive tracks of one
///   album played in order unless `output.crossfade_within_albums` is set.
/// - MixRamp, as MPD: with a crossfade set and `mixrampdelay` > 0, when both tracks have
///   MixRamp tags (`MIXRAMP_END` on the one ending, `MIXRAMP_START` on the next), the
///   overlap is where each crosses `mixrampdb` (less each track's ReplayGain, as MPD),
///   less the delay, and both play at full level. Tags missing: the plain crossfade
///   (MPD then sums without curves; playd fades). Tags that give too short an overlap:
///   gapless (as MPD).
extension Player {
    public struct CrossfadeSettings: Sendable, Equatable {
        /// MPD's `crossfade`, seconds (0: off).
        public var seconds = 0
        /// MPD's `mixrampdb`: the level where the two tracks meet.
        public var mixrampDB = 0.0
        /// MPD's `mixrampdelay`, seconds: ≤ 0 is off (MPD's default, −1).
        public var mixrampDelay = -1.0

        public init() {}

        /// MixRamp applies (MPD: a positive delay; `nan` turns it off).
        public var mixrampOn: Bool { mixrampDelay > 0 }

        /// An hour: longer than any track worth a cross-fade, and `seconds × rate`
        /// stays far inside Int.
        static let maxSeconds = 3600

        /// A level in dB as MixRamp tags give them (their analyser writes −90 … 0).
        static func checkedDB(_ db: Double) throws(PlayerError) -> Double {
            guard db.isFinite, (-200...200).contains(db) else {
                throw PlayerError(.invalidArgument, "mixrampdb must be a number of dB from -200 to 200")
            }
            return db
        }

        /// NaN (MPD's documented way to turn MixRamp off) is stored as −1 (off).
        static func checkedDelay(_ d: Double) throws(PlayerError) -> Double {
            if d.isNaN { return -1 }
            guard d.isFinite, d <= Double(maxSeconds) else {
                throw PlayerError(.invalidArgument, "mixrampdelay must be at most \(maxSeconds) seconds, or nan")
            }
            return d
        }

        /// From the state file, each value range-checked: a bad one is the default.
        init(saved: JSON?) {
            if let s = saved?["seconds"]?.integer(in: 0...Int64(Self.maxSeconds)) { seconds = Int(s) }
            if let db = saved?["mixramp_db"]?.numberValue, let v = try? Self.checkedDB(db) { mixrampDB = v }
            if let d = saved?["mixramp_delay"]?.numberValue, let v = try? Self.checkedDelay(d) { mixrampDelay = v }
        }
    }

    /// Sets one of the three, tells both protocols (MPD's idle `options`, always, as
    /// MPD), and has the coming join follow the setting when it has not begun: the
    /// engine keeps the next track it holds and decides its overlap again (a next still
    /// opening takes the rule when it is queued). An overlap already under way finishes
    /// as it began, as MPD's does.
    func setCrossfade(_ change: (inout CrossfadeSettings) -> Void) {
        var c = crossfade
        change(&c)
        crossfade = c
        emit(.crossfade(c))
        if pendingNext != nil { engine.setNextCrossfade(crossfadeRule()) }
        saveState()
    }

    /// The rule for the join of the track playing and the next: a value the engine
    /// calls under its lock (it captures settings, not the player).
    func crossfadeRule() -> (TrackInfo, TrackInfo) -> Crossfade? {
        let settings = crossfade, withinAlbums = config.crossfadeWithinAlbums, level = currentLevel()
        return { a, b in Self.crossfade(from: a, to: b, settings: settings, withinAlbums: withinAlbums, level: level) }
    }

    static func crossfade(from a: TrackInfo, to b: TrackInfo, settings: CrossfadeSettings, withinAlbums: Bool,
                          level: LevelSettings) -> Crossfade? {
        guard settings.seconds > 0 else { return nil }
        if !withinAlbums && sameAlbumInOrder(a, b) { return nil }
        if settings.mixrampOn, let end = a.tags["mixramp_end"], let start = b.tags["mixramp_start"] {
            // Each track's ReplayGain moves where it crosses the level (MPD does the same).
            let rgA = Loudness.replayGain(ReplayGainInfo(tags: a.tags), level).db ?? 0
            let rgB = Loudness.replayGain(ReplayGainInfo(tags: b.tags), level).db ?? 0
            guard let tail = mixRampSeconds(end, at: settings.mixrampDB - rgA),
                  let head = mixRampSeconds(start, at: settings.mixrampDB - rgB),
                  tail + head >= settings.mixrampDelay else { return nil }
            return Crossfade(seconds: tail + head - settings.mixrampDelay, curve: .sum)
        }
        return Crossfade(seconds: Double(settings.seconds))
    }

    /// Whether `b` is the track after `a` on the same album: the same album (and album
    /// artist, where both have one), and track n + 1 on the same disc or track 1 of the
    /// next disc. Without track numbers: the same folder and `b`'s name sorting after.
    static func sameAlbumInOrder(_ a: TrackInfo, _ b: TrackInfo) -> Bool {
        guard let album = a.album, !album.isEmpty, b.album == album else { return false }
        if let x = a.albumArtist, let y = b.albumArtist, x != y { return false }
        if let ta = a.trackNumber, let tb = b.trackNumber {
            let (da, db) = (a.discNumber ?? 1, b.discNumber ?? 1)
            return (db == da && tb == ta &+ 1) || (db == da &+ 1 && tb == 1)
        }
        func split(_ p: String) -> (folder: Substring, name: Substring) {
            let i = p.lastIndex(of: "/") ?? p.startIndex
            return (p[..<i], p[i...])
        }
        let (pa, pb) = (split(a.path), split(b.path))
        return pa.folder == pb.folder && pb.name > pa.name
    }

    /// Where a MixRamp list ("dB seconds;dB seconds;…", the dB rising) reaches `db`:
    /// the time at an exact entry, interpolated between the two around it, the first
    /// entry's below them all; nil above them all or for a list that does not parse.
    /// Lists are capped at 4 KiB (a tag is hostile input like any other).
    static func mixRampSeconds(_ list: String, at db: Double) -> Double? {
        guard list.utf8.count <= 4096 else { return nil }
        var below: (db: Double, seconds: Double)?
        for pair in list.split(separator: ";", omittingEmptySubsequences: true) {
            let parts = pair.split(separator: " ", omittingEmptySubsequences: true)
            guard parts.count == 2, let d = Double(parts[0]), let s = Double(parts[1]), d.isFinite, s.isFinite, s >= 0 else {
                return nil
            }
            if d == db { return s }
            if d < db { below = (d, s); continue }
            guard let lo = below else { return s }
            return lo.seconds + (db - lo.db) * (s - lo.seconds) / (d - lo.db)
        }
        return nil
    }
}
