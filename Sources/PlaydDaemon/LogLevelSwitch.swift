import Logging
import Synchronization

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
