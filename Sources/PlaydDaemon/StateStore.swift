import CoreStream
import Logging
import PlaydProtocol
#if canImport(Glibc)
import Glibc
#endif

/// What playd remembers across restarts.
struct SavedState {
    var file: String?
    var positionFrames: Int64
    var sampleRate: Int?
    var state: String
    /// The loop region; its `count` is the wraps left when saved.
    var loop: LoopRegion?
    var direction: PlayDirection = .forward
    var volume: Int
    var muted = false
    var queue = PlayQueue()
    /// Outputs switched off with `output`/`disableoutput`, by name.
    var disabledOutputs: [String] = []
    /// MPD's crossfade, mixrampdb, mixrampdelay (its state file keeps them too).
    var crossfade = Player.CrossfadeSettings()
    /// The schedule's block in place (`3@2026-11-27`, `default`) and whether a client's
    /// override held: a restart in the same block goes on with it.
    var schedule: (occurrence: String, overridden: Bool)?

    private var scheduleJSON: JSON {
        guard let s = schedule else { return .null }
        return .obj(("block", .string(s.occurrence)), ("override", .bool(s.overridden)))
    }

    // In typed parts: as one literal this getter took 9.4 s to type-check, in every
    // build (debug, both sanitizers, release; -warn-long-function-bodies, 2026-11-29).
    private var loopJSON: JSON {
        guard let l = loop else { return .null }
        let count: JSON = l.count.map(JSON.int) ?? .null
        return .obj(("start_frames", .int(l.start)), ("end_frames", .int(l.end)), ("count", count), ("ping_pong", .bool(l.pingPong)))
    }

    private var crossfadeJSON: JSON {
        .obj(("seconds", .int(Int64(crossfade.seconds))), ("mixramp_db", .number(crossfade.mixrampDB)),
             ("mixramp_delay", .number(crossfade.mixrampDelay)))
    }

    private var queueJSON: JSON {
        let entries: [JSON] = queue.entries.map { (e: PlayQueue.Entry) -> JSON in .obj(("id", .int(Int64(e.id))), ("file", .string(e.path))) }
        let current: JSON = queue.current.map { (c: Int) -> JSON in .int(Int64(c)) } ?? .null
        // "repeat" for state files of earlier versions; "repeats" and "single" say all
        // of it (single without repeat has no word there).
        let word: String = RepeatWord(repeats: queue.repeats, single: queue.single).rawValue
        return .obj(("entries", .array(entries)), ("current", current), ("repeat", .string(word)), ("repeats", .bool(queue.repeats)),
                    ("single", .string(queue.single.rawValue)), ("shuffle", .bool(queue.shuffle)), ("consume", .bool(queue.consume)))
    }

    var json: JSON {
        let fileJSON: JSON = file.map(JSON.string) ?? .null
        let rateJSON: JSON = sampleRate.map(JSON.int) ?? .null
        let disabled: [JSON] = disabledOutputs.map(JSON.string)
        return .obj(("version", .int(1)), ("file", fileJSON), ("position_frames", .int(positionFrames)),
                    ("sample_rate", rateJSON), ("state", .string(state)), ("loop", loopJSON),
                    ("direction", .string(direction.rawValue)), ("volume", .int(volume)), ("muted", .bool(muted)),
                    ("disabled_outputs", .array(disabled)), ("crossfade", crossfadeJSON), ("schedule", scheduleJSON),
                    ("queue", queueJSON))
    }
}

/// Saves the state atomically (write a temporary file, fsync, rename) so a crash at
/// any moment leaves either the old or the new file, never a torn one.
enum StateStore {
    struct Error: Swift.Error, CustomStringConvertible {
        var message: String
        var description: String { message }
    }

    /// Creates the folders above `path` that are missing.
    static func makeParents(of path: String) throws(Error) {
        let dir = String(path[..<(path.lastIndex(of: "/") ?? path.startIndex)])
        var p = ""
        for part in dir.split(separator: "/") {
            p += "/" + part
            if mkdir(p, 0o755) != 0 && errno != EEXIST { throw Error(message: "\(p): mkdir() failed: \(String(cString: strerror(errno)))") }
        }
    }

    static func save(_ state: SavedState, to path: String) throws(Error) {
        try save(text: state.json.text + "\n", to: path)
    }

    static func save(text: String, to path: String) throws(Error) {
        try makeParents(of: path)
        let tmp = path + ".tmp.\(getpid())"
        let fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw Error(message: "\(tmp): open() failed: \(String(cString: strerror(errno)))") }
        let bytes = Array(text.utf8)
        var off = 0
        while off < bytes.count {
            let n = bytes[off...].withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            if n < 0 { if errno == EINTR { continue }; let e = errno; close(fd); unlink(tmp); throw Error(message: "\(tmp): write() failed: \(String(cString: strerror(e)))") }
            off += n
        }
        if fsync(fd) != 0 { let e = errno; close(fd); unlink(tmp); throw Error(message: "\(tmp): fsync() failed: \(String(cString: strerror(e)))") }
        close(fd)
        if rename(tmp, path) != 0 { let e = errno; unlink(tmp); throw Error(message: "\(path): rename() failed: \(String(cString: strerror(e)))") }
    }

    /// Removes temporary files a killed playd left next to `path` (`NAME.tmp.PID` whose
    /// process is gone): a `kill -9` between writing and renaming leaves one behind.
    static func removeLeftovers(of path: String) {
        let slash = path.lastIndex(of: "/") ?? path.startIndex
        let dir = slash == path.startIndex ? "." : String(path[..<slash])
        let prefix = String(path[path.index(after: slash)...]) + ".tmp."
        guard let d = opendir(dir) else { return }
        defer { closedir(d) }
        while let e = readdir(d) {
            let name = withUnsafeBytes(of: e.pointee.d_name) { String(decoding: $0.prefix(while: { $0 != 0 }), as: UTF8.self) }
            guard name.hasPrefix(prefix), let pid = Int32(name.dropFirst(prefix.count)) else { continue }
            if pid != getpid() && kill(pid, 0) != 0 && errno == ESRCH { unlink(dir + "/" + name) }
        }
    }

    /// nil when there is no state file; throws when it exists but is unreadable or corrupt.
    /// Every number in it is range-checked before it becomes an integer: the file is
    /// input like any other (a hand-edited `1e300` must not trap at start).
    static func load(from path: String) throws(Error) -> SavedState? {
        let bytes: [UInt8]
        do {
            bytes = try LocalFile.read(path, limit: maxFileBytes, withinRoots: false)
        } catch {
            if error.code == .fileNotFound { return nil }
            throw Error(message: "\(path): cannot read: \(error.message)")
        }
        let j: JSON
        do { j = try JSON.parse(String(decoding: bytes, as: UTF8.self)) } catch { throw Error(message: "\(path): corrupt state file: \(error)") }
        let frames = 0...FrameTime.maxFrames
        guard let state = j["state"]?.stringValue, let pos = j["position_frames"]?.integer(in: frames) else {
            throw Error(message: "\(path): corrupt state file: missing state or position_frames out of range")
        }
        var loop: LoopRegion?
        if let l = j["loop"], let a = l["start_frames"]?.integer(in: frames), let b = l["end_frames"]?.integer(in: frames), a < b {
            let count = l["count"]?.integer(in: 0...999_999_999).map { Int($0) }
            loop = LoopRegion(start: a, end: b, count: count, pingPong: l["ping_pong"]?.boolValue ?? false)
        }
        let direction = j["direction"]?.stringValue.flatMap(PlayDirection.init(rawValue:)) ?? .forward
        var queue = PlayQueue()
        if let q = j["queue"], let list = q["entries"]?.arrayValue {
            var entries: [PlayQueue.Entry] = []
            var ids: Set<Int> = []
            for e in list {
                guard let id = e["id"]?.integer(in: 1...999_999_999_999), let file = e["file"]?.stringValue,
                      ids.insert(Int(id)).inserted else {
                    throw Error(message: "\(path): corrupt state file: a queue entry without id or file")
                }
                entries.append(PlayQueue.Entry(id: Int(id), path: file))
            }
            let current = q["current"]?.integer(in: 0...Int64(max(0, entries.count - 1))).map { Int($0) }
            var options = PlayQueue()
            (options.repeats, options.single) = (q["repeat"]?.stringValue.flatMap(RepeatWord.init(rawValue:)) ?? .off).options
            if let r = q["repeats"]?.boolValue { options.repeats = r }
            if let single = q["single"]?.stringValue.flatMap(PlayQueue.Single.init(rawValue:)) { options.single = single }
            queue = PlayQueue(entries: entries, current: entries.isEmpty ? nil : current,
                              repeats: options.repeats, single: options.single,
                              shuffle: q["shuffle"]?.boolValue ?? false, consume: q["consume"]?.boolValue ?? false)
        }
        return SavedState(file: j["file"]?.stringValue, positionFrames: pos,
                          sampleRate: j["sample_rate"]?.integer(in: 1...10_000_000).map { Int($0) }, state: state,
                          loop: loop, direction: direction,
                          volume: Int(j["volume"]?.integer(in: 0...100) ?? 100),
                          muted: j["muted"]?.boolValue ?? false, queue: queue,
                          disabledOutputs: j["disabled_outputs"]?.arrayValue?.compactMap(\.stringValue) ?? [],
                          crossfade: Player.CrossfadeSettings(saved: j["crossfade"]),
                          schedule: j["schedule"].flatMap { s in
                              s["block"]?.stringValue.flatMap { $0.utf8.count <= 64 ? ($0, s["override"]?.boolValue ?? false) : nil }
                          })
    }
}

/// Writes the state file off the control thread (issue 38): the fsync of every state
/// change ran on it, and on a hung disk it never returned (on an SD card it took 10 to
/// 40 ms a turn). The control thread hands over the newest document; a write in
/// progress is not waited for, and the states handed over meanwhile collapse into the
/// newest one (MPD writes its state file every `state_file_interval`, 2 minutes; playd
/// still writes after every change, only not on the control thread). Each write is
/// atomic (``StateStore/save(text:to:)``), so a crash leaves the old file or the new.
///
/// Thread: `write` from the control thread, `writeNow` at shutdown; the writes on a
/// worker thread.
final class StateWriter: Sendable {
    private let worker = SerialWorker(name: "playd-state")
    /// The newest document not yet written, and its path. Set by the control thread,
    /// taken by the worker; under its lock.
    private let newest = Locked<(text: String, path: String)?>(nil)
    /// Held while a document is taken and written, so shutdown's last write and the
    /// worker's never share the temporary file, and none is written after it. Taken by
    /// the worker and by ``writeNow``, before `newest`. It counts the documents written:
    /// a `Locked<Void>` has no storage of its own, and ThreadSanitizer took the inout
    /// access to its empty value for an unlocked one (CI, 2026-11-27).
    private let writing = Locked<Int>(0)
    private let logger: Logger

    init(logger: Logger) { self.logger = logger }

    /// Hands `text` over to be written to `path`; returns at once.
    func write(_ text: String, to path: String) {
        let idle = newest.withLock { n -> Bool in
            let idle = n == nil
            n = (text, path)
            return idle
        }
        guard idle else { return }
        worker.submit { [self] in
            // The document is taken under `writing`: taken before it, an older state
            // could be written after shutdown's last one.
            writing.withLock { written in
                guard let job = newest.withLock({ n -> (text: String, path: String)? in defer { n = nil }; return n }) else { return }
                save(job.text, job.path)
                written += 1
            }
        }
    }

    /// Writes `text` now, on this thread, and drops what waits: at shutdown.
    func writeNow(_ text: String, to path: String) {
        writing.withLock { written in
            newest.withLock { $0 = nil }
            save(text, path)
            written += 1
        }
    }

    /// Writes one document. Under `writing` (lock order: `writing`, then `newest`).
    private func save(_ text: String, _ path: String) {
        do { try StateStore.save(text: text, to: path) } catch {
            logger.error("cannot save state", metadata: ["state.path": "\(path)", "error": "\(error)"])
        }
    }
}
