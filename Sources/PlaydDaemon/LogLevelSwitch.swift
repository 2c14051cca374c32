import Logging
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// The daemon's log level, changeable while running (SIGHUP reload): every logger's
/// handler reads it here rather than keeping its own copy.
public enum LogLevelSwitch {
    /// Index into `Logger.Level.allCases`. Written by the thread that reloads (control),
    /// read by every thread that logs; a relaxed atomic, as nothing else depends on it.
    private static let index = Atomic<Int>(2)

    public static var level: Logger.Level {
        let all = Logger.Level.allCases
        return all[min(max(0, index.load(ordering: .relaxed)), all.count - 1)]
    }

    public static func set(_ level: Logger.Level) {
        index.store(Logger.Level.allCases.firstIndex(of: level) ?? 2, ordering: .relaxed)
    }

    /// By name (`log.level`); an unknown name changes nothing.
    public static func set(_ name: String) {
        if let l = Logger.Level(rawValue: name) { set(l) }
    }
}

/// A handler that logs through `inner` at ``LogLevelSwitch``'s level.
public struct SwitchedLogHandler: LogHandler {
    public var inner: any LogHandler
    public init(_ inner: any LogHandler) { self.inner = inner }

    public var logLevel: Logger.Level {
        get { LogLevelSwitch.level }
        set { LogLevelSwitch.set(newValue) }
    }
    public var metadata: Logger.Metadata {
        get { inner.metadata }
        set { inner.metadata = newValue }
    }
    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { inner[metadataKey: key] }
        set { inner[metadataKey: key] = newValue }
    }
    public func log(level: Logger.Level, message: Logger.Message, metadata: Logger.Metadata?,
                    source: String, file: String, function: String, line: UInt) {
        var i = inner
        i.logLevel = .trace
        i.log(level: level, message: message, metadata: metadata, source: source, file: file, function: function, line: line)
    }
}

/// Log lines for journald: under systemd (`$JOURNAL_STREAM` set) stderr goes to the
/// journal, which takes a `<N>` syslog priority at the start of each line, so
/// `journalctl -p err` shows errors only; and it stamps the time itself. One line per
/// call: `<N>label: message key=value …`, line breaks in the message as spaces.
public struct JournalLogHandler: LogHandler {
    public var logLevel: Logger.Level = .trace
    public var metadata: Logger.Metadata = [:]
    let label: String
    public init(label: String) { self.label = label }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    /// syslog priorities (sd-daemon.h's SD_DEBUG … SD_CRIT).
    public static func priority(_ level: Logger.Level) -> Int {
        switch level {
        case .trace, .debug: return 7
        case .info: return 6
        case .notice: return 5
        case .warning: return 4
        case .error: return 3
        case .critical: return 2
        }
    }

    /// Whether stderr goes to the journal.
    public static var journalIsStderr: Bool {
        guard let v = getenv("JOURNAL_STREAM") else { return false }
        return v.pointee != 0
    }

    public func log(level: Logger.Level, message: Logger.Message, metadata extra: Logger.Metadata?,
                    source: String, file: String, function: String, line: UInt) {
        var all = metadata
        if let e = extra { all.merge(e) { $1 } }
        let fields = all.keys.sorted().map { "\($0)=\(all[$0]!)" }.joined(separator: " ")
        var text = "<\(Self.priority(level))>\(label): \(message)" + (fields.isEmpty ? "" : " " + fields)
        text = String(text.map { $0 == "\n" || $0 == "\r" ? " " : $0 }) + "\n"
        _ = text.withUTF8 { write(2, $0.baseAddress, $0.count) }
    }
}
