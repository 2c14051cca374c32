import CoreStream
import Dispatch
import Logging
import PlaydProtocol
import PlaydSessions
import Synchronization

/// The daemon's sessions on a player, without sockets or processes (as swift-nio's
/// `EmbeddedChannel` runs a handler): a line in, its reply out, and the notifications
/// each connection would have been sent. The sessions, command tables, parking and
/// notifications are the daemon's own (``MPDCommands/session(_:password:maxCommandListBytes:channels:)``,
/// ``JSONSession``, ``Daemon/Notification``); only ``ControlServer``'s bytes and
/// limits are left out. Protocol tests run here; processes are for integration.
///
/// Thread: the caller's, which acts as the control thread (one at a time).
public final class InProcessServer {
    public let player: Player
    let channels = MessageChannels()
    /// Work other threads posted to the control thread (walks, opens, engine events).
    private final class Posted: Sendable {
        let work = Mutex<[@Sendable () -> Void]>([])
        let arrived = DispatchSemaphore(value: 0)
    }
    private let posted = Posted()
    private var connections: [Weak] = []
    private var resumeWanted = false
    private struct Weak { weak var connection: Connection? }

    /// A player on `config` (its output, state file and library) with `commands`.
    public init(config: DaemonConfig, logger: Logger, commands: CommandTable = CommandTable()) throws {
        player = try Player(config: config, logger: logger, commands: commands)
        player.post = { [posted] work in
            posted.work.withLock { $0.append(work) }
            posted.arrived.signal()
        }
        player.onNotify = { [unowned self] changes, events in
            let n = Daemon.Notification(player, changes, events)
            for c in connections.compactMap(\.connection) { c.output += n.text(c.session) }
        }
        player.resumeParked = { [unowned self] in resumeWanted = true }
        channels.wake = { [unowned self] owner, subsystem in
            for c in connections.compactMap(\.connection) {
                guard let m = c.session as? MPDSession, owner == nil || owner === m else { continue }
                c.output += m.notify([subsystem])
            }
        }
        player.restore()
    }

    public enum Wire { case json, mpd(password: String? = nil) }

    /// A new connection; its greeting is in ``Connection/output``.
    public func connect(_ p: Wire) -> Connection {
        let session: LineSession
        switch p {
        case .json: session = JSONSession(player: player, counters: { ServerCounters() })
        case .mpd(let password): session = MPDCommands.session(player, password: password, channels: channels)
        }
        let c = Connection(server: self, session: session)
        connections.append(Weak(connection: c))
        return c
    }

    /// One turn of the server's loop: the posted work, then the player's flush (the
    /// notifications of the turn).
    public func turn() {
        runPosted()
        player.flush()
    }

    /// The posted work, without the flush: as ControlServer's loop runs it, before the
    /// parked sessions it resumes in the same turn (a file opened off the control
    /// thread is the Player's until the flush at the end of that turn).
    func runPosted() {
        for work in posted.work.withLock({ l -> [@Sendable () -> Void] in defer { l.removeAll() }; return l }) { work() }
    }

    /// Waits (at most `seconds`, a hang guard) for work another thread posts, and runs
    /// it. False if nothing came.
    @discardableResult
    public func awaitPosted(seconds: Int = 60) -> Bool {
        guard posted.arrived.wait(timeout: .now() + .seconds(seconds)) == .success else { return false }
        runPosted()
        return true
    }

    public final class Connection {
        unowned let server: InProcessServer
        let session: LineSession
        /// Everything sent to this client and not yet taken: replies and notifications.
        public internal(set) var output: String
        public private(set) var closed = false

        init(server: InProcessServer, session: LineSession) {
            self.server = server
            self.session = session
            output = session.greeting() ?? ""
        }

        /// Sends one line and runs the server until its reply is complete (a parked
        /// request waits for the work it is parked on, up to a minute each time).
        /// Returns what the client received meanwhile, and takes it.
        @discardableResult
        public func send(_ line: String) -> String {
            precondition(!closed, "the connection is closed")
            var out = session.handle(Array(line.utf8))
            while true {
                output += out.text
                if out.close { closed = true; break }
                if out.more { out = session.resume(); continue }
                if out.parked {
                    server.resumeWanted = false
                    while !server.resumeWanted { guard server.awaitPosted() else { return take() } }
                    out = session.resume()
                    continue
                }
                break
            }
            server.turn()
            return take()
        }

        /// What was sent to this client since the last take.
        public func take() -> String {
            defer { output = "" }
            return output
        }
    }
}
