import Foundation
import Testing
import CoreStream
import CoreStreamTestSupport

@Suite("Engine end to end, captured through the wav: output", .checksSomething, .serialized)
struct EngineCaptureTests {
    @Test("a whole track renders bit-identical to the CLI decode",
          arguments: ["flac-44100-2.flac", "mp3vbr-44100-2.mp3", "aac-48000-1.m4a", "opus-44100-2.opus", "vorbis-48000-1.ogg"])
    func wholeTrack(_ name: String) throws {
        let fixture = Fixtures.named(name)
        let h = EngineHarness(paced: false)
        try h.engine.play(path: fixture.path)
        #expect(h.waitForEnd())
        let capture = try h.finishCapture()
        let reference = try Reference.decode(fixture.path)
        let expectedFrames = fixture.hasExactLength
            ? Int(FrameTime.convert(fixture.sourceFrames, from: fixture.sampleRate, to: fixture.decodedRate))
            : reference.count / fixture.channels
        #expect(capture.sampleRate == fixture.decodedRate)
        #expect(capture.channels == fixture.channels)
        #expect(capture.frames == expectedFrames)
        let n = min(capture.samples.count, expectedFrames * fixture.channels)
        #expect(Reference.maxDifference(capture.samples[0..<n], reference[0..<n]) == 0)
        #expect(h.engine.status().underruns == 0)
    }
}
