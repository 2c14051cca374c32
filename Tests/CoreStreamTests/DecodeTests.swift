import Foundation
import Testing
import CoreStream
import CoreStreamTestSupport

@Suite("Decoding against the ffmpeg CLI", .checksSomething, .tags(.addressSanitizer))
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

/// Decoding into another rate (a gapless next track, an announcement in the device's
/// format) against the ffmpeg CLI's resample of the same file: the same samples. Reads
/// of 4096 frames, as the reader makes them: each read's end once flushed swresample
/// (a nil input), which clicked at nearly every boundary.
@Suite("Resampled decode is the ffmpeg CLI's", .checksSomething, .tags(.addressSanitizer))
struct ResampledDecodeTests {
    @Test(arguments: [
        ("aevalsrc=0.4*sin(2*PI*(300+400*t)*t):s=16000:d=1.5", "libmp3lame", "mp3", 44100, 2),
        ("sine=frequency=997:sample_rate=48000:duration=2", "flac", "flac", 44100, 2),
        ("sine=frequency=440:sample_rate=22050:duration=2", "pcm_s16le", "wav", 48000, 1),
    ])
    func matchesTheCLI(_ source: String, _ codec: String, _ ext: String, _ rate: Int, _ channels: Int) throws {
        let path = NSTemporaryDirectory() + "playd-resample-\(getpid())-\(rate)-\(channels).\(ext)"
        defer { try? FileManager.default.removeItem(atPath: path) }
        try Shell.ffmpeg(["-f", "lavfi", "-i", source, "-c:a", codec, path])
        var extra = ["-ar", "\(rate)"]
        extra = (channels == 2 ? ["-af", "pan=stereo|c0=c0|c1=c0"] : ["-ac", "1"]) + extra
        let reference = try Reference.decode(path, extraArguments: extra)
        let decoder = try AudioDecoder(path: path, outputFormat: PCMFormat(sampleRate: rate, channels: channels))
        let mine = try Reference.drain(decoder, chunk: 4096)
        #expect(mine.count == reference.count)
        let firstDifference = zip(mine, reference).enumerated().first { $0.element.0 != $0.element.1 }?.offset
        #expect(firstDifference == nil, "first difference at sample \(firstDifference ?? -1)")
    }
}
