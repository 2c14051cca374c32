import ArgumentParser
import PlaydProtocol

struct ScheduleCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "schedule",
        abstract: "Show the schedule: the block now, what changes next and when, whether a client's override holds.",
        discussion: "With --day, a day's plan (today, or DATE as YYYY-MM-DD, or tomorrow): each stretch with its real length, daylight-saving changes included, and the announcements.")
    @OptionGroup var connection: Connection
    @Flag(name: .long, help: "Print a day's plan.") var day = false
    @Argument(help: "The day for --day: YYYY-MM-DD, today or tomorrow.") var date: String?

    func validate() throws {
        if date != nil && !day { throw ValidationError("DATE goes with --day") }
    }

    func run() throws {
        let r = try connection.send("schedule", day ? [("day", .string(date ?? "today"))] : [])
        if connection.json { return }
        guard r["configured"]?.boolValue == true else {
            print("no schedule (the config has no [schedule] blocks, default or announcements)")
            return
        }
        if day, let d = r["day"] {
            print("\(d["date"]?.shown ?? "?") (\(r["timezone"]?.shown ?? "?"))")
            for b in d["blocks"]?.arrayValue ?? [] {
                let span = "\(b["from"]?.shown ?? "?")–\(b["to"]?.shown ?? "?")"
                let seconds = Int(b["seconds"]?.numberValue ?? 0)
                print("\(OutputView.pad(span, 13)) \(OutputView.pad(b["block"]?.shown ?? "?", 16)) \(OutputView.pad(b["programme"]?.shown ?? "?", 32)) \(Self.duration(seconds))")
            }
            let calls = d["announcements"]?.arrayValue ?? []
            if !calls.isEmpty {
                print("announcements:")
                for a in calls {
                    let name = a["name"]?.shown ?? ""
                    print("  \(a["at"]?.shown ?? "?")  \(name.isEmpty ? "" : name + "  ")\(a["source"]?.shown ?? "")")
                }
            }
            return
        }
        var now = "\(r["block"]?.shown ?? "none") (\(r["programme"]?.shown ?? "silence"))"
        if let since = r["since"]?.shown { now += " since \(since)" }
        print("now:       \(now)")
        let held = r["override"]?.boolValue == true
        print("override:  \(held ? "a client's command holds until the next block" : "none") (\(r["override_mode"]?.shown ?? "?"))")
        if let n = r["next"], let at = n["at"]?.shown {
            let inSeconds = Int(n["in_seconds"]?.numberValue ?? 0)
            print("next:      \(n["block"]?.shown ?? "?") (\(n["programme"]?.shown ?? "?")) at \(at), in \(Self.duration(inSeconds))")
        } else {
            print("next:      nothing changes in the next 8 days")
        }
        print("time zone: \(r["timezone"]?.shown ?? "?"), clock \(r["now"]?.shown ?? "?")")
    }

    /// `2:00:00`, `45:00`.
    static func duration(_ s: Int) -> String {
        let h = s / 3600, m = s / 60 % 60, sec = s % 60
        func two(_ v: Int) -> String { v < 10 ? "0\(v)" : "\(v)" }
        return h > 0 ? "\(h):\(two(m)):\(two(sec))" : "\(m):\(two(sec))"
    }
}
