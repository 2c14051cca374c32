import Foundation
import Logging
import Synchronization
import Testing
import CoreStream
import CoreStreamTestSupport
@testable import PlaydDaemon

/// The Player in-process, without sockets (as swift-nio tests handlers with
/// EmbeddedChannel): typed commands against the unpaced null output, and what each
/// tells its subscribers.
@Suite("Player, in-process", .checksSomething, .serialized)
struct PlayerTests {
    final class Box: @unchecked Sendable {
        // @unchecked Sendable: `posted` is behind its Mutex; the rest is the test thread's.
        var changes = Changes(); var events: [PlayerEvent] = []; var flushes = 0
        /// Times the player asked for parked sessions to be resumed.
        var resumes = 0
        let posted = Mutex<[@Sendable () -> Void]>([])
        /// Signalled at every post (the walker's result comes back this way).
        let arrived = DispatchSemaphore(value: 0)
        /// What the server's loop does in a turn: posted work (engine events), then flush.
        func turn(_ p: Player) {
            runPosted()
            p.flush()
        }
        func runPosted() {
            for work in posted.withLock({ l -> [@Sendable () -> Void] in defer { l.removeAll() }; return l }) { work() }
        }
        /// `add` as a session runs it: parked while the walker collects the sources,
        /// run again within the turn the result is posted back in.
        @discardableResult
        func add(_ p: Player, _ sources: [String], place: Command.Place = .end) throws -> Outcome {
            try perform(p, .add(sources: sources, place: place))
        }
        /// A command as a session runs it: parked while a walk or a file's open goes on
        /// off the control thread, and run again in the turn its result comes back in.
        @discardableResult
        func perform(_ p: Player, _ command: Command) throws -> Outcome {
            while true {
                let result = Result { () throws(PlayerError) -> Outcome in try p.perform(command) }
                guard case .failure(let e) = result, e.code == .workPending else { return try result.get() }
                guard arrived.wait(timeout: .now() + 30) == .success else { throw e }
                runPosted()
            }
        }
    }

    /// A config on `null?pace=off` with its own state file in a new folder, and a quiet
    /// logger.
    static func setup(name: String) throws -> (DaemonConfig, Logger, String) {
        let dir = NSTemporaryDirectory() + "playd-player-\(getpid())-\(name.filter(\.isLetter))-\(UInt16.random(in: 0...UInt16.max))"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        var config = DaemonConfig()
        config.outputDevice = "null?pace=off"
        config.stateFile = dir + "/state.json"
        var logger = Logger(label: "test")
        logger.logLevel = .critical
        return (config, logger, dir)
    }

    /// A player on `null?pace=off` with its own state file; notifications into a box.
    static func player(name: String = #function) throws -> (Player, Box, String) {
        let (config, logger, dir) = try setup(name: name)
        let p = try Player(config: config, logger: logger)
        let box = Box()
        p.onNotify = { c, e in box.changes.formUnion(c); box.events += e; box.flushes += 1 }
        p.post = { work in box.posted.withLock { $0.append(work) }; box.arrived.signal() }
        p.resumeParked = { box.resumes += 1 }
        p.restore()
        return (p, box, dir)
    }

    static var long: String { Fixtures.named("flac-44100-2.flac").path }

    /// Command → the subsystems it must announce (MPD's idle names).
    static let rows: [(String, [Command], Changes)] = [
        ("add", [.add(sources: [long], place: .end)], .queue),
        ("insert next", [.add(sources: [long], place: .next)], .queue),
        ("remove", [.remove(0..<1)], .queue),
        ("move", [.move(0..<1, to: 1)], .queue),
        ("play index", [.playIndex(0)], .player),
        ("pause", [.playIndex(0), .transport(.pause)], .player),
        ("seek", [.playIndex(0), .seek(try! SeekTarget(checking: .seconds(1), relative: false))], .player),
        ("repeat", [.setRepeat(true)], .options),
        ("single", [.setSingle(.oneshot)], .options),
        ("random", [.setRandom(true)], .options),
        ("consume", [.setConsume(true)], .options),
        ("volume", [.volume(.set(try! Bounded(checking: 40)))], .mixer),
        ("mute", [.mute(true)], .mixer),
        ("output", [.output(name: "local", enabled: false)], .outputs),
        ("direction", [.playIndex(0), .direction(.reverse)], .player),
        ("loop", [.playIndex(0), .loop(LoopRegion(start: 100, end: 50_000, count: nil, pingPong: false))], .player),
        ("clear", [.clear], .queue),
    ]

    @Test(arguments: rows.map(\.0))
    func everyChangeIsAnnounced(_ name: String) throws {
        let row = Self.rows.first { $0.0 == name }!
        let (p, box, dir) = try Self.player(name: name)
        defer { p.shutdown(); try? FileManager.default.removeItem(atPath: dir) }
        try box.add(p, [Self.long, Self.long])
        box.turn(p)
        box.changes = []
        for c in row.1 { try box.perform(p, c) }
        box.turn(p)
        #expect(box.changes.isSuperset(of: row.2), "\(name): announced \(box.changes.mpdSubsystems.sorted()), wanted \(row.2.mpdSubsystems.sorted())")
    }

    /// `delete 0:500` (and every bulk edit) is one state write, not 500.
    /// The start-up scan's end reaches the control thread however soon the scan ends: a
    /// scan of a few unchanged files that ended before the daemon had set `post` was
    /// dropped, and `status` said "updating" for ever, the songs never measured (CI, a
    /// loaded machine, twice). Forced here: any scan the player starts before `post` is
    /// set has ended before it is.
    @Test func theStartUpScanIsReportedHoweverSoonItEnds() throws {
        var (config, logger, dir) = try Self.setup(name: #function)
        try FileManager.default.createDirectory(atPath: dir + "/music", withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: Self.long, toPath: dir + "/music/a.flac")
        config.musicRoots = [dir + "/music"]
        // Else the roots would hold every later test in this process to this folder
        // (`LocalFile.roots` is the process's).
        config.allowOutsideRoots = true
        let p = try Player(config: config, logger: logger)
        p.library?.waitForScan()
        let box = Box()
        p.post = { work in box.posted.withLock { $0.append(work) }; box.arrived.signal() }
        p.restore()
        #expect(p.libraryJob != 0, "restore starts the scan (update_on_start)")
        // Its report comes back as posted work (a hang guard: a lost report never comes).
        while p.libraryJob != 0, box.arrived.wait(timeout: .now() + 60) == .success { box.turn(p) }
        #expect(p.libraryJob == 0, "the scan's end was reported")
        #expect(p.librarySongs == 1)
    }

    @Test func aBulkEditIsOneStateWrite() throws {
        let (p, box, dir) = try Self.player()
        defer { p.shutdown(); try? FileManager.default.removeItem(atPath: dir) }
        try box.add(p, Array(repeating: Self.long, count: 600))
        p.flush()
        let writes = p.stateWrites, flushes = box.flushes
        try p.perform(.remove(0..<500))
        p.flush()
        #expect(p.queue.count == 100)
        #expect(p.stateWrites == writes + 1)
        #expect(box.flushes == flushes + 1)
    }

    /// MPD's four options each on its own: `repeat on, single on, repeat off, single
    /// off` ends with both off (it said `repeat: 1` before).
    @Test func repeatAndSingleAreIndependent() throws {
        let (p, _, dir) = try Self.player()
        defer { p.shutdown(); try? FileManager.default.removeItem(atPath: dir) }
        for c: Command in [.setRepeat(true), .setSingle(.on), .setRepeat(false), .setSingle(.off)] { try p.perform(c) }
        #expect(p.queue.repeats == false && p.queue.single == .off)
        try p.perform(.setSingle(.on))
        #expect(p.queue.repeats == false && p.queue.single == .on)
        #expect(RepeatWord(repeats: p.queue.repeats, single: p.queue.single) == .off)
        try p.perform(.setRepeatSingle(repeats: true, single: .on))
        #expect(p.queue.repeats && p.queue.single == .on)
    }

    /// A folder `add` waits for the walker thread: the first try says `workPending` and
    /// changes nothing while the path is looked up off the control thread (a stat on a
    /// hung mount never returns); the lookup comes back as posted work, the request
    /// runs again and starts the walk, whose result comes back the same way, and the
    /// same request then adds what the walk found, in natural order. A second `add` of
    /// the same folder while the walk runs starts no second walk; a result nobody took
    /// is gone after the turn.
    @Test(.tags(.threadSanitizer)) func aFolderAddWaitsForTheWalkerThread() throws {
        let (p, box, dir) = try Self.player()
        defer { p.shutdown(); try? FileManager.default.removeItem(atPath: dir) }
        let folder = dir + "/music"
        try FileManager.default.createDirectory(atPath: folder + "/sub", withIntermediateDirectories: true)
        for name in ["10 b.flac", "2 a.flac", "sub/1 c.flac", "notes.txt"] {
            try FileManager.default.copyItem(atPath: Self.long, toPath: folder + "/" + name)
        }
        #expect(throws: PlayerError.self, "the lookup") { try p.perform(.add(sources: [folder], place: .end)) }
        #expect(box.arrived.wait(timeout: .now() + 30) == .success)
        box.runPosted()
        #expect(box.resumes == 1, "the lookup's resume")
        #expect(throws: PlayerError.self, "the walk starts") { try p.perform(.add(sources: [folder], place: .end)) }
        #expect(throws: PlayerError.self, "the same walk") { try p.perform(.add(sources: [folder], place: .end)) }
        #expect(p.queue.count == 0)
        #expect(box.arrived.wait(timeout: .now() + 30) == .success)
        box.runPosted()
        #expect(box.resumes == 2, "one walk, one resume")
        let out = try p.perform(.add(sources: [folder], place: .end))
        #expect(out.added.count == 3)
        #expect(p.queue.entries.map { String($0.path.dropFirst(folder.count + 1)) } == ["2 a.flac", "10 b.flac", "sub/1 c.flac"])
        p.flush()
        #expect(throws: PlayerError.self, "taken at the end of the turn: a later add walks again") {
            try p.perform(.add(sources: [folder], place: .end))
        }
    }

    /// Out-of-range arguments are typed errors, not traps: positions the queue does not
    /// have, and a seek in seconds that is too many frames at the track's rate.
    @Test(arguments: [Command.playIndex(-1), .playIndex(Int.max), .playID(Int.max), .remove(5..<Int.max),
                      .move(0..<1, to: Int.max), .seek(try! SeekTarget(checking: .seconds(1e15), relative: false)),
                      .add(sources: [long], place: .index(Int.max))])
    func badArgumentsAreTypedErrors(_ c: Command) throws {
        let (p, box, dir) = try Self.player(name: "bad")
        defer { p.shutdown(); try? FileManager.default.removeItem(atPath: dir) }
        try box.add(p, [Self.long])
        try box.perform(p, .playIndex(0))
        #expect(throws: PlayerError.self) { try box.perform(p, c) }
        #expect(p.engine.status().state == .playing || p.engine.status().state == .stopped)
    }

    /// A number with a range is checked where it is made (issue 40: once, not again in
    /// the Player): out of range it is a typed error for an in-process caller, as the
    /// argument kinds make it one for a client.
    @Test func numbersOutOfRangeAreRefusedWhereTheyAreMade() throws {
        #expect(throws: PlayerError.self) { try Bounded<VolumeLevel>(checking: 101) }
        #expect(throws: PlayerError.self) { try Bounded<VolumeStep>(checking: Int.min) }
        #expect(throws: PlayerError.self) { try Bounded<Priority>(checking: 256) }
        #expect(throws: PlayerError.self) { try SeekTarget(checking: .frames(Int64.min), relative: true) }
        #expect(throws: PlayerError.self) { try SeekTarget(checking: .seconds(.nan), relative: false) }
        #expect(try Bounded<VolumeLevel>(checking: 100).value == 100)
        #expect(try Bounded<Priority>(checking: 0).value == 0)
        #expect(try SeekTarget(checking: .frames(-(1 << 53)), relative: true).amount == .frames(-(1 << 53)))
    }
}
