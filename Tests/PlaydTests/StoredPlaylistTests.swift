import Foundation
import Testing
import PlaydProtocol
import CoreStreamTestSupport

/// Stored playlists through the real daemon: `playctl save/load/playlists` and mpc on
/// the same files, which Debian's MPD reads as its own (and playd reads MPD's).
@Suite("Stored playlists", .checksSomething, .serialized)
struct StoredPlaylistTests {
    func mpc(_ socket: String, _ args: String...) throws -> (Int32, String) {
        let r = try Shell.run(["mpc", "-h", socket] + args)
        return (r.status, String(decoding: r.stdout, as: UTF8.self) + r.stderr)
    }

    @Test func playctlMPCAndRealMPDShareThem() throws {
        let h = try DaemonHarness(extraConfig: "[library]\nmusic_roots = [\"$DIR/music\"]", output: "null")
        let music = h.dir + "/music"
        try FileManager.default.createDirectory(atPath: music, withIntermediateDirectories: true)
        for name in ["flac-44100-2.flac", "flac-48000-1.flac"] {
            try FileManager.default.copyItem(atPath: Fixtures.named(name).path, toPath: music + "/" + name)
        }
        try h.start()
        let sock = h.dir + "/mpd.sock"
        #expect(try mpc(sock, "update", "--wait").0 == 0)

        // playctl saves the queue; the file is MPD's format: one URI a line, relative
        // to the music folder.
        #expect(try h.playctl("add", music + "/flac-44100-2.flac", music + "/flac-48000-1.flac").0 == 0)
        let (st, out, err) = try h.playctl("save", "morning")
        #expect(st == 0, "\(out) \(err)")
        let file = try String(contentsOfFile: h.dir + "/playlists/morning.m3u", encoding: .utf8)
        #expect(file == "flac-44100-2.flac\nflac-48000-1.flac\n")
        let again = try h.playctl("save", "morning")
        #expect(again.0 != 0 && again.2.contains("playlist_exists"), "\(again)")
        #expect(try h.playctl("playlists").1 == "morning\n")
        #expect(try h.playctl("playlists", "morning").1 == "\(music)/flac-44100-2.flac\n\(music)/flac-48000-1.flac\n")
        #expect(try mpc(sock, "lsplaylists").1 == "morning\n")

        // mpc loads it, playctl loads it again.
        #expect(try mpc(sock, "clear").0 == 0)
        #expect(try mpc(sock, "load", "morning").0 == 0)
        #expect(try mpc(sock, "playlist", "-f", "%file%").1 == "flac-44100-2.flac\nflac-48000-1.flac\n")
        #expect(try h.playctl("load", "morning").1.hasPrefix("added 2 entries"))
        #expect(h.request("status")?["queue"]?["length"]?.numberValue == 4)

        // Debian's MPD reads playd's file, and playd reads one MPD saved.
        let mpd = try RealMPD(music: music)
        defer { mpd.stop() }
        try FileManager.default.copyItem(atPath: h.dir + "/playlists/morning.m3u", toPath: mpd.dir + "/playlists/morning.m3u")
        #expect(try mpc(mpd.socket, "load", "morning").0 == 0)
        #expect(try mpc(mpd.socket, "playlist", "-f", "%file%").1 == "flac-44100-2.flac\nflac-48000-1.flac\n")
        #expect(try mpc(mpd.socket, "insert", "flac-48000-1.flac").0 == 0)
        #expect(try mpc(mpd.socket, "save", "evening").0 == 0)
        try FileManager.default.copyItem(atPath: mpd.dir + "/playlists/evening.m3u", toPath: h.dir + "/playlists/evening.m3u")
        #expect(try mpc(sock, "clear").0 == 0)
        #expect(try mpc(sock, "load", "evening").0 == 0)
        let mpdOrder = try mpc(mpd.socket, "playlist", "-f", "%file%").1
        #expect(try mpc(sock, "playlist", "-f", "%file%").1 == mpdOrder)

        // Removed, renamed, refused names.
        #expect(try mpc(sock, "rm", "evening").0 == 0)
        #expect(try h.playctl("playlists").1 == "morning\n")
        #expect(h.request("rename_playlist", ("name", .string("morning")), ("to", .string("weekday")))?["ok"] == .bool(true))
        #expect(h.request("save", ("name", .string("../etc/x")))?["error"]?["code"]?.stringValue == "invalid_argument")
        #expect(h.request("load", ("name", .string("nope")))?["error"]?["code"]?.stringValue == "no_such_playlist")
        #expect(try h.playctl("playlists").1 == "weekday\n")
        #expect(h.terminate().status == 0)
    }
}

/// Cover art as Home Assistant fetches it: python-mpd2 checks `commands`, then reads
/// `albumart` and `readpicture` chunk by chunk; the bytes must be the cover file's and
/// the embedded picture as the ffmpeg CLI extracts it.
@Suite("Cover art over MPD", .checksSomething)
struct CoverArtTests {
    @Test func pythonMPD2ReadsCoversWhole() throws {
        let python = try MPDClientTests.pythonWithMPD2()
        let h = try DaemonHarness(extraConfig: "[library]\nmusic_roots = [\"$DIR/music\"]", output: "null")
        let music = h.dir + "/music"
        try FileManager.default.createDirectory(atPath: music + "/album", withIntermediateDirectories: true)
        // A cover larger than one 8 KiB chunk: noise does not compress.
        try Shell.ffmpeg(["-f", "lavfi", "-i", "nullsrc=s=320x320,geq=r=random(1)*255:g=random(2)*255:b=random(3)*255", "-frames:v", "1", music + "/album/cover.png"])
        try Shell.ffmpeg(["-f", "lavfi", "-i", "nullsrc=s=300x300,geq=r=random(4)*255:g=random(5)*255:b=random(6)*255", "-frames:v", "1", h.dir + "/embedded.png"])
        try Shell.ffmpeg(["-i", Fixtures.named("flac-44100-2.flac").path, "-i", h.dir + "/embedded.png", "-map", "0:a", "-map", "1",
                          "-c", "copy", "-disposition:v", "attached_pic", music + "/album/track.flac"])
        try Shell.ffmpeg(["-i", music + "/album/track.flac", "-map", "0:v", "-c", "copy", "-f", "image2", h.dir + "/extracted.png"])
        let cover = try Data(contentsOf: URL(fileURLWithPath: music + "/album/cover.png"))
        let embedded = try Data(contentsOf: URL(fileURLWithPath: h.dir + "/extracted.png"))
        #expect(cover.count > 8192 && embedded.count > 8192, "\(cover.count) \(embedded.count): one chunk would not test chunking")
        try h.start()
        let script = """
        import sys
        from mpd import MPDClient
        c = MPDClient(); c.timeout = 10; c.connect(sys.argv[1])
        cmds = c.commands()
        assert 'albumart' in cmds and 'readpicture' in cmds, cmds
        open(sys.argv[2], 'wb').write(c.albumart('album/track.flac')['binary'])
        pic = c.readpicture('album/track.flac')
        open(sys.argv[3], 'wb').write(pic['binary'])
        print(pic['type'])
        """
        let r = try Shell.run([python, "-c", script, h.dir + "/mpd.sock", h.dir + "/got-cover", h.dir + "/got-embedded"])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(String(decoding: r.stdout, as: UTF8.self) == "image/png\n")
        #expect(try Data(contentsOf: URL(fileURLWithPath: h.dir + "/got-cover")) == cover)
        #expect(try Data(contentsOf: URL(fileURLWithPath: h.dir + "/got-embedded")) == embedded)
        #expect(h.terminate().status == 0)
    }
}
