import CoreStream
#if canImport(Glibc)
import Glibc
#endif

/// Stored playlists (MPD's `save`, `load`, `playlistadd`, …; `playctl save/load/
/// playlists`): M3U files in `library.playlist_directory`. Control thread.
extension Player {
    /// The playlist folder. Its files are the queue's saves: what the queue may hold
    /// can always be saved and loaded again, whatever `limits.max_playlist_entries`
    /// says for playlist files given to `add` (a 12,000-song queue could not be saved
    /// under its 10,000, issue 39); bytes up to 512 an entry.
    public var storedPlaylists: StoredPlaylists {
        StoredPlaylists(directory: config.resolvedPlaylistDirectory, root: firstMusicRoot,
                        maxBytes: max(config.maxPlaylistBytes, config.maxQueueLength * 512),
                        maxEntries: max(config.maxPlaylistEntries, config.maxQueueLength))
    }

    /// The folder relative names are relative to (MPD's music directory): the first
    /// of `library.music_roots`.
    public var firstMusicRoot: String? {
        library?.roots.first ?? config.musicRoots.first.map { $0.hasSuffix("/") ? String($0.dropLast()) : $0 }
    }

    /// Runs a stored-playlist command; `load` returns the ids it queued.
    func storedPlaylist(_ command: Command) throws -> [Int] {
        let lists = storedPlaylists
        do {
            switch command {
            case .savePlaylist(let name):
                try lists.save(name, queue.entries.map(\.path))
                emit(.storedPlaylist(name: name))
            case .loadPlaylist(let name, let range, let place):
                var entries = try lists.read(name)
                if let r = range {
                    // A range past the end is cut at the end (as MPD).
                    let hi = min(r.upperBound, entries.count), lo = min(r.lowerBound, hi)
                    entries = Array(entries[lo..<hi])
                }
                // Entries whose file is gone are left out (as MPD); the rest are checked
                // against the roots like any other `add`.
                let present = entries.filter { e in
                    var st = stat()
                    return NetworkInput.hasScheme(e) || (PathBytes.stat(e, &st) == 0 && (st.st_mode & S_IFMT) == S_IFREG)
                }
                return present.isEmpty ? [] : try add(present, place: place).ids
            case .playlistAdd(let name, let sources, let at):
                try StoredPlaylists.checkName(name)
                // What `add` would queue: folders walked off this thread, files checked
                // against the roots.
                try lists.insert(name, try collect(sources).files, at: at)
                emit(.storedPlaylist(name: name))
            case .playlistClear(let name):
                try lists.clear(name)
                emit(.storedPlaylist(name: name))
            case .playlistDelete(let name, let range):
                try lists.delete(name, range)
                emit(.storedPlaylist(name: name))
            case .playlistMove(let name, let from, let to):
                try lists.move(name, from: from, to: to)
                emit(.storedPlaylist(name: name))
            case .playlistRename(let from, let to):
                try lists.rename(from, to: to)
                emit(.storedPlaylist(name: to))
            case .playlistRemove(let name):
                try lists.remove(name)
                emit(.storedPlaylist(name: name))
            default:
                break
            }
        } catch let error as StoredPlaylists.Error {
            throw Self.playerError(error)
        }
        return []
    }

    /// The entries of the stored playlist `name` (absolute paths and URLs).
    public func storedPlaylistEntries(_ name: String) throws(PlayerError) -> [String] {
        do throws(StoredPlaylists.Error) {
            return try storedPlaylists.read(name)
        } catch {
            throw Self.playerError(error)
        }
    }

    static func playerError(_ error: StoredPlaylists.Error) -> PlayerError {
        switch error.code {
        case .noSuchPlaylist: return PlayerError(.noSuchPlaylist, error.message)
        case .exists: return PlayerError(.playlistExists, error.message)
        case .tooLarge: return PlayerError(.tooLarge, error.message)
        case .badName, .badIndex: return PlayerError(.invalidArgument, error.message)
        case .io: return PlayerError(.stream(.ioError), error.message)
        }
    }
}
