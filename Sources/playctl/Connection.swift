import ArgumentParser
import CoreStream
import PlaydProtocol
#if canImport(Glibc)
import Glibc
#endif

// The connection to playd: where its socket is, sending a request, failing with a
// message and an exit status; and the argument helpers every subcommand shares.

struct Connection: ParsableArguments {
    @Option(name: .long, help: "Control socket path.", completion: .file())
    var socket: String?

    @Flag(name: .long, help: "Print the protocol's JSON.")
    var json = false

    /// Where playd is looked for: `--socket`, else `$PLAYD_SOCKET`, else the user's own
    /// daemon (`$XDG_RUNTIME_DIR/playd/control.sock`), else the system service's
    /// (`/run/playd/control.sock`): the first of the last two that exists.
    var candidates: [String] {
        if let s = socket { return [s] }
        if let e = getenv("PLAYD_SOCKET"), e.pointee != 0 { return [String(cString: e)] }
        var list: [String] = []
        if let x = getenv("XDG_RUNTIME_DIR"), x.pointee != 0 { list.append(String(cString: x) + "/playd/control.sock") }
        return list + ["/run/playd/control.sock"]
    }

    var path: String {
        let list = candidates
        return list.first { p in
            var st = stat()
            return PathBytes.stat(p, &st) == 0 && (st.st_mode & S_IFMT) == S_IFSOCK
        } ?? list[0]
    }

    func connect() throws -> LineClient {
        let list = candidates
        do {
            return try LineClient(path: path)
        } catch .notListening(let p) {
            let tried = list.count > 1 ? " (looked for \(list.joined(separator: " and ")))" : ""
            fail("no playd listening on \(p)\(tried); start it with `playd`, `systemctl --user start playd` "
                 + "or `systemctl start playd`, or name its socket with --socket or $PLAYD_SOCKET", code: 3)
        } catch .permissionDenied(let p) {
            var st = stat()
            let group = PathBytes.stat(p, &st) == 0 ? getgrgid(st.st_gid).map { String(cString: $0.pointee.gr_name) } : nil
            if let g = group {
                fail("permission denied on \(p): it belongs to the group '\(g)'; join it (sudo usermod -aG \(g) $USER) "
                     + "and log in again", code: 4)
            }
            fail("permission denied on \(p): ask to be added to the socket's group", code: 4)
        } catch {
            fail("\(error)", code: 3)
        }
    }

    /// Sends `cmd` with `fields`; prints an error reply and exits non-zero on failure.
    @discardableResult
    func send(_ cmd: String, _ fields: [(String, JSON)] = []) throws -> JSON {
        let client = try connect()
        guard let reply = client.request(.object([("id", .int(1)), ("cmd", .string(cmd))] + fields)) else {
            fail("playd closed the connection without replying", code: 5)
        }
        if reply["ok"]?.boolValue != true {
            if json { print(reply.text) }
            let code = reply["error"]?["code"]?.shown ?? "error"
            let message = reply["error"]?["message"]?.shown ?? reply.text
            fail("\(code): \(message)", code: 1)
        }
        if json { print(reply.text) }
        return reply
    }
}

func fail(_ message: String, code: Int32) -> Never {
    var err = "playctl: " + message + "\n"
    _ = err.withUTF8 { write(2, $0.baseAddress, $0.count) }
    exit(code)
}

func parseTime(_ text: String) throws -> TimeArgument {
    do { return try TimeArgument(parsing: text) } catch { throw ValidationError(error.description) }
}

/// An absolute path: playd may run in another directory. A URL (`http://…`, or any
/// `scheme://`) goes as it is: playd plays http(s) streams and refuses the rest.
func absolute(_ path: String) -> String {
    guard !path.hasPrefix("/"), !NetworkInput.hasScheme(path) else { return path }
    var buf = [CChar](repeating: 0, count: 4096)
    return getcwd(&buf, buf.count) != nil ? PathBytes.text(cString: buf) + "/" + path : path
}

/// Queue positions on the command line and in playctl's own output count from 1, as
/// mpc's do; the protocol's `index` counts from 0 (docs/protocol.md). Checked before
/// the subtraction: a position of 0 or less is a usage error, not an index of -1.
func queueIndex(_ position: Int, _ name: String) throws -> Int64 {
    guard position >= 1 else { throw ValidationError("\(name) is a queue position: 1 is the first entry (as in `playctl queue`)") }
    return Int64(position - 1)
}

/// The 1-based position of a protocol `index` (0-based), for output.
func position(_ index: JSON?) -> Int {
    guard let i = index?.numberValue, i >= 0, i < 1e9 else { return 0 }
    return Int(i) + 1
}

/// A relative path that names something from the working folder, made absolute;
/// any other is passed on as written, for playd to take from its first music root
/// (`playctl update "Artist/Album"` anywhere, `playctl update .` inside the music).
func absoluteIfPresent(_ path: String) -> String {
    guard !path.hasPrefix("/"), !NetworkInput.hasScheme(path) else { return path }
    var st = stat()
    return PathBytes.stat(path, &st) == 0 ? absolute(path) : path
}
