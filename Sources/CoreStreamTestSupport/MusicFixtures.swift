import Foundation

/// Music-like test files for the exactness matrix: unlike the tone and chirp fixtures,
/// this source has transients (noise bursts with sharp attacks), so the encoders switch
/// block sizes (Vorbis short blocks, AAC short windows, MP3 mixed blocks), use the bit
/// reservoir and, for FFmpeg's AAC encoder, code noise bands as noise (PNS): what real
/// music does and a steady tone does not. Generated with the ffmpeg CLI, once per
/// fixtures directory.
public struct MusicFixture: Sendable, CustomStringConvertible {
    /// wav16, flac, alac, mp3cbr, mp3vbr, vorbis, opus, opusneg, aaclc, aacpns.
    public var format: String
    public var path: String
    /// The ffmpeg arguments that encode it (for gapless splits of the same source).
    public var codec: [String]
    public var ext: String

    public var description: String { format }

    /// How a capture is compared with the CLI's decode.
    public enum Match: Sendable { case exact, within(Float), noise }
    public var match: Match {
        switch format {
        case "opus", "opusneg": return .within(1e-4)
        // Noise-substituted bands come from the decoder's random generator: after a
        // seek they hold other noise of the same energy (docs in AudioDecoder.preroll).
        case "aacpns": return .noise
        default: return .exact
        }
    }
    /// AAC in M4A: the CLI decodes the end padding that the edit list trims.
    public var cliKeepsPadding: Bool { format.hasPrefix("aac") }
    /// Always 48 kHz for Opus.
    public var rate: Int { format.hasPrefix("opus") ? 48000 : 44100 }
}

public enum MusicFixtures {
    public static let seconds = 6
    public static let rate = 44100

    /// Two sounds in each channel: chords that change every half second, a chirp, and
    /// noise bursts (attack in one sample, decay over ~30 ms) at periods that never
    /// line up, so no stretch repeats.
    static let expression =
        "0.25*sin(2*PI*(220+110*floor(mod(t,2)*2))*t)+0.15*sin(2*PI*(330+3*t*t)*t)"
        + "+0.6*(random(0)-0.5)*exp(-40*mod(t,0.37))+0.4*sin(2*PI*1800*t)*exp(-25*mod(t+0.1,0.61))"
        + "|0.25*sin(2*PI*(277+40*floor(mod(t,3)))*t)+0.5*(random(1)-0.5)*exp(-35*mod(t+0.05,0.29))"
        + "+0.2*sin(2*PI*(500+7*t*t)*t)"

    static let formats: [(String, String, [String])] = [
        ("wav16", "wav", ["-c:a", "pcm_s16le"]),
        ("flac", "flac", ["-c:a", "flac"]),
        ("alac", "m4a", ["-c:a", "alac"]),
        ("mp3cbr", "mp3", ["-c:a", "libmp3lame", "-b:a", "192k"]),
        ("mp3vbr", "mp3", ["-c:a", "libmp3lame", "-q:a", "2"]),
        ("vorbis", "ogg", ["-c:a", "libvorbis", "-q:a", "5"]),
        ("opus", "opus", ["-c:a", "libopus", "-b:a", "128k"]),
        ("aaclc", "m4a", ["-c:a", "aac", "-aac_pns", "0", "-b:a", "192k"]),
        ("aacpns", "m4a", ["-c:a", "aac", "-b:a", "192k"]),
    ]

    public static let directory = Fixtures.directory + "/music-\(seconds)"
    /// The 16-bit stereo source every file was encoded from.
    public static var source: String { directory + "/source.wav" }

    private static let generated: Result<[MusicFixture], FixtureError> = {
        func ff(_ args: [String]) throws {
            let r = try Shell.run(["ffmpeg", "-nostdin", "-v", "error", "-y"] + args)
            guard r.status == 0 else { throw FixtureError("ffmpeg \(args.joined(separator: " ")): \(r.stderr)") }
        }
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            let stamp = directory + "/.complete"
            var list: [MusicFixture] = []
            let fresh = !FileManager.default.fileExists(atPath: stamp)
            if fresh {
                try ff(["-f", "lavfi", "-i", "aevalsrc='\(expression)':s=\(rate):d=\(seconds)", "-c:a", "pcm_s16le", source])
            }
            for (name, ext, codec) in formats {
                let path = "\(directory)/\(name).\(ext)"
                if fresh { try ff(["-i", source] + codec + [path]) }
                list.append(MusicFixture(format: name, path: path, codec: codec, ext: ext))
            }
            // A stream-copied cut of the Opus file: its first granule position puts its
            // start before zero (−14,400 samples here), as a cut made with `-c copy` does.
            let neg = directory + "/opusneg.opus"
            if fresh { try ff(["-ss", "2.3", "-i", list.first { $0.format == "opus" }!.path, "-c", "copy", neg]) }
            list.append(MusicFixture(format: "opusneg", path: neg, codec: [], ext: "opus"))
            if fresh { FileManager.default.createFile(atPath: stamp, contents: nil) }
            return .success(list)
        } catch let e as FixtureError {
            return .failure(e)
        } catch {
            return .failure(FixtureError("music fixtures: \(error)"))
        }
    }()

    public static var all: [MusicFixture] {
        switch generated {
        case .success(let list): return list
        case .failure(let e): fatalError(e.message)
        }
    }

    public static func named(_ format: String) -> MusicFixture {
        guard let f = all.first(where: { $0.format == format }) else { fatalError("no music fixture \(format)") }
        return f
    }

    /// The source cut at `cut` into two files encoded like `fixture` (for gapless joins).
    public static func split(_ fixture: MusicFixture, at cut: Int) throws -> [String] {
        var paths: [String] = []
        for (i, range) in ["start_sample=0:end_sample=\(cut)", "start_sample=\(cut)"].enumerated() {
            let out = "\(directory)/split-\(cut)-\(fixture.format)-\(i + 1).\(fixture.ext)"
            if !FileManager.default.fileExists(atPath: out) {
                let r = try Shell.run(["ffmpeg", "-nostdin", "-v", "error", "-y", "-i", source,
                                       "-af", "atrim=\(range),asetpts=PTS-STARTPTS"] + fixture.codec + [out + ".tmp." + fixture.ext])
                guard r.status == 0 else { throw FixtureError("ffmpeg split failed: \(r.stderr)") }
                try FileManager.default.moveItem(atPath: out + ".tmp." + fixture.ext, toPath: out)
            }
            paths.append(out)
        }
        return paths
    }
}
