import Foundation
import Testing
import PlaydProtocol
import CoreStreamTestSupport

/// Memory stays flat however long the file (README): the reader decodes on demand into
/// a fixed ring, never the whole file. A 20-minute FLAC (423 MB as the floats the engine
/// renders) is played unpaced; playd's private memory (RssAnon) when 10 % of it has
/// been heard and when 90 % has must be within 1 MiB. Buffering the decoded file would
/// add 340 MB between the two, buffering the compressed one (71 MB) 57 MB.
///
/// What does grow is libavformat's seek index: an entry per FLAC frame read, capped
/// per stream at its `max_index_size`, 1 MiB. Measured here: +300 kB over the file
/// with 4096-frame blocks (the encoder's default, used below), +1 MB with 1152-frame
/// blocks, where the cap is reached after about 19 minutes; then it stays.
@Suite("Memory in file length", .checksSomething)
struct MemoryTests {
    @Test func privateMemoryIsFlatOverALongFile() throws {
        let d = try DaemonHarness(output: "null?pace=off")
        let long = d.dir + "/long.flac"
        // A chirp sweeping 100 Hz…8 kHz and back every 10 s: FLAC cannot shrink it to
        // nothing, so the file is tens of MB, as music is.
        try Shell.ffmpeg(["-f", "lavfi", "-i", "aevalsrc='0.3*sin(2*PI*(100+7900*abs(mod(t,10)-5)/5)*t)':s=44100:d=1200", "-ac", "2",
                          "-c:a", "flac", long])
        let size = try #require(try FileManager.default.attributesOfItem(atPath: long)[.size] as? Int)
        try d.start()
        let pid = try #require(d.process?.processIdentifier)
        #expect(d.request("play", ("path", .string(long)))?["ok"] == .bool(true))
        let total = 1200.0 * 44_100
        func rssWhenHeard(_ fraction: Double) throws -> Int {
            #expect(d.waitFor(seconds: 120) { (d.request("status")?["position_frames"]?.numberValue ?? 0) >= total * fraction },
                    "playback never reached \(Int(fraction * 100)) %")
            return try #require(rssAnonKB(pid))
        }
        let early = try rssWhenHeard(0.1)
        let late = try rssWhenHeard(0.9)
        print("memory over a 20-minute FLAC (\(size / 1_000_000) MB): RssAnon \(early) kB at 10 %, \(late) kB at 90 %")
        #expect(size > 20_000_000, "the file is \(size) bytes: too small to show buffering")
        #expect(late - early <= 1024, "private memory grew \(late - early) kB between 10 % and 90 % of the file")
        #expect(d.terminate().status == 0)
    }
}
