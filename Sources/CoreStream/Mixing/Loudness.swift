#if canImport(Glibc)
import Glibc
#endif

/// ReplayGain modes, as MPD's `replaygain` setting.
public enum ReplayGainMode: String, Sendable, CaseIterable {
    /// No ReplayGain.
    case off
    /// The track's gain (falling back to the album's).
    case track
    /// The album's gain (falling back to the track's).
    case album
    /// The album's gain when tracks play in album order, else the track's. (With no
    /// shuffle yet, that is the album's.)
    case auto
}

/// Where a track's ReplayGain comes from (`[replaygain] source`, issue 43).
public enum ReplayGainSource: String, Sendable, CaseIterable {
    /// Its `REPLAYGAIN_*` tags only (MPD's behaviour).
    case tags
    /// playd's own EBU R128 measurement only (``LoudnessMeter``).
    case measured
    /// The tags where the file has them, else the measurement.
    case auto
}

/// The output level the user asked for: volume, mute and ReplayGain settings.
public struct LevelSettings: Sendable, Equatable {
    /// 0…100, on a cubic curve (see ``Loudness/volumeGain(_:)``).
    public var volume = 100
    /// Silent without losing `volume`.
    public var muted = false
    public var replayGain = ReplayGainMode.off
    /// Added to the tags' gain, dB.
    public var preampDB = 0.0
    /// Applied to files without ReplayGain tags when ReplayGain is on, dB.
    public var missingPreampDB = 0.0
    /// Lower the gain so the tagged peak does not clip (a measured true peak: so it
    /// stays under `maxTruePeakDBTP`).
    public var preventClipping = true
    /// Tags, a measurement, or tags else a measurement.
    public var source = ReplayGainSource.tags
    /// What a measured track is brought to, LUFS (ReplayGain 2.0's −18).
    public var referenceLUFS = -18.0
    /// The highest true peak a measured track's gain may give, dBTP.
    public var maxTruePeakDBTP = -1.0

    public init() {}
}

/// ReplayGain tags of a track (`REPLAYGAIN_TRACK_GAIN = "-7.89 dB"`, `…_PEAK = "0.98"`),
/// as FFmpeg reports them from Vorbis comments, ID3v2 TXXX frames, APE and MP4 atoms.
public struct ReplayGainInfo: Sendable, Equatable {
    public var trackGainDB: Double?
    public var trackPeak: Double?
    public var albumGainDB: Double?
    public var albumPeak: Double?
    /// "tags" or "measured" (status says where the gain came from); nil when neither
    /// gave one.
    public var source: String?

    public init(trackGainDB: Double? = nil, trackPeak: Double? = nil, albumGainDB: Double? = nil, albumPeak: Double? = nil) {
        self.trackGainDB = trackGainDB
        self.trackPeak = trackPeak
        self.albumGainDB = albumGainDB
        self.albumPeak = albumPeak
    }

    /// A track's ReplayGain under `settings.source`: its tags, or `measured` (EBU R128
    /// figures) as a gain to `settings.referenceLUFS`. A measured peak is stored
    /// relative to `settings.maxTruePeakDBTP`, so the clipping limit (peak to full
    /// scale) keeps the true peak under that ceiling.
    public init(tags: [String: String], measured: LoudnessFigures?, settings: LevelSettings) {
        let tagged = ReplayGainInfo(tags: tags)
        func fromMeasurement() -> ReplayGainInfo {
            guard let m = measured, let lufs = m.integratedLUFS else { return ReplayGainInfo() }
            var r = ReplayGainInfo(trackGainDB: settings.referenceLUFS - lufs,
                                   trackPeak: m.truePeakDBTP.map { Loudness.linear(db: $0 - settings.maxTruePeakDBTP) },
                                   albumGainDB: m.albumLUFS.map { settings.referenceLUFS - $0 },
                                   albumPeak: m.albumTruePeakDBTP.map { Loudness.linear(db: $0 - settings.maxTruePeakDBTP) })
            r.source = "measured"
            return r
        }
        switch settings.source {
        case .tags: self = tagged
        case .measured: self = fromMeasurement()
        case .auto: self = tagged.isEmpty ? fromMeasurement() : tagged
        }
    }

    /// From lower-cased tag keys.
    public init(tags: [String: String]) {
        func number(_ key: String) -> Double? {
            guard var text = tags[key]?.trimmingASCIISpaces else { return nil }
            if text.lowercased().hasSuffix("db") { text = String(text.dropLast(2)).trimmingASCIISpaces }
            guard let v = Double(text), v.isFinite else { return nil }
            return v
        }
        self.init(trackGainDB: number("replaygain_track_gain"), trackPeak: number("replaygain_track_peak"),
                  albumGainDB: number("replaygain_album_gain"), albumPeak: number("replaygain_album_peak"))
        if !isEmpty { source = "tags" }
    }

    public var isEmpty: Bool { trackGainDB == nil && albumGainDB == nil }
}

/// Turns settings and tags into one linear gain: a pure function, tested without audio.
public enum Loudness {
    /// Volume 0…100 as a linear amplitude factor: (v/100)³, the cubic curve mpv's
    /// software volume uses, so equal steps sound roughly equal; 100 is unity.
    public static func volumeGain(_ volume: Int) -> Double {
        let x = Double(min(100, max(0, volume))) / 100
        return x * x * x
    }

    /// The ReplayGain factor for `info` under `settings` (1 when off), and the dB it
    /// applies (nil when off).
    public static func replayGain(_ info: ReplayGainInfo, _ settings: LevelSettings) -> (factor: Double, db: Double?) {
        let chosen: (gain: Double?, peak: Double?)
        switch settings.replayGain {
        case .off: return (1, nil)
        case .track: chosen = info.trackGainDB != nil ? (info.trackGainDB, info.trackPeak) : (info.albumGainDB, info.albumPeak)
        case .album, .auto: chosen = info.albumGainDB != nil ? (info.albumGainDB, info.albumPeak) : (info.trackGainDB, info.trackPeak)
        }
        guard let gain = chosen.gain else {
            return (pow10(settings.missingPreampDB / 20), settings.missingPreampDB)
        }
        var db = gain + settings.preampDB
        if settings.preventClipping, let peak = chosen.peak, peak > 0 {
            // Never louder than what brings the peak to full scale.
            db = min(db, -20 * log10(peak))
        }
        return (pow10(db / 20), db)
    }

    /// What the render thread multiplies every sample by.
    public static func level(_ settings: LevelSettings, replayGain info: ReplayGainInfo) -> Float {
        volumeLevel(settings) * Float(replayGain(info, settings).factor)
    }

    /// The volume part of the level: 0 when muted.
    public static func volumeLevel(_ settings: LevelSettings) -> Float {
        settings.muted ? 0 : Float(volumeGain(settings.volume))
    }

    /// A gain in dB as a linear factor.
    public static func linear(db: Double) -> Double { pow10(db / 20) }

    private static func pow10(_ x: Double) -> Double { exp(x * 2.302585092994046) }
    private static func log10(_ x: Double) -> Double { log(x) / 2.302585092994046 }
}

extension String {
    var trimmingASCIISpaces: String {
        var s = Substring(self)
        while s.first == " " || s.first == "\t" { s = s.dropFirst() }
        while s.last == " " || s.last == "\t" { s = s.dropLast() }
        return String(s)
    }
}
