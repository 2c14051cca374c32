import Foundation
import Testing
import CoreStreamTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// The docs' command blocks marked `<!-- doc-test: run -->` (README.md, docs/*.md;
/// `scripts/check-docs` requires every `sh` block to carry a mark) run here as
/// written, line by line through /bin/sh, in document order, against a playd that
/// listens where the system service does (/run/playd/control.sock and mpd.sock, so
/// `mpc -h /run/playd/mpd.sock` and a bare `playctl` work unchanged) on a music tree
/// with the folders and tags the examples name. Each line must exit 0, and a line
/// that lists something must list something.
@Suite("Docs run as written", .checksSomething, .serialized)
struct DocsTests {
    struct Line: CustomStringConvertible {
        var file: String, number: Int, text: String
        var description: String { "\(file):\(number): \(text)" }
    }

    /// The lines of the blocks marked to run, comments cut.
    static func runnableLines() throws -> [Line] {
        let root = Fixtures.repositoryRoot.path
        let docs = ["README.md"] + (try FileManager.default.contentsOfDirectory(atPath: root + "/docs"))
            .filter { $0.hasSuffix(".md") }.sorted().map { "docs/" + $0 }
        var out: [Line] = []
        for doc in docs {
            let lines = try String(contentsOfFile: root + "/" + doc, encoding: .utf8).components(separatedBy: "\n")
            var i = 0
            while i < lines.count {
                defer { i += 1 }
                guard lines[i] == "```sh" else { continue }
                let mark = lines[..<i].last { !$0.trimmingCharacters(in: .whitespaces).isEmpty } ?? ""
                var j = i + 1
                while j < lines.count && lines[j] != "```" {
                    if mark == "<!-- doc-test: run -->" {
                        // "cmd   # comment": the comment starts at " # " after the command.
                        var text = lines[j]
                        if let r = text.range(of: " # ") { text = String(text[..<r.lowerBound]) }
                        text = text.trimmingCharacters(in: .whitespaces)
                        if !text.isEmpty { out.append(Line(file: doc, number: j + 1, text: text)) }
                    }
                    j += 1
                }
                i = j
            }
        }
        return out
    }

    /// Folders and tags the examples name: "Daft Punk/Discovery", "Artist/Album", a
    /// song matching "beat", and the announcements' clips.
    static func musicTree(_ dir: String) throws {
        for (path, artist, album, title) in [("Daft Punk/Discovery/01 One More Time.flac", "Daft Punk", "Discovery", "One More Time"),
                                             ("Daft Punk/Homework/01 Da Funk.flac", "Daft Punk", "Homework", "Da Funk"),
                                             ("Artist/Album/01 Song.flac", "Artist", "Album", "Song"),
                                             ("Mixed/07 Beat Goes On.flac", "Various", "Mixed", "Beat Goes On")] {
            let full = dir + "/" + path
            try FileManager.default.createDirectory(atPath: (full as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            try Shell.ffmpeg(["-f", "lavfi", "-i", "sine=frequency=440:duration=20", "-ac", "2",
                              "-metadata", "artist=\(artist)", "-metadata", "album=\(album)", "-metadata", "title=\(title)", full])
        }
        // The clips docs/announcements.md announces: a 3 s "closing" MP3 and a chime.
        try FileManager.default.createDirectory(atPath: dir + "/Announcements", withIntermediateDirectories: true)
        try Shell.ffmpeg(["-f", "lavfi", "-i", "sine=frequency=660:duration=3:sample_rate=16000", "-c:a", "libmp3lame", dir + "/Announcements/closing.mp3"])
        try Shell.ffmpeg(["-f", "lavfi", "-i", "sine=frequency=880:duration=0.4", dir + "/Announcements/ding.wav"])
    }

    /// The number a doc page states where `pattern`'s first group is (a documented count
    /// a test compares with its list).
    static func statedCount(_ page: String, _ pattern: String) throws -> Int {
        let doc = try String(contentsOfFile: Fixtures.repositoryRoot.path + "/" + page, encoding: .utf8)
        let re = try NSRegularExpression(pattern: pattern)
        let m = try #require(re.firstMatch(in: doc, range: NSRange(doc.startIndex..., in: doc)), "\(page) gives no count")
        return try #require(Range(m.range(at: 1), in: doc).flatMap { Int(doc[$0]) }, "\(page): no number")
    }

    /// docs/reliability.md's mutation table is scripts/mutate's list: the same names, and
    /// the count its text gives (issue 41: a documented count is checked, not kept by
    /// hand beside the list).
    @Test func theMutationTableIsTheScriptsList() throws {
        let root = Fixtures.repositoryRoot.path
        let script = try String(contentsOfFile: root + "/scripts/mutate", encoding: .utf8)
        let doc = try String(contentsOfFile: root + "/docs/reliability.md", encoding: .utf8)
        func all(_ pattern: String, _ text: String) throws -> [String] {
            let re = try NSRegularExpression(pattern: pattern, options: [.anchorsMatchLines])
            return re.matches(in: text, range: NSRange(text.startIndex..., in: text)).compactMap { m in
                Range(m.range(at: 1), in: text).map { String(text[$0]) }
            }
        }
        let listed = try all(#"^    M\("([a-z0-9-]+)""#, script)
        let table = Set(try all(#"^\| ([a-z0-9]+(?:-[a-z0-9]+)+)(?: \(quick\))? \|"#, doc))
        #expect(listed.count >= 20 && Set(listed).count == listed.count, "scripts/mutate lists \(listed)")
        #expect(Set(listed) == table, "in scripts/mutate only: \(Set(listed).subtracting(table).sorted()); in docs/reliability.md only: \(table.subtracting(listed).sorted())")
        let stated = try Self.statedCount("docs/reliability.md", #"The whole list, (\d+)\s+mutations"#)
        #expect(stated == listed.count, "docs/reliability.md says \(stated) mutations; scripts/mutate has \(listed.count)")
    }

    @Test func everyRunnableDocLineRunsAsWritten() throws {
        let lines = try Self.runnableLines()
        #expect(lines.count >= 20, "the marked blocks hold \(lines.count) lines")
        try #require(!FileManager.default.fileExists(atPath: "/run/playd"),
                     "/run/playd exists: a playd service runs on this machine; the docs' commands would drive it")
        try FileManager.default.createDirectory(atPath: "/run/playd", withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: "/run/playd") }
        let music = NSTemporaryDirectory() + "playd-docs-music-\(getpid())"
        try? FileManager.default.removeItem(atPath: music)
        try Self.musicTree(music)
        defer { try? FileManager.default.removeItem(atPath: music) }
        // The web remote on 6680, as docs/web.md's curl lines name it (below the
        // ephemeral range; one DocsTests runs at a time).
        let d = try DaemonHarness(extraConfig: "[library]\nmusic_roots = [\"\(music)\"]\n[http]\nlisten = [\"127.0.0.1:6680\"]", output: "null",
                                  outputKeys: "feeds = [\"fifo:$DIR/snapcast.fifo?format=48000:16:2&name=snapcast\"]")
        _ = try d.start(arguments: ["--socket", "/run/playd/control.sock"], ping: false)
        defer { _ = d.terminate() }
        let wantsOutput = ["playctl search", "playctl list", "playctl ls", "playctl playlists", "playctl outputs",
                           "mpc -h /run/playd/mpd.sock search", "mpc -h /run/playd/mpd.sock outputs"]
        // The built playctl first on PATH; no variable that would point playctl elsewhere.
        var env = ProcessInfo.processInfo.environment
        env["PATH"] = DaemonHarness.binDir + ":" + (env["PATH"] ?? "/usr/bin:/bin")
        env["XDG_RUNTIME_DIR"] = nil
        env["PLAYD_SOCKET"] = nil
        for line in lines {
            let r = try Shell.run(["/bin/sh", "-c", line.text], environment: env)
            let stdout = String(decoding: r.stdout, as: UTF8.self)
            #expect(r.status == 0, "\(line)\n  exit \(r.status): \(r.stderr)\(stdout)")
            if wantsOutput.contains(where: { line.text.hasPrefix($0) }) {
                #expect(!stdout.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty, "\(line) printed nothing")
            }
        }
    }
}
