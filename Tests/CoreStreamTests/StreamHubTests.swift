import Testing
@testable import CoreStream

/// The listen streams' hub, in-process (issue 45): an encoder runs only while its
/// format has a listener, so a box that serves streams nobody listens to encodes
/// nothing (docs/web.md says so; docs/benchmarks.md has the CPU with 0 and 1 listener).
@Suite("Listen streams' hub", .checksSomething)
struct StreamHubTests {
    @Test func anEncoderRunsOnlyWhileItsFormatHasAListener() throws {
        let hub = StreamHub(formats: [.opus, .wav], maxListeners: 4, bufferMillis: 100)
        #expect(hub.runningEncoders.isEmpty, "no listener, no encoder")
        let a = try hub.attach(.opus, icy: false)
        let b = try hub.attach(.opus, icy: false)
        #expect(hub.runningEncoders == [.opus], "one encoder for both Opus listeners, none for WAV")
        hub.detach(a)
        #expect(hub.runningEncoders == [.opus], "one Opus listener is left")
        hub.detach(b)
        #expect(hub.runningEncoders.isEmpty, "the last listener left: the encoder stopped")
        // A listener after that gets a stream from the start: the container's header.
        let c = try hub.attach(.wav, icy: false)
        defer { hub.detach(c) }
        let first = c.next(max: 4)
        #expect(first.map { Array($0.prefix(4)) } == Array("RIFF".utf8), "a new WAV listener's first bytes: \(String(describing: first))")
        #expect(hub.runningEncoders == [.wav])
    }
}
