#if canImport(Glibc)
import Glibc
#endif

/// A calendar date without a time zone (a schedule's `days = ["2026-12-24"]`, the
/// day a block's occurrence began).
public struct LocalDate: Hashable, Comparable, Sendable, CustomStringConvertible {
    public var year: Int, month: Int, day: Int

    public init?(year: Int, month: Int, day: Int) {
        guard (1...9999).contains(year), (1...12).contains(month), (1...LocalDate.days(in: month, of: year)).contains(day) else { return nil }
        self.year = year; self.month = month; self.day = day
    }

    /// `YYYY-MM-DD`, checked (`2026-02-30` is refused).
    public init?(_ text: String) {
        let parts = text.split(separator: "-", omittingEmptySubsequences: false)
        guard parts.count == 3, parts[0].count == 4, parts[1].count == 2, parts[2].count == 2,
              parts.allSatisfy({ $0.utf8.allSatisfy { (48...57).contains($0) } }),
              let y = Int(parts[0]), let m = Int(parts[1]), let d = Int(parts[2]) else { return nil }
        self.init(year: y, month: m, day: d)
    }

    static func days(in month: Int, of year: Int) -> Int {
        switch month {
        case 2: return (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: return 30
        default: return 31
        }
    }

    /// Days since 1970-01-01 (the proleptic Gregorian calendar: H. Hinnant's
    /// days_from_civil).
    var dayNumber: Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let mp = (month + 9) % 12
        let doy = (153 * mp + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }

    init(dayNumber z0: Int) {
        let z = z0 + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        day = doy - (153 * mp + 2) / 5 + 1
        month = mp < 10 ? mp + 3 : mp - 9
        year = yoe + era * 400 + (month <= 2 ? 1 : 0)
    }

    public func adding(days n: Int) -> LocalDate { LocalDate(dayNumber: dayNumber + n) }

    /// 0 Sunday … 6 Saturday (as `tm_wday`).
    public var weekday: Int { ((dayNumber % 7) + 11) % 7 }

    public var description: String {
        func two(_ v: Int) -> String { v < 10 ? "0\(v)" : "\(v)" }
        return "\(year)-\(two(month))-\(two(day))"
    }

    public static func < (a: LocalDate, b: LocalDate) -> Bool { a.dayNumber < b.dayNumber }
}

/// The wall clock in the process's time zone (`TZ`, or `schedule.timezone`, which
/// playd sets as `TZ` at start), through the C library: glibc's `localtime_r` and
/// `mktime` read the zone's tzdata rules, daylight saving included, and libfaketime
/// moves the clock they read. Foundation's calendar would do the same at the cost of
/// linking ICU (about 30 MB); the daemon does not link Foundation.
public enum WallClock {
    /// The local date and the second of that day (0…86399) at `time` (seconds since
    /// 1970), and the UTC offset in seconds.
    public static func local(_ time: Int) -> (date: LocalDate, second: Int, offset: Int) {
        var t = time_t(time)
        var tm = Glibc.tm()
        guard localtime_r(&t, &tm) != nil,
              let d = LocalDate(year: Int(tm.tm_year) + 1900, month: Int(tm.tm_mon) + 1, day: Int(tm.tm_mday)) else {
            return (LocalDate(dayNumber: time / 86_400), ((time % 86_400) + 86_400) % 86_400, 0)
        }
        return (d, Int(tm.tm_hour) * 3600 + Int(tm.tm_min) * 60 + min(59, Int(tm.tm_sec)), Int(tm.tm_gmtoff))
    }

    /// The instant the wall clock shows `second` (0…86400) of `date`: for a time the
    /// clocks skip (02:30 on the night they go forward) the C library's answer, the
    /// instant an hour on; for one they show twice, the first.
    public static func instant(_ date: LocalDate, _ second: Int) -> Int {
        var tm = Glibc.tm()
        tm.tm_year = Int32(date.year - 1900)
        tm.tm_mon = Int32(date.month - 1)
        tm.tm_mday = Int32(date.day)
        tm.tm_hour = Int32(second / 3600)
        tm.tm_min = Int32(second / 60 % 60)
        tm.tm_sec = Int32(second % 60)
        tm.tm_isdst = -1
        var probe = tm
        let t = Int(mktime(&probe))
        // The repeated hour: mktime may pick the second showing; take the earlier one.
        var earlier = tm
        earlier.tm_isdst = 1
        let e = Int(mktime(&earlier))
        if e < t, local(e).date == date, local(e).second == second { return e }
        return t
    }

    /// Seconds since 1970 now (the real-time clock libfaketime moves).
    public static func now() -> Int {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Int(ts.tv_sec)
    }

    /// `2026-03-29T03:00:00+02:00`.
    public static func iso(_ time: Int) -> String {
        let l = local(time)
        let sign = l.offset < 0 ? "-" : "+"
        let o = abs(l.offset)
        return "\(l.date)T\(clock(l.second))\(sign)\(two(o / 3600)):\(two(o / 60 % 60))"
    }

    /// `HH:MM:SS` of a second of the day (86400: `24:00:00`).
    public static func clock(_ second: Int) -> String {
        "\(two(second / 3600)):\(two(second / 60 % 60)):\(two(second % 60))"
    }

    /// `HH:MM`, or `HH:MM:SS` when the seconds are not 0.
    public static func short(_ second: Int) -> String {
        second % 60 == 0 ? "\(two(second / 3600)):\(two(second / 60 % 60))" : clock(second)
    }

    private static func two(_ v: Int) -> String { v < 10 ? "0\(v)" : "\(v)" }

    /// Whether `name` is a time zone of the system's tzdata (`Europe/Berlin`): a
    /// relative path of plain parts under `$TZDIR` or /usr/share/zoneinfo, naming a
    /// regular file that starts with the TZif magic. glibc takes any other TZ for UTC
    /// without a word; the config refuses it instead.
    public static func isZone(_ name: String) -> Bool {
        guard !name.isEmpty, name.utf8.count <= 255, !name.hasPrefix("/"),
              name.utf8.allSatisfy({ b in (65...90).contains(b) || (97...122).contains(b) || (48...57).contains(b)
                                         || b == UInt8(ascii: "/") || b == UInt8(ascii: "_") || b == UInt8(ascii: "-") || b == UInt8(ascii: "+") }),
              !name.split(separator: "/", omittingEmptySubsequences: false).contains(where: { $0.isEmpty || $0 == "." || $0 == ".." }) else {
            return false
        }
        let dir = Environment.get("TZDIR") ?? "/usr/share/zoneinfo"
        let fd = open(dir + "/" + name, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG else { return false }
        var magic = [UInt8](repeating: 0, count: 4)
        return read(fd, &magic, 4) == 4 && magic == Array("TZif".utf8)
    }
}
