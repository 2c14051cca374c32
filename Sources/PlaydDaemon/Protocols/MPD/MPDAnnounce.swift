import CoreStream

/// MPD's way to announce: a message on the `announce` channel (docs/announcements.md),
/// `sendmessage announce "[--duck=DB] [--gain=DB] [--pause] [--chime=FILE] SOURCE"` or
/// `"--cancel"`. The words are MPD's protocol's, so they are read here, not in the
/// Player (issue 40).
extension MPDCommands {
    /// Runs one message from the channel. Its `sendmessage` has replied already, so a
    /// refusal goes to the log and the JSON events.
    static func announceMessage(_ player: Player, _ text: String) {
        do throws(PlayerError) {
            switch try parseAnnounceMessage(text) {
            // Its clips are checked off the control thread: it goes on when they are.
            case .some(let r): player.announceWhenAdmitted(r) { player.refuseAnnouncement(text, $0) }
            case .none: try player.perform(.cancelAnnouncement)
            }
        } catch {
            player.refuseAnnouncement(text, error)
        }
    }

    /// nil: `--cancel`.
    static func parseAnnounceMessage(_ text: String) throws(PlayerError) -> Player.AnnounceRequest? {
        var rest = Substring(text)
        var r = Player.AnnounceRequest(source: "")
        func number(_ s: Substring, _ name: String) throws(PlayerError) -> Double {
            guard let d = Double(s), d.isFinite else { throw PlayerError(.badRequest, "--\(name)=\(s) is not a number of dB") }
            return d
        }
        while rest.hasPrefix("--") {
            let word = rest.prefix { $0 != " " }
            rest = rest.dropFirst(word.count).drop { $0 == " " }
            if word == "--cancel" { return nil }
            if word == "--pause" { r.pause = true; continue }
            if word.hasPrefix("--duck=") { r.duckDB = try number(word.dropFirst(7), "duck"); continue }
            if word.hasPrefix("--gain=") { r.gainDB = try number(word.dropFirst(7), "gain"); continue }
            if word.hasPrefix("--chime=") { r.chime = String(word.dropFirst(8)); continue }
            throw PlayerError(.badRequest, "unknown option \(word) (--duck=DB, --gain=DB, --pause, --chime=FILE, --cancel)")
        }
        r.source = String(rest)
        return r
    }
}
