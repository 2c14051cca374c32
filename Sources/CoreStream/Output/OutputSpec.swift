/// Parses an output spec into an ``AudioOutput``.
///
/// - `alsa:DEVICE` (default `alsa:default`): ALSA with the fallback chain
///   `hw:X` → `plughw:X` → `default`. `alsa:A,B,C` with commas is not used because ALSA
///   names contain commas (`hw:0,1`); give an explicit chain with `|`: `alsa:hw:1|default`.
/// - `null`: discard, paced by a clock; `null?pace=off` unpaced.
/// - `wav:PATH`: capture to a float WAV, paced; `wav:PATH?pace=off` unpaced.
///
/// Options after `?`, joined by `&`: `buffer_time` and `period_time` in milliseconds
/// (defaults 750 and 250), `pace=on|off` for `null` and `wav`.
///
/// Why 750/250 rather than MPD's 500 ms: every period costs a wake-up of the render
/// thread and, through ALSA's pulse plugin, three of libpulse's thread; a 250 ms period
/// cuts playd's CPU while playing by a third against 125 ms (docs/benchmarks.md). The
/// pulse plugin wants at least three periods, hence 750 ms. What it costs: where the
/// device cannot rewind (pulse), a pause or a software volume change is heard up to a
/// buffer later.
public enum OutputSpec {
    public static let defaultBufferMillis = 750
    public static let defaultPeriodMillis = 250

    public static func make(_ spec: String, bufferMillis: Int = defaultBufferMillis,
                            periodMillis: Int = defaultPeriodMillis) throws(StreamError) -> any AudioOutput {
        var body = spec
        var options: [String: String] = [:]
        if let q = spec.lastIndex(of: "?") {
            body = String(spec[..<q])
            for pair in spec[spec.index(after: q)...].split(separator: "&") {
                let kv = pair.split(separator: "=", maxSplits: 1).map(String.init)
                guard kv.count == 2 else { throw StreamError(.invalidArgument, "output \(spec): option '\(pair)' is not key=value") }
                options[kv[0]] = kv[1]
            }
        }
        func millis(_ key: String, _ fallback: Int) throws(StreamError) -> Int {
            guard let v = options.removeValue(forKey: key) else { return fallback }
            guard let n = Int(v), n > 0, n <= 10_000 else {
                throw StreamError(.invalidArgument, "output \(spec): \(key) must be 1…10000 ms, got '\(v)'")
            }
            return n
        }
        func pace() throws(StreamError) -> Bool {
            guard let v = options.removeValue(forKey: "pace") else { return true }
            switch v {
            case "on", "true", "1": return true
            case "off", "false", "0": return false
            default: throw StreamError(.invalidArgument, "output \(spec): pace must be on or off, got '\(v)'")
            }
        }
        let buffer = try millis("buffer_time", bufferMillis)
        let period = try millis("period_time", min(periodMillis, buffer))
        guard period <= buffer else {
            throw StreamError(.invalidArgument, "output \(spec): period_time \(period) ms exceeds buffer_time \(buffer) ms")
        }
        let output: any AudioOutput
        if body == "null" {
            output = NullOutput(paced: try pace(), bufferTimeMicros: buffer * 1000, periodTimeMicros: period * 1000)
        } else if body.hasPrefix("wav:") {
            let path = String(body.dropFirst(4))
            guard !path.isEmpty else { throw StreamError(.invalidArgument, "output \(spec): wav: needs a path") }
            output = WAVOutput(path: path, paced: try pace(), bufferTimeMicros: buffer * 1000, periodTimeMicros: period * 1000)
        } else if body == "alsa" || body.hasPrefix("alsa:") {
            let device = body == "alsa" ? "default" : String(body.dropFirst(5))
            guard !device.isEmpty else { throw StreamError(.invalidArgument, "output \(spec): alsa: needs a device name") }
            let chain = device.contains("|")
                ? device.split(separator: "|").map(String.init)
                : ALSAOutput.fallbackChain(for: device)
            output = ALSAOutput(spec: spec, chain: chain, bufferTimeMicros: buffer * 1000, periodTimeMicros: period * 1000)
        } else {
            throw StreamError(.invalidArgument, "output \(spec): unknown output (use alsa:DEVICE, null or wav:PATH)")
        }
        if let unknown = options.keys.sorted().first {
            throw StreamError(.invalidArgument, "output \(spec): unknown option '\(unknown)'")
        }
        return output
    }
}
