import CLinux
#if canImport(Glibc)
import Glibc
#endif

/// Who is on the other end of a control connection, from the kernel (SO_PEERCRED).
public struct Peer: Sendable, CustomStringConvertible {
    public var pid: Int32
    public var uid: UInt32
    public var gid: UInt32
    /// Supplementary groups, from /proc/PID/status (empty when it cannot be read: the
    /// process is gone or in another pid namespace; then only `gid` counts).
    public var groups: [UInt32]

    /// The credentials of the peer of the Unix socket `fd`; nil for TCP (none exist).
    /// `groups`: also read its supplementary groups (only a group allow-list needs them).
    public static func of(socket fd: Int32, groups: Bool) -> Peer? {
        var pid: Int32 = 0, uid: UInt32 = 0, gid: UInt32 = 0
        guard clinux_peer_credentials(fd, &pid, &uid, &gid) == 0 else { return nil }
        return Peer(pid: pid, uid: uid, gid: gid, groups: groups && pid > 0 ? supplementaryGroups(pid: pid) : [])
    }

    public var description: String { "uid \(uid) gid \(gid) pid \(pid)" }

    /// The `Groups:` line of /proc/PID/status.
    static func supplementaryGroups(pid: Int32) -> [UInt32] {
        let fd = open("/proc/\(pid)/status", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return [] }
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: 4096)
        let n = read(fd, &buffer, buffer.count)
        guard n > 0 else { return [] }
        let text = String(decoding: buffer[..<n], as: UTF8.self)
        guard let line = text.split(separator: "\n").first(where: { $0.hasPrefix("Groups:") }) else { return [] }
        return line.dropFirst("Groups:".count).split(whereSeparator: { $0 == " " || $0 == "\t" }).compactMap { UInt32($0) }
    }
}

/// Which peers may use the control sockets: `control.allowed_users` and
/// `control.allowed_groups`. Both empty: anyone who can open the socket (its mode and
/// group are the gate). Otherwise a Unix-socket peer is let in when its uid is listed or
/// its primary or a supplementary group is; a TCP client (MPD's `mpd.bind`) carries no
/// credentials and is refused. Root gets no exception: list it to allow it.
public struct AccessPolicy: Sendable {
    public var uids: Set<UInt32> = []
    public var gids: Set<UInt32> = []
    public init() {}
    public init(uids: Set<UInt32>, gids: Set<UInt32>) { self.uids = uids; self.gids = gids }

    public var isOpen: Bool { uids.isEmpty && gids.isEmpty }

    public func allows(_ peer: Peer?) -> Bool {
        if isOpen { return true }
        guard let p = peer else { return false }
        return uids.contains(p.uid) || gids.contains(p.gid) || p.groups.contains(where: gids.contains)
    }

    public struct Error: Swift.Error { public var message: String }

    /// Resolves user and group names (or numeric ids) through the system databases.
    public static func resolve(users: [String], groups: [String]) throws(Error) -> AccessPolicy {
        var policy = AccessPolicy()
        for u in users {
            if let id = UInt32(u) { policy.uids.insert(id); continue }
            guard let pw = getpwnam(u) else { throw Error(message: "control.allowed_users: no user named '\(u)'") }
            policy.uids.insert(pw.pointee.pw_uid)
        }
        for g in groups {
            if let id = UInt32(g) { policy.gids.insert(id); continue }
            guard let gr = getgrnam(g) else { throw Error(message: "control.allowed_groups: no group named '\(g)'") }
            policy.gids.insert(gr.pointee.gr_gid)
        }
        return policy
    }
}
