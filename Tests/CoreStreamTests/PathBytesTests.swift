import Testing
import CoreStream

/// File names are bytes: the text playd carries for them, and back.
@Suite("Path bytes as text", .checksSomething)
struct PathBytesTests {
    @Test("each name's text", arguments: [
        (Array("café.flac".utf8), "café.flac"),
        ([0x63, 0x61, 0x66, 0xE9, 0x2E, 0x66], "caf\\xe9.f"),            // Latin-1 é
        (Array("a\\x41".utf8), "a\\x5cx41"),                              // a backslash that reads as an escape
        (Array("a\\b\\x4".utf8), "a\\b\\x4"),                             // backslashes that do not
        ([0xED, 0xA0, 0x80], "\\xed\\xa0\\x80"),                          // a surrogate
        ([0xC0, 0xAF], "\\xc0\\xaf"),                                     // an overlong "/"
        ([0xF4, 0x90, 0x80, 0x80], "\\xf4\\x90\\x80\\x80"),               // above U+10FFFF
        ([0x41, 0xE2, 0x82], "A\\xe2\\x82"),                              // cut short
        ([0xF0, 0x9F, 0x8E, 0xB5], "🎵"),
    ] as [([UInt8], String)])
    func text(_ bytes: [UInt8], _ text: String) {
        #expect(PathBytes.text(bytes) == text)
        #expect(PathBytes.bytes(text) == bytes)
    }

    /// Escapes `text` never writes stay literal: no NUL or "/" spelled as `\x00`, `\x2f`.
    @Test(arguments: ["a\\x00b", "..\\x2fetc", "\\x41"])
    func onlyItsOwnEscapesAreDecoded(_ text: String) {
        #expect(PathBytes.bytes(text) == Array(text.utf8))
    }

    /// Any bytes but NUL come back as they went, through text that is valid UTF-8.
    @Test func randomNamesRoundTrip() {
        var rng = SplitMix64(seed: 20261122)
        for _ in 0..<20_000 {
            let n = Int.random(in: 1...24, using: &rng)
            // Mostly the bytes that matter: backslash, x, hex digits, and the high half.
            let alphabet: [UInt8] = [0x5C, 0x78, 0x30, 0x41, 0x66, 0x39] + Array(0x80...0xFF)
            let bytes = (0..<n).map { _ in alphabet.randomElement(using: &rng)! }
            let t = PathBytes.text(bytes)
            #expect(PathBytes.bytes(t) == bytes, "\(bytes) → \(t)")
            #expect(String(validating: Array(t.utf8), as: UTF8.self) == t)
        }
    }
}
