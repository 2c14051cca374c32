import Foundation
import CoreStream

/// One generated test file (see `scripts/make-fixtures`).
public struct Fixture: Sendable, CustomStringConvertible {
    public var name: String
    /// The manifest's format key: wav16, wavf32, flac, alac, vorbis, opus, mp3cbr,
    /// mp3vbr, mp3noxing, aacm4a, adts.
    public var format: String
    public var sampleRate: Int
    public var channels: Int
    /// Frames in the PCM source the file was encoded from.
    public var sourceFrames: Int64
    public var path: String

    /// The container carries gapless info, so the decoded length must equal the source's.
    /// (mp3 without a Xing header and ADTS AAC carry none.)
    public var hasExactLength: Bool { format != "mp3noxing" && format != "adts" }
    /// Seeks must be bit-exact against a straight decode (AAC and Opus: position-exact,
    /// values within codec tolerance).
    public var bitExactSeek: Bool { !["aacm4a", "adts", "opus"].contains(format) }
    /// Lossless formats decode to exactly the source samples.
    public var isLossless: Bool { ["wav16", "wavf32", "flac", "alac"].contains(format) }
    /// Opus always decodes at 48 kHz.
    public var decodedRate: Int { format == "opus" ? 48000 : sampleRate }

    public var description: String { name }
}

/// Generates (once per directory) and lists the fixtures.
public enum Fixtures {
    /// The repository root, found from this source file's path.
    public static let repositoryRoot: URL = {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent()
    }()

    /// `$PLAYD_FIXTURES`, or a per-user folder in the temporary directory.
    public static let directory: String = {
        if let d = ProcessInfo.processInfo.environment["PLAYD_FIXTURES"], !d.isEmpty { return d }
        return NSTemporaryDirectory() + "playd-fixtures-\(getuid())"
    }()

    private static let generated: Result<[Fixture], FixtureError> = {
        let script = repositoryRoot.appendingPathComponent("scripts/make-fixtures").path
        do {
            let out = try Shell.run([script, directory, "3"])
            guard out.status == 0 else { return .failure(FixtureError("make-fixtures failed: \(out.stderr)")) }
            let text = try String(contentsOfFile: directory + "/fixtures.tsv", encoding: .utf8)
            let list = text.split(separator: "\n").map { line -> Fixture in
                let f = line.split(separator: "\t").map(String.init)
                return Fixture(name: f[0], format: f[1], sampleRate: Int(f[2])!, channels: Int(f[3])!,
                               sourceFrames: Int64(f[4])!, path: directory + "/" + f[0])
            }
            return .success(list)
        } catch {
            return .failure(FixtureError("make-fixtures: \(error)"))
        }
    }()

    /// Every fixture. Generating them needs the ffmpeg CLI; a failure is fatal to the test.
    public static var all: [Fixture] {
        switch generated {
        case .success(let list): return list
        case .failure(let e): fatalError(e.message)
        }
    }

    public static func named(_ name: String) -> Fixture {
        guard let f = all.first(where: { $0.name == name }) else { fatalError("no fixture \(name)") }
        return f
    }

    /// The 44.1 kHz stereo source WAV the fixtures were encoded from.
    public static var stereoSource: String { directory + "/source-44100-2.wav" }
}

public struct FixtureError: Error, CustomStringConvertible {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}
