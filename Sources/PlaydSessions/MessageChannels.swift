/// Client-to-client messages on named channels: MPD's `subscribe`, `unsubscribe`,
/// `channels`, `sendmessage` and `readmessages`, which clients use to talk to each
/// other through the server (Snapcast's and ncmpcpp's helpers, scripts, and playd's
/// own `announce` channel later).
///
/// Thread: the control thread only. Every session runs there, so nothing here is
/// locked; the server wakes idling sessions through ``wake``, posted to its loop.
public final class MessageChannels {
    /// MPD's limits (Client.hxx): 16 subscriptions per client and 64 unread messages;
    /// a message to a client whose box is full is not delivered to it.
    public static let maxSubscriptions = 16
    public static let maxMessages = 64
    /// And playd's own: 256 KiB of unread text per client. MPD has no byte cap, but 64
    /// lines of 64 KiB are 4 MiB a client, more than a `readmessages` reply may leave
    /// unsent (1 MiB) and, over 100 connections, more than the unit's MemoryMax.
    public static let maxMailboxBytes = 256 * 1024

    /// One client's subscriptions and unread messages. The session owns it; the
    /// registry holds it weakly, so a closed connection drops out by itself.
    public final class Mailbox {
        public fileprivate(set) var channels: Set<String> = []
        public fileprivate(set) var messages: [(channel: String, text: String)] = []
        /// UTF-8 bytes of channel names and texts in `messages`.
        public fileprivate(set) var bytes = 0
        /// The session to wake (idle `message`), compared by identity.
        public weak var owner: AnyObject?
        fileprivate init(owner: AnyObject?) { self.owner = owner }
    }

    public enum SubscribeResult: Sendable { case ok, invalid, already, full }

    private struct WeakBox { weak var box: Mailbox? }
    private var boxes: [WeakBox] = []

    /// Wakes sessions waiting in `idle` for `subsystem`: `owner` nil means every
    /// session (a subscription changed), else only that one (a message for it).
    public var wake: ((_ owner: AnyObject?, _ subsystem: String) -> Void)?

    public init() {}

    /// A mailbox for a new session.
    public func register(owner: AnyObject?) -> Mailbox {
        boxes.removeAll { $0.box == nil }
        let m = Mailbox(owner: owner)
        boxes.append(WeakBox(box: m))
        return m
    }

    /// MPD's rule: one or more ASCII letters, digits, `_`, `-`, `.` or `:`.
    public static func validName(_ name: String) -> Bool {
        !name.isEmpty && name.utf8.allSatisfy { c in
            (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A)
                || c == UInt8(ascii: "_") || c == UInt8(ascii: "-") || c == UInt8(ascii: ".") || c == UInt8(ascii: ":")
        }
    }

    public func subscribe(_ m: Mailbox, to name: String) -> SubscribeResult {
        guard Self.validName(name) else { return .invalid }
        guard m.channels.count < Self.maxSubscriptions else { return .full }
        guard m.channels.insert(name).inserted else { return .already }
        wake?(nil, "subscription")
        return .ok
    }

    /// False when the mailbox was not subscribed.
    public func unsubscribe(_ m: Mailbox, from name: String) -> Bool {
        guard m.channels.remove(name) != nil else { return false }
        wake?(nil, "subscription")
        return true
    }

    /// Every channel some open connection is subscribed to, sorted (MPD's std::set).
    public func channels() -> [String] {
        var all: Set<String> = []
        for w in boxes { if let b = w.box { all.formUnion(b.channels) } }
        return all.sorted { Array($0.utf8).lexicographicallyPrecedes(Array($1.utf8)) }
    }

    /// Delivers `text` to every subscriber of `channel` with room for it; false when
    /// none took it (MPD: "nobody is subscribed to this channel").
    public func send(_ text: String, to channel: String) -> Bool {
        var sent = false
        for w in boxes {
            let size = channel.utf8.count + text.utf8.count
            guard let b = w.box, b.channels.contains(channel), b.messages.count < Self.maxMessages,
                  b.bytes + size <= Self.maxMailboxBytes else { continue }
            if b.messages.isEmpty, let owner = b.owner { wake?(owner, "message") }
            b.messages.append((channel, text))
            b.bytes += size
            sent = true
        }
        return sent
    }

    /// The unread messages, oldest first, and the box emptied.
    public func take(_ m: Mailbox) -> [(channel: String, text: String)] {
        defer { m.messages.removeAll(); m.bytes = 0 }
        return m.messages
    }
}
