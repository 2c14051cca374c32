import Foundation
import Logging
import Synchronization
import CoreStream

/// Runs a ``PlaybackEngine`` with a `wav:` capture output and collects its events.
public final class EngineHarness: @unchecked Sendable {
    public let engine: PlaybackEngine
    public let capturePath: String
    private final class EventLog: Sendable { let list = Mutex<[PlaybackEngine.Event]>([]) }
    private let events = EventLog()

    /// - Parameter paced: pace the capture like a sound card (true) or take audio as
    ///   fast as it comes (false).
    public convenience init(paced: Bool, bufferMillis: Int = 200, periodMillis: Int = 50, name: String = #function) {
        try! self.init(paced: paced, feeds: [], bufferMillis: bufferMillis, periodMillis: periodMillis, name: name)
    }

    /// With `feeds`: extra outputs (``FeedOutput`` specs), fed with what the capture plays.
    public init(paced: Bool, feeds: [String], bufferMillis: Int = 200, periodMillis: Int = 50,
                name: String = #function) throws {
        let safe = name.filter { $0.isLetter || $0.isNumber }
        capturePath = NSTemporaryDirectory() + "playd-capture-\(getpid())-\(safe)-\(UInt32.random(in: 0...UInt32.max)).wav"
        var config = PlaybackEngine.Configuration()
        config.output = "wav:\(capturePath)" + (paced ? "" : "?pace=off")
        config.bufferMillis = bufferMillis
        config.periodMillis = periodMillis
        config.feeds = try feeds.map { spec throws(StreamError) in try FeedOutput(spec: spec) }
        var logger = Logger(label: "test")
        logger.logLevel = ProcessInfo.processInfo.environment["PLAYD_TEST_LOG"] == "debug" ? .debug : .warning
        let sink = events
        engine = PlaybackEngine(configuration: config, logger: logger) { e in sink.list.withLock { $0.append(e) } }
    }

    public var recordedEvents: [PlaybackEngine.Event] { events.list.withLock { $0 } }

    /// Polls until `condition` holds or `seconds` pass. Returns whether it held.
    @discardableResult
    public func wait(seconds: Double, until condition: () -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if condition() { return true }
            usleep(2_000)
        }
        return condition()
    }

    /// Waits for the current track to end (state stopped).
    @discardableResult
    public func waitForEnd(seconds: Double = 30) -> Bool {
        wait(seconds: seconds) { engine.status().state == .stopped }
    }

    /// Plays `path` unpaced from `from` after `setUp` (the engine is paused there, so a
    /// loop or direction set in it applies from the first frame), to the end. Returns
    /// the capture, the events, and whether the track ended within `seconds`.
    public static func playToEnd(_ path: String, from: Int64? = nil, seconds: Double = 60, name: String = #function,
                                 _ setUp: (PlaybackEngine) throws -> Void = { _ in }) throws
        -> (capture: WAVFile, events: [PlaybackEngine.Event], ended: Bool) {
        let h = EngineHarness(paced: false, name: name)
        try h.engine.play(path: path, from: from, paused: true)
        try setUp(h.engine)
        h.engine.waitUntilApplied()
        h.engine.resume()
        let ended = h.waitForEnd(seconds: seconds)
        let events = h.recordedEvents
        return (try h.finishCapture(), events, ended)
    }

    /// Shuts the engine down (closing the WAV file) and reads the capture.
    public func finishCapture() throws -> WAVFile {
        engine.shutdown()
        defer { try? FileManager.default.removeItem(atPath: capturePath) }
        return try WAVFile(path: capturePath)
    }
}
