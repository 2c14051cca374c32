import CoreStream

/// Every config key once (issue 38): its name, how it is read and range-checked, and
/// whether a reload (SIGHUP) can apply it. The parser (``DaemonConfig/init(toml:path:)``),
/// the reload (``Daemon/keepRestartOnlyKeys(running:into:)``) and the check of
/// `config.example.toml` (ConfigKeyTests, from which `scripts/make-man` writes
/// playd.toml(5)) all read this table. Before it the keys were listed three times and
/// one list fell behind: SIGHUP ignored all six `streams.*` keys while the log said
/// "config reloaded".
extension DaemonConfig {
    /// What a reload does with a changed key.
    enum Reload: Sendable {
        /// Applied by the reload.
        case live
        /// Needs a restart (a socket, the output, the library's folders): the running
        /// value is kept and the reload names the key (log line and `STATUS=`).
        case restart
    }

    /// One key of the table.
    struct Key: Sendable {
        let name: String
        let reload: Reload
        /// Reads the key's value into the config, or throws naming the line and key.
        let parse: @Sendable (inout DaemonConfig, Value) throws(Error) -> Void
        /// Whether two configs differ in this key.
        let differs: @Sendable (DaemonConfig, DaemonConfig) -> Bool
        /// Sets this key of the first config to the second's.
        let copy: @Sendable (inout DaemonConfig, DaemonConfig) -> Void

        init<T: Equatable & Sendable>(_ name: String, _ field: WritableKeyPath<DaemonConfig, T> & Sendable, _ reload: Reload,
                                      _ read: @escaping @Sendable (Value) throws(Error) -> T) {
            self.name = name
            self.reload = reload
            parse = { (c: inout DaemonConfig, v: Value) throws(Error) in c[keyPath: field] = try read(v) }
            differs = { a, b in a[keyPath: field] != b[keyPath: field] }
            copy = { a, b in a[keyPath: field] = b[keyPath: field] }
        }
    }

    /// A key's value in the file, with the checks every key uses; errors name the
    /// file, the line and the key.
    struct Value {
        let entry: TOML.Leaf
        let key: String
        let path: String

        func fail(_ m: String) -> Error { Error(message: "\(path): line \(entry.line): \(key): \(m)") }

        func string() throws(Error) -> String {
            guard case .string(let s) = entry.value else { throw fail("expected a string, got \(entry.value.typeName)") }
            return s
        }
        /// A string that must be one of `choices`.
        func word(_ choices: [String]) throws(Error) -> String {
            let s = try string()
            guard choices.contains(s) else { throw fail("'\(s)' must be one of \(choices.joined(separator: ", "))") }
            return s
        }
        func int(_ range: ClosedRange<Int>) throws(Error) -> Int {
            guard case .integer(let i) = entry.value else { throw fail("expected an integer, got \(entry.value.typeName)") }
            guard range.contains(i) else { throw fail("\(i) is outside \(range.lowerBound)…\(range.upperBound)") }
            return i
        }
        func bool() throws(Error) -> Bool {
            guard case .bool(let b) = entry.value else { throw fail("expected true or false, got \(entry.value.typeName)") }
            return b
        }
        func decibels(_ range: ClosedRange<Double> = -15...15) throws(Error) -> Double {
            let v: Double
            switch entry.value {
            case .float(let d): v = d
            case .integer(let i): v = Double(i)
            default: throw fail("expected a number of dB, got \(entry.value.typeName)")
            }
            func show(_ d: Double) -> String { (d < 0 ? "−" : "") + (d == d.rounded() ? String(Int(abs(d))) : String(abs(d))) }
            guard v.isFinite, range.contains(v) else { throw fail("\(v) dB is outside \(show(range.lowerBound))…\(show(range.upperBound))") }
            return v
        }
        func strings() throws(Error) -> [String] {
            guard case .array(let a) = entry.value else { throw fail("expected an array of strings, got \(entry.value.typeName)") }
            var out: [String] = []
            for v in a {
                guard case .string(let s) = v else { throw fail("expected an array of strings, found a \(v.typeName)") }
                out.append(s)
            }
            return out
        }
    }

    /// `volume.mixer` (alias `output.mixer`).
    static let mixers = ["software", "hardware", "pipewire", "none"]

    static let keys: [Key] = [
        Key("control.socket", \.socketPath, .restart) { v throws(Error) in try v.string() },
        Key("control.socket_mode", \.socketMode, .restart) { v throws(Error) in
            let s = try v.string()
            guard let m = UInt32(s, radix: 8), m <= 0o777 else { throw v.fail("'\(s)' is not an octal mode such as \"0660\"") }
            return m
        },
        Key("control.socket_group", \.socketGroup, .restart) { v throws(Error) in try v.string() },
        Key("control.allowed_users", \.allowedUsers, .restart) { v throws(Error) in try v.strings() },
        Key("control.allowed_groups", \.allowedGroups, .restart) { v throws(Error) in try v.strings() },
        Key("output.device", \.outputDevice, .restart) { v throws(Error) in try v.string() },
        Key("output.fallback", \.outputFallback, .restart) { v throws(Error) in try v.strings() },
        Key("output.feeds", \.feeds, .restart) { v throws(Error) in
            let specs = try v.strings()
            var names: Set<String> = [PlaybackEngine.localOutputName]
            for spec in specs {
                let name: String
                do { name = try FeedOutput.parse(spec: spec).name } catch { throw v.fail((error as? StreamError)?.message ?? "\(error)") }
                guard names.insert(name).inserted else { throw v.fail("two outputs are named '\(name)': give each feed its own ?name=") }
            }
            return specs
        },
        Key("output.buffer_time", \.bufferTime, .restart) { v throws(Error) in try v.int(10...10_000) },
        Key("output.period_time", \.periodTime, .restart) { v throws(Error) in try v.int(1...10_000) },
        Key("output.format_change", \.formatChange, .restart) { v throws(Error) in
            try v.word(PlaybackEngine.FormatChange.allCases.map(\.rawValue))
        },
        Key("output.crossfade_within_albums", \.crossfadeWithinAlbums, .live) { v throws(Error) in try v.bool() },
        Key("engine.ring_frames", \.ringFrames, .restart) { v throws(Error) in try v.int(4096...(1 << 24)) },
        Key("library.music_roots", \.musicRoots, .restart) { v throws(Error) in try v.strings() },
        Key("library.allow_outside_roots", \.allowOutsideRoots, .live) { v throws(Error) in try v.bool() },
        Key("library.database", \.libraryDatabase, .restart) { v throws(Error) in try v.string() },
        Key("library.playlist_directory", \.playlistDirectory, .restart) { v throws(Error) in try v.string() },
        Key("library.update_on_start", \.updateOnStart, .live) { v throws(Error) in try v.bool() },
        Key("library.measure_loudness", \.measureLoudness, .live) { v throws(Error) in try v.bool() },
        Key("state.file", \.stateFile, .restart) { v throws(Error) in try v.string() },
        Key("state.save_interval", \.saveInterval, .live) { v throws(Error) in try v.int(1...86_400) },
        Key("state.resume", \.resume, .live) { v throws(Error) in try v.word(["paused", "playing", "stopped"]) },
        Key("mpd.enabled", \.mpdEnabled, .restart) { v throws(Error) in try v.bool() },
        Key("mpd.socket", \.mpdSocket, .restart) { v throws(Error) in try v.string() },
        Key("mpd.tcp", \.mpdTCP, .restart) { v throws(Error) in try v.string() },
        Key("mpd.password", \.mpdPassword, .restart) { v throws(Error) in try v.string() },
        Key("mpd.zeroconf", \.zeroconf, .restart) { v throws(Error) in try v.bool() },
        Key("mpd.zeroconf_name", \.zeroconfName, .restart) { v throws(Error) in
            let s = try v.string()
            // A DNS-SD instance name is one DNS label: 1 to 63 bytes (RFC 6763 4.1.1).
            guard !s.isEmpty, s.utf8.count <= 63 else { throw v.fail("'\(s)' must be 1 to 63 bytes (one DNS label)") }
            return s
        },
        Key("mpd.max_command_list_size", \.maxCommandListKiB, .restart) { v throws(Error) in try v.int(1...(1 << 20)) },
        Key("http.listen", \.httpListen, .restart) { v throws(Error) in
            let addresses = try v.strings()
            guard addresses.count <= 8 else { throw v.fail("at most 8 addresses") }
            for a in addresses where WebServer.parseAddress(a) == nil {
                throw v.fail("'\(a)' is not an address such as \"127.0.0.1:6680\" or \"[::1]:6680\"")
            }
            return addresses
        },
        Key("http.password", \.httpPassword, .restart) { v throws(Error) in
            let s = try v.string()
            guard s.utf8.count <= 1024 else { throw v.fail("at most 1,024 bytes") }
            return s
        },
        Key("http.password_file", \.httpPasswordFile, .restart) { v throws(Error) in try v.string() },
        Key("http.web_root", \.httpWebRoot, .restart) { v throws(Error) in try v.string() },
        Key("http.streams", \.httpStreams, .restart) { v throws(Error) in
            let words = try v.strings()
            let known = StreamHub.Format.allCases.map(\.rawValue)
            for w in words where !known.contains(w) { throw v.fail("'\(w)' must be one of \(known.joined(separator: ", "))") }
            return words
        },
        Key("http.stream_buffer_ms", \.httpStreamBufferMillis, .restart) { v throws(Error) in try v.int(50...10_000) },
        Key("http.max_listeners", \.httpMaxListeners, .restart) { v throws(Error) in try v.int(1...1000) },
        Key("http.stream_volume", \.httpStreamVolume, .restart) { v throws(Error) in try v.word(["follow", "fixed"]) },
        Key("volume.mixer", \.mixer, .restart) { v throws(Error) in try v.word(mixers) },
        // The same setting, where the PipeWire issue (46) and MPD's `mixer_type` put it:
        // beside the output it belongs to. Giving both is an error (DaemonConfig.init).
        Key("output.mixer", \.mixer, .restart) { v throws(Error) in try v.word(mixers) },
        Key("volume.mixer_device", \.mixerDevice, .restart) { v throws(Error) in try v.string() },
        Key("volume.mixer_control", \.mixerControl, .restart) { v throws(Error) in try v.string() },
        Key("volume.start", \.volumeStart, .restart) { v throws(Error) in try v.int(-1...100) },
        Key("volume.max", \.volumeMax, .restart) { v throws(Error) in try v.int(0...100) },
        Key("volume.replaygain", \.replayGain, .live) { v throws(Error) in try v.word(ReplayGainMode.allCases.map(\.rawValue)) },
        Key("volume.replaygain_preamp", \.replayGainPreamp, .live) { v throws(Error) in try v.decibels() },
        Key("volume.replaygain_missing_preamp", \.replayGainMissingPreamp, .live) { v throws(Error) in try v.decibels() },
        Key("volume.replaygain_limit", \.replayGainLimit, .live) { v throws(Error) in try v.bool() },
        Key("replaygain.source", \.replayGainSource, .live) { v throws(Error) in try v.word(ReplayGainSource.allCases.map(\.rawValue)) },
        Key("replaygain.reference_lufs", \.replayGainReferenceLUFS, .live) { v throws(Error) in try v.decibels(-30...(-5)) },
        Key("replaygain.max_true_peak_dbtp", \.replayGainMaxTruePeak, .live) { v throws(Error) in try v.decibels(-10...0) },
        Key("announce.tts_urls", \.ttsURLs, .live) { v throws(Error) in
            let patterns = try v.strings()
            for p in patterns where p.isEmpty || p.utf8.count > 1024 { throw v.fail("a pattern must be 1 to 1,024 bytes") }
            guard patterns.count <= 64 else { throw v.fail("at most 64 patterns") }
            return patterns
        },
        Key("announce.tts_mode", \.ttsMode, .live) { v throws(Error) in try v.word(["pause", "duck"]) },
        Key("announce.tts_duck_db", \.ttsDuckDB, .live) { v throws(Error) in try v.decibels(-60...0) },
        Key("limits.max_connections", \.maxConnections, .live) { v throws(Error) in try v.int(1...1000) },
        Key("limits.max_connections_per_user", \.maxConnectionsPerUser, .live) { v throws(Error) in try v.int(1...1000) },
        Key("limits.connection_timeout", \.connectionTimeout, .live) { v throws(Error) in try v.int(1...86_400) },
        Key("limits.open_timeout", \.openTimeout, .live) { v throws(Error) in try v.int(1...3600) },
        Key("limits.max_queue_length", \.maxQueueLength, .live) { v throws(Error) in try v.int(1...1_000_000) },
        Key("limits.max_playlist_size", \.maxPlaylistBytes, .live) { v throws(Error) in try v.int(1024...(256 << 20)) },
        Key("limits.max_playlist_entries", \.maxPlaylistEntries, .live) { v throws(Error) in try v.int(1...1_000_000) },
        Key("streams.enabled", \.streamsEnabled, .live) { v throws(Error) in try v.bool() },
        Key("streams.allowed_hosts", \.streamHosts, .live) { v throws(Error) in try v.strings().map { $0.lowercased() } },
        Key("streams.timeout", \.streamTimeout, .live) { v throws(Error) in try v.int(1...600) },
        Key("streams.reconnect_attempts", \.streamReconnects, .live) { v throws(Error) in try v.int(0...1000) },
        Key("streams.buffer_kib", \.streamBufferKiB, .live) { v throws(Error) in try v.int(16...65_536) },
        Key("streams.prefill_kib", \.streamPrefillKiB, .live) { v throws(Error) in try v.int(0...65_536) },
        Key("streams.normalize", \.streamNormalize, .live) { v throws(Error) in try v.bool() },
        Key("log.level", \.logLevel, .live) { v throws(Error) in try v.word(DaemonConfig.logLevels) },
    ]

    static let keysByName: [String: Key] = Dictionary(uniqueKeysWithValues: keys.map { ($0.name, $0) })
}
