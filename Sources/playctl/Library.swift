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
    @Argument(help: "A folder or file under the music roots (default: all of them).") var path: String?
    @Flag(name: .long, help: "Wait until the scan ends, then print the totals.") var wait = false
    func run() throws {
        var fields: [(String, JSON)] = []
        if let p = path { fields.append(("path", .string(absolute(p)))) }
        let r = try connection.send("update", fields)
        let job = Int(r["job"]?.numberValue ?? 0)
        if !connection.json { print("updating the library (job \(job))") }
        guard wait else { return }
        while true {
            usleep(200_000)
            let s = try connection.send("status")
            let lib = s["library"]
            if lib?["updating"]?.boolValue != true {
                if !connection.json { print("done: \(Int(lib?["songs"]?.numberValue ?? 0)) songs in the library") }
                return
            }
        }
    }
}

/// One song per line: `Artist — Album — 03 Title (3:45)  /path`.
enum SongView {
    static func render(_ s: JSON) -> String {
        let artist = s["artist"]?.stringValue ?? "?"
        let album = s["album"]?.stringValue ?? "?"
        var title = s["title"]?.stringValue ?? String((s["file"]?.stringValue ?? "").split(separator: "/").last ?? "")
        if let t = s["track"]?.numberValue { title = (t < 10 ? "0" : "") + "\(Int(t)) " + title }
        var line = "\(artist) — \(album) — \(title)"
        if let d = s["duration"]?.numberValue { line += " (\(formatClock(d)))" }
        return line + "  " + (s["file"]?.stringValue ?? "")
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
        if !connection.json { for v in r[what.rawValue]?.arrayValue ?? [] { print(v.stringValue ?? "") } }
    }
}

struct Ls: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "List a library folder: its folders, then its songs.")
    @OptionGroup var connection: Connection
    @Argument(help: "A folder under the music roots (default: the roots).") var path: String?
    func run() throws {
        var fields: [(String, JSON)] = []
        if let p = path { fields.append(("path", .string(p))) }  // relative: to the first music root
        let r = try connection.send("ls", fields)
        guard !connection.json else { return }
        for d in r["directories"]?.arrayValue ?? [] { print((d.stringValue ?? "") + "/") }
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
            if !connection.json { for f in r["files"]?.arrayValue ?? [] { print(f.stringValue ?? "") } }
        } else {
            let r = try connection.send("playlists", [])
            if !connection.json { for p in r["playlists"]?.arrayValue ?? [] { print(p["name"]?.stringValue ?? "") } }
        }
    }
}
