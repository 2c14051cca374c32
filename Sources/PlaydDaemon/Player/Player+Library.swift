import CoreStream
#if canImport(Glibc)
import Glibc
#endif

/// The music library's requests (`update`, `search`, `find`, `list`, `ls`) and the
/// path policy: with `library.music_roots` set, only files under the roots are played
/// or queued, unless `library.allow_outside_roots` says otherwise. Control thread.
extension Player {
    /// The roots rule as it stands now, as a value for work off the control thread.
    var admission: SourceAdmission {
        SourceAdmission(roots: library?.roots, allowOutsideRoots: config.allowOutsideRoots,
                        streams: config.streamsEnabled, streamHosts: config.streamHosts)
    }

    /// The path to play or queue, resolved; refused when outside the roots
    /// (``SourceAdmission/admit(_:)``).
    public func admit(_ path: String) throws -> String { try admission.admit(path) }

    /// Starts a library scan; returns its job number.
    func update(_ path: String?) throws -> Int {
        guard let library else { throw PlayerError(.noLibrary, "no music library: set library.music_roots in the config") }
        let job = try library.update(path)
        libraryJob = job
        emit(.updateStarted(job: job))
        return job
    }

    /// The library, or the error every library command gives without one.
    public func requireLibrary() throws(PlayerError) -> MusicLibrary {
        guard let library else { throw PlayerError(.noLibrary, "no music library: set library.music_roots in the config") }
        return library
    }

    /// While a scan runs: a progress event about once a second. From `tick`.
    func libraryTick() {
        guard let library, let p = library.progress else { return }
        let now = monotonicNanoseconds()
        guard now - lastLibraryEvent > 1_000_000_000 else { return }
        lastLibraryEvent = now
        emit(.updateRunning(job: p.job, scanned: p.scanned, rate: p.rate))
    }

    /// The scanner thread's end report, on the control thread.
    func libraryScanEnded(_ r: MusicLibrary.ScanReport) {
        librarySongs = library?.songCount() ?? 0
        if r.job == libraryJob { libraryJob = 0 }  // not when a newer scan has started since
        for u in r.unreadable { logger.warning("library: cannot read", metadata: ["path": "\(u)"]) }
        logger.info("library updated", metadata: ["job": "\(r.job)", "scanned": "\(r.scanned)", "added": "\(r.added)",
                                                  "updated": "\(r.updated)", "removed": "\(r.removed)",
                                                  "seconds": "\(r.seconds)"])
        emit(.updateFinished(r, songs: librarySongs))
        if config.measureLoudness && libraryJob == 0 { loudness.measureLibrary() }
    }
}

/// The path policy: with `library.music_roots` set, only files under the roots are
/// played or queued, unless `library.allow_outside_roots` says otherwise. A value, so
/// a folder walk off the control thread applies the rule the request was made under.
///
/// Thread: any (realpath and stat calls).
struct SourceAdmission: Sendable {
    /// The library's roots, resolved; nil: no library, and every path is taken as given.
    var roots: [String]?
    var allowOutsideRoots: Bool
    /// `streams.enabled` and `streams.allowed_hosts`.
    var streams = true
    var streamHosts: [String] = []

    /// The path to play or queue, resolved; refused when outside the roots.
    ///
    /// A path outside the roots gets the same answer whether or not it exists (a "no
    /// such file" would tell a local user which files exist in, say, /root). The roots
    /// are checked again when the file is opened (``LocalFile``), on the descriptor.
    func admit(_ path: String) throws -> String {
        guard !path.utf8.contains(0) else { throw PlayerError(.badRequest, "a path cannot contain a NUL byte") }
        guard path.utf8.count <= 4096 else { throw PlayerError(.badRequest, "path longer than 4096 bytes") }
        if NetworkInput.hasScheme(path) { return try admitStream(path) }
        guard let roots else { return path }
        if let real = MusicLibrary.resolveInside(path, roots: roots) { return real }
        if allowOutsideRoots { return path }
        let absolute = path.hasPrefix("/") ? path : (roots.first ?? "") + "/" + path
        // Inside the roots but missing: say so. Outside: one answer for all.
        if LocalFile.isInside(LocalFile.resolvedParent(absolute), roots: roots) {
            throw StreamError(.fileNotFound, "\(path): no such file")
        }
        throw PlayerError(.outsideLibrary,
                          "\(path) is outside the music roots (\(roots.joined(separator: ", "))); set library.allow_outside_roots to allow it")
    }

    /// A URL: an http(s) one when streams are on and its host is allowed. Any other
    /// scheme (`file:`, `ftp:`, …) is refused, never taken for a path.
    func admitStream(_ url: String) throws -> String {
        guard NetworkInput.isStreamURL(url) else {
            throw PlayerError(.stream(.streamNotAllowed), "\(url): only http:// and https:// streams are played")
        }
        guard streams else { throw PlayerError(.stream(.streamNotAllowed), "\(url): streams are off (streams.enabled = false)") }
        guard let host = NetworkInput.host(url), !url.contains(where: { $0.isWhitespace || $0.asciiValue.map { $0 < 0x20 } == true }) else {
            throw PlayerError(.badRequest, "\(url): not a URL playd can open")
        }
        if !NetworkInput.hostAllowed(host, streamHosts) {
            throw PlayerError(.stream(.streamNotAllowed), "\(url): the host \(host) is not in streams.allowed_hosts")
        }
        return url
    }

    /// `admit` for a list from a folder walk or a playlist: entries outside the roots
    /// (a symlink out, a playlist line pointing elsewhere) are left out and counted.
    func admitAll(_ paths: [String]) -> (kept: [String], refused: Int) {
        guard roots != nil || paths.contains(where: NetworkInput.hasScheme) else { return (paths, 0) }
        var kept: [String] = []
        for p in paths { if let a = try? admit(p) { kept.append(a) } }
        return (kept, paths.count - kept.count)
    }
}
