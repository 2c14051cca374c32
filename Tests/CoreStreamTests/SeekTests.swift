import Testing
import CoreStream
import CoreStreamTestSupport

/// Seek targets for a fixture: 0, 1, the last frame, targets either side of the packet
/// sizes of every codec we decode (1152 mp3, 1024 aac, 960 opus, 4096 flac/alac,
/// 2048/256 vorbis), and seeded pseudo-random ones.
func seekTargets(length: Int64) -> [Int64] {
    var t: [Int64] = [0, 1, length - 1, length - 2, length / 2]
    for packet in [1152, 1024, 960, 4096, 2048, 256] as [Int64] {
        for k in [1, 7] as [Int64] where packet * k + 1 < length {
            t += [packet * k - 1, packet * k, packet * k + 1]
        }
    }
    var seed: UInt64 = 0x9E37_79B9_7F4A_7C15
    for _ in 0..<6 {
        seed = seed &* 6364136223846793005 &+ 1442695040888963407
        t.append(Int64((seed >> 33) % UInt64(length)))
    }
    return t
}

@Suite("Sample-exact seek against the ffmpeg CLI", .checksSomething, .tags(.addressSanitizer))
struct SeekTests {
    @Test("after seek(N) the first frame is source frame N", arguments: Fixtures.all)
    func seekTable(_ fixture: Fixture) throws {
        let reference = try Reference.decode(fixture.path)
        let decoder = try AudioDecoder(path: fixture.path)
        let ch = fixture.channels
        let length = decoder.info.durationFrames!
        let refFrames = Int64(reference.count / ch)
        let usable = min(length, refFrames)
        let targets = seekTargets(length: usable)
        #expect(targets.count >= 20)
        // Out of order on purpose: backwards and forwards seeks.
        for target in targets.reversed() + targets {
            try decoder.seek(to: target)
            #expect(decoder.position == target)
            let want = Int(min(2048, usable - target))
            let got = try Reference.read(decoder, frames: want)
            try #require(got.count == want * ch, "short read after seek to \(target)")
            let lo = Int(target) * ch
            let expected = reference[lo..<(lo + want * ch)]
            let diff = Reference.maxDifference(got[...], expected)
            if fixture.bitExactSeek {
                #expect(diff == 0, "seek to \(target): max difference \(diff)")
            } else {
                // Right position, values within codec tolerance: a one-frame shift of the
                // chirp/tone would differ by far more than this.
                #expect(diff < 5e-3, "seek to \(target): max difference \(diff)")
            }
        }
    }

    @Test("seeking to the end delivers nothing more", arguments: [Fixtures.named("flac-44100-2.flac"), Fixtures.named("mp3vbr-44100-2.mp3")])
    func seekToEnd(_ fixture: Fixture) throws {
        let decoder = try AudioDecoder(path: fixture.path)
        let length = decoder.info.durationFrames!
        try decoder.seek(to: length)
        #expect(try Reference.drain(decoder).isEmpty)
        try decoder.seek(to: length + 1000)
        #expect(try Reference.drain(decoder).isEmpty)
        try decoder.seek(to: length - 10)
        #expect(try Reference.drain(decoder).count == 10 * fixture.channels)
    }
}
