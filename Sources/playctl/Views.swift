import ArgumentParser
import CoreStream
import PlaydProtocol
#if canImport(Glibc)
import Glibc
#endif

// How playctl shows what playd replies: times, MPD-style status lines, outputs.

/// m:ss.mmm — loop points are often closer together than a second.
func formatPrecise(_ seconds: Double) -> String {
    let ms = Int((seconds * 1000).rounded())
    let m = ms / 60_000, rest = ms % 60_000
    return "\(m):" + (rest < 10_000 ? "0" : "") + "\(rest / 1000)." + String(1000 + rest % 1000).dropFirst()
}

/// Numbers as mpc prints them: no ".0" on whole ones.
enum MPDStyle {
    static func number(_ v: Double) -> String {
        v == v.rounded() && abs(v) < 1e15 ? String(Int64(v)) : String(v)
    }
}

enum OutputView {
    static func pad(_ s: String, _ width: Int) -> String {
        s.count >= width ? s : s + String(repeating: " ", count: width - s.count)
    }

    /// `snapcast  fifo  on   writing   48000:16:2  written 1.2 M  dropped 0  (fifo:/tmp/snapfifo)`
    static func render(_ o: JSON) -> String {
        var line = pad(o["name"]?.shown ?? "?", 10)
        line += " " + pad(o["kind"]?.shown ?? "?", 5)
        line += " " + (o["enabled"]?.boolValue == true ? "on " : "off")
        line += " " + pad(o["state"]?.shown ?? "?", 9)
        line += " " + (o["format"]?.shown ?? "-")
        if let w = o["frames_written"]?.numberValue, let d = o["frames_dropped"]?.numberValue {
            line += "  written \(Int(w)) dropped \(Int(d)) frames"
        }
        line += "  (\(o["spec"]?.shown ?? ""))"
        if let e = o["error"]?.shown { line += "\n  error: \(e)" }
        return line
    }
}

enum StatusView {
    static func render(_ s: JSON) -> String {
        var lines: [String] = []
        let state = s[.state]?.shown ?? "?"
        guard let file = s[.file]?.shown else { return "stopped" }
        let title = s[.title]?.shown ?? String(file.split(separator: "/").last ?? Substring(file))
        lines.append([s[.artist]?.shown, title].compactMap { $0 }.joined(separator: " — "))
        let pos = s[.position]?.numberValue ?? 0
        let dur = s[.duration]?.numberValue
        var bar = ""
        if let d = dur, d > 0 {
            let width = 30
            let filled = min(width, Int(Double(width) * pos / d))
            bar = " [" + String(repeating: "#", count: filled) + String(repeating: "-", count: width - filled) + "]"
        }
        let stream = s[.stream].flatMap { $0.isNull ? nil : $0 }
        let live = stream?["live"]?.boolValue == true
        lines.append("[\(state)] \(formatClock(pos)) / \(live ? "live" : dur.map(formatClock) ?? "?:??")\(bar)")
        if let st = stream {
            var line = "stream: \(st["station"]?.shown ?? file)"
            if let n = st["reconnecting"]?.numberValue { line += " (reconnecting, attempt \(Int(n)))" }
            lines.append(line)
        }
        if let l = s[.loop], !l.isNull, let a = l["start"]?.numberValue, let b = l["end"]?.numberValue {
            var line = "loop: \(formatPrecise(a)) – \(formatPrecise(b))"
            if l["ping_pong"]?.boolValue == true { line += " ping-pong" }
            line += ", \(Int(l["passes"]?.numberValue ?? 0)) passes"
            if let left = l["remaining"]?.numberValue { line += ", \(Int(left)) left" }
            lines.append(line)
        }
        if s[.direction]?.shown == "reverse" { lines.append("direction: reverse") }
        if let q = s[.queue], let n = q["length"]?.numberValue, n > 0 {
            let pos = q["current"]?.numberValue.map { "\(Int($0) + 1)/" } ?? ""
            var opts: [String] = []
            if let r = q["repeat"]?.shown, r != "off" { opts.append(r == "one" ? "repeat one" : "repeat") }
            if q["shuffle"]?.boolValue == true { opts.append("shuffle") }
            if q["consume"]?.boolValue == true { opts.append("consume") }
            lines.append("queue: \(pos)\(Int(n))" + (opts.isEmpty ? "" : " (" + opts.joined(separator: ", ") + ")"))
        }
        if let a = s[.album]?.shown {
            lines.append("album: \(a)" + (s[.date]?.shown.map { " (\($0))" } ?? ""))
        }
        if let v = s[.volume]?.numberValue {
            var line = "volume: \(Int(v))" + (s[.muted]?.boolValue == true ? " (muted)" : "")
            if let rg = s[.replayGain], let db = rg["applied_db"]?.numberValue {
                line += ", ReplayGain \(rg["mode"]?.shown ?? "") \(db >= 0 ? "+" : "")\((db * 100).rounded() / 100) dB"
            }
            lines.append(line)
        }
        if let o = s[.output], !o.isNull {
            lines.append("output: \(o["device"]?.shown ?? "?") \(o["format"]?.shown ?? "") \(o["sample_rate"]?.numberValue.map { Int($0) } ?? 0) Hz")
        }
        return lines.joined(separator: "\n")
    }
}

extension JSON {
    /// A string from the daemon as a terminal may show it: tags, file names and radio
    /// titles are outside text, and a control character in one (an escape sequence that
    /// clears the screen, a newline that fakes a line) is shown as U+FFFD. `--json`
    /// prints the reply itself, where JSON's escapes keep them harmless (issue 39).
    var shown: String? {
        guard let s = stringValue else { return nil }
        guard s.unicodeScalars.contains(where: Self.isControl) else { return s }
        return String(String.UnicodeScalarView(s.unicodeScalars.map { Self.isControl($0) ? "\u{FFFD}" : $0 }))
    }

    /// C0 and C1 controls and DEL.
    static func isControl(_ u: Unicode.Scalar) -> Bool { u.value < 0x20 || (0x7F...0x9F).contains(u.value) }
}
