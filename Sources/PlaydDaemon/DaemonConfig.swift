import CoreStream
#if canImport(Glibc)
import Glibc
#endif

/// playd's configuration. Every key, its type and default, is listed (commented out)
/// in `config.example.toml`; unknown keys and wrong types are refused at start with the
/// key's name and line.
public struct DaemonConfig: Sendable, Equatable {
    /// `control.socket`: the Unix socket path. Empty: `$RUNTIME_DIRECTORY/control.sock`
    /// under systemd, else `$XDG_RUNTIME_DIR/playd/control.sock`, else `/run/playd/control.sock`.
    public var socketPath = ""
    /// `control.socket_mode`: permission bits of the socket, octal string.
    public var socketMode: UInt32 = 0o660
    /// `control.socket_group`: group that owns the socket (empty: the daemon's group).
    public var socketGroup = ""
    /// `control.allowed_users`, `control.allowed_groups`: names or numeric ids let in on
    /// the control and MPD sockets (SO_PEERCRED). Both empty: anyone who can open them.
    public var allowedUsers: [String] = []
    public var allowedGroups: [String] = []
    /// `output.device`: output spec (auto, alsa:DEVICE, null, wav:PATH).
    public var outputDevice = "auto"
    /// `output.fallback`: ALSA devices tried after `output.device`, in order.
    public var outputFallback: [String] = []
    /// `output.feeds`: extra outputs fed with what the local output plays
    /// (`fifo:PATH[?format=48000:16:2&name=NAME]`, for Snapcast).
    public var feeds: [String] = []
    /// `output.buffer_time`, `output.period_time`: milliseconds.
    public var bufferTime = OutputSpec.defaultBufferMillis
    public var periodTime = OutputSpec.defaultPeriodMillis
    /// `engine.ring_frames`: frames decoded ahead of the device.
    public var ringFrames = 32 * 1024
    /// `library.music_roots`: directories with music, indexed by the library.
    public var musicRoots: [String] = []
    /// `library.allow_outside_roots`: with roots set, also play and queue other paths.
    public var allowOutsideRoots = false
    /// `library.database`: the index. Empty: `library.db` next to the state file.
    public var libraryDatabase = ""
    /// `library.playlist_directory`: stored playlists ("": `playlists` next to the state file).
    public var playlistDirectory = ""
    /// `library.update_on_start`: scan the roots when playd starts.
    public var updateOnStart = true
    /// `library.measure_loudness`: measure the library's songs in the background after
    /// a scan and keep the figures in the index (LibraryLoudness.swift).
    public var measureLoudness = true
    /// `state.file`: where playback state is saved. Empty: `$STATE_DIRECTORY/state.json`
    /// under systemd, else `$XDG_STATE_HOME/playd/state.json`, else `~/.local/state/playd/state.json`.
    public var stateFile = ""
    /// `state.save_interval`: seconds between saves while playing.
    public var saveInterval = 10
    /// `state.resume`: what a restored track does at start: paused, playing or stopped.
    public var resume = "paused"
    /// `log.level`: trace, debug, info, notice, warning, error, critical.
    public var logLevel = "info"
    /// `output.format_change`: resample or reopen (a next track in another format).
    public var formatChange = "resample"
    /// `output.crossfade_within_albums`: cross-fade also between consecutive tracks of
    /// one album played in order (off: those stay gapless).
    public var crossfadeWithinAlbums = false
    /// `volume.mixer`: software, hardware (an ALSA mixer control) or none.
    public var mixer = "software"
    /// `volume.mixer_device` and `volume.mixer_control`: the ALSA mixer for `hardware`.
    public var mixerDevice = "default"
    public var mixerControl = "Master"
    /// `mpd.enabled`, `mpd.socket` (default: mpd.sock next to the control socket),
    /// `mpd.tcp` (host:port, off when empty) and `mpd.password` (none when empty).
    /// `volume.start`: the volume at every start (-1: the one saved in the state file).
    public var volumeStart = -1
    /// `volume.max`: the highest volume a client may set (a request above it gets it).
    public var volumeMax = 100
    public var mpdEnabled = true
    public var mpdSocket = ""
    public var mpdTCP = ""
    public var mpdPassword = ""
    /// `http.listen`: the web remote's addresses ("127.0.0.1:6680", "[::1]:6680"); off
    /// when empty. `http.password` or `http.password_file` (its first line): needed on
    /// any address but loopback. `http.web_root`: where the page's files are (default:
    /// beside the binary, `../share/playd/web`).
    public var httpListen: [String] = []
    public var httpPassword = ""
    public var httpPasswordFile = ""
    public var httpWebRoot = ""
    /// `http.streams`: the listen streams served (`opus`, `mp3`, `flac`, `wav`: at
    /// /stream.opus …); none when empty. `http.stream_buffer_ms`: the audio a new
    /// listener gets at once, and a quarter of how far one may fall behind before it is
    /// dropped. `http.max_listeners`: listeners at once, over all formats.
    public var httpStreams: [String] = []
    public var httpStreamBufferMillis = 500
    public var httpMaxListeners = 32
    /// `http.stream_volume`: follow (the volume applies to the listen streams) or fixed.
    public var httpStreamVolume = "follow"
    /// Announce the MPD TCP listener over Zeroconf (`_mpd._tcp`), as MPD's
    /// zeroconf_enabled; only when `mpd.tcp` is set.
    public var zeroconf = true
    /// The announced name; `%h` is the host name (MPD's zeroconf_name).
    public var zeroconfName = "playd @ %h"
    /// `volume.replaygain`: off, track, album or auto.
    public var replayGain = "off"
    /// `volume.replaygain_preamp`, dB added to the tags' gain (−15…15).
    public var replayGainPreamp = 0.0
    /// `volume.replaygain_missing_preamp`, dB for files without ReplayGain tags (−15…15).
    public var replayGainMissingPreamp = 0.0
    /// `volume.replaygain_limit`: keep the tagged peak from clipping (a measured true
    /// peak under `replaygain.max_true_peak_dbtp`).
    public var replayGainLimit = true
    /// `replaygain.source`: tags (MPD's behaviour, the default), measured or auto (tags
    /// where present, else measured).
    public var replayGainSource = "tags"
    /// `replaygain.reference_lufs`: what a measured track is brought to (−30…−5).
    public var replayGainReferenceLUFS = -18.0
    /// `replaygain.max_true_peak_dbtp`: a measured track's gain keeps its true peak
    /// under this (−10…0).
    public var replayGainMaxTruePeak = -1.0

    /// `limits.max_connections`: connections per listener (control, MPD socket, MPD TCP).
    public var maxConnections = 100
    /// `limits.max_connections_per_user`: connections one uid (TCP: one address) may
    /// hold over all listeners.
    public var maxConnectionsPerUser = 80
    /// `limits.connection_timeout`: seconds a silent connection is kept, unless it
    /// waits for events (`subscribe`, MPD `idle`).
    public var connectionTimeout = 60
    /// `limits.open_timeout`: seconds a `play` waits for its file's open, or for the
    /// output's reopen, before it is answered `timed_out` (``Player/openTimeoutNanoseconds``).
    public var openTimeout = 30
    /// `limits.max_queue_length`: entries in the queue (MPD's `max_playlist_length`).
    public var maxQueueLength = 16_384
    /// `limits.max_playlist_size`: bytes of an M3U/PLS file read for `add`/`load`.
    public var maxPlaylistBytes = 4 << 20
    /// `limits.max_playlist_entries`: entries taken from one playlist file (unset: the
    /// queue's length). Stored playlists, the queue's own saves, are held to the queue's
    /// limit instead (``Player/storedPlaylists``): with 10,000 here a 12,000-song queue
    /// could not be saved (issue 39).
    public var maxPlaylistEntries = 16_384
    /// `mpd.max_command_list_size`: KiB of one MPD command list (MPD's default 2048).
    public var maxCommandListKiB = 2048
    /// `streams.enabled`: http(s) URLs are played and queued.
    public var streamsEnabled = true
    /// `streams.allowed_hosts`: when not empty, only URLs on these hosts (exact, or a
    /// `.example.org` suffix).
    public var streamHosts: [String] = []
    /// `streams.timeout`: seconds a connect or a silent read may take.
    public var streamTimeout = 10
    /// `streams.reconnect_attempts`: tries after a live stream drops.
    public var streamReconnects = 5
    /// `streams.buffer_kib`: the network buffer of a stream that cannot seek.
    public var streamBufferKiB = 128
    /// `streams.normalize`: a slow automatic gain for streams (StreamNormalizer).
    public var streamNormalize = false
    /// `streams.prefill_kib`: what arrives before the first frame (at most the buffer).
    public var streamPrefillKiB = 32

    /// `announce.tts_urls`: URL patterns (globs, `*` across `/` too) of text-to-speech
    /// clips: Home Assistant's `clear`, `add URL`, `play` of one plays it as an
    /// announcement and keeps the queue (Player+TTS.swift). Empty: off.
    public var ttsURLs = ["*/api/tts_proxy/*"]
    /// `announce.tts_mode`: pause (the music waits at its frame) or duck.
    public var ttsMode = "pause"
    /// `announce.tts_duck_db`: the music's level under a clip in duck mode (−60…0 dB).
    public var ttsDuckDB = -18.0

    /// `[schedule]`, `[schedule.default]`, `[[schedule.block]]`, `[[schedule.announce]]`:
    /// the day's programme (Schedule.swift, docs/schedule.md).
    public var schedule = Schedule()

    public init() {}

    public struct Error: Swift.Error, CustomStringConvertible {
        public var message: String
        public var description: String { message }
    }

    /// The config's tables; every key is `table.key`.
    /// (From the key table, its one owner: a new table's keys bring the table.)
    static let sections: Set<String> = Set(keys.map { String($0.name.prefix { $0 != "." }) } + ["schedule"])

    /// Parses `text` (the file at `path`, named in errors).
    public init(toml text: String, path: String) throws(Error) {
        try self.init(toml: Array(text.utf8), path: path)
    }

    /// Parses the bytes of a TOML 1.0 file (`path` is named in errors).
    public init(toml bytes: [UInt8], path: String) throws(Error) {
        let doc: TOML
        do { doc = try TOML(bytes: bytes) } catch { throw Error(message: "\(path): \(error)") }
        self.init()
        for h in doc.headers where !(h.path.count == 1 && Self.sections.contains(h.path[0])) && h.path != ["schedule", "default"] {
            let name = h.path.map(TOML.showKey).joined(separator: ".")
            throw Error(message: "\(path): line \(h.line): unknown table [\(name)] (the tables are \(Self.sections.sorted().joined(separator: ", ")))")
        }
        var seen: Set<String> = []
        var mixerSpellings: Set<String> = []  // the values of output.mixer and volume.mixer
        // The schedule's tables and arrays of tables are read by their own parser.
        schedule = try Schedule.parse(doc.leaves.filter { $0.path.first == "schedule" }, path: path)
        for e in doc.leaves where e.path.first != "schedule" {
            // Every setting is `table.key`: a path of any other length (or a quoted part
            // holding a dot) matches no key of the table.
            let key = e.path.count == 2 ? e.path.joined(separator: ".") : e.path.map(TOML.showKey).joined(separator: ".")
            guard let k = Self.keysByName[key] else {
                throw Error(message: "\(path): line \(e.line): unknown key '\(key)'")
            }
            try k.parse(&self, Value(entry: e, key: key, path: path))
            seen.insert(key)
            if key == "output.mixer" || key == "volume.mixer" { mixerSpellings.insert(mixer) }
        }
        guard periodTime <= bufferTime else {
            throw Error(message: "\(path): output.period_time (\(periodTime)) must not exceed output.buffer_time (\(bufferTime))")
        }
        guard streamPrefillKiB <= streamBufferKiB else {
            throw Error(message: "\(path): streams.prefill_kib (\(streamPrefillKiB)) must not exceed streams.buffer_kib (\(streamBufferKiB))")
        }
        if !seen.contains("limits.max_playlist_entries") { maxPlaylistEntries = maxQueueLength }
        if mixerSpellings.count > 1 {
            throw Error(message: "\(path): output.mixer and volume.mixer are the same setting, given two values: give one")
        }
    }

    public static let logLevels = ["trace", "debug", "info", "notice", "warning", "error", "critical"]

    /// Reads the config from `path`, or (nil) from `$XDG_CONFIG_HOME/playd/config.toml` or
    /// `/etc/playd/config.toml` when present, else the defaults. Returns the path used.
    public static func load(path: String?) throws(Error) -> (DaemonConfig, String?) {
        let candidates: [String]
        if let p = path {
            candidates = [p]
        } else {
            let env = Environment.get
            let xdg = env("XDG_CONFIG_HOME") ?? env("HOME").map { $0 + "/.config" }
            candidates = [xdg.map { $0 + "/playd/config.toml" }, "/etc/playd/config.toml"].compactMap { $0 }
        }
        for c in candidates {
            let bytes: [UInt8]
            do {
                bytes = try LocalFile.read(c, limit: maxFileBytes, withinRoots: false)
            } catch {
                if path != nil || error.code != .fileNotFound { throw Error(message: "\(c): cannot read the config file: \(error.message)") }
                continue
            }
            return (try DaemonConfig(toml: bytes, path: c), c)
        }
        return (DaemonConfig(), nil)
    }

    /// The socket path after defaults.
    public var resolvedSocketPath: String {
        if !socketPath.isEmpty { return socketPath }
        let env = Environment.get
        if let rd = env("RUNTIME_DIRECTORY")?.split(separator: ":").first { return "\(rd)/control.sock" }
        if let x = env("XDG_RUNTIME_DIR") { return x + "/playd/control.sock" }
        return "/run/playd/control.sock"
    }

    /// The MPD socket path after defaults: `mpd.sock` next to the control socket.
    public var resolvedMPDSocketPath: String {
        if !mpdSocket.isEmpty { return mpdSocket }
        let control = resolvedSocketPath
        return String(control[..<(control.lastIndex(of: "/") ?? control.startIndex)]) + "/mpd.sock"
    }

    /// The state file path after defaults.
    public var resolvedStateFile: String {
        if !stateFile.isEmpty { return stateFile }
        let env = Environment.get
        if let sd = env("STATE_DIRECTORY")?.split(separator: ":").first { return "\(sd)/state.json" }
        if let x = env("XDG_STATE_HOME") { return x + "/playd/state.json" }
        return (env("HOME") ?? "/tmp") + "/.local/state/playd/state.json"
    }

    /// The stored playlists' folder after defaults.
    public var resolvedPlaylistDirectory: String {
        if !playlistDirectory.isEmpty { return playlistDirectory }
        let state = resolvedStateFile
        return String(state[..<(state.lastIndex(of: "/") ?? state.startIndex)]) + "/playlists"
    }

    /// The output spec with the fallback chain folded in.
    public var outputSpec: String {
        guard !outputFallback.isEmpty, let spec = try? OutputSpec.parse(outputDevice), spec.kind == .alsa else {
            return outputDevice
        }
        let query = spec.options.keys.sorted().map { "\($0)=\(spec.options[$0]!)" }.joined(separator: "&")
        return "alsa:" + ([spec.target] + outputFallback).joined(separator: "|") + (query.isEmpty ? "" : "?" + query)
    }
}

enum Environment {
    static func get(_ name: String) -> String? {
        guard let v = getenv(name) else { return nil }
        let s = String(cString: v)
        return s.isEmpty ? nil : s
    }
}

/// Config and state files are read whole, up to this size (a symlink to /dev/zero or a
/// 2 GB file is refused, not read).
let maxFileBytes = 16 << 20
