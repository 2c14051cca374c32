import Foundation
import Testing
import CoreStream
import CoreStreamTestSupport

/// The decoder on http(s) URLs, against servers this test starts on loopback: HTTP
/// files decode and seek as the ffmpeg CLI decodes the same file from disk; failures
/// are typed; a live Icecast mount reports its station and titles.
@Suite("Network streams in the decoder", .checksSomething, .serialized)
struct NetworkStreamTests {
    static let dir: String = {
        let d = NSTemporaryDirectory() + "playd-net-\(getpid())"
        try? FileManager.default.createDirectory(atPath: d, withIntermediateDirectories: true)
        return d
    }()

    /// A fixture copied into the served folder; its URL on `server`.
    static func served(_ name: String, _ server: ServerProcess) throws -> (url: String, path: String) {
        let path = dir + "/" + name
        if !FileManager.default.fileExists(atPath: path) {
            try FileManager.default.copyItem(atPath: Fixtures.named(name).path, toPath: path)
        }
        return ("http://127.0.0.1:\(server.port)/\(name)", path)
    }

    /// Over HTTP with byte ranges: the whole decode and the decode after a seek are the
    /// CLI's decode of the file on disk, bit for bit, and the length is the local one.
    @Test(arguments: ["mp3vbr-44100-2.mp3", "flac-44100-2.flac", "vorbis-44100-2.ogg"])
    func httpFileDecodesAndSeeksAsOnDisk(_ name: String) throws {
        let server = try TestHTTPServer.start(serving: Self.dir)
        let (url, path) = try Self.served(name, server)
        let reference = try Reference.decode(path)
        let d = try AudioDecoder(path: url)
        #expect(!d.info.isLive && d.info.isSeekable)
        #expect(d.info.durationFrames == (try AudioDecoder(path: path)).info.durationFrames)
        #expect(try Reference.drain(d) == reference, "\(name): the straight decode over HTTP differs")
        let ch = d.outputFormat.channels
        for target in [54_321, 1] {
            try d.seek(to: Int64(target))
            let got = try Reference.read(d, frames: 20_000)
            #expect(got == Array(reference[(target * ch)..<((target + 20_000) * ch)]), "\(name): after seek(\(target))")
        }
    }

    /// A FLAC over HTTP seeks by an interpolation search on bytes (FFmpeg bisected,
    /// one slow request per step): after seeks anywhere in a 60 s sweep whose bitrate
    /// climbs (so bytes and time are far from proportional), in the first and last
    /// frames and back and forth, what follows is the CLI's decode to the sample, and
    /// so is the decode after a seek that lands before the audio's first frame.
    @Test func aFLACOverHTTPSeeksExactlyByBytes() throws {
        let server = try TestHTTPServer.start(serving: Self.dir)
        let path = Self.dir + "/sweep.flac"
        if !FileManager.default.fileExists(atPath: path) {
            try Shell.ffmpeg(["-f", "lavfi", "-i", "aevalsrc='0.3*sin(2*PI*(100+150*t)*t)|0.2*sin(2*PI*(3000-40*t)*t)':s=44100:d=60",
                              "-c:a", "flac", path])
        }
        let reference = try Reference.decode(path)
        let frames = reference.count / 2
        let d = try AudioDecoder(path: "http://127.0.0.1:\(server.port)/sweep.flac")
        #expect(d.info.durationFrames == Int64(frames))
        var seed: UInt64 = 0x9E37_79B9_7F4A_7C15  // a fixed LCG: the same targets each run
        let targets = [frames / 2, 1, frames - 5000, 4607, 4608, frames * 9 / 10, 100_000]
            + (0..<8).map { _ -> Int in
                seed = seed &* 6364136223846793005 &+ 1442695040888963407
                return Int((seed >> 33) % UInt64(frames - 4096))
            }
        for target in targets {
            try d.seek(to: Int64(target))
            let n = min(4096, frames - target)
            let got = try Reference.read(d, frames: n)
            #expect(got == Array(reference[(target * 2)..<((target + n) * 2)]), "after seek(\(target))")
        }
    }

    /// Reverse playback and a loop over HTTP, through the engine: the capture is the
    /// CLI's decode of the file on disk, reversed and cut as the path plays it.
    @Test func httpFilePlaysInReverseAndLoopsAsOnDisk() throws {
        let server = try TestHTTPServer.start(serving: Self.dir)
        let (url, path) = try Self.served("vorbis-44100-2.ogg", server)
        let reference = try Reference.decode(path)
        let total = reference.count / 2
        let rev = try EngineHarness.playToEnd(url, from: Int64(total)) { $0.setDirection(.reverse) }
        #expect(rev.ended)
        let ramp = 44_100 / 200 + 1
        let expected = Runs.expected(reference, channels: 2, [Runs.Run(0, total, reverse: true)])
        #expect(rev.capture.samples.count == expected.count)
        #expect(rev.capture.samples.dropFirst(ramp * 2) == expected.dropFirst(ramp * 2), "reverse over HTTP differs")
        let (a, b) = (40_001, 90_002)
        let loop = try EngineHarness.playToEnd(url, from: 0) { try $0.setLoop(LoopRegion(start: Int64(a), end: Int64(b), count: 2)) }
        #expect(loop.capture.samples == Runs.expected(reference, channels: 2, [Runs.Run(0, b), Runs.Run(a, b), Runs.Run(a, b), Runs.Run(b, total)]),
                "a loop over HTTP differs")
    }

    /// A server without byte ranges: the file plays whole from the start; a seek is
    /// refused as `not_seekable`, not attempted.
    @Test func httpFileWithoutRangesPlaysWholeAndRefusesSeeks() throws {
        let server = try TestHTTPServer.start(serving: Self.dir, ranges: false)
        let (url, path) = try Self.served("mp3cbr-44100-2.mp3", server)
        let d = try AudioDecoder(path: url)
        #expect(!d.info.isSeekable && !d.info.isLive)
        #expect(try Reference.drain(d) == (try Reference.decode(path)))
        do {
            try d.seek(to: 10_000)
            Issue.record("a seek without byte ranges was not refused")
        } catch {
            #expect(error.code == .notSeekable, "\(error)")
        }
    }

    /// Every failure has its code: HTTP statuses, a refused connection, a server that
    /// never answers (within the timeout).
    @Test func failuresAreTyped() throws {
        let server = try TestHTTPServer.start(serving: Self.dir)
        func code(_ url: String, timeout: Double = 10) -> StreamError.Code? {
            var o = StreamOptions()
            o.timeoutSeconds = timeout
            do { _ = try AudioDecoder(path: url, stream: o); return nil } catch { return error.code }
        }
        let base = "http://127.0.0.1:\(server.port)"
        #expect(code(base + "/status/404") == .httpNotFound)
        #expect(code(base + "/no-such-file.mp3") == .httpNotFound)
        #expect(code(base + "/status/403") == .httpForbidden)
        #expect(code(base + "/status/401") == .httpForbidden)
        #expect(code(base + "/status/500") == .httpError)
        #expect(code(base + "/status/400") == .httpError)
        #expect(code("http://127.0.0.1:\(ServerProcess.freePort())/x.mp3") == .unreachable)
        // Accepts and never answers: the open gives up at the timeout.
        let silent = SilentServer()
        #expect(code("http://127.0.0.1:\(silent.port)/live.mp3", timeout: 1) == .timedOut)
    }

    /// Redirects are followed, a few of them: 3 hops reach the file; a chain longer
    /// than FFmpeg's limit (8) fails with a typed error instead of going round.
    @Test func redirectsAreFollowedUpToALimit() throws {
        let server = try TestHTTPServer.start(serving: Self.dir)
        let (_, path) = try Self.served("mp3cbr-44100-2.mp3", server)
        let d = try AudioDecoder(path: "http://127.0.0.1:\(server.port)/redirect/3/mp3cbr-44100-2.mp3")
        #expect(try Reference.drain(d) == (try Reference.decode(path)))
        do {
            _ = try AudioDecoder(path: "http://127.0.0.1:\(server.port)/redirect/50/mp3cbr-44100-2.mp3")
            Issue.record("a chain of 50 redirects was followed to the end")
        } catch {
            #expect([.unreachable, .ioError, .httpError].contains(error.code), "\(error)")
        }
    }

    /// What FFmpeg would open on its own from a stream is refused: an HLS playlist
    /// whose segment is a local file (CVE-2016-1898's shape) is not opened at all.
    @Test func aPlaylistThatPointsAtLocalFilesIsRefused() throws {
        let server = try TestHTTPServer.start(serving: Self.dir)
        try "#EXTM3U\n#EXT-X-TARGETDURATION:10\n#EXTINF:10,\nfile:///etc/passwd\n#EXT-X-ENDLIST\n"
            .write(toFile: Self.dir + "/evil.m3u8", atomically: true, encoding: .utf8)
        do {
            _ = try AudioDecoder(path: "http://127.0.0.1:\(server.port)/evil.m3u8")
            Issue.record("an HLS playlist was opened")
        } catch {
            // Probed as HLS, whose demuxer is not on the allow-list: never opened.
            #expect(error.code == .unsupportedFormat, "\(error)")
            #expect(error.message.contains("hls"), "\(error)")
        }
    }

    @Test(arguments: [
        ("StreamTitle='Daft Punk - One More Time';StreamUrl='';", "Daft Punk - One More Time"),
        ("StreamTitle='It's a title';", "It's a title"),
        ("StreamTitle='';", nil),
        ("StreamUrl='x';", nil),
        ("StreamTitle='no end", "no end"),
    ] as [(String, String?)])
    func icyBlocksParse(_ block: String, _ title: String?) {
        #expect(NetworkInput.parseStreamTitle(block) == title)
    }

    @Test(arguments: [
        ("Daft Punk - One More Time", "Daft Punk", "One More Time"),
        ("Just a title", nil, "Just a title"),
        (" - Untitled", nil, " - Untitled"),
        ("A - B - C", "A", "B - C"),
    ] as [(String, String?, String)])
    func titlesSplitAtTheFirstDash(_ s: String, _ artist: String?, _ title: String) {
        let parts = NetworkInput.splitTitle(s)
        #expect(parts.artist == artist && parts.title == title)
    }

    @Test(arguments: [
        ("http://radio.example.org:8000/live.mp3", "radio.example.org"),
        ("https://user:pw@Example.ORG/x", "example.org"),
        ("http://[::1]:8000/x", "::1"),
        ("HTTP://127.0.0.1", "127.0.0.1"),
        ("ftp://example.org/x", nil),
        ("/music/a.flac", nil),
    ] as [(String, String?)])
    func hostsAreRead(_ url: String, _ host: String?) {
        #expect(NetworkInput.host(url) == host)
    }

    /// A live Icecast mount: live (no length, no seeking), its station's name, and a
    /// title change made at the server while reading arrives as an event.
    @Test func liveIcecastMountReportsStationAndTitles() throws {
        let ice = try Icecast(dir: Self.dir + "/ice-\(UInt16.random(in: 0...UInt16.max))")
        try ice.start()
        try ice.feed("live.mp3", input: Fixtures.named("flac-44100-2.flac").path, name: "Test FM")
        try ice.setTitle("live.mp3", "Daft Punk - One More Time")
        let d = try AudioDecoder(path: ice.url("live.mp3"))
        #expect(d.info.isLive && !d.info.isSeekable && d.info.durationFrames == nil)
        #expect(d.info.stationName == "Test FM")
        let titles = Titles()
        d.onStreamEvent = { if case .title(let t) = $0 { titles.add(t) } }
        try ice.setTitle("live.mp3", "Air - La Femme d'Argent")
        let buffer = UnsafeMutablePointer<Float>.allocate(capacity: 4096 * 2)
        defer { buffer.deallocate() }
        var frames = 0
        // Up to 15 s of audio: the title comes within the next metadata interval.
        while frames < 44_100 * 15, !titles.list.contains("Air - La Femme d'Argent") {
            let n = try d.read(into: buffer, capacity: 4096)
            #expect(n > 0)
            if n == 0 { break }
            frames += n
        }
        #expect(titles.list.contains("Air - La Femme d'Argent"), "titles: \(titles.list), after \(frames) frames")
        #expect(throws: StreamError.self) { try d.seek(to: 1000) }
    }

    final class Titles: @unchecked Sendable {
        var list: [String?] = []
        func add(_ t: String?) { list.append(t) }
    }
}
