import ArgumentParser
import PlaydProtocol
#if canImport(Glibc)
import Glibc
#endif

// The music library: update, search, find, list, ls (see docs/library.md).

struct Update: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Rescan the music roots (or one folder under them) in the background.")
    @OptionGroup var connection: Connection
    @Argument(help: "A folder or file under the music roots (default: all of them).", completion: .file()) var path: String?
    @Flag(name: .long, help: "Wait until the scan ends, then print the totals.") var wait = false
    func run() throws {
        var fields: [(String, JSON)] = []
        if let p = path { fields.append(("path", .string(absoluteIfPresent(p)))) }
        let r = try connection.send("update", fields)
        let job = Int(r["job"]?.numberValue ?? 0)
        if !connection.json { print("updating the library (job \(job))") }
        guard wait else { return }
        while true {
            usleep(200_000)
            let s = try connection.send("status")
            let lib = s["library"]
            if lib?["updating"]?.boolValue != true {
                if !connection.json {
                    print("done: \(Int(lib?["songs"]?.numberValue ?? 0)) songs in the library")
                    if let l = lib?["loudness"], l["measuring"]?.boolValue == true {
                        print("loudness: \(Int(l["measured"]?.numberValue ?? 0)) of \(Int(l["songs"]?.numberValue ?? 0)) songs measured; measuring the rest in the background")
                    }
                }
                return
            }
        }
    }
}

/// One song per line: `Artist — Album — 03 Title (3:45)  /path`.
enum SongView {
    static func render(_ s: JSON) -> String {
        let artist = s["artist"]?.shown ?? "?"
        let album = s["album"]?.shown ?? "?"
        var title = s["title"]?.shown ?? String((s["file"]?.shown ?? "").split(separator: "/").last ?? "")
        if let t = s["track"]?.numberValue { title = (t < 10 ? "0" : "") + "\(Int(t)) " + title }
        var line = "\(artist) — \(album) — \(title)"
        if let d = s["duration"]?.numberValue { line += " (\(formatClock(d)))" }
        return line + "  " + (s["file"]?.shown ?? "")
    }

    static func printSongs(_ r: JSON, _ connection: Connection, added: Bool) {
        guard !connection.json else { return }
        for s in r["songs"]?.arrayValue ?? [] { print(render(s)) }
        if added { print("added \(r["added"]?.arrayValue?.count ?? 0), queue length \(Int(r["length"]?.numberValue ?? 0))") }
    }
}

struct Search: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Find songs with QUERY in any tag or the path (case-insensitive).")
    @OptionGroup var connection: Connection
    @Argument(help: "Text to look for.") var query: String
    @Flag(name: .long, help: "Add what is found to the queue.") var add = false
    @Option(name: .long, help: "At most this many songs (default 10000).") var limit: Int?
    func run() throws {
        var fields: [(String, JSON)] = [("query", .string(query)), ("add", .bool(add))]
        if let l = limit { fields.append(("limit", .int(l))) }
        SongView.printSongs(try connection.send("search", fields), connection, added: add)
    }
}

struct Find: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Find songs by field: artist=…, album=…, title=…, albumartist=…, genre=…, date=…, file=…",
        discussion: "Exact match; a value ending in * matches as a prefix (artist=Beat*). Several fields must all match.")
    @OptionGroup var connection: Connection
    @Argument(help: "FIELD=VALUE, one or more.") var filters: [String]
    @Flag(name: .long, help: "Add what is found to the queue.") var add = false
    func run() throws {
        var fields: [(String, JSON)] = [("add", .bool(add))]
        for f in filters {
            guard let eq = f.firstIndex(of: "=") else { throw ValidationError("'\(f)' is not FIELD=VALUE") }
            fields.append((String(f[..<eq]).lowercased(), .string(String(f[f.index(after: eq)...]))))
        }
        SongView.printSongs(try connection.send("find", fields), connection, added: add)
    }
}

struct List: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "List the artists or albums in the library.")
    enum What: String, ExpressibleByArgument, CaseIterable { case artists, albums, genres }
    @OptionGroup var connection: Connection
    @Argument(help: "artists, albums or genres.") var what: What
    @Option(name: .long, help: "Only this artist's albums.") var artist: String?
    func run() throws {
        var fields: [(String, JSON)] = [("what", .string(what.rawValue))]
        if let a = artist { fields.append(("artist", .string(a))) }
        let r = try connection.send("list", fields)
        if !connection.json { for v in r[what.rawValue]?.arrayValue ?? [] { print(v.shown ?? "") } }
    }
}

struct Ls: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "List a library folder: its folders, then its songs.")
    @OptionGroup var connection: Connection
    @Argument(help: "A folder under the music roots (default: the roots).", completion: .directory) var path: String?
    func run() throws {
        var fields: [(String, JSON)] = []
        if let p = path { fields.append(("path", .string(p))) }  // relative: to the first music root
        let r = try connection.send("ls", fields)
        guard !connection.json else { return }
        for d in r["directories"]?.arrayValue ?? [] { print((d.shown ?? "") + "/") }
        for s in r["songs"]?.arrayValue ?? [] { print(SongView.render(s)) }
    }
}

struct Save: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Save the queue as a stored playlist NAME (MPD's `save`; an existing one is not replaced).")
    @OptionGroup var connection: Connection
    @Argument(help: "The playlist's name (no '/').") var name: String
    func run() throws {
        _ = try connection.send("save", [("name", .string(name))])
        if !connection.json { print("saved \(name)") }
    }
}

struct Load: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Add the stored playlist NAME to the end of the queue.")
    @OptionGroup var connection: Connection
    @Argument(help: "The playlist's name.") var name: String
    func run() throws {
        let r = try connection.send("load", [("name", .string(name))])
        if !connection.json { print("added \(Int(r["added"]?.numberValue ?? 0)) entries (queue: \(Int(r["length"]?.numberValue ?? 0)))") }
    }
}

struct Playlists: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List the stored playlists, or with NAME the files in one.")
    @OptionGroup var connection: Connection
    @Argument(help: "A playlist to list the files of.") var name: String?
    func run() throws {
        if let n = name {
            let r = try connection.send("playlist", [("name", .string(n))])
            if !connection.json { for f in r["files"]?.arrayValue ?? [] { print(f.shown ?? "") } }
        } else {
            let r = try connection.send("playlists", [])
            if !connection.json { for p in r["playlists"]?.arrayValue ?? [] { print(p["name"]?.shown ?? "") } }
        }
    }
}

struct Current: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print what plays, one line, for status bars (as `mpc current`; nothing when stopped).",
        discussion: """
        FORMAT (as mpc's): %artist%, %title%, %album%, %albumartist%, %track%, %disc%, %date%, \
        %genre%, %name% (a radio's station), %file%, %time% (length), %position% (1-based), %id%. \
        [ … ] is left out when a field in it is empty; a|b takes the first that prints something; \
        # escapes the next character. \
        The default is mpc's: [%name%: &[%artist% - ]%title%]|%name%|[%artist% - ]%title%|%file%
        """)
    @OptionGroup var connection: Connection
    @Option(name: [.short, .customLong("format")], help: "What to print (see below).")
    var format = "[%name%: &[%artist% - ]%title%]|%name%|[%artist% - ]%title%|%file%"
    func run() throws {
        let s = try connection.send("status")
        guard !connection.json, let file = s["file"]?.shown else { return }
        var fields: [String: String] = ["file": file]
        for key in ["artist", "title", "album", "genre", "date"] { fields[key] = s[key]?.shown }
        fields["albumartist"] = s["album_artist"]?.shown
        for key in ["track", "disc"] { if let n = s[key]?.numberValue { fields[key] = String(Int(n)) } }
        if let d = s["duration"]?.numberValue { fields["time"] = formatClock(d) }
        fields["name"] = s["stream"]?["station"]?.shown
        if let i = s["queue"]?["current"]?.numberValue { fields["position"] = String(Int(i) + 1) }
        if let id = s["queue"]?["current_id"]?.numberValue { fields["id"] = String(Int(id)) }
        print(MPCFormat.render(format, fields) ?? "")
    }
}

/// mpc's song format: `%field%`; `[ … ]` is left out when a field in it is empty;
/// `a|b` is the first alternative that prints something with every field present;
/// `&` joins (a group with `&` needs both sides); `#` escapes the next character.
enum MPCFormat {
    static func render(_ format: String, _ fields: [String: String]) -> String? {
        var chars = Array(format)[...]
        return alternatives(&chars, fields)
    }

    /// `a|b|…` up to a closing `]` (not consumed) or the end: the first alternative
    /// with every field present and something printed; nil when there is none.
    private static func alternatives(_ s: inout ArraySlice<Character>, _ f: [String: String]) -> String? {
        var chosen: String?
        while true {
            let r = sequence(&s, f)
            if chosen == nil, let r, !r.isEmpty { chosen = r }
            guard s.first == "|" else { break }
            s = s.dropFirst()
        }
        return chosen
    }

    /// Text, fields and groups up to `|`, `]` or the end; nil when a field is empty.
    private static func sequence(_ s: inout ArraySlice<Character>, _ f: [String: String]) -> String? {
        var out = ""
        var missing = false
        while let c = s.first, c != "|", c != "]" {
            s = s.dropFirst()
            switch c {
            case "%":
                // A `%` without a closing one is itself (as mpc).
                guard let close = s.firstIndex(of: "%") else { out.append(c); continue }
                let name = String(s[..<close])
                s = s[s.index(after: close)...]
                if let v = f[name], !v.isEmpty { out += v } else { missing = true }
            case "[":
                let inner = alternatives(&s, f)
                if s.first == "]" { s = s.dropFirst() }
                out += inner ?? ""
            case "&":
                continue
            case "#":
                if let d = s.first { out.append(d); s = s.dropFirst() }
            default:
                out.append(c)
            }
        }
        return missing ? nil : out
    }
}
