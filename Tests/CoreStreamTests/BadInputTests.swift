import Foundation
import Testing
import CoreStream
import CoreStreamTestSupport

@Suite("Bad input gives a distinct typed error naming the file", .checksSomething, .tags(.addressSanitizer))
struct BadInputTests {
    static let cases: [BadMedia.Case] = {
        let dir = NSTemporaryDirectory() + "playd-bad-\(getpid())"
        return try! BadMedia.make(in: dir)
    }()

    @Test(arguments: cases)
    func openFails(_ bad: BadMedia.Case) throws {
        if bad.needsUnprivilegedReader && getuid() == 0 {
            // Root reads anything: open it as nobody, through playd's one-shot mode.
            let playd = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().path + "/playd"
            let r = try Shell.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                                   playd, "--output", "null?pace=off", bad.path])
            #expect(r.status == 1, "\(bad.name): \(r.stderr)")
            #expect(r.stderr.contains("error.code=\(bad.expectedCode)") && r.stderr.contains(bad.path), "\(bad.name): \(r.stderr)")
        } else {
            do {
                let d = try AudioDecoder(path: bad.path)
                Issue.record("\(bad.name) opened: \(d.info)")
            } catch {
                #expect(error.code.name == bad.expectedCode, "\(bad.name): \(error)")
                #expect(error.message.contains(bad.path), "message must name the file: \(error.message)")
            }
        }
    }

    /// Ogg files whose last page declares a granule position near Int64.max (CRC
    /// recomputed, so the demuxer believes it): the duration and timestamps from it do
    /// not fit in a frame count. Opening, decoding and seeking must give a typed error
    /// or play, never trap (a trap ends this test process).
    @Test(arguments: ["vorbis-44100-2.ogg", "opus-48000-1.opus"], [Int64.max - 1, Int64.max / 2, 1 << 62])
    func hostileGranulePositionsNeverTrap(_ name: String, _ granule: Int64) throws {
        let path = NSTemporaryDirectory() + "playd-granule-\(getpid())-\(granule)-\(name)"
        defer { try? FileManager.default.removeItem(atPath: path) }
        let script = """
        import struct, sys
        data = bytearray(open(sys.argv[1], 'rb').read())
        def crc(page):
            r = 0
            for b in page:
                r ^= b << 24
                for _ in range(8):
                    r = ((r << 1) ^ 0x04C11DB7) & 0xFFFFFFFF if r & 0x80000000 else (r << 1) & 0xFFFFFFFF
            return r
        last = data.rfind(b'OggS')
        nseg = data[last + 26]
        size = 27 + nseg + sum(data[last + 27:last + 27 + nseg])
        struct.pack_into('<q', data, last + 6, int(sys.argv[3]))
        struct.pack_into('<I', data, last + 22, 0)
        struct.pack_into('<I', data, last + 22, crc(bytes(data[last:last + size])))
        open(sys.argv[2], 'wb').write(data)
        """
        let r = try Shell.run(["python3", "-c", script, Fixtures.named(name).path, path, "\(granule)"])
        try #require(r.status == 0, "\(r.stderr)")
        do {
            let d = try AudioDecoder(path: path)
            _ = try Reference.drain(d)
            try d.seek(to: 1000)
        } catch let e as StreamError {
            #expect(e.message.contains(path), "a typed error naming the file: \(e)")
        }
    }

    @Test func corruptPacketsMidFileAreSkippedAndCounted() throws {
        // Flip bytes in the middle of an MP3: it still plays to the end, counting bad packets.
        let source = Fixtures.named("mp3cbr-44100-2.mp3")
        var data = try Data(contentsOf: URL(fileURLWithPath: source.path))
        var seed: UInt32 = 7
        for i in stride(from: data.count / 3, to: data.count * 2 / 3, by: 97) {
            seed = seed &* 1103515245 &+ 12345
            data[i] ^= UInt8(truncatingIfNeeded: seed >> 16) | 1
        }
        let path = NSTemporaryDirectory() + "playd-corrupt-\(getpid()).mp3"
        try data.write(to: URL(fileURLWithPath: path))
        defer { try? FileManager.default.removeItem(atPath: path) }
        let decoder = try AudioDecoder(path: path)
        let all = try Reference.drain(decoder)
        #expect(decoder.corruptPackets > 0)
        // What the CLI makes of the damaged file, and the undamaged file's decode up to
        // the damage (its first third of bytes: 1,152-frame packets of 626 bytes at
        // 192 kb/s), are the references.
        let damaged = try Reference.decode(path), clean = try Reference.decode(source.path)
        print("corrupt mp3: playd \(all.count / 2) frames, the CLI \(damaged.count / 2), undamaged \(clean.count / 2); \(decoder.corruptPackets) packets skipped")
        let intact = (data.count / 3 / 626 - 2) * 1152
        #expect(Reference.firstMismatch(all, clean, channels: 2).map { $0 >= intact } ?? true,
                "the undamaged first third differs from the clean decode")
        #expect(all.count == damaged.count, "playd decoded \(all.count / 2) frames, the CLI \(damaged.count / 2)")
        #expect(Reference.firstMismatch(all, damaged, channels: 2) == nil, "playd's decode of the damaged file is not the CLI's")
    }
}
