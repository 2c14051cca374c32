import Foundation
import Testing
import PlaydProtocol
import CoreStreamTestSupport

/// The music library on a real daemon: a tree of files tagged by the ffmpeg CLI,
/// scanned, queried, changed and scanned again; broken tags, a symlink loop, a symlink
/// out of the roots, an unreadable folder; the path policy; MPD's library commands.
@Suite("Music library", .checksSomething, .serialized)
struct LibraryTests {
    /// Writes a one-second tagged file with the ffmpeg CLI.
    static func tagged(_ path: String, artist: String, album: String, title: String, track: Int, hz: Int = 440) throws {
        try FileManager.default.createDirectory(atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        try Shell.ffmpeg(["-f", "lavfi", "-i", "sine=frequency=\(hz):duration=1",
                          "-metadata", "artist=\(artist)", "-metadata", "album=\(album)", "-metadata", "title=\(title)",
                          "-metadata", "track=\(track)", path])
    }

    /// The tree: two artists, three albums, six songs in three formats, a file that is
    /// not audio, a symlink back up (a loop) and one out of the roots.
    static func makeTree(_ music: String, outside: String) throws {
        try tagged("\(music)/Alpha/First/01 Dawn.flac", artist: "Alpha", album: "First", title: "Dawn", track: 1)
        try tagged("\(music)/Alpha/First/02 Noon.mp3", artist: "Alpha", album: "First", title: "Noon", track: 2)
        try tagged("\(music)/Alpha/Second/01 Dusk.ogg", artist: "Alpha", album: "Second", title: "Dusk", track: 1)
        try tagged("\(music)/Beta/Third/01 Beat It.flac", artist: "Beta", album: "Third", title: "Beat It", track: 1)
        try tagged("\(music)/Beta/Third/02 Beatnik.flac", artist: "Beta", album: "Third", title: "Beatnik", track: 2)
        try tagged("\(music)/Beta/Third/10 Coda.flac", artist: "Beta", album: "Third", title: "Coda", track: 10)
        try "not audio at all".write(toFile: "\(music)/Beta/Third/11 broken.mp3", atomically: true, encoding: .utf8)
        try FileManager.default.createSymbolicLink(atPath: "\(music)/Beta/loop", withDestinationPath: "..")
        try tagged("\(outside)/secret.flac", artist: "Nobody", album: "Outside", title: "Secret", track: 1)
        try FileManager.default.createSymbolicLink(atPath: "\(music)/Beta/escape", withDestinationPath: outside)
    }

    func harness(_ extra: String = "", name: String = #function) throws -> (DaemonHarness, String, String) {
        let h = try DaemonHarness(extraConfig: "[library]\nmusic_roots = [\"$DIR/music\"]\n\(extra)", name: name)
        let music = h.dir + "/music", outside = h.dir + "/outside"
        try Self.makeTree(music, outside: outside)
        return (h, music, outside)
    }

    /// MPD's `Last-Modified:` of an indexed song is its file's mtime as `date -u -r`
    /// prints it (the index keeps nanoseconds, and they were printed as seconds:
    /// `1068291701-01-00T01:50:58Z` for a file of 2026).
    @Test func lastModifiedIsTheFilesTime() throws {
        let (h, music, _) = try harness()
        try h.start()
        #expect((h.waitForScan() ?? 0) > 0)
        let c = try LineClient(path: h.dir + "/mpd.sock")
        _ = c.readLine(timeoutMillis: 10_000)
        #expect(c.send("listallinfo"))
        var pairs: [(String, String)] = []
        var file: String?
        while let line = c.readLine(timeoutMillis: 10_000), line != "OK" {
            if line.hasPrefix("file: ") { file = String(line.dropFirst(6)) }
            if line.hasPrefix("Last-Modified: "), let f = file { pairs.append((f, String(line.dropFirst(15)))); file = nil }
        }
        #expect(!pairs.isEmpty)
        for (f, modified) in pairs {
            let r = try Shell.run(["date", "-u", "-r", music + "/" + f, "+%Y-%m-%dT%H:%M:%SZ"])
            #expect(modified + "\n" == String(decoding: r.stdout, as: UTF8.self), "\(f)")
        }
    }

    /// Starts an update and returns its `finished` event.
    func updateAndWait(_ h: DaemonHarness) throws -> JSON {
        let events = try LineClient(path: h.socket)
        _ = events.request(.obj(("id", .int(1)), ("cmd", .string("subscribe"))))
        #expect(h.request("update")?["ok"]?.boolValue == true)
        let deadline = Date().addingTimeInterval(20)
        while Date() < deadline, let line = events.readLine(timeoutMillis: 1000) {
            if let j = try? JSON.parse(line), j["event"]?.stringValue == "update", j["state"]?.stringValue == "finished" { return j }
        }
        throw FixtureError("no update event")
    }

    /// A scan opens a connection to the index of its own and closes it when it ends:
    /// ten updates leave the daemon with the descriptors on `library.db` it had after the
    /// second (each scan left two open, 2026-11-28: a daemon updated by cron every hour
    /// ran out of descriptors in a few weeks). Counted by the kernel (/proc/PID/fd).
    @Test func aScanLeavesNoDescriptorOnTheIndex() throws {
        let (h, _, _) = try harness()
        try h.start()
        #expect(h.waitForScan() == 7)
        let pid = try #require(h.process?.processIdentifier)
        func onIndex() -> Int {
            let dir = "/proc/\(pid)/fd"
            let fds = (try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? []
            return fds.filter { ((try? FileManager.default.destinationOfSymbolicLink(atPath: "\(dir)/\($0)")) ?? "").contains("library.db") }.count
        }
        // SQLite keeps one closed connection's descriptor for the next open while another
        // connection holds POSIX locks on the file (closing it would drop them): counted
        // after a second scan, the figure stays.
        _ = try updateAndWait(h)
        let before = onIndex()
        #expect(before > 0, "the control thread's connection")
        for _ in 0..<10 { _ = try updateAndWait(h) }
        #expect(onIndex() == before)
        #expect(h.terminate().status == 0)
    }

    func titles(_ reply: JSON?) -> [String] {
        (reply?["songs"]?.arrayValue ?? []).map { $0["title"]?.stringValue ?? "-" }
    }

    @Test func scanQueryChangeAndRescan() throws {
        let (h, music, _) = try harness()
        try h.start()
        // The start-up scan: 6 songs and the broken file (listed with its error);
        // the loop walked once; the link out of the roots skipped.
        #expect(h.waitForScan() == 7)
        #expect(titles(h.request("search", ("query", .string("beat")))) == ["Beat It", "Beatnik"])
        #expect(titles(h.request("find", ("artist", .string("Alpha")), ("album", .string("First")))) == ["Dawn", "Noon"])
        #expect(titles(h.request("find", ("title", .string("D*")))).sorted() == ["Dawn", "Dusk"])
        #expect(titles(h.request("find", ("title", .string("d*")))).isEmpty, "find is exact (case-sensitive)")
        #expect(h.request("list", ("what", .string("artists")))?["artists"]?.arrayValue?.compactMap(\.stringValue) == ["Alpha", "Beta"])
        #expect(h.request("list", ("what", .string("albums")), ("artist", .string("Alpha")))?["albums"]?.arrayValue?.compactMap(\.stringValue)
                == ["First", "Second"])
        let ls = try #require(h.request("ls", ("path", .string("Beta/Third"))))
        let songNames: [String] = (ls["songs"]?.arrayValue ?? []).map { (s: JSON) -> String in
            let file: String = s["file"]?.stringValue ?? ""
            return file.split(separator: "/").last.map(String.init) ?? ""
        }
        #expect(songNames == ["01 Beat It.flac", "02 Beatnik.flac", "10 Coda.flac", "11 broken.mp3"], "natural order")
        let broken = ls["songs"]?.arrayValue?.last
        #expect(broken?["error"]?.stringValue != nil, "the broken file is listed with its error")
        #expect(h.request("search", ("query", .string("Secret")))?["count"]?.numberValue == 0, "nothing from outside the roots")
        #expect(h.request("ls")?["directories"]?.arrayValue?.count == 2)
        // playctl's view, and `find --add` filling the queue.
        let (st, out, _) = try h.playctl("find", "album=Third", "--add")
        #expect(st == 0 && out.contains("Beatnik") && out.contains("added 3"), "\(out)")  // the broken file has no album tag

        // Change the tree: rename one, retag one (new size and mtime), delete one, add one.
        let fm = FileManager.default
        try fm.moveItem(atPath: "\(music)/Alpha/First/02 Noon.mp3", toPath: "\(music)/Alpha/First/02 Midday.mp3")
        try fm.removeItem(atPath: "\(music)/Beta/Third/10 Coda.flac")
        try Self.tagged("\(music)/Beta/Third/10 Coda.flac", artist: "Beta", album: "Third", title: "Coda (Live)", track: 10, hz: 880)
        try fm.removeItem(atPath: "\(music)/Alpha/Second/01 Dusk.ogg")
        try Self.tagged("\(music)/Gamma/Fourth/01 New.flac", artist: "Gamma", album: "Fourth", title: "New", track: 1)
        let f = try updateAndWait(h)
        // Renamed: one removed, one added; retagged: updated; deleted: removed; new: added.
        #expect(f["added"]?.numberValue == 2 && f["updated"]?.numberValue == 1 && f["removed"]?.numberValue == 2, "\(f.text)")
        #expect(f["songs"]?.numberValue == 7)
        #expect(titles(h.request("find", ("album", .string("Third")))).contains("Coda (Live)"))
        #expect(titles(h.request("find", ("artist", .string("Gamma")))) == ["New"])
        #expect(titles(h.request("find", ("title", .string("Dusk")))).isEmpty)
        #expect(h.request("update", ("path", .string("/etc")))?["error"]?["code"]?.stringValue == "invalid_argument")
        _ = h.terminate()
    }

    @Test func pathsOutsideTheRootsAreRefused() throws {
        let (h, music, outside) = try harness("update_on_start = false")
        try h.start()
        func code(_ path: String) -> String? {
            let r = h.request("play", ("path", .string(path)))
            return r?["ok"]?.boolValue == true ? "ok" : r?["error"]?["code"]?.stringValue
        }
        #expect(code("\(music)/Alpha/First/01 Dawn.flac") == "ok")
        #expect(code("Alpha/First/01 Dawn.flac") == "ok", "relative to the root")
        #expect(code("\(outside)/secret.flac") == "outside_library")
        #expect(code("\(music)/../outside/secret.flac") == "outside_library", "..")
        #expect(code("\(music)/Beta/escape/secret.flac") == "outside_library", "a symlink out of the roots")
        // A folder beside the root whose name starts with the root's (issue 41: a check
        // of the prefix without its slash let `/x/music-private/…` in for `/x/music`).
        let sibling = music + "-private"
        try FileManager.default.createDirectory(atPath: sibling, withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: "\(outside)/secret.flac", toPath: "\(sibling)/secret.flac")
        #expect(code("\(sibling)/secret.flac") == "outside_library", "a sibling sharing the root's name as a prefix")
        #expect(h.request("add", ("path", .string(sibling)))?["error"]?["code"]?.stringValue == "outside_library")
        #expect(code("\(music)/" + String(repeating: "x/", count: 3000)) == "bad_request", "overlong")
        #expect(h.request("add", ("path", .string(outside)))?["error"]?["code"]?.stringValue == "outside_library")
        // A folder whose symlink leads out: the outside entry is left out and counted.
        let added = try #require(h.request("add", ("path", .string("\(music)/Beta"))))
        #expect(added["outside_library"]?.numberValue == 1, "\(added.text)")
        _ = h.terminate()

        let (h2, _, outside2) = try harness("update_on_start = false\nallow_outside_roots = true")
        try h2.start()
        #expect(h2.request("play", ("path", .string("\(outside2)/secret.flac")))?["ok"]?.boolValue == true)
        _ = h2.terminate()
    }

    /// An unreadable folder is reported and the scan goes on. Folder permissions do not
    /// stop root, so as root the daemon runs as `nobody` for this test.
    @Test func unreadableFolderIsReportedAndTheScanGoesOn() throws {
        let (h, music, _) = try harness("update_on_start = false")
        var launcher: [String] = []
        if geteuid() == 0 {
            _ = try Shell.run(["chown", "-R", "65534:65534", h.dir])
            launcher = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
        }
        chmod("\(music)/Alpha/Second", 0o000)
        defer { chmod("\(music)/Alpha/Second", 0o755) }
        try h.start(launcher: launcher)
        let f = try updateAndWait(h)
        let unreadable = f["unreadable"]?.arrayValue?.compactMap(\.stringValue) ?? []
        #expect(unreadable.contains { $0.contains("Alpha/Second") && $0.contains("Permission denied") }, "\(f.text)")
        #expect(f["songs"]?.numberValue == 6, "everything else indexed: \(f.text)")
        _ = h.terminate()
    }

    @Test func mpdClientsUseTheLibrary() throws {
        let (h, _, _) = try harness()
        try h.start()
        #expect(h.waitForScan() == 7)
        func mpc(_ args: String...) throws -> String {
            String(decoding: try Shell.run(["mpc", "-h", h.dir + "/mpd.sock"] + args).stdout, as: UTF8.self)
        }
        #expect(try mpc("search", "title", "beat") == "Beta/Third/01 Beat It.flac\nBeta/Third/02 Beatnik.flac\n")
        #expect(try mpc("find", "artist", "Alpha", "album", "Second") == "Alpha/Second/01 Dusk.ogg\n")
        #expect(try mpc("list", "artist") == "Alpha\nBeta\n")
        #expect(try mpc("list", "album", "artist", "Beta") == "Third\n")
        #expect(try mpc("ls", "Alpha") == "Alpha/First\nAlpha/Second\n")
        // MPD's `update` answers with the job (mpc prints it only if the scan is still
        // running when it asks for the status: not for seven files).
        let raw = try LineClient(path: h.dir + "/mpd.sock")
        #expect(raw.readLine(timeoutMillis: 2000)?.hasPrefix("OK MPD ") == true)
        #expect(raw.send("update"))
        #expect(raw.readLine(timeoutMillis: 2000)?.hasPrefix("updating_db: ") == true)
        #expect(raw.readLine(timeoutMillis: 2000) == "OK")
        #expect(h.waitForScan() == 7)
        #expect(try mpc("findadd", "album", "First").isEmpty)
        #expect(try mpc("playlist") == "Alpha - Dawn\nAlpha - Noon\n")
        let stats = try mpc("stats")
        #expect(stats.contains("Songs:        7") && stats.contains("Artists:      2"), "\(stats)")
        _ = h.terminate()
    }
}
