import Foundation
import Logging
import Testing
import CoreStream
import CoreStreamTestSupport
import PlaydProtocol
import PlaydSessions
@testable import PlaydDaemon

/// The command specs (issue 40) through the daemon's own sessions, in-process
/// (InProcessServer: no sockets, no processes): a command defined only here appears on
/// both protocols and in their notifications, and the same fault gets the same code on
/// every path.
@Suite("Command specs, in-process", .checksSomething, .serialized)
struct CommandSpecTests {
    /// A player on `null?pace=off` with its own state file, and `extra` commands.
    static func server(_ extra: [CommandSpec] = [], name: String = #function) throws -> (InProcessServer, String) {
        let (config, logger, dir) = try PlayerTests.setup(name: name)
        return (try InProcessServer(config: config, logger: logger, commands: CommandTable(extra: extra)), dir)
    }

    /// CONTRIBUTING.md's recipe, step 1: the spec. A "night mode" that turns consume on
    /// and sets the volume, defined nowhere but here. Steps 2 and 3 (a Player method, an
    /// encoder) are the existing `perform` and `.options` reply.
    static let nightMode = CommandSpec(json: "night_mode", mpd: "nightmode", .control,
                                       [ArgumentSpec("volume", .integer(0...40)), ArgumentSpec("consume", .flag, optional: true)],
                                       reply: .options) { p, a throws(PlayerError) in
        try p.perform(.volume(.set(a.bounded("volume")!)))
        try p.perform(.setConsume(a.flag("consume") ?? true))
    }

    @Test func aCommandDefinedInTheTestAppearsOnBothProtocolsAndInTheirNotifications() throws {
        let (s, dir) = try Self.server([Self.nightMode])
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let mpd = s.connect(.mpd())
        let idler = s.connect(.mpd())
        let json = s.connect(.json)
        #expect(mpd.take() == "OK MPD \(MPDSession.protocolVersion)\n")
        _ = idler.take()
        #expect(mpd.send("commands").contains("command: nightmode\n"))
        #expect(json.send(#"{"cmd":"subscribe"}"#).contains(#""ok":true"#))
        #expect(idler.send("idle options mixer") == "", "idling: no reply until something changes")

        #expect(mpd.send("nightmode 20") == "OK\n")
        let woke = idler.take()
        #expect(woke.contains("changed: mixer\n") && woke.hasSuffix("OK\n"), "\(woke)")
        let status = mpd.send("status")
        #expect(status.contains("volume: 20\n") && status.contains("consume: 1\n"), "\(status)")
        let events = json.take()
        #expect(events.contains(#""event":"options""#) && events.contains(#""event":"volume""#), "\(events)")

        // The reply first, then (subscribed) the turn's events.
        let lines = json.send(#"{"id":7,"cmd":"night_mode","volume":5,"consume":false}"#).split(separator: "\n")
        let reply = try JSON.parse(String(lines[0]))
        #expect(reply["ok"] == .bool(true) && reply["consume"] == .bool(false), "the .options reply: \(reply.text)")
        #expect(lines.dropFirst().contains { $0.contains(#""event":"volume""#) && $0.contains(#""volume":5"#) })
        #expect(mpd.send("status").contains("volume: 5\n"))

        // Its arguments are read through the spec's kinds, with each protocol's words.
        #expect(mpd.send("nightmode 41") == "ACK [2@0] {nightmode} Number too large: 41\n")
        #expect(mpd.send("nightmode x") == "ACK [2@0] {nightmode} Integer expected: x\n")
        #expect(mpd.send("nightmode 1 2 3") == "ACK [2@0] {nightmode} too many arguments for \"nightmode\"\n")
        #expect(mpd.send("nightmode") == "ACK [2@0] {nightmode} too few arguments for \"nightmode\"\n")
        let missing = try JSON.parse(json.send(#"{"cmd":"night_mode"}"#).trimmingCharacters(in: .newlines))
        #expect(missing["error"]?["code"] == .string("bad_request"))
        #expect(missing["error"]?["message"]?.stringValue?.contains("\"volume\"") == true)
        let high = try JSON.parse(json.send(#"{"cmd":"night_mode","volume":41}"#).trimmingCharacters(in: .newlines))
        #expect(high["error"]?["code"] == .string("invalid_argument"))

        // Its permission is the spec's: refused before the password, listed as MPD lists.
        let (locked, dir2) = try Self.server([Self.nightMode])
        defer { try? FileManager.default.removeItem(atPath: dir2) }
        let guest = locked.connect(.mpd(password: "pw"))
        _ = guest.take()
        #expect(guest.send("notcommands").contains("command: nightmode\n"))
        #expect(guest.send("nightmode 3") == "ACK [4@0] {nightmode} you don't have permission for \"nightmode\"\n")
    }

    /// One fault, one code, on every path: a word that is not a number is a bad request
    /// on JSON and MPD's ACK 2 ("… expected"); a number outside the range an invalid
    /// argument and MPD's "Number too large". Where MPDDifferentialTests sends the same
    /// faults to real MPD (setvol, crossfade, repeat, single, replay_gain_mode), these
    /// are MPD's own words; here they run in-process, one spec table under both.
    @Test(arguments: [
        ("setvol x", "ACK [2@0] {setvol} Integer expected: x"),
        ("setvol 101", "ACK [2@0] {setvol} Number too large: 101"),
        ("volume -101", "ACK [2@0] {volume} Number too large: -101"),
        ("volume 9223372036854775807", "ACK [2@0] {volume} Number too large: 9223372036854775807"),
        ("crossfade -1", "ACK [2@0] {crossfade} Number too large: -1"),
        ("mixrampdb 1e300", "ACK [2@0] {mixrampdb} Number too large: 1e300"),
        ("mixrampdb nan", "ACK [2@0] {mixrampdb} Number too large: nan"),
        ("mixrampdelay x", "ACK [2@0] {mixrampdelay} Float expected: x"),
        ("repeat 2", "ACK [2@0] {repeat} Boolean (0/1) expected: 2"),
        ("random yes", "ACK [2@0] {random} Boolean (0/1) expected: yes"),
        ("single 2", "ACK [2@0] {single} Unrecognized single mode, expected 0, 1, or oneshot"),
        ("replay_gain_mode loud", "ACK [2@0] {replay_gain_mode} Unrecognized replay gain mode"),
        ("pause 2", "ACK [2@0] {pause} Boolean (0/1) expected: 2"),
        ("enableoutput 9", "ACK [50@0] {enableoutput} No such audio output"),
        ("toggleoutput x", "ACK [2@0] {toggleoutput} Integer expected: x"),
        ("delete 0:x", "ACK [2@0] {delete} Integer or range expected: 0:x"),
        ("delete 3:1", "ACK [2@0] {delete} Bad song index"),
        ("delete 0", "ACK [2@0] {delete} Bad song index"),
        ("move 1:-2 0", "ACK [2@0] {move} Number is negative: 1:-2"),
        ("play 0", "ACK [2@0] {play} Bad song index"),
        ("playid 7", "ACK [50@0] {playid} No such song"),
    ])
    func mpdArgumentsAreReadInMPDsWords(_ line: String, _ ack: String) throws {
        let (s, dir) = try Self.server()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let c = s.connect(.mpd())
        _ = c.take()
        #expect(c.send(line) == ack + "\n")
    }

    @Test(arguments: [
        (#"{"cmd":"volume","set":"x"}"#, "bad_request"),
        (#"{"cmd":"volume","set":101}"#, "invalid_argument"),
        (#"{"cmd":"volume","change":-101}"#, "invalid_argument"),
        (#"{"cmd":"volume","set":1.5}"#, "bad_request"),
        (#"{"cmd":"crossfade","seconds":-1}"#, "invalid_argument"),
        (#"{"cmd":"crossfade","mixramp_db":"loud"}"#, "bad_request"),
        (#"{"cmd":"crossfade","mixramp_db":1e300}"#, "invalid_argument"),
        (#"{"cmd":"shuffle"}"#, "bad_request"),
        (#"{"cmd":"shuffle","on":1}"#, "bad_request"),
        (#"{"cmd":"single","mode":"sometimes"}"#, "bad_request"),
        (#"{"cmd":"repeat","mode":true}"#, "bad_request"),
        (#"{"cmd":"direction","direction":"sideways"}"#, "bad_request"),
        (#"{"cmd":"mute","muted":"yes"}"#, "bad_request"),
        (#"{"cmd":"output","name":"nope","enabled":true}"#, "invalid_argument"),
        (#"{"cmd":"output","enabled":true}"#, "bad_request"),
        // The commands only JSON spells, read through the same kinds.
        (#"{"cmd":"search","query":"x","limit":0}"#, "invalid_argument"),
        (#"{"cmd":"search","query":"x","limit":"all"}"#, "bad_request"),
        (#"{"cmd":"find","artist":5}"#, "bad_request"),
        (#"{"cmd":"playlist"}"#, "bad_request"),
        (#"{"cmd":"update","path":5}"#, "bad_request"),
        (#"{"cmd":"add","paths":[1]}"#, "bad_request"),
        (#"{"cmd":"insert","paths":"a.flac"}"#, "bad_request"),
    ])
    func jsonArgumentsGetTheSameCodeForTheSameFault(_ line: String, _ code: String) throws {
        let (s, dir) = try Self.server()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let c = s.connect(.json)
        let reply = try JSON.parse(c.send(line).trimmingCharacters(in: .newlines))
        #expect(reply["error"]?["code"] == .string(code), "\(reply.text)")
        // And nothing changed: a bad member refuses the whole request.
        let after = try JSON.parse(c.send(#"{"cmd":"crossfade"}"#).trimmingCharacters(in: .newlines))
        #expect(after["seconds"] == .int(0), "\(after.text)")
    }

    /// Every command MPD spells from a spec takes MPD's argument count from it, and
    /// every spec has at least one name: no spec is unreachable, none is two rows.
    @Test func everySpecIsReachableAndNamedOncePerProtocol() {
        let specs = CommandTable().specs
        #expect(specs.allSatisfy { $0.json != nil || $0.mpd != nil })
        let mpd = specs.compactMap(\.mpd), json = specs.compactMap(\.json)
        #expect(Set(mpd).count == mpd.count && Set(json).count == json.count)
        let sessionMPD = Set(MPDCommands.sessionRows.map(\.name)), sessionJSON = Set(JSONCommands.sessionRows.keys)
        #expect(sessionMPD.isDisjoint(with: mpd), "a command is both a spec and a session row")
        #expect(sessionJSON.isDisjoint(with: json), "a command is both a spec and a JSON session row")
        // JSON's rows are the session's too (play, seek, loop and announce parsed their
        // times by hand until the .time kind).
        #expect(sessionJSON == ["status", "subscribe", "unsubscribe"])
        // MPD's only rows that are not specs are the session's own (issue 40: 38 MPD rows
        // parsed their arguments by hand; albumart and readpicture were rows until their
        // binary reply was a Reply case).
        #expect(sessionMPD == ["subscribe", "unsubscribe", "channels", "readmessages", "sendmessage"])
        #expect(CommandTable().byMPD["albumart"]?.reply == .mpdBinary && CommandTable().byMPD["readpicture"]?.reply == .mpdBinary)
    }

    /// Every request playctl's sources send (`send("NAME"`, `static let request =
    /// "NAME"`, a `"cmd"` member) is one the daemon serves (issue 40: playctl was not
    /// checked against the specs, and a renamed command would have failed only when run).
    @Test func playctlSendsOnlyServedCommands() throws {
        let dir = Fixtures.repositoryRoot.path + "/Sources/playctl"
        var sent: Set<String> = []
        for file in try FileManager.default.contentsOfDirectory(atPath: dir) where file.hasSuffix(".swift") {
            let text = try String(contentsOfFile: dir + "/" + file, encoding: .utf8)
            for pattern in [#"send\("([a-z_]+)""#, #"static let request = "([a-z_]+)""#, #""cmd"\), \.string\("([a-z_]+)"\)"#,
                            #"\("cmd", \.string\("([a-z_]+)"\)"#] {
                let re = try NSRegularExpression(pattern: pattern)
                for m in re.matches(in: text, range: NSRange(text.startIndex..., in: text)) {
                    if let r = Range(m.range(at: 1), in: text) { sent.insert(String(text[r])) }
                }
            }
        }
        #expect(sent.count >= 30, "found \(sent.sorted())")
        let served = Set(CommandTable().specs.compactMap(\.json)).union(JSONCommands.sessionRows.keys)
        #expect(sent.subtracting(served).isEmpty, "playctl sends what the daemon does not serve: \(sent.subtracting(served).sorted())")
    }

    /// A value out of range is checked once, by the command's spec in the daemon:
    /// playctl passes it on and prints the daemon's error, with the code and the words
    /// a JSON client gets for the same request (issue 40: playctl checked volume,
    /// cross-fade and loop counts itself, with messages of its own).
    @Test func playctlLeavesRangesToTheSpecs() throws {
        let h = try DaemonHarness(output: "null")
        try h.start()
        let cases: [([String], String, [(String, JSON)])] = [
            (["volume", "150"], "volume", [("set", .int(150))]),
            (["volume", "+150"], "volume", [("change", .int(150))]),
            (["crossfade", "4000"], "crossfade", [("seconds", .int(4000))]),
            (["loop", "1", "2", "--count=-1"], "loop", [("start", .int(1)), ("end", .int(2)), ("count", .int(-1))]),
        ]
        for (args, cmd, fields) in cases {
            let reply = try #require(h.request(cmd, fields: fields), "\(cmd): no reply")
            let code = try #require(reply["error"]?["code"]?.stringValue, "\(cmd) \(fields): \(reply.text)")
            let message = try #require(reply["error"]?["message"]?.stringValue)
            let (status, _, err) = try h.playctl(args)
            #expect(status != 0 && err.contains("\(code): \(message)"), "playctl \(args): \(status) \(err); JSON: \(code): \(message)")
        }
        _ = h.terminate()
    }

    /// docs/protocol.md's command headings name every JSON command the daemon serves,
    /// and no other: the list is checked against the table, not kept by hand beside it.
    @Test func theProtocolDocListsEveryJSONCommand() throws {
        let text = try String(contentsOfFile: Fixtures.repositoryRoot.path + "/docs/protocol.md", encoding: .utf8)
        let section = try #require(text.components(separatedBy: "\n## Commands\n").dropFirst().first?
            .components(separatedBy: "\n## ").first)
        var documented: Set<String> = []
        for line in section.split(separator: "\n") where line.hasPrefix("### ") {
            // "### pause, resume, toggle, stop", "### The queue: add, insert, …"
            let names = line.dropFirst(4).split(separator: ":").last ?? ""
            for n in names.split(separator: ",") { documented.insert(n.trimmingCharacters(in: .whitespaces)) }
        }
        let served = Set(CommandTable().specs.compactMap(\.json)).union(JSONCommands.sessionRows.keys)
        #expect(served.subtracting(documented).isEmpty, "served, not in docs/protocol.md: \(served.subtracting(documented).sorted())")
        #expect(documented.subtracting(served).isEmpty, "in docs/protocol.md, not served: \(documented.subtracting(served).sorted())")
    }

    /// A malformed request gets a typed error and the session goes on (moved here from
    /// the spawned daemon's DaemonTests: it is the session's, not the socket's).
    @Test(arguments: [
        ("not json", "bad_json"),
        ("[1,2]", "bad_json"),
        (#"{"id":1}"#, "bad_request"),
        (#"{"id":2,"cmd":5}"#, "bad_request"),
        (#"{"id":3,"cmd":"dance"}"#, "unknown_command"),
        (#"{"id":4,"cmd":"play"}"#, "bad_request"),
        (#"{"id":5,"cmd":"play","path":42}"#, "bad_request"),
        (#"{"id":6,"cmd":"seek","to":{"seconds":1}}"#, "not_playing"),
        (#"{"id":7,"cmd":"play","path":"/etc"}"#, "is_directory"),
        (#"{"id":8,"cmd":"subscribe","ticks":1}"#, "invalid_argument"),
        (#"{"id":9,"cmd":"remove","entry":5}"#, "invalid_argument"),
        (#"{"id":10,"cmd":"remove","index":-1}"#, "invalid_argument"),
        (#"{"id":11,"cmd":"remove"}"#, "bad_request"),
        (#"{"id":12,"cmd":"save","name":"../x"}"#, "invalid_argument"),
        // Times (the .time kind): a wrong form, a relative one where none is allowed,
        // more frames than the engine counts are bad requests; a negative absolute time
        // and a count outside its range are invalid arguments, on every command alike.
        (#"{"id":13,"cmd":"seek","to":"soon"}"#, "bad_request"),
        (#"{"id":14,"cmd":"seek","to":{"frames":1e16}}"#, "bad_request"),
        (#"{"id":15,"cmd":"play","path":"/etc","at":"+10"}"#, "bad_request"),
        (#"{"id":16,"cmd":"play","path":"/etc","at":-1}"#, "invalid_argument"),
        (#"{"id":17,"cmd":"loop","start":1,"end":2,"count":-1}"#, "invalid_argument"),
        (#"{"id":18,"cmd":"seek"}"#, "bad_request"),
        (#"{"id":19,"cmd":"announce","path":""}"#, "bad_request"),
        (#"{"id":20,"cmd":"announce","duck":"loud","path":"/x"}"#, "bad_request"),
    ])
    func malformedJSONRequestsGetTypedErrors(_ line: String, _ code: String) throws {
        let (s, dir) = try Self.server()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let c = s.connect(.json)
        let reply = try JSON.parse(c.send(line).trimmingCharacters(in: .newlines))
        #expect(reply["ok"] == .bool(false))
        #expect(reply["error"]?["code"] == .string(code), "\(line): \(reply.text)")
        #expect(reply["error"]?["message"]?.stringValue?.isEmpty == false)
        let pong = try JSON.parse(c.send(#"{"id":"abc","cmd":"ping"}"#).trimmingCharacters(in: .newlines))
        #expect(pong["id"] == .string("abc") && pong["ok"] == .bool(true), "still usable, ids echoed")
    }

    /// Every status member `playctl status` reads (StatusKey) is in the daemon's reply
    /// while a tagged file plays. (Events need no such test: the encoder and `playctl
    /// watch` both spell them as EventName, so the compiler holds them together.)
    @Test func playctlsStatusKeysAreTheEncoders() throws {
        let (s, dir) = try Self.server()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let file = dir + "/tagged.flac"
        try Shell.ffmpeg(["-f", "lavfi", "-i", "sine=d=30", "-metadata", "title=T", "-metadata", "artist=A",
                          "-metadata", "album=B", "-metadata", "date=2001", "-c:a", "flac", file])
        let c = s.connect(.json)
        let played = try JSON.parse(c.send(#"{"cmd":"play","path":"\#(file)"}"#).trimmingCharacters(in: .newlines))
        #expect(played["ok"] == .bool(true), "\(played.text)")
        let status = try JSON.parse(c.send(#"{"cmd":"status"}"#).trimmingCharacters(in: .newlines))
        // `stream` is a radio's only: StreamTests reads it from a radio's status.
        for key in StatusKey.allCases where key != .stream {
            #expect(status[key] != nil, "status has no \(key.rawValue): \(status.text)")
        }
        s.player.shutdown()
    }
}
