import Testing
@testable import PlaydDaemon
import PlaydProtocol
import Foundation
import CoreStreamTestSupport

@Suite("JSON", .checksSomething, .tags(.addressSanitizer))
struct JSONTests {
    @Test(arguments: [
        #"{"id":1,"cmd":"play","path":"/a b/ü.flac"}"#,
        #"{"a":[1,2.5,-3,1e3,true,false,null],"b":{"c":"x\"y\\z\n"}}"#,
        #"[]"#, #"{}"#, #""\u00e9\ud83c\udfb5""#,
    ])
    func roundTrips(_ text: String) throws {
        let v = try JSON.parse(text)
        #expect(try JSON.parse(v.text) == v)
    }

    @Test(arguments: [
        "", "{", "{\"a\":}", "{\"a\" 1}", "[1,]", "tru", "\"\\x\"", "\"\u{01}\"", "{} x", "01", "1.", "-",
        "\"\\ud800\"", String(repeating: "[", count: 100) + String(repeating: "]", count: 100),
    ])
    func rejects(_ text: String) {
        #expect(throws: JSON.ParseError.self) { try JSON.parse(text) }
    }

    /// The writer against an independent parser, Python's json module: every control
    /// character, quotes and backslashes, a combining mark right after an escaped quote,
    /// CR LF and non-ASCII come back as the same code points, integers as the same values.
    @Test func pythonReadsWhatIsWritten() throws {
        let control = String(String.UnicodeScalarView((1..<0x20).compactMap(Unicode.Scalar.init)))
        let strings = [control, "\"\u{301}x", "a\\\"b\r\nc\\", "café 🎵 /a b/ü.flac", ""]
        let numbers: [Int64] = [-12, 0, 7, 123_456_789_012_345, 9_007_199_254_740_000, -9_007_199_254_740_000]
        let doc = JSON.object([("s", .array(strings.map(JSON.string))), ("n", .array(numbers.map(JSON.int)))])
        let dir = try freshTestDirectory("playd-json", "python")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try doc.text.write(toFile: dir + "/doc.json", atomically: true, encoding: .utf8)
        let r = try Shell.run(["python3", "-c", """
            import json, sys
            d = json.load(open(sys.argv[1], encoding="utf-8"))
            print(json.dumps([[[ord(c) for c in s] for s in d["s"]], d["n"]]))
            """, dir + "/doc.json"])
        #expect(r.status == 0, "\(r.stderr)")
        let codePoints = strings.map { "[" + $0.unicodeScalars.map { String($0.value) }.joined(separator: ", ") + "]" }
        let want = "[[" + codePoints.joined(separator: ", ") + "], [" + numbers.map(String.init).joined(separator: ", ") + "]]"
        #expect(String(decoding: r.stdout, as: UTF8.self).trimmingCharacters(in: .newlines) == want)
    }

    @Test func numbersKeepIntegersExact() throws {
        #expect(JSON.int(Int64(9_007_199_254_740_000)).text == "9007199254740000")
        #expect(try JSON.parse("123456789012").numberValue == 123_456_789_012)
    }
}

@Suite("TIME arguments", .checksSomething)
struct TimeArgumentTests {
    @Test(arguments: [
        ("83.5", TimeArgument(value: .seconds(83.5))),
        ("1:23.5", TimeArgument(value: .seconds(83.5))),
        ("1:02:03", TimeArgument(value: .seconds(3723))),
        ("+10", TimeArgument(value: .seconds(10), direction: 1)),
        ("-10", TimeArgument(value: .seconds(10), direction: -1)),
        ("123456f", TimeArgument(value: .frames(123456))),
        ("+4410f", TimeArgument(value: .frames(4410), direction: 1)),
        ("0", TimeArgument(value: .seconds(0))),
    ])
    func parses(_ text: String, _ expected: TimeArgument) throws {
        #expect(try TimeArgument(parsing: text) == expected)
    }

    @Test(arguments: ["", "abc", "1:60", "1:2:3:4", "f", "12.5f", "1::2", "+", "1:-2", "nan", "inf"])
    func rejects(_ text: String) {
        #expect(throws: TimeArgument.ParseError.self) { try TimeArgument(parsing: text) }
    }
}

@Suite("Config", .checksSomething, .tags(.addressSanitizer))
struct ConfigTests {
    @Test func readsEveryKey() throws {
        let text = """
        # comment
        [control]
        socket = "/run/x.sock"   # trailing comment
        socket_mode = "0600"
        socket_group = 'audio'
        [output]
        device = "alsa:hw:0"
        fallback = ["plughw:0", "default"]
        buffer_time = 200
        period_time = 50
        [engine]
        ring_frames = 65_536
        [library]
        music_roots = ["/srv/music"]
        [state]
        file = "/var/lib/playd/state.json"
        save_interval = 5
        resume = "playing"
        [log]
        level = "debug"
        """
        let c = try DaemonConfig(toml: text, path: "t.toml")
        #expect(c.socketPath == "/run/x.sock")
        #expect(c.socketMode == 0o600)
        #expect(c.socketGroup == "audio")
        #expect(c.outputSpec == "alsa:hw:0|plughw:0|default")
        // A bare `alsa` with options folds the same way (it used to need "alsa:").
        let bare = try DaemonConfig(toml: "[output]\ndevice = \"alsa?buffer_time=500\"\nfallback = [\"null\"]", path: "t.toml")
        #expect(bare.outputSpec == "alsa:default|null?buffer_time=500")
        #expect(c.bufferTime == 200 && c.periodTime == 50)
        #expect(c.ringFrames == 65536)
        #expect(c.musicRoots == ["/srv/music"])
        #expect(c.stateFile == "/var/lib/playd/state.json" && c.saveInterval == 5 && c.resume == "playing")
        #expect(c.logLevel == "debug")
    }

    @Test(arguments: [
        ("[output]\nbuffer_time = \"500\"", "line 2: output.buffer_time: expected an integer, got string"),
        ("[output]\ncolour = 1", "line 2: unknown key 'output.colour'"),
        ("\n\n[control]\nsocket_mode = \"999\"", "line 4: control.socket_mode"),
        ("[state]\nresume = \"later\"", "line 2: state.resume"),
        ("[output]\nbuffer_time = 100\nperiod_time = 200", "period_time"),
        ("[output]\ndevice = alsa", "line 2"),
        ("[output]\n[output]", "line 2: table [output] defined twice"),
        ("[log]\nlevel = \"loud\"", "line 2: log.level"),
        ("[output]\nfallback = [1]", "line 2: output.fallback"),
        ("[output]\nfeeds = [\"fifo:snapfifo\"]", "line 2: output.feeds: feed fifo:snapfifo: the FIFO path must be absolute"),
        ("[output]\nfeeds = [\"fifo:/tmp/a\", \"fifo:/tmp/b\"]", "two outputs are named 'fifo'"),
        ("[output]\nfeeds = [\"fifo:/tmp/a?name=local\"]", "two outputs are named 'local'"),
        ("[output]\nfeeds = [\"fifo:/tmp/a?format=48000:24:2\"]", "bits must be 16 or 32"),
        ("[output]\nfeeds = [\"http://x\"]", "unknown kind"),
        ("[limits]\nmax_connections = 0", "line 2: limits.max_connections: 0 is outside 1…1000"),
        ("[limits]\nmax_queue_length = 9223372036854775807", "line 2: limits.max_queue_length"),
        ("[mpd]\nmax_command_list_size = -1", "line 2: mpd.max_command_list_size"),
        ("[library]\nmusic_roots = [\n  \"/a\",\n  1,\n]", "line 2: library.music_roots"),
        ("[library]\nmusic_roots = [\n  \"/a\"\n", "line 2: expected ',' or ']'"),
        ("[streams]\nprefill_kib = 64\nbuffer_kib = 32", "streams.prefill_kib (64) must not exceed streams.buffer_kib (32)"),
        ("\n[outptu]", "line 2: unknown table [outptu]"),
        ("[output.extra]\nx = 1", "line 1: unknown table [output.extra]"),
        ("\"control.socket\" = \"/x\"", "line 1: unknown key '\"control.socket\"'"),
        ("control = 1", "line 1: unknown key 'control'"),
        ("[[output]]\ndevice = \"null\"", "line 1: unknown key 'output'"),
        ("output = { device = \"null\", buffer_time = 1.5 }", "line 1: output.buffer_time: expected an integer, got float"),
        ("output.device = \"null\"\n[output]", "line 2: table [output] defined twice"),
        ("[state]\nfile = \"\"\"\n/var/lib/x", "line 3: the multi-line string is not closed"),
        ("[log]\nlevel = 1979-05-27", "line 2: log.level: expected a string, got date-time"),
        ("[output]\nmixer = \"pipewire\"\n[volume]\nmixer = \"software\"", "output.mixer and volume.mixer are the same setting, given two values"),
        ("[output]\nmixer = \"alsa\"", "line 2: output.mixer: 'alsa' must be one of software, hardware, pipewire, none"),
    ])
    func refusesWithKeyAndLine(_ text: String, _ expected: String) {
        do {
            _ = try DaemonConfig(toml: text, path: "bad.toml")
            Issue.record("accepted: \(text)")
        } catch {
            #expect(error.message.hasPrefix("bad.toml: "))
            #expect(error.message.contains(expected), "\(error.message)")
        }
    }

    /// Arrays over several lines, with comments (a `]` in one too) and a trailing
    /// comma, as TOML 1.0 allows.
    @Test(arguments: [
        ("music_roots = [\n  \"/a\",\n  \"/b\",\n]", ["/a", "/b"]),
        ("music_roots = [   # the shop's folders ]\n  \"/a\", # first\n\n  '/b[1]'\n  ]", ["/a", "/b[1]"]),
        ("music_roots = [\"/a\", \"/b\"]", ["/a", "/b"]),
        ("music_roots = [\n]", []),
    ])
    func arraysMaySpanLines(_ text: String, _ roots: [String]) throws {
        let c = try DaemonConfig(toml: "[library]\n" + text + "\nallow_outside_roots = true\n", path: "t.toml")
        #expect(c.musicRoots == roots)
        #expect(c.allowOutsideRoots)
    }

    /// The rest of TOML 1.0 reaches the settings: dotted keys, inline tables, literal
    /// and multi-line strings, quoted keys, underscores in numbers.
    @Test func everyFormOfTOMLReachesTheSettings() throws {
        let text = #"""
        output.device = "null"   # a dotted key at the top level
        library = { music_roots = ['/srv/music', """/srv/more"""], "allow_outside_roots" = false }
        [state]
        file = '''/var/lib/playd/state.json'''
        save_interval = 1_0
        [control]
        socket = """\
            /run/playd/\
            control.sock"""
        "socket_group" = 'audio'
        """#
        let c = try DaemonConfig(toml: text, path: "t.toml")
        #expect(c.outputDevice == "null")
        #expect(c.musicRoots == ["/srv/music", "/srv/more"])
        #expect(c.allowOutsideRoots == false)
        #expect(c.stateFile == "/var/lib/playd/state.json" && c.saveInterval == 10)
        #expect(c.socketPath == "/run/playd/control.sock" && c.socketGroup == "audio")
    }

    /// docs/configuration.md is what `scripts/make-config-doc` writes from
    /// config.example.toml today (the reference cannot fall behind the keys).
    @Test func theConfigurationPageIsWrittenFromTheExample() throws {
        let r = try Shell.run(["/usr/bin/python3", Fixtures.repositoryRoot.path + "/scripts/make-config-doc", "--check"])
        #expect(r.status == 0, "\(r.stderr)")
    }

    @Test func theExampleConfigParsesToTheDefaults() throws {
        let path = Fixtures.repositoryRoot.appendingPathComponent("config.example.toml").path
        let text = try String(contentsOfFile: path, encoding: .utf8)
        // Every key is commented out at its default: uncommenting them all must give the defaults.
        let uncommented = text.split(separator: "\n", omittingEmptySubsequences: false).map { line -> String in
            // "# key = value" lines are settings; everything else is prose.
            let l = String(line)
            guard l.hasPrefix("# "), let eq = l.range(of: " = ") else { return l }
            let key = l[l.index(l.startIndex, offsetBy: 2)..<eq.lowerBound]
            return key.allSatisfy({ $0.isLowercase || $0 == "_" }) ? String(l.dropFirst(2)) : l
        }.joined(separator: "\n")
        #expect(uncommented.components(separatedBy: " = ").count > 12)
        let c = try DaemonConfig(toml: uncommented, path: path)
        #expect(c == DaemonConfig())
    }

    /// config.example.toml (and so playd.toml(5), which scripts/make-man writes from
    /// it) documents exactly the keys of the parser's table: each with a `# table.key
    /// (type, default …)` paragraph and a commented-out setting, and the header's list
    /// of keys a reload cannot apply is the table's. A key added to the table without
    /// its paragraph, or a paragraph left behind, fails here.
    @Test func theExampleConfigDocumentsEveryKeyOfTheTable() throws {
        let path = Fixtures.repositoryRoot.appendingPathComponent("config.example.toml").path
        let lines = try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        let table = Set(DaemonConfig.keys.map(\.name))
        #expect(table.count == DaemonConfig.keys.count, "a key is in the table twice")
        // "# output.buffer_time (integer, …": a key's paragraph.
        let documented = Set(lines.compactMap { l -> String? in
            guard l.hasPrefix("# "), let paren = l.range(of: " ("), paren.lowerBound > l.index(l.startIndex, offsetBy: 2) else { return nil }
            let k = l[l.index(l.startIndex, offsetBy: 2)..<paren.lowerBound]
            return k.contains(".") && k.allSatisfy({ $0.isLowercase || $0 == "_" || $0 == "." }) ? String(k) : nil
        })
        #expect(documented == table, "documented but not in the table: \(documented.subtracting(table).sorted()); in the table but not documented: \(table.subtracting(documented).sorted())")
        // "# key = value" under "[table]": the settings.
        var section = ""
        var settings = Set<String>()
        for l in lines {
            if l.hasPrefix("["), let end = l.firstIndex(of: "]") { section = String(l[l.index(after: l.startIndex)..<end]); continue }
            guard l.hasPrefix("# "), let eq = l.range(of: " = "), eq.lowerBound > l.index(l.startIndex, offsetBy: 2) else { continue }
            let k = l[l.index(l.startIndex, offsetBy: 2)..<eq.lowerBound]
            if k.allSatisfy({ $0.isLowercase || $0 == "_" }) { settings.insert(section + "." + k) }
        }
        #expect(settings == table, "set but not in the table: \(settings.subtracting(table).sorted()); never set: \(table.subtracting(settings).sorted())")
        // The header's list of restart-only keys.
        let header = lines.prefix { !$0.hasPrefix("[") }.joined(separator: " ").replacingOccurrences(of: "# ", with: "")
        let listed = try #require(header.range(of: "status line): ").flatMap { start in
            header.range(of: ". A file with an error", range: start.upperBound..<header.endIndex).map { header[start.upperBound..<$0.lowerBound] }
        }, "the header lists the keys a reload cannot apply")
        let restart = DaemonConfig.keys.filter { $0.reload == .restart }.map(\.name)
        #expect(listed.components(separatedBy: ", ").map { $0.trimmingCharacters(in: .whitespaces) } == restart)
    }
}
