import CoreStream
import PlaydProtocol
import PlaydSessions

/// One connection speaking playd's JSON-lines protocol: a request object per line, a
/// reply object per request, and (after `subscribe`) event lines. Commands come from
/// ``JSONCommands/table``; the server only moves this session's bytes.
///
/// Thread: control only.
final class JSONSession: LineSession {
    private let player: Player
    private let counters: () -> ServerCounters
    /// Receives events (`subscribe`).
    private(set) var subscribed = false
    /// Position ticks every this many milliseconds (0: none), and when the next is due.
    private var tickMillis = 0
    private(set) var nextTickDue: UInt64?
    /// A request waiting for work off the control thread (a folder walk), run again
    /// when the server resumes this session.
    private var parked: JSON?

    init(player: Player, counters: @escaping () -> ServerCounters) {
        self.player = player
        self.counters = counters
    }

    func greeting() -> String? { nil }
    var waitsForEvents: Bool { subscribed }
    func resume() -> SessionOutput {
        guard let request = parked else { return SessionOutput() }
        parked = nil
        return answer(request)
    }

    func handle(_ bytes: [UInt8]) -> SessionOutput {
        var line = bytes
        if line.last == 0x0D { line.removeLast() }
        if line.allSatisfy({ $0 == 0x20 || $0 == 0x09 }) { return SessionOutput() }
        guard let text = String(validating: line, as: UTF8.self) else {
            return reply(errorReply(id: nil, .badJSON, "request is not valid UTF-8"))
        }
        let request: JSON
        do {
            request = try JSON.parse(text)
        } catch {
            return reply(errorReply(id: nil, .badJSON, "invalid JSON: \(error)"))
        }
        guard case .object = request else { return reply(errorReply(id: nil, .badJSON, "a request must be a JSON object")) }
        return answer(request)
    }

    /// The reply to a request, or a parked session when it waits for a folder walk.
    private func answer(_ request: JSON) -> SessionOutput {
        do throws(PlayerError) {
            return reply(try run(request))
        } catch {
            parked = request
            return SessionOutput(parked: true)
        }
    }

    /// The reply; throws only ``PlayerError/Code/workPending``.
    func run(_ req: JSON) throws(PlayerError) -> JSON {
        let id = req["id"]
        guard let cmd = req["cmd"] else { return errorReply(id: id, .badRequest, "missing \"cmd\"") }
        guard let name = cmd.stringValue else { return errorReply(id: id, .badRequest, "\"cmd\" must be a string") }
        let spec = player.commands.byJSON[name]
        let handler = JSONCommands.sessionRows[name]
        guard spec != nil || handler != nil else { return errorReply(id: id, .unknownCommand, "unknown command '\(name)'") }
        do {
            let result: [(String, JSON)]
            if let spec {
                let arguments = try spec.read(json: req)
                let output = try spec.run(player, arguments)
                result = JSONCommands.members(spec.reply, player, arguments, output)
            } else {
                result = try handler!(JSONCommands.Context(player: player, request: req, session: self, counters: counters()))
            }
            return .object([("id", id ?? .null), ("ok", .bool(true))] + result)
        } catch let e as PlayerError where e.code == .workPending {
            throw e
        } catch {
            let e = PlayerError(any: error)
            return errorReply(id: id, code: e.jsonCode, e.message)
        }
    }

    private func reply(_ j: JSON) -> SessionOutput { SessionOutput(j.text + "\n") }

    func subscribe(ticks: Int) {
        subscribed = true
        tickMillis = ticks
        nextTickDue = ticks > 0 ? monotonicNanoseconds() : nil
    }

    func unsubscribe() {
        subscribed = false
        tickMillis = 0
        nextTickDue = nil
    }

    /// Event lines for a subscriber (encoded once for all sessions by the daemon).
    func events(_ lines: String) -> String { subscribed ? lines : "" }

    func tick(now: UInt64) -> String {
        guard tickMillis > 0 else { return "" }
        nextTickDue = now + UInt64(tickMillis) * 1_000_000
        return JSONEncoding.position(player).text + "\n"
    }

    func lineTooLong(maxBytes: Int) -> SessionOutput {
        reply(errorReply(id: nil, .lineTooLong, "request line longer than \(maxBytes) bytes"))
    }

    /// The line a refused connection gets before it is closed.
    static func refusal(_ r: Refusal) -> String {
        errorReply(id: nil, r.tooMany ? .tooManyConnections : .notAllowed, r.reason).text + "\n"
    }
}

/// `{"id":…,"ok":false,"error":{"code":"…","message":"…"}}`.
func errorReply(id: JSON?, _ code: ProtocolErrorCode, _ message: String) -> JSON {
    errorReply(id: id, code: code.rawValue, message)
}

/// The same with a code name from elsewhere (the engine's `StreamError.Code.name`).
func errorReply(id: JSON?, code: String, _ message: String) -> JSON {
    .obj(("id", id), ("ok", .bool(false)),
         ("error", .obj(("code", .string(code)), ("message", .string(message)))))
}
