import ArgumentParser
import CLinux
import CoreStream
import PlaydProtocol
#if canImport(Glibc)
import Glibc
#endif

/// `playctl loudness FILE|DIR...`: EBU R128 figures, measured in this process (as
/// `export`), never inside the daemon. A folder is walked (sorted, at most
/// ``maxFiles`` files) and each folder holding more than one measured track gets an
/// album line over its tracks. Files that are not audio are named with their error;
/// the others are measured all the same.
struct Loudness: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Measure EBU R128 loudness: integrated (LUFS), range (LU), true peak (dBTP).",
        discussion: """
        Measures each FILE, and every file under each DIR, in this process at lowered
        priority (libebur128). A folder with more than one track also gets its album
        figures. --json prints one document: {"tracks": [...], "albums": [...],
        "errors": [...]}. Exit status 1 when nothing could be measured.
        """)
    @OptionGroup var connection: Connection
    @Argument(help: "Files or folders.", completion: .file()) var paths: [String]

    /// A walk's bound: a music collection's folder, not a whole disk by mistake.
    static let maxFiles = 100_000

    struct Track { let path: String; let figures: LoudnessFigures }
    struct Album { let folder: String; let figures: LoudnessFigures; let tracks: Int }

    func run() throws {
        _ = setpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0, 10)  // never compete with playback
        var tracks: [Track] = [], albums: [Album] = [], errors: [(String, StreamError)] = []
        for p in paths {
            if NetworkInput.isStreamURL(p) {
                errors.append((p, StreamError(.invalidArgument, "\(p): a stream has no end to measure to; give a file")))
                continue
            }
            let path = absolute(p)
            var st = stat()
            guard PathBytes.stat(path, &st) == 0 else {
                errors.append((path, StreamError(.fileNotFound, "\(path): no such file or folder")))
                continue
            }
            let groups: [(folder: String, files: [String])]
            if (st.st_mode & S_IFMT) == S_IFDIR {
                var found: [(String, [String])] = []
                var count = 0
                Self.walk(path, &found, &count)
                if count > Self.maxFiles {
                    errors.append((path, StreamError(.tooLarge, "\(path): more than \(Self.maxFiles) files; measure its folders one by one")))
                    continue
                }
                groups = found
            } else {
                groups = [(String(path[..<(path.lastIndex(of: "/") ?? path.startIndex)]), [path])]
            }
            for g in groups {
                var meters: [LoudnessMeter] = []
                for f in g.files {
                    do {
                        let m = try LoudnessMeter.measure(path: f)
                        tracks.append(Track(path: f, figures: m.figures))
                        if g.files.count > 1 { meters.append(m) }
                    } catch {
                        errors.append((f, error))
                    }
                }
                if meters.count > 1, let a = LoudnessMeter.album(meters) {
                    albums.append(Album(folder: g.folder, figures: a, tracks: meters.count))
                }
            }
        }
        if connection.json {
            print(JSON.obj(("tracks", .array(tracks.map { .object([("path", .string($0.path))] + Self.members($0.figures)) })),
                           ("albums", .array(albums.map { .object([("folder", .string($0.folder)), ("tracks", .int(Int64($0.tracks)))] + Self.members($0.figures)) })),
                           ("errors", .array(errors.map { .obj(("path", .string($0.0)), ("code", .string($0.1.code.name)), ("message", .string($0.1.message))) }))).text)
        } else {
            for t in tracks { print(Self.line(t.figures) + "  " + (JSON.string(t.path).shown ?? "")) }
            for a in albums { print(Self.line(a.figures) + "  album: " + (JSON.string(a.folder).shown ?? "") + " (\(a.tracks) tracks)") }
            for (p, e) in errors { warn("\(JSON.string(p).shown ?? ""): \(e.code.name): \(JSON.string(e.message).shown ?? "")") }
        }
        if tracks.isEmpty { throw ExitCode(1) }
    }

    /// Figures rounded as the `ffmpeg` CLI's summary prints them (0.1), plus the gain
    /// for ReplayGain 2.0's −18 LUFS at 0.01 dB.
    static func members(_ f: LoudnessFigures) -> [(String, JSON)] {
        func r(_ v: Double?, _ places: Double = 100) -> JSON { v.map { .number(($0 * places).rounded() / places) } ?? .null }
        return [("integrated_lufs", r(f.integratedLUFS)), ("range_lu", r(f.rangeLU)), ("true_peak_dbtp", r(f.truePeakDBTP)),
                ("sample_peak_dbfs", r(f.samplePeakDBFS)), ("gain_db", r(f.gainDB())), ("seconds", r(f.seconds, 1000))]
    }

    static func line(_ f: LoudnessFigures) -> String {
        func p(_ v: Double?, _ unit: String) -> String { v.map { fixed($0, 1) + " " + unit } ?? "-inf " + unit }
        return "\(p(f.integratedLUFS, "LUFS"))  LRA \(fixed(f.rangeLU, 1)) LU  peak \(p(f.truePeakDBTP, "dBTP"))"
    }

    static func fixed(_ v: Double, _ places: Int) -> String {
        let scale = pow(10.0, Double(places))
        let r = (v * scale).rounded() / scale
        var s = "\(r)"
        if !s.contains(".") { s += ".0" }
        return s
    }

    /// Regular files under `dir`, by folder, each folder's files sorted by name, the
    /// folders in walk order (sorted); symbolic links are not followed (no loops).
    /// Counts past ``maxFiles`` and stops.
    static func walk(_ dir: String, _ out: inout [(String, [String])], _ count: inout Int) {
        guard count <= maxFiles, let d = PathBytes.withCPath(dir, { opendir($0) }) else { return }
        var files: [String] = [], dirs: [String] = []
        while let e = readdir(d) {
            let name = withUnsafeBytes(of: e.pointee.d_name) { raw in
                PathBytes.text(raw.prefix(while: { $0 != 0 }))
            }
            if name == "." || name == ".." || name.hasPrefix(".") { continue }
            let path = dir.hasSuffix("/") ? dir + name : dir + "/" + name
            var st = stat()
            guard PathBytes.lstat(path, &st) == 0 else { continue }
            switch st.st_mode & S_IFMT {
            case S_IFDIR: dirs.append(path)
            case S_IFREG:
                files.append(path)
                count += 1
            default: continue
            }
            if count > maxFiles { break }
        }
        closedir(d)
        if !files.isEmpty { out.append((dir, files.sorted())) }
        for sub in dirs.sorted() { walk(sub, &out, &count) }
    }
}
