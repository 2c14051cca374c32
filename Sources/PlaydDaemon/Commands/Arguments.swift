import CoreStream
import PlaydProtocol
import PlaydSessions

/// A command's argument as its spec declares it: a name (the JSON member; MPD takes the
/// arguments by position, in the spec's order), a kind with its range, and whether it
/// may be left out. Each protocol reads its wire form (an MPD word, a JSON value)
/// through the kind: the range is checked there and nowhere else on the way to the
/// player (issue 40: a `playctl seek` passed 10 checks, 3 of them repeats).
public struct ArgumentSpec: Sendable {
    public enum Kind: Sendable {
        /// A whole number in the range. MPD: a decimal word ("Integer expected: X";
        /// outside the range "Number too large: X", MPD's words for both ends of an
        /// unsigned parse); JSON: a whole number.
        case integer(ClosedRange<Int>)
        /// MPD "0"/"1"; JSON true/false.
        case flag
        /// A number in the range (MPD parses it with strtof, so `nan` and `inf` are
        /// words; `nan` passes only where `nan` is set, then stands for "off"). JSON: a
        /// number, or null where `nan` is set.
        case number(ClosedRange<Double>, nan: Bool)
        /// One of a fixed set of words, spelled per protocol. The value is the choice's
        /// `name`; `mpdRefusal` is MPD's own message for anything else.
        case choice([Choice], mpdRefusal: String)
        /// A queue position: a whole number, and no more. Whether the queue has it is
        /// the Player's check, the only one (``PlayerError/Code/badIndex``: MPD's "Bad
        /// song index"), made when the command runs, after every argument is read (MPD
        /// reads all of a command's arguments before it looks at the queue).
        case index
        /// A queue entry's id: a whole number; the Player looks it up
        /// (``PlayerError/Code/noSuchEntry``: MPD's "No such song").
        case id
        /// Seconds: MPD a float word (`+N`/`-N` from the position heard where
        /// `relative`; else a negative one is refused), JSON a number.
        case seconds(relative: Bool)
        /// A time in a track (JSON's `play` `at`, `seek` `to`, `loop` points): JSON a
        /// number of seconds, `{"seconds": S}` or `{"frames": N}` (a whole number, at
        /// most 2^53), with `"relative": true` a signed amount from the position heard
        /// where `relative`, or a string as `playctl` takes it (`83.5`, `1:23.5`,
        /// `+10`, `123456f`). A relative time where none is allowed is a bad request,
        /// a negative absolute one an invalid argument. MPD: as ``seconds(relative:)``.
        case time(relative: Bool)
        /// A file, folder or URL to open: a non-empty string of at most 4,096 bytes
        /// (PATH_MAX); whether it may be opened is the Player's check (the roots).
        case source
        /// A name whose owner checks it (a stored playlist's: StoredPlaylists.checkName,
        /// MPD's "Bad playlist name"): any word here, any string on JSON. Its length is
        /// bounded by the line it came in (limits.max_line_bytes).
        case name
        /// MPD's queue range: "N", "START:" (to the end) or "START:END" (END
        /// exclusive). Its syntax and MPD's 32-bit limits are checked here; whether the
        /// queue has it is the Player's check ("Bad song index").
        case range
        /// MPD: every word left (the last argument only), each read as `element`; none
        /// when the argument is optional, else at least one. JSON: an array of them.
        indirect case list(Kind)
        /// MPD's song filter, every word left: `TAG VALUE` pairs, or one expression
        /// `(TAG == 'VALUE')` or `(TAG contains 'VALUE')` joined by ` AND ` (the subset
        /// the index answers; MPD's own words for the rest). With `grouping`, a trailing
        /// `group TAG` (MPD's `count`), and no pair at all is the whole library.
        case filter(grouping: Bool)
        /// Every word left, as given: `list`'s, whose grammar hangs on its first word
        /// (MPD's `list album ARTIST`), and `tagtypes`' sub-commands.
        case words

        /// Whether it takes every word left (MPD), not one.
        var takesTheRest: Bool {
            switch self {
            case .list, .filter, .words: return true
            default: return false
            }
        }
    }

    public struct Choice: Sendable {
        /// The canonical name (the value the spec's `run` reads).
        public var name: String
        public var mpd: String?
        public var json: String?
        public init(_ name: String, mpd: String? = nil, json: String? = nil) {
            self.name = name
            self.mpd = mpd ?? name
            self.json = json ?? name
        }
    }

    public var name: String
    public var kind: Kind
    public var optional: Bool
    public init(_ name: String, _ kind: Kind, optional: Bool = false) {
        self.name = name
        self.kind = kind
        self.optional = optional
    }

    /// What a JSON client is told this argument takes.
    var jsonExpectation: String {
        switch kind {
        case .integer(let r): return "a whole number \(r.lowerBound)…\(r.upperBound)"
        case .flag: return "true or false"
        case .number(let r, let nan):
            let range = r.lowerBound.isFinite || r.upperBound.isFinite ? " \(Self.figure(r.lowerBound))…\(Self.figure(r.upperBound))" : ""
            return "a number\(range)\(nan ? " or null" : "")"
        case .choice(let cs, _): return cs.compactMap(\.json).joined(separator: ", ")
        case .index: return "a queue position (a whole number)"
        case .id: return "an entry id (a whole number ≥ 0)"
        case .seconds(let relative): return relative ? "a number of seconds" : "a number of seconds ≥ 0"
        case .time(let relative):
            return "seconds (a number ≥ 0 or a string such as \"1:23.5\"), {\"seconds\": …} or {\"frames\": …}"
                + (relative ? ", with \"relative\": true from the position heard" : "")
        case .source: return "a file or URL (a non-empty string of at most \(Self.maxSourceBytes) bytes)"
        case .name: return "a string"
        case .range: return "a range \"START:END\""
        case .list(let element): return "an array, each \(ArgumentSpec(name, element).jsonExpectation)"
        case .filter, .words: return "MPD words (no JSON command takes them)"
        }
    }

    /// The longest file or URL a command takes (Linux's PATH_MAX).
    static let maxSourceBytes = 4096

    static func figure(_ d: Double) -> String { d == d.rounded() && abs(d) < 1e15 ? String(Int(d)) : "\(d)" }
}

/// A value read from the wire, already range-checked.
public enum ArgumentValue: Sendable, Equatable {
    case integer(Int)
    case flag(Bool)
    /// NaN only where the kind allows it.
    case number(Double)
    case choice(String)
    /// Seconds; `relative`: from the position heard.
    case time(Double, relative: Bool)
    /// A ``ArgumentSpec/Kind/time(relative:)``: seconds or frames, and a direction.
    case at(TimeArgument)
    case text(String)
    /// START, and END (nil: open) when the word was a range.
    case range(Int, Int?, isRange: Bool)
    case list([ArgumentValue])
    /// A song filter's terms (tag lowercased), and the tag to group by (MPD's name).
    case filter([FilterTerm], group: String?)
    case words([String])
}

/// One `TAG VALUE` of an MPD song filter.
public struct FilterTerm: Sendable, Equatable {
    public var tag: String
    public var value: String
    public init(_ tag: String, _ value: String) { self.tag = tag; self.value = value }
}

/// The arguments of one request, by name, each read through its spec.
public struct Arguments: Sendable {
    var values: [String: ArgumentValue] = [:]
    /// Not an argument of the request but of the session it came on: the most bytes of a
    /// binary reply its client takes at once (MPD's `binarylimit`; the session owns
    /// it, MPDCommands sets it here before the command runs).
    public var binaryLimit = MPDSession.defaultBinaryLimit
    public init() {}
    public subscript(_ name: String) -> ArgumentValue? { values[name] }
    public func has(_ name: String) -> Bool { values[name] != nil }
    public func integer(_ name: String) -> Int? { if case .integer(let v)? = values[name] { return v }; return nil }
    public func flag(_ name: String) -> Bool? { if case .flag(let v)? = values[name] { return v }; return nil }
    public func number(_ name: String) -> Double? { if case .number(let v)? = values[name] { return v }; return nil }
    public func choice(_ name: String) -> String? { if case .choice(let v)? = values[name] { return v }; return nil }
    public func time(_ name: String) -> (seconds: Double, relative: Bool)? {
        if case .time(let s, let r)? = values[name] { return (s, r) }; return nil
    }
    public func at(_ name: String) -> TimeArgument? { if case .at(let v)? = values[name] { return v }; return nil }
    /// A whole number its kind read, as the Player takes it: checked once, by the kind,
    /// whose range the spec takes from `B.range` (or one inside it, as a test's
    /// command does; the assertion holds a spec to that in debug builds).
    public func bounded<B: Bounds>(_ name: String) -> Bounded<B>? {
        integer(name).map { v in
            assert(B.range.contains(v), "\(name): the spec's kind reads a range outside \(B.self)'s")
            return Bounded(read: v)
        }
    }
    /// A time (``ArgumentSpec/Kind/seconds(relative:)`` or ``ArgumentSpec/Kind/time(relative:)``)
    /// as the Player's seek takes it: read and checked by its kind, signed.
    public func seekTarget(_ name: String) -> SeekTarget? {
        switch values[name] {
        case .time(let s, let relative)?: return SeekTarget(read: .seconds(s), relative: relative)
        case .at(let t)?:
            let sign: Double = t.direction < 0 ? -1 : 1
            switch t.value {
            case .seconds(let s): return SeekTarget(read: .seconds(sign * s), relative: t.direction != 0)
            case .frames(let f): return SeekTarget(read: .frames(t.direction < 0 ? -f : f), relative: t.direction != 0)
            }
        default: return nil
        }
    }
    public func text(_ name: String) -> String? { if case .text(let v)? = values[name] { return v }; return nil }
    public func list(_ name: String) -> [ArgumentValue] { if case .list(let v)? = values[name] { return v }; return [] }
    public func filter(_ name: String) -> (terms: [FilterTerm], group: String?)? {
        if case .filter(let t, let g)? = values[name] { return (t, g) }; return nil
    }
    public func words(_ name: String) -> [String] { if case .words(let v)? = values[name] { return v }; return [] }
    /// A range argument as MPD gave it (START:END), for messages that quote it.
    public func rangeText(_ name: String) -> String? {
        guard case .range(let lo, let hi, let isRange)? = values[name] else { return nil }
        return isRange ? "\(lo):\(hi.map(String.init) ?? "")" : "\(lo)"
    }
    /// A range argument cut at the end of a queue of `count`, as MPD's `shuffle` and
    /// `plchanges` take one (a single N is N..<N+1); one ending before it starts is
    /// malformed, in MPD's words.
    public func clippedRange(_ name: String, count: Int) throws(PlayerError) -> Range<Int>? {
        guard case .range(let start, let end, let isRange)? = values[name] else { return nil }
        return try Self.clipped(start, end, isRange: isRange, count: count)
    }
    /// One range value (START, END, as read) cut so: a list of ranges (`prio`) takes
    /// each in turn.
    public static func clipped(_ start: Int, _ end: Int?, isRange: Bool, count: Int) throws(PlayerError) -> Range<Int> {
        if let end, end < start { throw PlayerError(.badRequest, "Malformed range: \(start):\(end)") }
        let hi = min(isRange ? end ?? count : start + 1, count)  // start ≤ Int32.max: no overflow
        return min(start, hi)..<hi
    }
    /// A range argument as queue indices: a single N is N..<N+1, an open END the end of
    /// a queue of `count`. One that ends before it starts names nothing in the queue.
    public func queueRange(_ name: String, count: Int) throws(PlayerError) -> Range<Int>? {
        guard case .range(let lo, let hi, let isRange)? = values[name] else { return nil }
        let end = isRange ? hi ?? count : lo + 1  // lo ≤ Int32.max: no overflow
        guard end >= lo else { throw PlayerError(.badIndex, "\(lo):\(end) ends before it starts") }
        return lo..<end
    }
}

extension ArgumentSpec {
    /// An MPD word read as this argument, with MPD's messages (its
    /// ProtocolArgumentParser: the same faults, the same words).
    func read(mpd word: String) throws(PlayerError) -> ArgumentValue {
        switch kind {
        case .integer(let r):
            guard let v = Int(word) else { throw PlayerError(.badRequest, "Integer expected: \(word)") }
            guard r.contains(v) else { throw PlayerError(.invalidArgument, "Number too large: \(word)") }
            return .integer(v)
        case .flag:
            guard word == "0" || word == "1" else { throw PlayerError(.badRequest, "Boolean (0/1) expected: \(word)") }
            return .flag(word == "1")
        case .number(let r, let nan):
            // strtof over the whole word, as MPD: "nan" and "inf" parse. 64 bytes: no
            // float needs more, and Float(_:) is not handed a megabyte.
            guard word.utf8.count <= 64, let f = Float(word) else { throw PlayerError(.badRequest, "Float expected: \(word)") }
            let v = Double(f)
            if v.isNaN, nan { return .number(v) }
            guard v.isFinite, r.contains(v) else { throw PlayerError(.invalidArgument, "Number too large: \(word)") }
            return .number(v)
        case .choice(let cs, let refusal):
            guard let c = cs.first(where: { $0.mpd == word }) else { throw PlayerError(.badRequest, refusal) }
            return .choice(c.name)
        case .index, .id:
            guard let v = Int(word) else { throw PlayerError(.badRequest, "Integer expected: \(word)") }
            return .integer(v)
        case .seconds(let relative):
            let signed = word.hasPrefix("+") || word.hasPrefix("-")
            // Finite before it is ever a frame count: `seekcur 1e300` trapped once.
            guard word.utf8.count <= 64, let v = Double(word), v.isFinite else { throw PlayerError(.badRequest, "Float expected: \(word)") }
            guard !signed || relative || v >= 0 else { throw PlayerError(.invalidArgument, "Negative value not allowed: \(word)") }
            return .time(v, relative: signed && relative)
        case .time(let relative):
            guard case .time(let v, let r) = try ArgumentSpec(name, .seconds(relative: relative)).read(mpd: word) else {
                throw PlayerError(.badRequest, "Float expected: \(word)")
            }
            return .at(TimeArgument(value: .seconds(abs(v)), direction: r ? (v < 0 ? -1 : 1) : 0))
        case .name:
            return .text(word)
        case .source:
            guard !word.isEmpty, word.utf8.count <= Self.maxSourceBytes else {
                throw PlayerError(.badRequest, "a file or URL of 1…\(Self.maxSourceBytes) bytes expected")
            }
            return .text(word)
        case .range:
            let parts = word.split(separator: ":", omittingEmptySubsequences: false)
            guard parts.count <= 2, let lo = Int(parts[0]), parts.count == 1 || parts[1].isEmpty || Int(parts[1]) != nil else {
                throw PlayerError(.badRequest, "Integer or range expected: \(word)")
            }
            let hi = parts.count == 2 && !parts[1].isEmpty ? Int(parts[1]) : nil
            // `-1` alone: MPD's old spelling of "all" (its ParseCommandArgRange keeps it).
            if word == "-1" { return .range(0, nil, isRange: true) }
            guard lo >= 0, (hi ?? 0) >= 0 else { throw PlayerError(.badRequest, "Number is negative: \(word)") }
            // MPD's positions are 32-bit: above that it says "Number too large" (and
            // `lo + 1` stays far from overflowing: `shuffle 9223372036854775807` trapped).
            guard lo <= Int(Int32.max), (hi ?? 0) <= Int(Int32.max) else { throw PlayerError(.invalidArgument, "Number too large: \(word)") }
            return .range(lo, hi, isRange: parts.count == 2)
        case .list, .filter, .words:
            return try read(mpd: [word])
        }
    }

    /// The words left, read as a kind that takes them all (``Kind/takesTheRest``).
    func read(mpd words: [String]) throws(PlayerError) -> ArgumentValue {
        switch kind {
        case .list(let element):
            let one = ArgumentSpec(name, element)
            var out: [ArgumentValue] = []
            for w in words { out.append(try one.read(mpd: w)) }
            return .list(out)
        case .filter(let grouping):
            var w = words
            var group: String?
            if grouping, w.count >= 2, w[w.count - 2] == "group" {
                let tag = w[w.count - 1]
                guard let t = MPDCommands.tagTypes.first(where: { $0.name.lowercased() == tag.lowercased() }) else {
                    throw PlayerError(.badRequest, "Unknown tag type: \(tag)")
                }
                group = t.name
                w.removeLast(2)
            }
            let terms = try MPDCommands.filters(w)
            guard !terms.isEmpty || grouping else { throw PlayerError(.badRequest, "Incorrect number of filter arguments") }
            return .filter(terms, group: group)
        case .words:
            return .words(words)
        default:
            return try read(mpd: words.first ?? "")
        }
    }

    /// A JSON member read as this argument. A wrong type is a bad request, a number
    /// outside the range an invalid argument, on every command alike.
    func read(json v: JSON) throws(PlayerError) -> ArgumentValue {
        let must = "\"\(name)\" must be \(jsonExpectation)"
        switch kind {
        case .integer(let r):
            guard case .number(let d) = v, d == d.rounded() else { throw PlayerError(.badRequest, must) }
            guard let n = v.integer(in: Int64(r.lowerBound)...Int64(r.upperBound)) else { throw PlayerError(.invalidArgument, must) }
            return .integer(Int(n))
        case .flag:
            guard let b = v.boolValue else { throw PlayerError(.badRequest, must) }
            return .flag(b)
        case .number(let r, let nan):
            if v.isNull, nan { return .number(.nan) }
            guard let d = v.numberValue else { throw PlayerError(.badRequest, must) }
            guard d.isFinite, r.contains(d) else { throw PlayerError(.invalidArgument, must) }
            return .number(d)
        case .choice(let cs, _):
            guard let s = v.stringValue, let c = cs.first(where: { $0.json == s }) else { throw PlayerError(.badRequest, must) }
            return .choice(c.name)
        case .index:
            // Within ±2^53 (exact in a double) before it becomes an Int.
            guard let n = v.integer(in: -(1 << 53)...(1 << 53)) else { throw PlayerError(.badRequest, must) }
            return .integer(Int(n))
        case .id:
            guard let n = v.integer(in: 0...(1 << 53)) else { throw PlayerError(.badRequest, must) }
            return .integer(Int(n))
        case .seconds(let relative):
            guard let d = v.numberValue, d.isFinite else { throw PlayerError(.badRequest, must) }
            guard relative || d >= 0 else { throw PlayerError(.invalidArgument, must) }
            return .time(d, relative: relative)
        case .time(let relative):
            return .at(try readTime(json: v, relative: relative, must: must))
        case .name:
            guard let s = v.stringValue else { throw PlayerError(.badRequest, must) }
            return .text(s)
        case .source:
            guard let s = v.stringValue, !s.isEmpty, s.utf8.count <= Self.maxSourceBytes else { throw PlayerError(.badRequest, must) }
            return .text(s)
        case .list(let element):
            guard let items = v.arrayValue else { throw PlayerError(.badRequest, must) }
            let one = ArgumentSpec(name, element)
            var out: [ArgumentValue] = []
            for item in items { out.append(try one.read(json: item)) }
            return .list(out)
        case .range, .filter, .words:
            // No JSON command takes one (JSON names entries one at a time; its `find`
            // takes tags as members).
            throw PlayerError(.badRequest, must)
        }
    }

    /// A JSON time (``Kind/time(relative:)``). Checked here, once: finite seconds, whole
    /// frames within 2^53, the direction allowed, an absolute one not negative.
    private func readTime(json v: JSON, relative allowed: Bool, must: String) throws(PlayerError) -> TimeArgument {
        let t: TimeArgument
        if let text = v.stringValue {
            // 64 bytes: no time needs more, and the parser is not handed a megabyte.
            guard text.utf8.count <= 64 else { throw PlayerError(.badRequest, must) }
            do { t = try TimeArgument(parsing: text) } catch { throw PlayerError(.badRequest, "\"\(name)\": \(error)") }
            if case .frames(let f) = t.value, f > FrameTime.maxFrames { throw PlayerError(.badRequest, must) }
        } else if let s = v.numberValue {
            guard s.isFinite else { throw PlayerError(.badRequest, must) }
            guard s >= 0 else { throw PlayerError(.invalidArgument, "\"\(name)\" is negative: \(must)") }
            t = TimeArgument(value: .seconds(s))
        } else if case .object = v {
            let relative = v["relative"]?.boolValue ?? false
            if let s = v["seconds"]?.numberValue, s.isFinite {
                guard relative || s >= 0 else { throw PlayerError(.invalidArgument, "\"\(name)\" is negative: \(must)") }
                t = TimeArgument(value: .seconds(abs(s)), direction: relative ? (s < 0 ? -1 : 1) : 0)
            } else if let f = v["frames"]?.numberValue, f == f.rounded(), abs(f) <= Double(FrameTime.maxFrames) {
                guard relative || f >= 0 else { throw PlayerError(.invalidArgument, "\"\(name)\" is negative: \(must)") }
                t = TimeArgument(value: .frames(Int64(abs(f))), direction: relative ? (f < 0 ? -1 : 1) : 0)
            } else {
                throw PlayerError(.badRequest, must)
            }
        } else {
            throw PlayerError(.badRequest, must)
        }
        guard t.direction == 0 || allowed else { throw PlayerError(.badRequest, "\"\(name)\" cannot be relative") }
        return t
    }
}
