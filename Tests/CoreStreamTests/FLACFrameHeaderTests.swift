import Foundation
import Testing
@testable import CoreStream
import CoreStreamTestSupport

/// The FLAC frame-header reader the HTTP byte search uses, against `ffprobe`'s packet
/// list (each packet's byte and timestamp): every frame's header is read at its byte
/// with FFmpeg's timestamp, and a search from inside a frame finds the next one.
@Suite("FLAC frame headers", .checksSomething)
struct FLACFrameHeaderTests {
    @Test(arguments: ["flac-44100-2.flac", "flac-48000-1.flac"])
    func eachFrameIsFoundWhereFFprobeListsIt(_ name: String) throws {
        let path = Fixtures.named(name).path
        let r = try Shell.run(["ffprobe", "-v", "error", "-select_streams", "a", "-show_entries", "packet=pts,pos",
                               "-of", "csv=p=0", path])
        let packets = String(decoding: r.stdout, as: UTF8.self).split(separator: "\n").compactMap { line -> (Int, Int64)? in
            let f = line.split(separator: ",")
            guard f.count == 2, let pts = Int64(f[0]), let pos = Int(f[1]) else { return nil }
            return (pos, pts)
        }
        #expect(packets.count > 10, "ffprobe listed \(packets.count) packets")
        let data = try Data(contentsOf: URL(fileURLWithPath: path))
        // STREAMINFO follows "fLaC" and its block header: bytes 10-11, the largest block size.
        let blockSize = Int(data[10]) << 8 | Int(data[11])
        data.withUnsafeBytes { bytes in
            var nextFound = 0
            for (k, (pos, pts)) in packets.enumerated() {
                let h = FLACFrameHeader.parse(bytes, at: pos, streamBlockSize: blockSize)
                #expect(h?.firstSample == pts && h?.offset == pos, "frame \(k) at byte \(pos): \(String(describing: h)), ffprobe's pts \(pts)")
                if k + 1 < packets.count, FLACFrameHeader.first(in: bytes, from: pos + 1, streamBlockSize: blockSize)?.offset == packets[k + 1].0 { nextFound += 1 }
            }
            // A sync code in audio bytes with a fitting CRC-8 may come first, rarely.
            #expect(nextFound * 100 >= (packets.count - 1) * 95, "\(nextFound) of \(packets.count - 1) next frames found first")
        }
    }

    /// Bytes that are not a header, or stop inside one, give nil, never a trap.
    @Test func truncatedAndReservedHeadersAreRefused() {
        let valid: [UInt8] = [0xFF, 0xF8, 0xC9, 0x18, 0x00]
        var crc: UInt8 = 0
        valid.withUnsafeBytes { crc = FLACFrameHeader.crc8($0, 0..<5) }
        let whole = valid + [crc]
        whole.withUnsafeBytes { #expect(FLACFrameHeader.parse($0, at: 0)?.firstSample == 0) }
        for cut in 0..<whole.count {
            Array(whole.prefix(cut)).withUnsafeBytes { #expect(FLACFrameHeader.parse($0, at: 0) == nil) }
        }
        var badCRC = whole; badCRC[5] ^= 1
        badCRC.withUnsafeBytes { #expect(FLACFrameHeader.parse($0, at: 0) == nil) }
        var reserved = whole; reserved[2] = 0x0F  // block size code 0, rate 15
        reserved.withUnsafeBytes { #expect(FLACFrameHeader.parse($0, at: 0) == nil) }
        [UInt8](repeating: 0xFF, count: 64).withUnsafeBytes { #expect(FLACFrameHeader.first(in: $0) == nil) }
    }
}
