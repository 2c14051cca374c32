import Foundation
import Testing
import CoreStream
import CoreStreamTestSupport

@Suite("Bad input gives a distinct typed error naming the file")
struct BadInputTests {
    static let cases: [BadMedia.Case] = {
        let dir = NSTemporaryDirectory() + "playd-bad-\(getpid())"
        return try! BadMedia.make(in: dir)
    }()

    @Test(arguments: cases)
    func openFails(_ bad: BadMedia.Case) {
        do {
            let d = try AudioDecoder(path: bad.path)
            Issue.record("\(bad.name) opened: \(d.info)")
        } catch {
            #expect(error.code.name == bad.expectedCode, "\(bad.name): \(error)")
            #expect(error.message.contains(bad.path), "message must name the file: \(error.message)")
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
        // Most of the audio survives; the CLI's own decode of the damaged file is the reference length.
        let reference = try Reference.decode(path)
        #expect(all.count > reference.count / 2)
        #expect(decoder.corruptPackets > 0)
    }
}
