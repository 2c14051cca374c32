/// A time as `playctl` and the protocol accept it: `83.5`, `1:23.5`, `1:02:03`,
/// relative `+10` / `-10`, and exact frames `123456f` (also `+4410f`).
public struct TimeArgument: Equatable, Sendable, CustomStringConvertible {
    public enum Value: Equatable, Sendable {
        case seconds(Double)
        case frames(Int64)
    }
    public var value: Value
    /// 0 absolute, +1 forward, -1 backward.
    public var direction: Int

    public init(value: Value, direction: Int = 0) {
        self.value = value
        self.direction = direction
    }

    public struct ParseError: Error, CustomStringConvertible {
        public var description: String
    }

    public init(parsing text: String) throws(ParseError) {
        var s = Substring(text.trimmingSpaces)
        direction = 0
        if s.hasPrefix("+") { direction = 1; s = s.dropFirst() } else if s.hasPrefix("-") { direction = -1; s = s.dropFirst() }
        guard !s.isEmpty else { throw ParseError(description: "'\(text)' is not a time (try 83.5, 1:23.5, 1:02:03, +10, -10 or 123456f)") }
        if s.hasSuffix("f") {
            guard let n = Int64(s.dropLast()), n >= 0 else {
                throw ParseError(description: "'\(text)' is not a frame count (digits followed by f)")
            }
            value = .frames(n)
            return
        }
        let parts = s.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count <= 3, parts.allSatisfy({ !$0.isEmpty }) else {
            throw ParseError(description: "'\(text)' is not a time (try 83.5, 1:23.5 or 1:02:03)")
        }
        var total = 0.0
        for (i, p) in parts.enumerated() {
            let isLast = i == parts.count - 1
            guard let v = isLast ? Double(p) : Double(Int(p) ?? -1), v >= 0, v.isFinite,
                  p.allSatisfy({ $0.isNumber || $0 == "." }) else {
                throw ParseError(description: "'\(text)' is not a time (try 83.5, 1:23.5 or 1:02:03)")
            }
            if i > 0 && v >= 60 { throw ParseError(description: "'\(text)': minutes and seconds must be below 60") }
            total = total * 60 + v
        }
        value = .seconds(total)
    }

    /// The protocol's form: `{"seconds": 83.5}` or `{"frames": 123456}`, plus
    /// `"relative": true` with a signed amount when relative.
    public var json: [(String, JSON)] {
        let sign = direction < 0 ? -1.0 : 1.0
        var members: [(String, JSON)]
        switch value {
        case .seconds(let s): members = [("seconds", .number(sign * s))]
        case .frames(let f): members = [("frames", .number(sign * Double(f)))]
        }
        if direction != 0 { members.append(("relative", .bool(true))) }
        return members
    }

    public var description: String {
        let sign = direction > 0 ? "+" : direction < 0 ? "-" : ""
        switch value {
        case .seconds(let s): return sign + formatClock(s)
        case .frames(let f): return "\(sign)\(f)f"
        }
    }
}

/// `1:23` or `1:02:03` for a number of seconds (floored to whole seconds).
public func formatClock(_ seconds: Double) -> String {
    guard seconds.isFinite, seconds >= 0 else { return "-:--" }
    let t = Int(seconds)
    let h = t / 3600, m = (t / 60) % 60, s = t % 60
    let ss = s < 10 ? "0\(s)" : "\(s)"
    if h > 0 { return "\(h):\(m < 10 ? "0\(m)" : "\(m)"):\(ss)" }
    return "\(m):\(ss)"
}

extension String {
    var trimmingSpaces: String {
        var s = Substring(self)
        while s.first?.isWhitespace == true { s = s.dropFirst() }
        while s.last?.isWhitespace == true { s = s.dropLast() }
        return String(s)
    }
}
