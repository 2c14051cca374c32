import Foundation
import Testing
import PlaydProtocol
import CoreStreamTestSupport

/// Every state change made through either protocol wakes the subscribers of both: a
/// JSON `subscribe`r gets the event, an MPD client in `idle SUBSYSTEM` wakes with that
/// subsystem. Real daemon, real sockets. (A `playctl seek` never woke `idle player`,
/// a `playctl shuffle` never woke `idle options`.)
@Suite("Notifications reach both protocols", .checksSomething, .serialized)
struct NotificationTests {
    enum Via: String { case json, mpd }
    struct Row: CustomStringConvertible {
        var via: Via
        /// A JSON object's text, or an MPD command line.
        var line: String
        var subsystem: String
        var event: String
        var description: String { "\(via.rawValue) \(line)" }
    }

    /// In order: each row changes what the one before left.
    static let rows: [Row] = [
        Row(via: .json, line: #"{"cmd":"pause"}"#, subsystem: "player", event: "state"),
        Row(via: .mpd, line: "pause 0", subsystem: "player", event: "state"),
        Row(via: .json, line: #"{"cmd":"seek","to":10}"#, subsystem: "player", event: "seeked"),
        Row(via: .mpd, line: "seekcur 20", subsystem: "player", event: "seeked"),
        Row(via: .json, line: #"{"cmd":"volume","set":30}"#, subsystem: "mixer", event: "volume"),
        Row(via: .mpd, line: "setvol 40", subsystem: "mixer", event: "volume"),
        Row(via: .mpd, line: "volume +5", subsystem: "mixer", event: "volume"),
        Row(via: .json, line: #"{"cmd":"mute"}"#, subsystem: "mixer", event: "volume"),
        Row(via: .json, line: #"{"cmd":"shuffle","on":true}"#, subsystem: "options", event: "options"),
        Row(via: .mpd, line: "random 0", subsystem: "options", event: "options"),
        Row(via: .json, line: #"{"cmd":"repeat","mode":"on"}"#, subsystem: "options", event: "options"),
        Row(via: .mpd, line: "repeat 0", subsystem: "options", event: "options"),
        Row(via: .mpd, line: "single 1", subsystem: "options", event: "options"),
        Row(via: .json, line: #"{"cmd":"single","mode":"off"}"#, subsystem: "options", event: "options"),
        Row(via: .mpd, line: "consume 1", subsystem: "options", event: "options"),
        Row(via: .json, line: #"{"cmd":"consume","on":false}"#, subsystem: "options", event: "options"),
        Row(via: .json, line: #"{"cmd":"add","path":"$LONG"}"#, subsystem: "playlist", event: "queue"),
        Row(via: .mpd, line: "add \"$LONG\"", subsystem: "playlist", event: "queue"),
        Row(via: .mpd, line: "addid \"$LONG\" 0", subsystem: "playlist", event: "queue"),
        Row(via: .json, line: #"{"cmd":"move","index":0,"to":3}"#, subsystem: "playlist", event: "queue"),
        Row(via: .mpd, line: "move 0 1", subsystem: "playlist", event: "queue"),
        Row(via: .json, line: #"{"cmd":"remove","index":3}"#, subsystem: "playlist", event: "queue"),
        Row(via: .mpd, line: "delete 2", subsystem: "playlist", event: "queue"),
        Row(via: .json, line: #"{"cmd":"next"}"#, subsystem: "player", event: "track"),
        Row(via: .mpd, line: "previous", subsystem: "player", event: "track"),
        Row(via: .mpd, line: "next", subsystem: "player", event: "track"),
        Row(via: .json, line: #"{"cmd":"prev"}"#, subsystem: "player", event: "track"),
        Row(via: .json, line: #"{"cmd":"play","index":1}"#, subsystem: "player", event: "track"),
        Row(via: .mpd, line: "play 0", subsystem: "player", event: "track"),
        Row(via: .mpd, line: "seek 1 5", subsystem: "player", event: "seeked"),
        Row(via: .json, line: #"{"cmd":"loop","start":1,"end":5}"#, subsystem: "player", event: "loop"),
        Row(via: .json, line: #"{"cmd":"loop","clear":true}"#, subsystem: "player", event: "loop"),
        Row(via: .json, line: #"{"cmd":"direction","direction":"reverse"}"#, subsystem: "player", event: "direction"),
        Row(via: .json, line: #"{"cmd":"direction","direction":"forward"}"#, subsystem: "player", event: "direction"),
        Row(via: .mpd, line: "disableoutput 0", subsystem: "output", event: "output"),
        Row(via: .json, line: #"{"cmd":"output","name":"local","enabled":true}"#, subsystem: "output", event: "output"),
        Row(via: .json, line: #"{"cmd":"stop"}"#, subsystem: "player", event: "state"),
        Row(via: .mpd, line: "play", subsystem: "player", event: "state"),
        Row(via: .mpd, line: "stop", subsystem: "player", event: "state"),
        Row(via: .mpd, line: "clear", subsystem: "playlist", event: "queue"),
        Row(via: .json, line: #"{"cmd":"add","path":"$LONG"}"#, subsystem: "playlist", event: "queue"),
        Row(via: .json, line: #"{"cmd":"clear"}"#, subsystem: "playlist", event: "queue"),
    ]

    /// 60 s, so nothing ends while the table runs.
    static func long() throws -> String {
        let path = NSTemporaryDirectory() + "playd-notify-long-\(getpid()).flac"
        if !FileManager.default.fileExists(atPath: path) {
            try Shell.ffmpeg(["-f", "lavfi", "-i", "sine=f=330:r=44100:d=60", "-ac", "2", path])
        }
        return path
    }

    @Test func everyChangeWakesBothProtocols() throws {
        let h = try DaemonHarness()
        try h.start()
        let mpdSocket = h.dir + "/mpd.sock"
        for _ in 0..<3 { #expect(h.request("add", ("path", .string(try Self.long())))?["ok"] == .bool(true)) }
        #expect(h.request("play", ("index", .int(0)))?["ok"] == .bool(true))
        for row in Self.rows {
            // Fresh listeners per row: nothing pending from the rows before.
            let json = try LineClient(path: h.socket)
            #expect(json.request(.obj(("id", .int(1)), ("cmd", .string("subscribe"))))?["ok"] == .bool(true))
            let idle = try LineClient(path: mpdSocket)
            #expect(idle.readLine(timeoutMillis: 10_000)?.hasPrefix("OK MPD") == true)
            #expect(idle.send("idle \(row.subsystem)"))
            // The idle is registered once a ping on the same connection would be
            // answered; MPD allows only noidle there, so ask on another one instead
            // and rely on the order of lines on one connection: the command goes
            // after the idle line has been read (the server reads lines in order).
            let line = row.line.replacingOccurrences(of: "$LONG", with: try Self.long())
            switch row.via {
            case .json:
                let c = try LineClient(path: h.socket)
                let reply = c.request(try JSON.parse(line))
                #expect(reply?["ok"] == .bool(true), "\(row): \(reply?.text ?? "no reply")")
            case .mpd:
                let c = try LineClient(path: mpdSocket)
                _ = c.readLine(timeoutMillis: 10_000)
                #expect(c.send(line))
                let reply = c.readLine(timeoutMillis: 10_000) ?? ""
                // addid answers with an Id line first.
                let ok = reply == "OK" || (reply.hasPrefix("Id: ") && c.readLine(timeoutMillis: 10_000) == "OK")
                #expect(ok, "\(row): \(reply)")
            }
            #expect(idle.readLine(timeoutMillis: 10_000) == "changed: \(row.subsystem)", "\(row): MPD idle did not wake")
            var got: [String] = []
            while let l = json.readLine(timeoutMillis: 10_000), let e = try? JSON.parse(l), let name = e["event"]?.stringValue {
                got.append(name)
                if name == row.event { break }
            }
            #expect(got.last == row.event, "\(row): JSON events \(got), wanted \(row.event)")
        }
        #expect(h.terminate().status == 0)
    }
}
