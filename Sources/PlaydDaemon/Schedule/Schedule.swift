/// The day's programme (`[schedule]` in the config, issue 43): blocks of music with a
/// start and an end on given days, a default for the hours no block covers, and
/// announcements at set times. Parsed and range-checked here; run by
/// Player+Schedule.swift. What is chosen where the issue is silent is written in
/// docs/schedule.md.
public struct Schedule: Sendable, Equatable {
    /// `schedule.timezone`: a tzdata name ("": the system's, or `TZ`). Restart only.
    public var timezone = ""
    /// `schedule.override`: what a client's play, stop or volume during a block does.
    public var override = Override.untilNextBlock
    /// `schedule.fade`: seconds the music fades out at a boundary when the new
    /// programme sets no cross-fade.
    public var fadeSeconds = 3.0
    public var blocks: [Block] = []
    /// `[schedule.default]`: the hours no block covers (nil: silence).
    public var fallback: Programme?
    public var announcements: [Announce] = []

    public init() {}

    public var isEmpty: Bool { blocks.isEmpty && fallback == nil && announcements.isEmpty }

    public enum Override: String, Sendable, CaseIterable {
        /// The client's command holds until the next boundary; the schedule then goes on.
        case untilNextBlock = "until_next_block"
        /// The schedule holds: within a second it plays its programme again, at its volume.
        case ignore
    }

    /// What plays: a source and the settings that come with it.
    public struct Programme: Sendable, Equatable {
        public enum Source: Sendable, Equatable {
            /// A stored playlist, by name.
            case playlist(String)
            /// A folder (under the music roots).
            case folder(String)
            /// An http(s) stream.
            case url(String)
            /// Nothing: the music stops.
            case silence
        }
        public var source: Source
        /// 0…100 (held to `volume.max`); nil: left as it is.
        public var volume: Int?
        /// The queue in random order (MPD's `random`); nil: left as it is.
        public var shuffle: Bool?
        /// MPD's cross-fade, whole seconds (0…30); nil: left as it is. Also the length
        /// of the fade into this programme at a boundary.
        public var crossfade: Int?

        public var sourceText: String {
            switch source {
            case .playlist(let n): return "playlist \(n)"
            case .folder(let f): return "folder \(f)"
            case .url(let u): return "url \(u)"
            case .silence: return "silence"
            }
        }
    }

    /// Weekdays and dates.
    public struct Days: Sendable, Equatable {
        /// 0 Sunday … 6 Saturday.
        public var weekdays: Set<Int> = []
        public var dates: Set<LocalDate> = []
        public static let every = Days(weekdays: Set(0...6))
        public func contains(_ d: LocalDate) -> Bool { dates.contains(d) || weekdays.contains(d.weekday) }
        public var isDates: Bool { weekdays.isEmpty && !dates.isEmpty }
        static let names = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"]
        static let longNames = ["sunday", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday"]
        public var text: [String] {
            (weekdays.count == 7 ? ["daily"] : [1, 2, 3, 4, 5, 6, 0].filter(weekdays.contains).map { Self.names[$0] })
                + dates.sorted().map(\.description)
        }
    }

    /// `[[schedule.block]]`: a programme from `from` to `to` (seconds of the day; `to`
    /// at or before `from` ends on the next day) on `days` (the days it starts on).
    public struct Block: Sendable, Equatable {
        public var name: String
        public var days: Days
        public var from: Int
        public var to: Int
        public var programme: Programme
        public var crossesMidnight: Bool { to <= from }
    }

    /// `[[schedule.announce]]`: a clip at a time of the given days.
    public struct Announce: Sendable, Equatable {
        public var name: String
        public var days: Days
        public var at: Int
        public var source: String
        public var chime: String?
        public var pause: Bool
        public var duckDB: Double
        public var gainDB: Double
    }

    static let maxBlocks = 256
    static let maxAnnouncements = 256
    static let maxDays = 400
}

// MARK: - Reading the config

extension Schedule {
    typealias Error = DaemonConfig.Error

    /// Reads the `schedule` leaves of the config (`schedule.KEY`, `schedule.default.KEY`,
    /// and the arrays of tables `schedule.block` and `schedule.announce`).
    static func parse(_ leaves: [TOML.Leaf], path: String) throws(Error) -> Schedule {
        var s = Schedule()
        var fallback: [(key: String, value: TOML.Value)] = []
        var fallbackLine = 0
        for e in leaves {
            func fail(_ m: String) -> Error { Error(message: "\(path): line \(e.line): \(e.path.map(TOML.showKey).joined(separator: ".")): \(m)") }
            let rest = Array(e.path.dropFirst())
            switch rest {
            case ["timezone"]:
                guard case .string(let z) = e.value else { throw fail("expected a string, got \(e.value.typeName)") }
                guard z.isEmpty || WallClock.isZone(z) else { throw fail("'\(z)' is not a time zone of this system's tzdata (such as \"Europe/Berlin\")") }
                s.timezone = z
            case ["override"]:
                guard case .string(let w) = e.value, let o = Override(rawValue: w) else {
                    throw fail("must be one of \(Override.allCases.map(\.rawValue).joined(separator: ", "))")
                }
                s.override = o
            case ["fade"]:
                let v: Double
                switch e.value {
                case .integer(let i): v = Double(i)
                case .float(let d): v = d
                default: throw fail("expected a number of seconds, got \(e.value.typeName)")
                }
                guard v.isFinite, (0.05...60).contains(v) else { throw fail("\(v) s is outside 0.05…60") }
                s.fadeSeconds = v
            case ["block"], ["announce"]:
                guard case .array(let items) = e.value else { throw fail("expected [[\(e.path.joined(separator: "."))]] tables, got \(e.value.typeName)") }
                for (n, item) in items.enumerated() {
                    guard case .table(let kv) = item else { throw fail("expected a table, got \(item.typeName)") }
                    let at = "\(path): line \(e.line): schedule.\(rest[0])[\(n + 1)]"
                    if rest[0] == "block" {
                        guard s.blocks.count < maxBlocks else { throw fail("at most \(maxBlocks) blocks") }
                        s.blocks.append(try block(kv, at: at))
                    } else {
                        guard s.announcements.count < maxAnnouncements else { throw fail("at most \(maxAnnouncements) announcements") }
                        s.announcements.append(try announce(kv, at: at))
                    }
                }
            default:
                if rest.count == 2 && rest[0] == "default" {
                    fallback.append((rest[1], e.value))
                    fallbackLine = e.line
                } else {
                    throw fail("unknown key (schedule has timezone, override, fade, [schedule.default], [[schedule.block]] and [[schedule.announce]])")
                }
            }
        }
        if !fallback.isEmpty {
            var f = Fields(fallback, at: "\(path): line \(fallbackLine): schedule.default")
            s.fallback = try f.programme()
            try f.done()
        }
        return s
    }

    private static func block(_ kv: [(key: String, value: TOML.Value)], at: String) throws(Error) -> Block {
        var f = Fields(kv, at: at)
        let name = try f.string("name") ?? ""
        let days = try f.days()
        guard let from = try f.time("from"), let to = try f.time("to") else { throw f.fail("needs from and to (\"08:00\")") }
        guard from < 86_400 else { throw f.fail("from: 24:00 is the end of a day; a block starts at 00:00") }
        guard from != to % 86_400 || (from == 0 && to == 86_400) else { throw f.fail("from and to are the same time") }
        let programme = try f.programme()
        try f.done()
        return Block(name: name, days: days, from: from, to: to, programme: programme)
    }

    private static func announce(_ kv: [(key: String, value: TOML.Value)], at: String) throws(Error) -> Announce {
        var f = Fields(kv, at: at)
        let name = try f.string("name") ?? ""
        let days = try f.days()
        guard let time = try f.time("at"), time < 86_400 else { throw f.fail("needs at (\"19:55\")") }
        let path = try f.string("path"), url = try f.string("url")
        guard (path == nil) != (url == nil), let source = path ?? url, !source.isEmpty else { throw f.fail("needs one of path or url") }
        let chime = try f.string("chime")
        let mode = try f.string("mode") ?? "duck"
        guard mode == "duck" || mode == "pause" else { throw f.fail("mode: '\(mode)' must be duck or pause") }
        let duck = try f.number("duck_db", -60...0) ?? -18
        let gain = try f.number("gain_db", -30...12) ?? 0
        try f.done()
        return Announce(name: name, days: days, at: time, source: source, chime: chime, pause: mode == "pause", duckDB: duck, gainDB: gain)
    }

    /// The keys of one table, taken one by one; ``done()`` refuses any left over.
    struct Fields {
        var kv: [(key: String, value: TOML.Value)]
        let at: String
        init(_ kv: [(key: String, value: TOML.Value)], at: String) { self.kv = kv; self.at = at }

        func fail(_ m: String) -> Error { Error(message: "\(at): \(m)") }

        mutating func take(_ key: String) -> TOML.Value? {
            guard let i = kv.firstIndex(where: { $0.key == key }) else { return nil }
            return kv.remove(at: i).value
        }

        func done() throws(Error) {
            if let k = kv.first?.key { throw fail("unknown key '\(k)'") }
        }

        mutating func string(_ key: String) throws(Error) -> String? {
            guard let v = take(key) else { return nil }
            guard case .string(let s) = v else { throw fail("\(key): expected a string, got \(v.typeName)") }
            guard s.utf8.count <= 4096 else { throw fail("\(key): at most 4,096 bytes") }
            return s
        }

        mutating func number(_ key: String, _ range: ClosedRange<Double>) throws(Error) -> Double? {
            guard let v = take(key) else { return nil }
            let d: Double
            switch v {
            case .integer(let i): d = Double(i)
            case .float(let x): d = x
            default: throw fail("\(key): expected a number, got \(v.typeName)")
            }
            guard d.isFinite, range.contains(d) else { throw fail("\(key): \(d) is outside \(range.lowerBound)…\(range.upperBound)") }
            return d
        }

        mutating func int(_ key: String, _ range: ClosedRange<Int>) throws(Error) -> Int? {
            guard let v = take(key) else { return nil }
            guard case .integer(let i) = v else { throw fail("\(key): expected an integer, got \(v.typeName)") }
            guard range.contains(i) else { throw fail("\(key): \(i) is outside \(range.lowerBound)…\(range.upperBound)") }
            return i
        }

        mutating func bool(_ key: String) throws(Error) -> Bool? {
            guard let v = take(key) else { return nil }
            guard case .bool(let b) = v else { throw fail("\(key): expected true or false, got \(v.typeName)") }
            return b
        }

        /// `"08:00"`, `"08:00:30"`, `"24:00"` (an end), or a TOML local time `08:00:00`;
        /// seconds of the day.
        mutating func time(_ key: String) throws(Error) -> Int? {
            guard let v = take(key) else { return nil }
            let text: String
            switch v {
            case .string(let s): text = s
            case .dateTime(.localTime, let s): text = s
            default: throw fail("\(key): expected a time such as \"08:00\", got \(v.typeName)")
            }
            guard let t = Schedule.secondOfDay(text) else { throw fail("\(key): '\(text)' is not a time from 00:00 to 24:00 (\"HH:MM\" or \"HH:MM:SS\")") }
            return t
        }

        /// `days`: weekdays (`mon`, `monday`), ranges (`mon-fri`), `daily`, `weekdays`,
        /// `weekends`, dates (`"2026-12-24"` or a TOML date); a string or an array of
        /// them. Missing: every day.
        mutating func days() throws(Error) -> Days {
            guard let v = take("days") else { return .every }
            var words: [TOML.Value]
            switch v {
            case .array(let a): words = a
            default: words = [v]
            }
            guard !words.isEmpty, words.count <= Schedule.maxDays else { throw fail("days: 1 to \(Schedule.maxDays) entries") }
            var d = Days()
            for w in words {
                let text: String
                switch w {
                case .string(let s): text = s.lowercased()
                case .dateTime(.localDate, let s): text = s
                default: throw fail("days: expected day names or dates, found a \(w.typeName)")
                }
                if let date = LocalDate(text) { d.dates.insert(date); continue }
                guard let set = Schedule.weekdays(text) else {
                    throw fail("days: '\(text)' is not a day (mon…sun, mon-fri, daily, weekdays, weekends) or a date (YYYY-MM-DD)")
                }
                d.weekdays.formUnion(set)
            }
            return d
        }

        /// The programme keys: one of playlist, folder, url or `silence = true`, and
        /// volume, shuffle, crossfade.
        mutating func programme() throws(Error) -> Programme {
            let playlist = try string("playlist"), folder = try string("folder"), url = try string("url")
            let silence = try bool("silence") ?? false
            let given = [playlist != nil, folder != nil, url != nil, silence].filter { $0 }.count
            guard given == 1 else { throw fail("needs one of playlist, folder, url or silence = true") }
            let source: Programme.Source
            if let p = playlist {
                guard !p.isEmpty else { throw fail("playlist: empty name") }
                source = .playlist(p)
            } else if let f = folder {
                guard !f.isEmpty else { throw fail("folder: empty path") }
                source = .folder(f)
            } else if let u = url {
                guard u.hasPrefix("http://") || u.hasPrefix("https://") else { throw fail("url: '\(u)' is not an http(s) URL") }
                source = .url(u)
            } else {
                source = .silence
            }
            return Programme(source: source, volume: try int("volume", 0...100), shuffle: try bool("shuffle"),
                             crossfade: try int("crossfade", 0...30))
        }
    }

    static func weekdays(_ word: String) -> Set<Int>? {
        switch word {
        case "daily", "every day", "all": return Set(0...6)
        case "weekdays": return Set(1...5)
        case "weekends", "weekend": return [0, 6]
        default: break
        }
        func day(_ w: Substring) -> Int? {
            Days.names.firstIndex(of: String(w)) ?? Days.longNames.firstIndex(of: String(w))
        }
        if let one = day(Substring(word)) { return [one] }
        let ends = word.split(separator: "-")
        guard ends.count == 2, let a = day(ends[0]), let b = day(ends[1]) else { return nil }
        // Monday first: "fri-mon" is Friday to Monday, over the weekend.
        var out: Set<Int> = []
        var i = a
        while true {
            out.insert(i)
            if i == b { break }
            i = (i + 1) % 7
        }
        return out
    }

    /// Seconds of the day of `HH:MM[:SS]` (24:00 allowed, as an end).
    static func secondOfDay(_ text: String) -> Int? {
        let parts = text.split(separator: ":", omittingEmptySubsequences: false)
        guard (2...3).contains(parts.count), parts.allSatisfy({ $0.count == 2 && $0.utf8.allSatisfy { (48...57).contains($0) } }) else { return nil }
        let nums = parts.compactMap { Int($0) }
        let (h, m, s) = (nums[0], nums[1], nums.count > 2 ? nums[2] : 0)
        guard h <= 24, m <= 59, s <= 59, h < 24 || (m == 0 && s == 0) else { return nil }
        return h * 3600 + m * 60 + s
    }
}

// MARK: - What is on when

extension Schedule {
    /// One occurrence of a block (its index and the day it began), or the default
    /// programme (`block` nil).
    public struct Occurrence: Hashable, Sendable, CustomStringConvertible {
        public var block: Int?
        public var date: LocalDate?
        public static let fallback = Occurrence(block: nil, date: nil)
        public var description: String { block.map { "\($0)@\(date!)" } ?? "default" }
        init(block: Int?, date: LocalDate?) { self.block = block; self.date = date }
        /// Read back from the state file (`3@2026-11-27`, `default`).
        init?(text: String, blocks: Int) {
            if text == "default" { self = .fallback; return }
            let parts = text.split(separator: "@")
            guard parts.count == 2, let i = Int(parts[0]), (0..<blocks).contains(i), let d = LocalDate(String(parts[1])) else { return nil }
            self.init(block: i, date: d)
        }
    }

    /// The block on at `second` of `date` (wall clock): dated blocks before weekday
    /// ones, and among those the first in the file; else the default.
    public func occurrence(_ date: LocalDate, _ second: Int) -> Occurrence {
        var weekly: Occurrence?
        for (i, b) in blocks.enumerated() {
            let on: LocalDate?
            if !b.crossesMidnight {
                on = b.days.contains(date) && second >= b.from && second < b.to ? date : nil
            } else if second >= b.from && b.days.contains(date) {
                on = date
            } else if second < b.to {
                let yesterday = date.adding(days: -1)
                on = b.days.contains(yesterday) ? yesterday : nil
            } else {
                on = nil
            }
            guard let start = on else { continue }
            let o = Occurrence(block: i, date: start)
            if b.days.dates.contains(start) { return o }
            if weekly == nil { weekly = o }
        }
        return weekly ?? .fallback
    }

    public func programme(_ o: Occurrence) -> Programme? {
        guard let i = o.block else { return fallback }
        return blocks[i].programme
    }

    public func name(_ o: Occurrence) -> String {
        guard let i = o.block else { return fallback == nil ? "(no block: silence)" : "default" }
        return blocks[i].name.isEmpty ? "block \(i + 1)" : blocks[i].name
    }

    /// The wall-clock seconds of `date` where something may change.
    func boundaries(_ date: LocalDate) -> [Int] {
        var s: Set<Int> = [0]
        for b in blocks { s.insert(b.from); s.insert(b.to % 86_400) }
        return s.sorted()
    }

    /// One stretch of a day's plan.
    public struct Stretch: Sendable {
        public var from: Int, to: Int
        public var occurrence: Occurrence
        /// Real seconds it lasts (the wall clock's hours, with the clocks' change).
        public var seconds: Int
    }

    /// `date`'s plan: what is on from 00:00 to 24:00, stretch by stretch.
    public func plan(_ date: LocalDate) -> [Stretch] {
        let cuts = boundaries(date) + [86_400]
        var out: [Stretch] = []
        for (a, b) in zip(cuts, cuts.dropFirst()) where a < b {
            let o = occurrence(date, a)
            if let last = out.last, last.occurrence == o {
                out[out.count - 1].to = b
            } else {
                out.append(Stretch(from: a, to: b, occurrence: o, seconds: 0))
            }
        }
        for i in out.indices {
            let end = out[i].to == 86_400 ? WallClock.instant(date.adding(days: 1), 0) : WallClock.instant(date, out[i].to)
            out[i].seconds = end - WallClock.instant(date, out[i].from)
        }
        return out
    }

    /// The next change after `time`: when, and what is on from then; nil when nothing
    /// changes within 8 days.
    public func nextChange(after time: Int) -> (at: Int, occurrence: Occurrence)? {
        let now = WallClock.local(time)
        let current = occurrence(now.date, now.second)
        for day in 0...8 {
            let d = now.date.adding(days: day)
            for cut in boundaries(d) where day > 0 || cut > now.second {
                let o = occurrence(d, cut)
                if o != current {
                    let at = WallClock.instant(d, cut)
                    if at > time { return (at, o) }
                }
            }
        }
        return nil
    }

    /// The announcements due in the wall-clock stretch after `from` up to `to`
    /// (seconds of the day, on `date`), in time order.
    func announcementsDue(_ date: LocalDate, after from: Int, upTo to: Int) -> [Announce] {
        announcements.filter { $0.days.contains(date) && $0.at > from && $0.at <= to }.sorted { $0.at < $1.at }
    }
}
