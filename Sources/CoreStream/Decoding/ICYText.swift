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

    // MARK: - A response's head and an ICY stream, as they arrive

    /// The response header bytes playd reads before it refuses a server (libcurl's own
    /// cap is 300 KiB in later versions; 7.88 has none). Without one, endless
    /// `Set-Cookie` or `Icy-*` lines held FFmpeg's http protocol, growing, until the
    /// timeout (130–216 MB measured, issue 39). Nothing but the fields below is kept.
    public static let maxHeaderBytes = 300 * 1024

    /// The fields of one HTTP response head that playd uses, taken line by line as
    /// they arrive; every line is counted toward ``maxHeaderBytes``.
    public struct ResponseHead: Sendable, Equatable {
        public var status = 0
        /// Content-Length (0…10^15), nil when absent or not a number in range.
        public var contentLength: Int64?
        /// The total length from `Content-Range: bytes A-B/TOTAL` of a 206.
        public var rangeTotal: Int64?
        public var acceptsRanges = false
        public var chunked = false
        /// `icy-metaint`: audio bytes between two metadata blocks (1…1 MiB), or nil.
        public var metaInterval: Int?
        /// `icy-name`, at most ``maxLength`` characters.
        public var stationName: String?
        /// Header bytes counted, status line included.
        public private(set) var bytes = 0
        /// The empty line that ends the head was seen.
        public private(set) var complete = false
        public init() {}

        /// Takes one line (with or without its CR LF). False once the head passed
        /// ``maxHeaderBytes``: the caller gives up on the response.
        public mutating func take(_ raw: UnsafeRawBufferPointer) -> Bool {
            bytes += raw.count
            guard bytes <= maxHeaderBytes else { return false }
            var line = Substring(String(decoding: raw.prefix(8192), as: UTF8.self))
            while let l = line.last, l == "\n" || l == "\r" || l == "\r\n" { line = line.dropLast() }
            if line.isEmpty { complete = true; return true }
            if line.hasPrefix("HTTP/") || line.hasPrefix("ICY ") {
                // A new response (an interim 1xx, or the next hop): its own fields.
                let counted = bytes
                self = ResponseHead()
                bytes = counted
                let parts = line.split(separator: " ", maxSplits: 2)
                if parts.count >= 2, parts[1].count == 3, let code = Int(parts[1]) { status = code }
                return true
            }
            guard let colon = line.firstIndex(of: ":") else { return true }
            let name = line[..<colon].lowercased()
            let value = line[line.index(after: colon)...].trimmingCharacters(in: " \t")
            switch name {
            case "content-length": contentLength = ICYText.number(value, max: 1_000_000_000_000_000)
            case "content-range":
                // bytes A-B/TOTAL
                if let slash = value.lastIndex(of: "/") {
                    rangeTotal = ICYText.number(String(value[value.index(after: slash)...]), max: 1_000_000_000_000_000)
                }
            case "accept-ranges": acceptsRanges = value.lowercased().contains("bytes")
            case "transfer-encoding": chunked = value.lowercased().contains("chunked")
            case "icy-metaint": metaInterval = ICYText.number(value, max: 1 << 20).flatMap { $0 > 0 ? Int($0) : nil }
            case "icy-name": stationName = value.isEmpty ? nil : String(value.prefix(maxLength))
            default: break
            }
            return true
        }
    }

    /// A decimal number of at most 18 digits within 0…`max`, or nil: checked before
    /// any conversion.
    static func number(_ s: String, max: Int64) -> Int64? {
        guard !s.isEmpty, s.utf8.count <= 18, s.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), let v = Int64(s), v <= max else { return nil }
        return v
    }

    /// Separates an ICY stream's audio from the metadata blocks the server puts in it
    /// every `interval` bytes (a length byte × 16, then the block: `StreamTitle='…';`).
    public struct Deinterleaver: Sendable {
        public let interval: Int
        private var untilBlock: Int
        private var blockLeft = -1  // -1: audio; 0…4080: bytes of the block to come
        private var block: [UInt8] = []
        /// Blocks completed so far (a counter: the caller notices a new one).
        public private(set) var blocks = 0
        /// The text of the last complete non-empty block.
        public private(set) var lastBlock: String?

        public init(interval: Int) {
            self.interval = max(1, interval)
            untilBlock = self.interval
        }

        /// Feeds `bytes`; `audio` gets the audio runs, in order. Returns the audio
        /// bytes passed on.
        @discardableResult
        public mutating func feed(_ bytes: UnsafeRawBufferPointer, audio: (UnsafeRawBufferPointer) -> Void) -> Int {
            var i = 0, passed = 0
            while i < bytes.count {
                if blockLeft < 0 {
                    let n = min(untilBlock, bytes.count - i)
                    if n > 0 { audio(UnsafeRawBufferPointer(rebasing: bytes[i..<(i + n)])); passed += n }
                    i += n
                    untilBlock -= n
                    if untilBlock == 0 && i < bytes.count {
                        blockLeft = Int(bytes[i]) * 16
                        i += 1
                        block.removeAll(keepingCapacity: true)
                        if blockLeft == 0 { endBlock() }
                    }
                } else {
                    let n = min(blockLeft, bytes.count - i)
                    block.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[i..<(i + n)]))
                    i += n
                    blockLeft -= n
                    if blockLeft == 0 { endBlock() }
                }
            }
            return passed
        }

        private mutating func endBlock() {
            blockLeft = -1
            untilBlock = interval
            guard !block.isEmpty else { return }
            let text = block.prefix { $0 != 0 }
            lastBlock = String(decoding: text, as: UTF8.self)
            blocks += 1
        }
    }

    // MARK: - Properties the fuzzers check

    /// Any bytes as a metadata block: no trap, a title within ``maxLength`` that comes
    /// from the block, and a split whose parts come from the title.
    public static func fuzzStreamTitle(_ bytes: UnsafeBufferPointer<UInt8>) {
        // The bytes as an ICY stream (the first byte sets the interval), fed in two
        // pieces: the audio passed on plus the blocks' bytes are all the bytes.
        if let first = bytes.first {
            var d = Deinterleaver(interval: Int(first) + 1)
            let raw = UnsafeRawBufferPointer(bytes), cut = raw.count / 2
            var audio = 0
            audio += d.feed(UnsafeRawBufferPointer(rebasing: raw[..<cut])) { precondition($0.count > 0) }
            audio += d.feed(UnsafeRawBufferPointer(rebasing: raw[cut...])) { precondition($0.count > 0) }
            precondition(audio <= raw.count && (d.lastBlock?.utf8.count ?? 0) <= 255 * 16 * 3, "audio \(audio) of \(raw.count)")
            if let b = d.lastBlock { _ = streamTitle(b) }
        }
        let block = String(decoding: bytes, as: UTF8.self)
        guard let title = streamTitle(block) else { return }
        precondition(title.count <= maxLength && !title.isEmpty, "title length \(title.count)")
        precondition(within(title, block), "a title that is not in the block")
        let (artist, rest) = splitTitle(title)
        precondition(within(rest, title) && (artist.map { within($0, title) } ?? true), "a split that is not in the title")
    }

    /// Any bytes as response headers: no trap, a station name within ``maxLength``.
    public static func fuzzHeaders(_ bytes: UnsafeBufferPointer<UInt8>) {
        // Line by line through the head parser: no trap, every byte counted, the cap
        // held, numbers in their ranges.
        var head = ResponseHead(), counted = 0, refused = false
        var start = 0
        for i in 0..<bytes.count where bytes[i] == 0x0A || i == bytes.count - 1 {
            let line = UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(bytes)[start...i])
            counted += line.count
            start = i + 1
            if !head.take(line) { refused = true; break }
        }
        precondition(head.bytes == counted && refused == (counted > maxHeaderBytes), "header bytes \(head.bytes) of \(counted)")
        precondition((head.contentLength ?? 0) >= 0 && (head.metaInterval ?? 1) >= 1 && (head.metaInterval ?? 1) <= 1 << 20)
        if let name = head.stationName { precondition(name.count <= maxLength && !name.isEmpty, "name length \(name.count)") }
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
