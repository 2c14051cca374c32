import Testing
import CoreStream
import CoreStreamTestSupport

@Suite("Decoding against the ffmpeg CLI", .tags(.addressSanitizer))
struct DecodeTests {
    @Test("a straight decode matches the CLI", arguments: Fixtures.all)
    func straightDecode(_ fixture: Fixture) throws {
        let decoder = try AudioDecoder(path: fixture.path)
        #expect(decoder.info.sampleRate == fixture.decodedRate)
        #expect(decoder.info.channels == fixture.channels)
        let ours = try Reference.drain(decoder)
        let reference = try Reference.decode(fixture.path)
        let ch = fixture.channels
        if fixture.hasExactLength {
            // Frame 0 is the first real sample and the length is the source's.
            let expected = FrameTime.convert(fixture.sourceFrames, from: fixture.sampleRate, to: fixture.decodedRate)
            #expect(Int64(ours.count / ch) == expected)
            #expect(decoder.info.durationFrames == expected)
            #expect(decoder.info.durationIsEstimate == false)
        } else {
            #expect(ours.count == reference.count)
        }
        let n = min(ours.count, reference.count)
        #expect(n > 0)
        let diff = Reference.maxDifference(ours[0..<n], reference[0..<n])
        #expect(diff == 0, "max difference \(diff) against the ffmpeg CLI")
    }
}
