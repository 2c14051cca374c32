/// The text a radio server sends: ICY `StreamTitle` blocks and the `icy-*` response
/// headers. Pure functions over strings, with no other dependency, so that libFuzzer
/// builds this file alone (`scripts/fuzz icy headers`) and checks ``fuzzStreamTitle(_:)``
/// and ``fuzzHeaders(_:)`` on whatever bytes it makes. Thread: any.
public enum ICYText {
    /// The most characters kept of a title or a station name.
    public static let maxLength = 512

    /// `StreamTitle='Artist - Title';StreamUrl='…';` → `Artist - Title`. The value ends
    /// at the first `';` (titles may hold quotes); at most ``maxLength`` characters are
    /// kept. Control characters are kept here (JSON escapes them; MPD replies blank
    /// them; playctl shows them as U+FFFD).
    public static func streamTitle(_ block: String) -> String? {
        guard let start = block.firstRange(of: "StreamTitle='") else { return nil }
        let rest = block[start.upperBound...]
        let value = rest.firstRange(of: "';").map { rest[..<$0.lowerBound] } ?? rest.dropLast(rest.hasSuffix("'") ? 1 : 0)
        let title = value.trimmingCharacters(in: " \t\0")
        return title.isEmpty ? nil : String(title.prefix(maxLength))
    }

    /// "Artist - Title" → (artist, title); a title without " - " is all title.
    public static func splitTitle(_ s: String) -> (artist: String?, title: String) {
        guard let r = s.firstRange(of: " - ") else { return (nil, s) }
        let a = s[..<r.lowerBound].trimmingCharacters(in: " "), t = s[r.upperBound...].trimmingCharacters(in: " ")
        return a.isEmpty || t.isEmpty ? (nil, s) : (a, t)
    }

    /// `icy-name` from a block of response header lines (the station's name), or nil.
    public static func stationName(headers: String) -> String? {
        for line in headers.split(whereSeparator: { $0 == "\n" || $0 == "\r" }) {
            guard let colon = line.firstIndex(of: ":") else { continue }
            if line[..<colon].lowercased() == "icy-name" {
                let v = line[line.index(after: colon)...].trimmingCharacters(in: " \t")
                return v.isEmpty ? nil : String(v.prefix(maxLength))
            }
        }
        return nil
    }

    // MARK: - Properties the fuzzers check

    /// Any bytes as a metadata block: no trap, a title within ``maxLength`` that comes
    /// from the block, and a split whose parts come from the title.
    public static func fuzzStreamTitle(_ bytes: UnsafeBufferPointer<UInt8>) {
        let block = String(decoding: bytes, as: UTF8.self)
        guard let title = streamTitle(block) else { return }
        precondition(title.count <= maxLength && !title.isEmpty, "title length \(title.count)")
        precondition(within(title, block), "a title that is not in the block")
        let (artist, rest) = splitTitle(title)
        precondition(within(rest, title) && (artist.map { within($0, title) } ?? true), "a split that is not in the title")
    }

    /// Any bytes as response headers: no trap, a name within ``maxLength`` that comes
    /// from the headers.
    public static func fuzzHeaders(_ bytes: UnsafeBufferPointer<UInt8>) {
        let headers = String(decoding: bytes, as: UTF8.self)
        guard let name = stationName(headers: headers) else { return }
        precondition(name.count <= maxLength && !name.isEmpty, "name length \(name.count)")
        precondition(within(name, headers), "a name that is not in the headers")
    }

    /// `part`'s scalars stand in `whole`, one after another (by scalars: a character
    /// boundary inside a slice may differ from the whole string's).
    static func within(_ part: String, _ whole: String) -> Bool {
        whole.unicodeScalars.firstRange(of: part.unicodeScalars) != nil
    }
}

extension Substring {
    func trimmingCharacters(in set: String) -> String {
        var s = self[...]
        while let f = s.first, set.contains(f) { s = s.dropFirst() }
        while let l = s.last, set.contains(l) { s = s.dropLast() }
        return String(s)
    }
}
