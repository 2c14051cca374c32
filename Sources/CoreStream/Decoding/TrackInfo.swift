/// What the engine knows about an opened file.
public struct TrackInfo: Sendable, Equatable {
    /// The path as given.
    public var path: String
    /// FFmpeg's container name, e.g. `"flac"`, `"mov,mp4,m4a,3gp,3g2,mj2"`.
    public var container: String
    /// FFmpeg's decoder name, e.g. `"mp3float"`, `"flac"`, `"aac"`.
    public var codec: String
    /// The source's own sample rate; positions are frames at this rate.
    public var sampleRate: Int
    public var channels: Int
    /// The exact length in source frames, when the container states it or it could be
    /// measured at open; otherwise an estimate (see ``durationIsEstimate``) or nil.
    public var durationFrames: Int64?
    /// True when ``durationFrames`` is FFmpeg's bit-rate estimate (mp3 without a Xing
    /// header, ADTS AAC): playback then runs to the end of the data, whatever it says.
    public var durationIsEstimate: Bool
    /// Bits per second, when known.
    public var bitRate: Int?
    /// Bits per decoded sample for lossless sources (16, 24…), when known.
    public var bitsPerSample: Int?
    /// The device sample format that carries this source without loss and without
    /// waste: S16 for 8/16-bit integer sources, S32 for 24/32-bit, float for lossy
    /// codecs (they decode to float).
    public var preferredDeviceFormat: DeviceSampleFormat
    /// Tags with lower-cased keys (`title`, `artist`, `album`, …), stream tags over container tags.
    public var tags: [String: String]
    /// Embedded cover art (ID3 APIC, FLAC PICTURE, MP4 `covr`), if any: the bytes come
    /// from ``AudioDecoder/coverArt(path:)`` on request.
    public var cover: CoverArt?
    /// A live network stream (an http(s) URL with no length and no seeking): it plays
    /// forward only, and position is the frames heard since it started.
    public var isLive = false
    /// Seeks, loops and reverse play work: false for a live stream, and for an HTTP file
    /// whose server takes no Range requests (it plays from the start, to its end).
    public var isSeekable = true
    /// A network stream's station name (the ICY `icy-name` header), if it sent one.
    public var stationName: String?
    /// A network stream's ICY title when it was opened (`StreamTitle`); later changes
    /// come as ``StreamEvent/title(_:)``.
    public var streamTitle: String?

    public var durationSeconds: Double? {
        durationFrames.map { FrameTime.seconds($0, rate: sampleRate) }
    }
}

/// Something with tags as FFmpeg reads them (lower-cased keys).
public protocol Tagged {
    var tags: [String: String] { get }
}

extension Tagged {
    /// Well-known tags under one name each, whatever the container called them.
    public var title: String? { tags["title"] }
    public var artist: String? { tags["artist"] }
    public var album: String? { tags["album"] }
    public var albumArtist: String? { tags["album_artist"] ?? tags["albumartist"] ?? tags["album artist"] }
    /// "3" from "3/12".
    public var trackNumber: Int? { leadingNumber(tags["track"] ?? tags["tracknumber"]) }
    public var discNumber: Int? { leadingNumber(tags["disc"] ?? tags["discnumber"]) }
    public var date: String? { tags["date"] ?? tags["year"] ?? tags["originaldate"] }
    public var genre: String? { tags["genre"] }
}

func leadingNumber(_ text: String?) -> Int? {
    guard let t = text else { return nil }
    let digits = t.drop { $0 == " " }.prefix { $0.isASCII && $0.isNumber }
    return Int(digits)
}

extension TrackInfo: Tagged {}

/// What ``AudioDecoder/probe(path:)`` reads without opening a codec.
public struct ProbedTrack: Sendable, Equatable, Tagged {
    public var tags: [String: String]
    /// The container's duration (an estimate for some formats).
    public var durationSeconds: Double?
    /// FFmpeg's codec name, e.g. `"flac"`, `"mp3"`.
    public var codec: String
    public var sampleRate: Int
    public var channels: Int
    /// The decoded samples' width as MPD writes it in `Format:`: bits ("16", "24",
    /// "32"), or "f" for codecs that decode to floating point (MP3, AAC, Vorbis, Opus).
    public var sampleWidth: String
}

/// Embedded cover art: its type and size.
public struct CoverArt: Sendable, Equatable {
    public var mime: String
    public var size: Int
    public init(mime: String, size: Int) {
        self.mime = mime
        self.size = size
    }
}

/// An interleaved 32-bit float PCM layout: what the decoder delivers and the ring carries.
public struct PCMFormat: Hashable, Sendable, CustomStringConvertible {
    public var sampleRate: Int
    public var channels: Int
    public init(sampleRate: Int, channels: Int) {
        self.sampleRate = sampleRate
        self.channels = channels
    }
    public var description: String { "\(sampleRate) Hz, \(channels) ch" }
}
