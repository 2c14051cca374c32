import CoreStream
import CoreStreamTestSupport
import Foundation
import PlaydProtocol
import PlaydSessions
import Testing

/// Every committed fuzz seed and regression input (`Fuzz/corpus/TARGET`) through the
/// same property checks the libFuzzer targets run (`scripts/fuzz`). An input that once
/// crashed a target is added there, so it stays fixed.
@Suite("Fuzz corpus", .checksSomething, .tags(.addressSanitizer))
struct FuzzCorpusTests {
    static func corpus(_ target: String) -> [String] {
        let dir = Fixtures.repositoryRoot.appendingPathComponent("Fuzz/corpus/\(target)").path
        return ((try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? []).sorted().map { dir + "/" + $0 }
    }

    @Test("the corpora are there", arguments: ["json", "mpd", "icy", "headers"])
    func corpusExists(target: String) {
        #expect(Self.corpus(target).count >= 8)
    }

    @Test("JSON control parser", arguments: corpus("json"))
    func json(path: String) throws {
        let data = try Data(contentsOf: URL(fileURLWithPath: path))
        data.withUnsafeBytes { FuzzChecks.jsonRequest($0.bindMemory(to: UInt8.self)) }
        checks("the fuzzer's properties, as preconditions: a broken one traps the run")
    }

    @Test("MPD protocol parser", arguments: corpus("mpd"))
    func mpd(path: String) throws {
        let data = try Data(contentsOf: URL(fileURLWithPath: path))
        data.withUnsafeBytes { SessionFuzzChecks.mpdLines($0.bindMemory(to: UInt8.self)) }
        checks("the fuzzer's properties, as preconditions: a broken one traps the run")
    }

    @Test("ICY StreamTitle blocks", arguments: corpus("icy"))
    func icy(path: String) throws {
        let data = try Data(contentsOf: URL(fileURLWithPath: path))
        data.withUnsafeBytes { ICYText.fuzzStreamTitle($0.bindMemory(to: UInt8.self)) }
        checks("the fuzzer's properties, as preconditions: a broken one traps the run")
    }

    @Test("a radio's response headers", arguments: corpus("headers"))
    func headers(path: String) throws {
        let data = try Data(contentsOf: URL(fileURLWithPath: path))
        data.withUnsafeBytes { ICYText.fuzzHeaders($0.bindMemory(to: UInt8.self)) }
        checks("the fuzzer's properties, as preconditions: a broken one traps the run")
    }
}
