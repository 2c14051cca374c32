import Foundation
import Testing
import CoreStreamTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// A child process spoken to in lines: stdin written, stdout collected by a thread.
final class LineProcess: @unchecked Sendable {
    // @unchecked: `lines` is guarded by `lock`; the rest is set up before the reader starts.
    private let process = Process()
    private let input = Pipe(), output = Pipe()
    private let lock = NSLock()
    private var lines: [String] = []
    /// Its standard error, for the failure message.
    let errorPath: String
    var errors: String { (try? String(contentsOfFile: errorPath, encoding: .utf8)) ?? "" }

    init(_ argv: [String]) throws {
        process.executableURL = URL(fileURLWithPath: argv[0])
        process.arguments = Array(argv.dropFirst())
        process.standardInput = input
        process.standardOutput = output
        let err = NSTemporaryDirectory() + "playd-lineprocess-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).err"
        FileManager.default.createFile(atPath: err, contents: nil)
        errorPath = err
        process.standardError = FileHandle(forWritingAtPath: err)
        try process.run()
        let handle = output.fileHandleForReading
        Thread.detachNewThread { [self] in
            var buffer = Data()
            while true {
                let chunk = handle.availableData
                if chunk.isEmpty { break }
                buffer += chunk
                while let nl = buffer.firstIndex(of: 0x0A) {
                    let line = String(decoding: buffer[buffer.startIndex..<nl], as: UTF8.self)
                    buffer = Data(buffer[(nl + 1)...])
                    lock.withLock { lines.append(line) }
                }
            }
        }
    }

    func send(_ line: String) { input.fileHandleForWriting.write(Data((line + "\n").utf8)) }

    /// The first line from index `from` on that satisfies `match`, waiting up to `seconds`.
    func wait(from: Int = 0, seconds: Double = 15, _ match: (String) -> Bool) -> (index: Int, line: String)? {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            let found: (Int, String)? = lock.withLock {
                for i in from..<max(from, lines.count) where match(lines[i]) { return (i, lines[i]) }
                return nil
            }
            if let found { return found }
            if !process.isRunning { break }
            usleep(20_000)
        }
        return nil
    }

    func stop() {
        // SIGINT: Python's KeyboardInterrupt ends a GLib main loop (SIGTERM does not).
        if process.isRunning { process.interrupt() }
        let deadline = Date().addingTimeInterval(5)
        while process.isRunning && Date() < deadline { usleep(20_000) }
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        try? FileManager.default.removeItem(atPath: errorPath)
    }
}

/// Snapcast's own MPD plugin, `meta_mpd.py` from Debian's snapserver, driven as
/// snapserver drives it (JSON-RPC on its stdin and stdout) against real MPD and
/// against playd: the properties it reports (state, position, volume, loop and
/// shuffle, every metadata field) and the effect of its controls must be the same.
@Suite("meta_mpd.py against real MPD", .checksSomething, .serialized)
struct MetaMPDTests {
    static let plugin = "/usr/share/snapserver/plug-ins/meta_mpd.py"

    /// One JSON-RPC exchange after another; the replies, `position` rounded to whole
    /// seconds (the two servers paused at the same second, not the same microsecond).
    static func transcript(_ socket: String) throws -> [String] {
        for args in [["clear"], ["add", "one.flac"], ["add", "two.flac"], ["add", "sub"], ["play", "1"], ["pause"]] {
            let r = try Shell.run(["mpc", "-q", "-h", socket] + args)
            try #require(r.status == 0, "mpc \(args): \(r.stderr)")
        }
        // The plugin looks up cover art on musicbrainz.org for a song with an artist and
        // an album, and dies on the network error this offline machine gives (its
        // handler fails too without a release id). So the search answers as
        // MusicBrainz does for a release it does not know (an empty list); everything
        // the plugin asks MPD is unchanged.
        let offline = """
            import runpy, sys, musicbrainzngs
            musicbrainzngs.search_releases = lambda *args, **kwargs: {"release-list": []}
            sys.argv = sys.argv[1:]
            runpy.run_path(sys.argv[0], run_name="__main__")
            """
        let meta = try LineProcess(["/usr/bin/python3", "-c", offline, plugin, "--mpd-host", socket, "--stream=playd"])
        defer { meta.stop() }
        var out: [String] = []
        guard let ready = meta.wait({ $0.contains("Plugin.Stream.Ready") }) else {
            Issue.record("meta_mpd.py never said Plugin.Stream.Ready: \(meta.errors.suffix(2000))")
            return out
        }
        func normalized(_ line: String) -> String {
            guard var json = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else { return line }
            func round(_ d: inout [String: Any]) {
                if let p = d["position"] as? Double { d["position"] = Int(p.rounded()) }
            }
            if var r = json["result"] as? [String: Any] { round(&r); json["result"] = r }
            if var p = json["params"] as? [String: Any] { round(&p); json["params"] = p }
            let data = (try? JSONSerialization.data(withJSONObject: json, options: [.sortedKeys])) ?? Data()
            return String(decoding: data, as: UTF8.self)
        }
        // What it announced before Ready: the playing song's metadata.
        if let props = meta.wait(seconds: 1, { $0.contains("Plugin.Stream.Player.Properties") }), props.index < ready.index {
            out.append("announced " + normalized(props.line))
        }
        var id = 0
        var cursor = ready.index
        func call(_ method: String, _ params: String? = nil) {
            id += 1
            meta.send(#"{"id":\#(id),"jsonrpc":"2.0","method":"Plugin.Stream.Player.\#(method)""# + (params.map { #","params":\#($0)"# } ?? "") + "}")
            let want = id
            func isReply(_ line: String) -> Bool {
                ((try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: Any])?["id"] as? Int == want
            }
            if let r = meta.wait(from: cursor, isReply) {
                cursor = r.index + 1
                out.append("\(method) \(params ?? "") → " + normalized(r.line))
            } else {
                out.append("\(method) \(params ?? "") → no reply")
            }
        }
        call("GetProperties")
        call("Control", #"{"command":"next"}"#)
        call("GetProperties")
        call("SetProperty", #"{"volume":30}"#)
        call("SetProperty", #"{"loopStatus":"track"}"#)
        call("SetProperty", #"{"shuffle":true}"#)
        call("GetProperties")
        call("SetProperty", #"{"loopStatus":"none","shuffle":false}"#)
        call("Control", #"{"command":"setPosition","params":{"position":30}}"#)
        call("GetProperties")
        call("Control", #"{"command":"seek","params":{"offset":-10}}"#)
        call("GetProperties")
        call("Control", #"{"command":"previous"}"#)
        call("Control", #"{"command":"stop"}"#)
        call("GetProperties")
        call("GetMetadata")
        call("Nonsense")
        return out
    }

    @Test func snapcastsPluginSeesPlaydAsMPD() throws {
        try #require(FileManager.default.fileExists(atPath: Self.plugin), "no \(Self.plugin): scripts/install-deps --test installs snapserver")
        let deps = try Shell.run(["/usr/bin/python3", "-c", "import mpd, gi, dbus, musicbrainzngs"])
        try #require(deps.status == 0, "meta_mpd.py's modules: scripts/install-deps --test installs python3-mpd, python3-gi, python3-dbus, python3-musicbrainzngs: \(deps.stderr)")
        let music = try MpcSuiteTests.musicTree()
        defer { try? FileManager.default.removeItem(atPath: music) }
        let mpd = try RealMPD(music: music)
        defer { mpd.stop() }
        let d = try playdOverMusic(music)
        let want = try Self.transcript(mpd.socket)
        let got = try Self.transcript(d.dir + "/mpd.sock")
        #expect(want.count == 18, "the reference transcript: \(want)")
        for (w, g) in zip(want, got) {
            #expect(g == w, "\n  MPD:   \(w)\n  playd: \(g)")
        }
        #expect(got.count == want.count)
    }
}
