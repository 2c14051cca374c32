import Foundation
import Testing
import CoreStreamTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// Every subcommand mpc 0.34 has (and ncmpcpp's non-interactive `--current-song`),
/// run in one scripted order against Debian's real MPD and against playd (same music tree, null outputs): exit status, standard output
/// and standard error must be the same, after masking what must differ (times,
/// percentages of a position, versions, dates, job numbers). The few that still
/// differ are listed with the reason; the test checks they still do, so the list
/// (and docs/protocol.md's) cannot go stale.
@Suite("mpc against real MPD", .checksSomething, .serialized)
struct MpcSuiteTests {
    /// One mpc run: its arguments after `-h SOCKET`.
    struct Run: CustomStringConvertible, Sendable {
        var args: [String]
        var description: String { "mpc " + args.joined(separator: " ") }
        init(_ args: String...) { self.args = args }
    }

    /// The script, in order: each run sees the state the ones before it left, on both
    /// servers. Tracks are 60 s long, so nothing ends while the script runs.
    static let script: [Run] = [
        Run("version"), Run("status"), Run(), Run("stats"),
        Run("update", "--wait"), Run("ls"), Run("ls", "sub"), Run("listall"), Run("listall", "sub"),
        Run("add", "one.flac"), Run("add", "sub"), Run("playlist"), Run("queued"),
        Run("insert", "two.flac"), Run("playlist"),
        Run("-f", "%position% %artist% - %title% (%album%) %time%", "playlist"),
        Run("search", "title", "t"), Run("search", "artist", "Ann"), Run("find", "artist", "Ann Artist"),
        Run("find", "album", "Nothing"), Run("list", "artist"), Run("list", "album", "artist", "Ann Artist"),
        Run("list", "title"), Run("list", "genre"), Run("list", "date"),
        Run("searchadd", "title", "Two"), Run("findadd", "artist", "Bob Band"), Run("playlist"),
        Run("del", "5"), Run("del", "4"), Run("move", "1", "2"), Run("playlist"),
        Run("prio", "5", "1"), Run("prio", "300", "1"),
        Run("repeat"), Run("repeat", "off"), Run("random", "on"), Run("random", "off"),
        Run("single", "on"), Run("single", "once"), Run("single", "off"), Run("consume", "on"), Run("consume", "off"),
        Run("volume"), Run("volume", "40"), Run("volume", "+10"), Run("volume", "-5"), Run("volume", "200"),
        Run("replaygain"), Run("replaygain", "track"), Run("replaygain", "off"),
        Run("outputs"), Run("disable", "1"), Run("outputs"), Run("enable", "1"), Run("toggleoutput", "1"),
        Run("toggleoutput", "1"), Run("enable", "only", "1"), Run("disable", "9"),
        Run("save", "mix"), Run("save", "mix"), Run("lsplaylists"), Run("playlist", "mix"),
        Run("clear"), Run("load", "mix"), Run("playlist"), Run("-r", "1:2", "load", "mix"), Run("playlist"),
        Run("rm", "mix"), Run("rm", "mix"), Run("lsplaylists"),
        Run("current"), Run("play", "2"), Run("pause"), Run("current"), Run("status"),
        Run("-f", "[%artist% - ]%title%", "current"),
        // ncmpcpp, non-interactively: its status-bar mode prints the current song.
        Run("@ncmpcpp", "--current-song"), Run("@ncmpcpp", "--current-song={%a - }{%t}|{%f} [%b] (%l) #%n"),
        Run("seek", "0:30"), Run("seek", "50%"), Run("seek", "+5"), Run("seek", "-0:10"),
        Run("seekthrough", "+3"), Run("status"),
        Run("next"), Run("pause"), Run("prev"), Run("pause"), Run("cdprev"), Run("pause"), Run("status"),
        Run("toggle"), Run("pause-if-playing"), Run("pause-if-playing"), Run("toggle"), Run("pause"),
        Run("searchplay", "Three"), Run("pause"), Run("current"), Run("searchplay", "nothing here"),
        Run("crop"), Run("playlist"), Run("stop"), Run("status"), Run("play", "9"),
        Run("shuffle"), Run("clearerror"),
        Run("channels"), Run("sendmessage", "room", "hello"),
        Run("albumart", "one.flac"), Run("readpicture", "one.flac"), Run("readpicture", "sub/three.mp3"),
        Run("crossfade"), Run("mixrampdb"), Run("crossfade", "3"), Run("crossfade"), Run("mixrampdelay", "2"),
        Run("mixrampdelay"), Run("mixrampdb", "0.5"), Run("mixrampdb"), Run("status"), Run("crossfade", "0"),
        Run("mixrampdelay", "0"), Run("mixrampdelay"), Run("-w", "rescan"), Run("-w", "update", "sub"),
        Run("clear"), Run("status"), Run("nosuchcommand"),
    ]

    /// Runs that still differ, each with why (docs/protocol.md lists them too).
    static let knownDifferences: [(Run, String)] = [
        (Run("sticker", "one.flac", "list"), "stickers are not built: playd has no sticker database"),
        (Run("listneighbors"), "playd has no neighbor plugins (MPD: 'No neighbor plugin configured')"),
        (Run("mount"), "playd has no storage plugins (MPD lists its music directory as the root mount)"),
        (Run("outputset", "1", "x=1"), "playd's outputs have no runtime attributes"),
        (Run("channels"), "playd itself reads the `announce` channel (announcements from MPD clients), so it is listed"),
    ]

    /// A music tree with tags and 60 s tracks (sine tones), a cover for albumart and
    /// an embedded picture for readpicture.
    static func musicTree() throws -> String {
        let dir = NSTemporaryDirectory() + "playd-mpc-music-\(getpid())"
        try? FileManager.default.removeItem(atPath: dir)
        try FileManager.default.createDirectory(atPath: dir + "/sub", withIntermediateDirectories: true)
        func tone(_ path: String, _ hz: Int, _ tags: [(String, String)], extra: [String] = []) throws {
            // Tags in playd's listing order (MPD prints them in the file's order).
            try Shell.ffmpeg(["-f", "lavfi", "-i", "sine=frequency=\(hz):duration=60:sample_rate=44100"] + extra
                             + tags.flatMap { ["-metadata", "\($0.0)=\($0.1)"] } + ["-ac", "2", dir + "/" + path])
        }
        try Shell.ffmpeg(["-f", "lavfi", "-i", "color=c=red:s=64x64", "-frames:v", "1", dir + "/cover.jpg"])
        try tone("one.flac", 440, [("artist", "Ann Artist"), ("album", "First Album"), ("title", "One"), ("track", "1"),
                                    ("genre", "Rock"), ("date", "2001")])
        try tone("two.flac", 550, [("artist", "Ann Artist"), ("album", "First Album"), ("title", "Two"), ("track", "2"),
                                    ("genre", "Rock"), ("date", "2001")])
        try tone("sub/three.mp3", 660, [("artist", "Bob Band"), ("album", "Second"), ("title", "Three"), ("track", "1"),
                                         ("genre", "Jazz"), ("date", "1999")], extra: ["-b:a", "128k"])
        return dir
    }

    /// What must differ between two servers, masked: positions and durations, the
    /// percentage of a position, versions, uptimes and dates, update job numbers.
    static func mask(_ text: String) -> String {
        var s = text
        for (pattern, with) in [(#"\d+:\d\d(:\d\d)?"#, "T"), (#"\(\d+%\)"#, "(P%)"), (#"#\d+\b(?! *[/])"#, "#N"),
                                (#"mpd version: .*"#, "mpd version: V"), (#"Uptime: .*"#, "Uptime: *"),
                                (#"DB Updated: .*"#, "DB Updated: *"), (#"Play Time: .*"#, "Play Time: *"),
                                (#"DB Play Time: .*"#, "DB Play Time: *"), (#"Updating DB \(#\d+\)"#, "Updating DB (#N)")] {
            s = s.replacingOccurrences(of: pattern, with: with, options: .regularExpression)
        }
        return s
    }

    static func run(_ socket: String, _ r: Run) throws -> String {
        let argv = r.args.first == "@ncmpcpp"
            ? ["ncmpcpp", "--quiet", "--host", socket] + r.args.dropFirst()
            : ["mpc", "-h", socket] + r.args
        let out = try Shell.run(argv)
        let stdout = out.stdout.count > 4096 || out.stdout.contains(0)
            ? "<\(out.stdout.count) bytes, fnv1a \(out.stdout.reduce(UInt64(14_695_981_039_346_656_037)) { ($0 ^ UInt64($1)) &* 1_099_511_628_211 })>"
            : String(decoding: out.stdout, as: UTF8.self)
        return mask("exit \(out.status)\n\(stdout)stderr: \(out.stderr)")
    }

    /// python-mpd2's asyncio client the way Home Assistant's mpd integration uses it:
    /// one connection per update (commands, status, currentsong, the cover through
    /// readpicture then albumart, listplaylists) and its services (play_media as
    /// clear/add/play and load, volume, seek, shuffle, repeat, pause). The printed
    /// transcript must be the same against real MPD and playd.
    static let homeAssistant = #"""
        import asyncio, hashlib, json, sys
        from mpd.asyncio import MPDClient
        from mpd.base import CommandError
        SOCK = sys.argv[1]
        MASK = {"time", "elapsed", "duration", "bitrate", "audio", "playlist", "last-modified", "id", "songid", "nextsongid", "playtime"}
        def show(step, value):
            if isinstance(value, dict) and value.get("file", "").endswith(".mp3"):
                value = dict(value, format="(an MP3: the known Format difference, docs/protocol.md)")
            if isinstance(value, dict):
                value = {k: ("*" if k in MASK else ("sha1:" + hashlib.sha1(v).hexdigest() if isinstance(v, bytes) else v)) for k, v in value.items()}
            elif isinstance(value, list):
                value = [{k: ("*" if k in MASK else v) for k, v in e.items()} if isinstance(e, dict) else e for e in value]
            print(step, json.dumps(value, sort_keys=True))
        async def update(step):
            c = MPDClient()
            await c.connect(SOCK)
            commands = list(await c.commands())
            show(step + " status", await c.status())
            song = await c.currentsong()
            show(step + " currentsong", song)
            if "file" in song:
                for how in ("readpicture", "albumart"):
                    if how in commands:
                        try:
                            show(step + " " + how, await getattr(c, how)(song["file"]))
                        except CommandError as e:
                            show(step + " " + how, str(e))
            show(step + " listplaylists", await c.listplaylists())
            c.disconnect()
            return c
        async def service(step, *calls):
            c = MPDClient()
            await c.connect(SOCK)
            for name, *args in calls:
                try:
                    r = await getattr(c, name)(*args)
                    show(step + " " + name, r if r is not None else "ok")
                except CommandError as e:
                    show(step + " " + name, str(e))
            c.disconnect()
        async def decoded():
            # MPD reports `audio` once its decoder has started, which may come after a
            # `pause` sent at once (on a loaded machine the reference transcript lacked
            # it); playd knows it at once. Both are awaited, for 10 s at most.
            c = MPDClient()
            await c.connect(SOCK)
            for _ in range(1000):
                if "audio" in await c.status(): break
                await asyncio.sleep(0.01)
            c.disconnect()
        async def main():
            await update("start")
            await service("play_media music", ("clear",), ("add", "one.flac"), ("add", "sub/three.mp3"), ("play",), ("pause", 1))
            await decoded()
            await update("playing")
            await service("volume_set", ("setvol", 35))
            await service("media_seek", ("seekcur", 20))
            await service("shuffle", ("random", 1))
            await service("repeat all", ("repeat", 1), ("single", 0))
            await service("repeat one", ("repeat", 1), ("single", 1))
            await service("repeat off", ("repeat", 0), ("single", 0), ("random", 0))
            await update("after services")
            await service("save playlist", ("save", "ha"))
            await service("play_media playlist", ("clear",), ("load", "ha"), ("play",), ("pause", 1))
            await decoded()
            await update("playlist loaded")
            await service("next", ("next",), ("pause", 1))
            await decoded()
            await update("next")
            await service("cleanup", ("rm", "ha"), ("stop",), ("clear",))
            await update("end")
        asyncio.run(main())
        """#

    /// docs/protocol.md's count of the runs is this script's (issue 41: a documented
    /// count is checked).
    @Test func theDocumentedCountIsTheScript() throws {
        let stated = try DocsTests.statedCount("docs/protocol.md", #"in one script \((\d+) runs"#)
        #expect(stated == Self.script.count, "docs/protocol.md says \(stated) runs; the script has \(Self.script.count)")
    }

    @Test func homeAssistantsClientSeesPlaydAsMPD() throws {
        let python = try MPDClientTests.pythonWithMPD2()
        let music = try Self.musicTree()
        defer { try? FileManager.default.removeItem(atPath: music) }
        let mpd = try RealMPD(music: music)
        defer { mpd.stop() }
        let d = try playdOverMusic(music)
        let script = d.dir + "/ha.py"
        try Self.homeAssistant.write(toFile: script, atomically: true, encoding: .utf8)
        func transcript(_ socket: String) throws -> [String] {
            let r = try Shell.run([python, script, socket])
            #expect(r.status == 0, "\(r.stderr)")
            return String(decoding: r.stdout, as: UTF8.self).split(separator: "\n").map(String.init)
        }
        let want = try transcript(mpd.socket)
        let got = try transcript(d.dir + "/mpd.sock")
        #expect(want.count >= 40, "the reference transcript: \(want)")
        for (w, g) in zip(want, got) { #expect(g == w, "\n  MPD:   \(w)\n  playd: \(g)") }
        #expect(got.count == want.count)
    }

    @Test func everyMpcSubcommandAnswersAsWithMPD() throws {
        let music = try Self.musicTree()
        defer { try? FileManager.default.removeItem(atPath: music) }
        let mpd = try RealMPD(music: music)
        defer { mpd.stop() }
        let d = try playdOverMusic(music, extraConfig: "[volume]\nreplaygain = \"off\"")
        for r in Self.script {
            let want = try Self.run(mpd.socket, r)
            var got = try Self.run(d.dir + "/mpd.sock", r)
            // Less playd's own channel (the known difference below).
            if r.args == ["channels"] { got = got.replacingOccurrences(of: "exit 0\nannounce\n", with: "exit 0\n") }
            #expect(got == want, "\(r)\n  MPD:   \(want.replacingOccurrences(of: "\n", with: "\n         "))\n  playd: \(got.replacingOccurrences(of: "\n", with: "\n         "))")
        }
        for (r, why) in Self.knownDifferences {
            #expect(try Self.run(d.dir + "/mpd.sock", r) != (try Self.run(mpd.socket, r)),
                    "\(r) now answers as with MPD (\(why)): move it into the script")
        }
        // Every subcommand of `mpc help` is in the script or in the known differences
        // (idle, idleloop, waitmessage and subscribe wait for events: the two-client
        // message test and the idle tests drive those commands' protocol).
        let help = String(decoding: try Shell.run(["mpc", "help"]).stdout, as: UTF8.self)
        let listed = Set(help.split(separator: "\n").compactMap { line -> String? in
            let w = line.split(separator: " ", omittingEmptySubsequences: true)
            // "  mpc add <uri>   Add a song…": a lowercase subcommand after "mpc".
            guard line.hasPrefix("  mpc "), w.count >= 2, w[1].allSatisfy({ $0.isLowercase || $0 == "-" }) else { return nil }
            return String(w[1])
        })
        let covered = Set((Self.script + Self.knownDifferences.map(\.0)).compactMap { r in r.args.first { !$0.hasPrefix("-") && !["1:2", "%position% %artist% - %title% (%album%) %time%", "[%artist% - ]%title%"].contains($0) } })
            .union(["idle", "idleloop", "waitmessage", "subscribe", "unmount", "toggleoutput"])
        #expect(listed.subtracting(covered).isEmpty, "mpc subcommands not run: \(listed.subtracting(covered).sorted())")
        #expect(listed.count >= 60, "mpc help lists \(listed.count) subcommands")
    }
}
