import Foundation
import Testing
import CoreStream
import CoreStreamTestSupport

/// Export through the engine's decoding path, checked with the ffmpeg CLI and ffprobe.
@Suite("Export", .checksSomething, .serialized)
struct ExportTests {
    static let dir: String = {
        let d = NSTemporaryDirectory() + "playd-export-\(getpid())"
        try? FileManager.default.createDirectory(atPath: d, withIntermediateDirectories: true)
        return d
    }()

    func export(_ input: String, _ name: String, _ format: ExportOptions.Format, from: Int64? = nil, to: Int64? = nil,
                configure: (inout ExportOptions) -> Void = { _ in }) throws -> (String, Exporter) {
        var o = ExportOptions(input: input, output: Self.dir + "/" + name, format: format)
        o.from = from
        o.to = to
        o.force = true
        configure(&o)
        let e = try Exporter(o)
        try e.run()
        return (o.output, e)
    }

    /// The CLI's own decode of `path`, cut to [from, to) by sample index.
    func cliRegion(_ path: String, _ from: Int, _ to: Int) throws -> [Float] {
        try Reference.decode(path, extraArguments: ["-af", "atrim=start_sample=\(from):end_sample=\(to)"])
    }

    @Test(arguments: ["flac-44100-2.flac", "mp3cbr-44100-2.mp3", "wav16-48000-1.wav", "vorbis-44100-2.ogg"])
    func regionToFloatWAVIsTheCLIDecodeOfTheRegion(_ name: String) throws {
        let fixture = Fixtures.named(name)
        let (a, b) = (12_345, 98_765)
        let (path, e) = try export(fixture.path, "region-\(name).wav", .wav, from: Int64(a), to: Int64(b)) { $0.bits = .f32 }
        #expect(e.encoderName == "pcm_f32le")
        let got = try Reference.decode(path)
        let want = try cliRegion(fixture.path, a, b)
        #expect(got.count == (b - a) * fixture.channels)
        #expect(got.elementsEqual(want), "\(name): the exported region differs from the CLI's decode of it")
    }

    /// A 16-bit WAV region exports as exactly the CLI's 16-bit decode of that region:
    /// 16-bit source → float → the 16-bit conversion the render thread also uses → the
    /// same bits.
    @Test func sixteenBitWAVExportIsTheSourceSamples() throws {
        let fixture = Fixtures.named("wav16-44100-2.wav")
        let (path, _) = try export(fixture.path, "s16.wav", .wav, from: 1000, to: 60_000)
        let got = try Data(contentsOf: URL(fileURLWithPath: path))
        let want = try Shell.run(["ffmpeg", "-nostdin", "-v", "error", "-i", fixture.path, "-af", "atrim=start_sample=1000:end_sample=60000",
                                  "-f", "s16le", "-"]).stdout
        #expect(got.suffix(want.count) == want, "the PCM in the exported WAV is not the source's 16-bit samples")
        #expect(got.count - want.count < 256, "a WAV header, then nothing but the samples")
    }

    @Test(arguments: [ExportOptions.Bits.s16, .s24])
    func flacDecodesBackBitIdentical(_ bits: ExportOptions.Bits) throws {
        let fixture = Fixtures.named("alac-44100-2.m4a")
        let (path, e) = try export(fixture.path, "back-\(bits.rawValue).flac", .flac, from: 5, to: 130_001) { $0.bits = bits }
        #expect(e.encoderName == "flac")
        let probe = try Shell.run(["ffprobe", "-v", "error", "-show_entries", "stream=bits_per_raw_sample", "-of", "csv=p=0", path])
        #expect(String(decoding: probe.stdout, as: UTF8.self).hasPrefix(bits == .s16 ? "16" : "24"))
        #expect(try Reference.decode(path).elementsEqual(try cliRegion(fixture.path, 5, 130_001)))
    }

    /// An M4A region declares exactly `to − from` frames (its edit list is written in
    /// the track's rate, not the 1000 Hz movie timescale: 95,200 came out within a
    /// frame and 1,001 as 970 before), as the CLI's ffprobe reads it and as playd
    /// decodes it back, and the audio is the region within AAC's tolerance.
    @Test(arguments: [(4_800, 100_000), (4_800, 5_801)])
    func m4aDeclaresExactlyTheRegionAndPlays(_ from: Int, _ to: Int) throws {
        let fixture = Fixtures.named("flac-48000-1.flac")
        let (path, e) = try export(fixture.path, "out-\(to).m4a", .m4a, from: Int64(from), to: Int64(to)) { $0.bitRate = 160_000 }
        #expect(e.fallbacks == ["libfdk_aac"] || e.fallbacks.isEmpty)
        let probe = try Shell.run(["ffprobe", "-v", "error", "-select_streams", "a", "-show_entries",
                                   "stream=codec_name,sample_rate,channels,duration_ts", "-of", "csv=p=0", path])
        let f = String(decoding: probe.stdout, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines).split(separator: ",")
        #expect(f.count == 4 && f[0] == "aac" && f[1] == "48000" && f[2] == "1")
        #expect(f.count == 4 && Int(f[3]) == to - from, "declared \(f), want \(to - from) frames")
        let back = try AudioDecoder(path: path)
        #expect(back.info.durationFrames == Int64(to - from))
        let decoded = try Reference.drain(back)
        #expect(decoded.count == to - from, "playd decodes \(decoded.count) frames of it")
        let want = try cliRegion(fixture.path, from, to)
        let n = min(decoded.count, want.count) - 2048
        if n > 2048 {
            var err = 0.0, ref = 0.0
            for i in 2048..<n { err += Double((decoded[i] - want[i]) * (decoded[i] - want[i])); ref += Double(want[i] * want[i]) }
            #expect(err / ref < 1e-3, "AAC round trip off by \(err / ref) of the signal energy")
        }
    }

    @Test func resamplingGivesTheExactFrameCount() throws {
        let fixture = Fixtures.named("flac-44100-2.flac")
        let (path, e) = try export(fixture.path, "48k.wav", .wav, from: 0, to: 88_200) { $0.sampleRate = 48_000; $0.channels = 1 }
        #expect(e.totalFrames == 96_000)
        let got = try Reference.decode(path)
        #expect(got.count == 96_000)
    }

    /// Tags and the cover art go into FLAC and M4A; the picture is checked byte for
    /// byte as the ffmpeg CLI extracts it. A FLAC's PICTURE block says the picture's
    /// size; an MP3's ID3v2 APIC frame does not, and the muxers want one (that export
    /// failed with `avformat_write_header() failed: Invalid argument`).
    @Test(arguments: [("flac", "png", ["-c:a", "copy"]), ("mp3", "jpg", ["-c:a", "libmp3lame", "-id3v2_version", "3"])])
    func tagsAndCoverArtAreCopied(_ ext: String, _ image: String, _ codec: [String]) throws {
        let picture = Self.dir + "/cover.\(image)"
        try #require(try Shell.run(["ffmpeg", "-nostdin", "-v", "error", "-y", "-f", "lavfi", "-i", "color=c=blue:s=24x16:d=1",
                                    "-frames:v", "1", picture]).status == 0)
        let tagged = Self.dir + "/tagged-src.\(ext)"
        let r = try Shell.run(["ffmpeg", "-nostdin", "-v", "error", "-y", "-i", Fixtures.named("flac-44100-2.flac").path, "-i", picture,
                               "-map", "0:a", "-map", "1"] + codec + ["-c:v", "copy", "-disposition:v", "attached_pic",
                               "-metadata", "title=Exported", "-metadata", "artist=Band", tagged])
        try #require(r.status == 0, "\(r.stderr)")
        let pictureBytes = try Data(contentsOf: URL(fileURLWithPath: picture))
        for format in [ExportOptions.Format.flac, .m4a] {
            let (path, e) = try export(tagged, "tags-\(ext).\(format.rawValue)", format)
            let info = try AudioDecoder(path: path).info
            #expect(info.title == "Exported" && info.artist == "Band", "\(format): tags \(info.tags)")
            #expect(e.coverCopied && e.coverDropped == nil, "\(format): \(e.coverDropped ?? "")")
            let out = try Shell.run(["ffmpeg", "-nostdin", "-v", "error", "-i", path, "-map", "0:v", "-c:v", "copy",
                                     "-f", "image2pipe", "-"])
            #expect(out.status == 0 && out.stdout == pictureBytes, "\(ext) → \(format): the cover is not the source's")
        }
        let (wav, e) = try export(tagged, "tags-\(ext).wav", .wav)
        let wavCover = try AudioDecoder.coverArt(path: wav)
        #expect(!e.coverCopied && wavCover == nil, "WAV holds no cover")
        #expect(e.coverDropped == "WAV has no place for a picture")
    }

    @Test func badRequestsFailBeforeAnyWork() throws {
        let src = Fixtures.named("flac-44100-2.flac").path
        func refused(_ o: ExportOptions, _ code: StreamError.Code) {
            #expect(throws: StreamError.self) { try Exporter(o) }
            do { _ = try Exporter(o) } catch { #expect(error.code == code, "\(error.message)") }
        }
        refused(ExportOptions(input: "/nonexistent.flac", output: Self.dir + "/x.wav", format: .wav), .fileNotFound)
        refused(ExportOptions(input: src, output: "/nonexistent-dir/x.wav", format: .wav), .fileNotFound)
        var flac32 = ExportOptions(input: src, output: Self.dir + "/x.flac", format: .flac)
        flac32.bits = .f32
        refused(flac32, .invalidArgument)
        var past = ExportOptions(input: src, output: Self.dir + "/x.wav", format: .wav)
        past.to = 10_000_000
        refused(past, .invalidArgument)
        let existing = Self.dir + "/exists.wav"
        try "keep me".write(toFile: existing, atomically: true, encoding: .utf8)
        refused(ExportOptions(input: src, output: existing, format: .wav), .invalidArgument)
        #expect(try String(contentsOfFile: existing, encoding: .utf8) == "keep me")
        #expect(ExportOptions.Format(path: "a/b.M4A") == .m4a && ExportOptions.Format(path: "x.ogg") == nil)
    }

    @Test func cancellingLeavesNoFile() throws {
        var o = ExportOptions(input: Fixtures.named("flac-44100-2.flac").path, output: Self.dir + "/cancel.m4a", format: .m4a)
        o.force = true
        let e = try Exporter(o)
        var polls = 0
        #expect(throws: StreamError.self) { try e.run(cancelled: { polls += 1; return polls > 3 }) }
        let left = try FileManager.default.contentsOfDirectory(atPath: Self.dir).filter { $0.hasPrefix("cancel.m4a") }
        #expect(left.isEmpty, "left behind: \(left)")
    }
}
