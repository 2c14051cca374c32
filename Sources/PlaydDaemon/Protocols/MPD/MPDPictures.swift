import CoreStream
import PlaydProtocol
import PlaydSessions
#if canImport(Glibc)
import Glibc
#endif

/// `albumart` (the cover file in a song's folder) and `readpicture` (the picture
/// embedded in the song), in chunks as MPD sends them: `size:`, for `readpicture`
/// `type:`, then `binary: N` and N bytes from the requested offset, at most the
/// client's `binarylimit`. Home Assistant and phone clients fetch covers this way.
extension MPDCommands {
    /// MPD 0.23's cover names, in its order (it takes no other); then names other
    /// players' rips use, which playd also takes (docs/protocol.md).
    static let coverNames = ["cover.png", "cover.jpg", "cover.tiff", "cover.bmp",
                             "cover.jpeg", "cover.webp", "folder.jpg", "folder.jpeg", "folder.png"]

    /// The chunk of `uri`'s picture from `offset` (checked whole and ≥ 0 by its kind),
    /// at most `limit` bytes: the specs `albumart` and `readpicture` (CommandSpecs+MPD.swift).
    static func picture(_ p: Player, _ uri: String, offset: Int, embedded: Bool, limit: Int) throws(PlayerError) -> CommandSpec.Output {
        // MPD's words: "No such song" for a song without one, "No file exists" for a
        // folder without a cover.
        let missing = embedded ? PlayerError(.noSuchEntry, "No such song") : PlayerError(.stream(.fileNotFound), "No file exists")
        // A stream has no folder and is not opened here (no network I/O on this thread).
        guard !NetworkInput.hasScheme(uri) else { throw missing }
        // The path's checks and the reads run off the control thread (a hung mount;
        // Player+DiskReads.swift); each chunk a client asks for is read again, as MPD does.
        let file = path(p, uri), admission = p.admission, name = embedded ? "readpicture" : "albumart"
        let read = try p.readOffThread("\(name)\0\(offset)\0\(limit)\0\(file)", what: "\(name) \(uri)") {
            Result { () throws(PlayerError) in
                try pictureChunk(admission, file, offset: offset, embedded: embedded, limit: limit, missing: missing)
            }
        }
        return try read.get()
    }

    /// The chunk of `file`'s picture from `offset`: the embedded one, or the cover file
    /// in its folder. Reads the disk: any thread but the control thread.
    static func pictureChunk(_ admission: SourceAdmission, _ uriPath: String, offset: Int, embedded: Bool, limit: Int,
                             missing: PlayerError) throws(PlayerError) -> CommandSpec.Output {
        let file: String
        do { file = try admission.admit(uriPath) } catch let e as StreamError where e.code == .fileNotFound {
            file = uriPath
        } catch {
            throw PlayerError(any: error)
        }
        if embedded {
            var st = stat()
            guard PathBytes.stat(file, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG else { throw missing }
            let art: (mime: String, bytes: [UInt8])?
            do {
                art = try AudioDecoder.coverArt(path: file)
            } catch {
                if error.code == .outsideRoots { throw PlayerError(.outsideLibrary, error.message) }
                return CommandSpec.Output()  // not media playd reads: no picture, as MPD answers
            }
            guard let art else { return CommandSpec.Output() }
            guard offset <= art.bytes.count else { throw PlayerError(.invalidArgument, "Bad file offset") }
            let end = offset + min(limit, art.bytes.count - offset)
            return CommandSpec.Output(lines: ["size: \(art.bytes.count)", "type: \(art.mime)"], binary: Array(art.bytes[offset..<end]))
        }
        // The song's folder (MPD takes the folder of the URI whether or not the song
        // exists).
        let folder = file.lastIndex(of: "/").map { String(file[..<$0]) } ?? file
        for name in coverNames {
            let cover = folder + "/" + name
            var st = stat()
            guard PathBytes.stat(cover, &st) == 0 else { continue }
            let opened: (fd: Int32, size: Int64)
            do {
                opened = try LocalFile.openRegular(cover)
            } catch {
                if error.code == .outsideRoots { throw PlayerError(.outsideLibrary, error.message) }
                continue
            }
            defer { close(opened.fd) }
            let size = Int(opened.size)
            guard offset <= size else { throw PlayerError(.invalidArgument, "Offset too large") }
            var chunk = [UInt8](repeating: 0, count: min(limit, size - offset))
            var have = 0
            while have < chunk.count {
                let n = chunk.withUnsafeMutableBytes { pread(opened.fd, $0.baseAddress! + have, $0.count - have, off_t(offset + have)) }
                if n < 0 && errno == EINTR { continue }
                guard n > 0 else { break }
                have += n
            }
            chunk.removeSubrange(have...)
            return CommandSpec.Output(lines: ["size: \(size)"], binary: chunk)
        }
        throw missing
    }
}
