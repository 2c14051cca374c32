/// An output spec, parsed once: `KIND[:TARGET][?KEY=VALUE&…]`. The kinds, their targets
/// and options are the registry ``OutputKind/all``; nothing else parses spec text.
///
/// - `alsa:DEVICE` (default `alsa:default`): ALSA with the fallback chain
///   `hw:X` → `plughw:X` → `default`. `alsa:A,B,C` with commas is not used because ALSA
///   names contain commas (`hw:0,1`); give an explicit chain with `|`: `alsa:hw:1|default`.
/// - `pipewire` / `pipewire:NODE`: a native PipeWire stream (``PipeWireOutput``) to the
///   default sink or the node named; `remote=SOCKET` for a server other than the
///   user's own (a name in the runtime folder or an absolute path).
/// - `null`: discard, paced by a clock; `null?pace=off` unpaced.
/// - `wav:PATH`: capture to a float WAV, paced; `wav:PATH?pace=off` unpaced.
/// - `fifo:PATH`: a feed (``FeedOutput``), a copy of what the local output plays.
///
/// Options of the local kinds: `buffer_time` and `period_time` in milliseconds
/// (defaults 750 and 250), `pace=on|off` for `null` and `wav`.
///
/// Why 750/250 rather than MPD's 500 ms: every period costs a wake-up of the render
/// thread and, through ALSA's pulse plugin, three of libpulse's thread; a 250 ms period
/// cuts playd's CPU while playing by a third against 125 ms (docs/benchmarks.md). The
/// pulse plugin wants at least three periods, hence 750 ms. What it costs: where the
/// device cannot rewind (pulse), a pause or a software volume change is heard up to a
/// buffer later.
public struct OutputSpec: Sendable, Equatable {
    public static let defaultBufferMillis = 750
    public static let defaultPeriodMillis = 250

    /// What the spec names: the device the render thread writes, or a feed.
    public enum Role: Sendable {
        case local, feed
        var noun: String { self == .local ? "output" : "feed" }
    }

    /// The spec as written.
    public let text: String
    public let kind: OutputKind
    /// The device (`alsa`), the path (`wav`, `fifo`), or empty (`null`).
    public let target: String
    /// The options, each one the kind takes (not yet range-checked).
    public let options: [String: String]

    /// Splits `text` and checks its kind, target and option names against the registry.
    public static func parse(_ text: String, as role: Role = .local) throws(StreamError) -> OutputSpec {
        func fail(_ why: String) -> StreamError { StreamError(.invalidArgument, "\(role.noun) \(text): \(why)") }
        var body = Substring(text)
        var options: [String: String] = [:]
        if let q = text.lastIndex(of: "?") {
            body = text[..<q]
            for pair in text[text.index(after: q)...].split(separator: "&") {
                let kv = pair.split(separator: "=", maxSplits: 1).map(String.init)
                guard kv.count == 2 else { throw fail("option '\(pair)' is not key=value") }
                options[kv[0]] = kv[1]
            }
        }
        let name = body.prefix { $0 != ":" }
        let kinds = OutputKind.all.filter { $0.role == role }
        guard let kind = kinds.first(where: { $0.name == name }) else {
            throw fail("unknown kind '\(name)' (use \(kinds.map(\.usage).joined(separator: ", ")))")
        }
        var target = body.count > name.count ? String(body.dropFirst(name.count + 1)) : ""
        switch kind.target {
        case .none:
            guard body.count == name.count else { throw fail("\(kind.name) takes no target") }
        case .optional(let fallback):
            if body.count == name.count { target = fallback }
            // An empty fallback (`pipewire`: the default sink) is not an empty target.
            guard !target.isEmpty || (body.count == name.count && fallback.isEmpty) else {
                throw fail("\(kind.name): needs a \(kind.targetNoun)")
            }
        case .required:
            guard !target.isEmpty else { throw fail("\(kind.name): needs a \(kind.targetNoun)") }
        }
        if let unknown = options.keys.sorted().first(where: { !kind.options.contains($0) }) {
            throw fail("unknown option '\(unknown)' (\(kind.name) takes \(kind.options.joined(separator: ", ")))")
        }
        return OutputSpec(text: text, kind: kind, target: target, options: options)
    }

    /// Makes the local output `text` names, with its buffer and period (an option in the
    /// spec wins over the given defaults).
    public static func make(_ text: String, bufferMillis: Int = defaultBufferMillis,
                            periodMillis: Int = defaultPeriodMillis) throws(StreamError) -> any AudioOutput {
        try parse(text).makeOutput(bufferMillis: bufferMillis, periodMillis: periodMillis)
    }

    public func makeOutput(bufferMillis: Int = defaultBufferMillis,
                           periodMillis: Int = defaultPeriodMillis) throws(StreamError) -> any AudioOutput {
        let buffer = try millis("buffer_time", bufferMillis)
        let period = try millis("period_time", min(periodMillis, buffer))
        guard period <= buffer else {
            throw fail("period_time \(period) ms exceeds buffer_time \(buffer) ms")
        }
        switch kind {
        case .null:
            return NullOutput(paced: try pace(), bufferTimeMicros: buffer * 1000, periodTimeMicros: period * 1000)
        case .wav:
            return WAVOutput(path: target, paced: try pace(), bufferTimeMicros: buffer * 1000, periodTimeMicros: period * 1000)
        case .alsa:
            let chain = target.contains("|")
                ? target.split(separator: "|").map(String.init)
                : ALSAOutput.fallbackChain(for: target)
            return ALSAOutput(spec: text, chain: chain, bufferTimeMicros: buffer * 1000, periodTimeMicros: period * 1000)
        case .pipewire:
            let remote = options["remote"] ?? ""
            guard remote.utf8.count < 108, !remote.utf8.contains(0) else {
                throw fail("remote must be a socket name or path shorter than 108 bytes")
            }
            return PipeWireOutput(spec: text, target: target, remote: remote, bufferTimeMicros: buffer * 1000, periodTimeMicros: period * 1000)
        default:
            throw fail("a \(kind.name) is not a local output")
        }
    }

    private func fail(_ why: String) -> StreamError {
        StreamError(.invalidArgument, "\(kind.role.noun) \(text): \(why)")
    }

    private func millis(_ key: String, _ fallback: Int) throws(StreamError) -> Int {
        guard let v = options[key] else { return fallback }
        guard let n = Int(v), n > 0, n <= 10_000 else { throw fail("\(key) must be 1…10000 ms, got '\(v)'") }
        return n
    }

    private func pace() throws(StreamError) -> Bool {
        switch options["pace"] {
        case nil, "on", "true", "1": return true
        case "off", "false", "0": return false
        case let v?: throw fail("pace must be on or off, got '\(v)'")
        }
    }
}

/// One kind of output in the registry: its name, whether it is the local device or a
/// feed, what its target is, and the options it takes.
public struct OutputKind: Sendable, Hashable {
    public enum Target: Sendable, Hashable {
        /// No target (`null`).
        case none
        /// A target, this one when the spec names none (`alsa` → `default`).
        case optional(String)
        case required
    }

    public let name: String
    public let role: OutputSpec.Role
    public let target: Target
    let targetNoun: String
    public let options: [String]
    /// How the kind is written, for error messages.
    public let usage: String

    private static let local = ["buffer_time", "period_time"]
    public static let alsa = OutputKind(name: "alsa", role: .local, target: .optional("default"), targetNoun: "device name",
                                        options: local, usage: "alsa:DEVICE")
    public static let null = OutputKind(name: "null", role: .local, target: .none, targetNoun: "",
                                        options: local + ["pace"], usage: "null")
    public static let wav = OutputKind(name: "wav", role: .local, target: .required, targetNoun: "path",
                                       options: local + ["pace"], usage: "wav:PATH")
    public static let pipewire = OutputKind(name: "pipewire", role: .local, target: .optional(""), targetNoun: "node name",
                                            options: local + ["remote"], usage: "pipewire[:NODE]")
    public static let fifo = OutputKind(name: "fifo", role: .feed, target: .required, targetNoun: "path",
                                        options: ["format", "name"], usage: "fifo:PATH[?format=48000:16:2&name=NAME]")
    /// The registry.
    public static let all: [OutputKind] = [alsa, pipewire, null, wav, fifo]
}
