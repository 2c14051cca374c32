import Testing
import PlaydProtocol
import PlaydSessions

/// The message board's caps, which a hostile client would press on: unread messages
/// are bounded in count (MPD's 64) and in bytes (256 KiB a client), and what does not
/// fit is not delivered, so memory per connection stays bounded.
@Suite("MPD message board limits", .checksSomething)
struct MessageChannelsTests {
    final class Owner {}

    @Test(arguments: [(count: 100, size: 10, delivered: 64), (count: 5, size: 60_000, delivered: 4),
                      (count: 2, size: 300_000, delivered: 0)])
    func unreadMessagesAreBounded(count: Int, size: Int, delivered: Int) {
        let board = MessageChannels()
        let owner = Owner()
        let box = board.register(owner: owner)
        #expect(board.subscribe(box, to: "room") == .ok)
        let text = String(repeating: "x", count: size)
        let sent = (0..<count).filter { _ in board.send(text, to: "room") }.count
        #expect(sent == delivered)
        #expect(box.bytes <= MessageChannels.maxMailboxBytes)
        #expect(board.take(box).count == delivered)
        #expect(box.bytes == 0 && box.messages.isEmpty)
        #expect(board.send(text.count <= MessageChannels.maxMailboxBytes - 4 ? text : "short", to: "room"),
                "read, the box takes messages again")
    }

    @Test func aClosedConnectionLeavesNoChannel() {
        let board = MessageChannels()
        var owner: Owner? = Owner()
        var box: MessageChannels.Mailbox? = board.register(owner: owner)
        #expect(board.subscribe(box!, to: "gone") == .ok)
        #expect(board.channels() == ["gone"])
        box = nil; owner = nil
        #expect(board.channels().isEmpty)
        #expect(!board.send("x", to: "gone"))
    }
}
