import Logging
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// The outputs: opening the local one (and reopening it after a failure), listing
/// it and the feeds, turning one on or off.
extension PlaybackEngine {
    /// One output as `outputs` lists it: the local one first, then the feeds.
    public struct OutputReport: Sendable {
        public var name: String
        /// `alsa`, `pipewire`, `null`, `wav` or `fifo`.
        public var kind: String
        /// The spec it was made from.
        public var spec: String
        public var enabled: Bool
        /// Local: `open` or `closed`; a feed: its ``FeedState`` name.
        public var state: String
        /// What it runs at: the negotiated device format, or the feed's `rate:bits:channels`.
        public var format: String?
        /// Feeds: frames written to and dropped at the FIFO (in the feed's format).
        public var framesWritten: Int?
        public var framesDropped: Int?
        public var error: String?
    }

    /// The name of the local output in ``outputs()``.
    public static let localOutputName = "local"


    /// Opens the output for `format` now (a daemon does this at start, so a broken device
    /// fails the start; and before a `play` whose track needs another format, on a
    /// worker, so that play's own reopen is not made on the control thread). What plays
    /// is let go of (its format is no longer the device's). The device's open holds
    /// `reconfigure` only, as in ``recoverOutput()``: `status` is answered meanwhile, and
    /// a `play` throws `output_unavailable` rather than wait. Thread: any.
    public func openOutput(for format: PCMFormat, preferring width: DeviceSampleFormat = .int16) throws(StreamError) {
        var lostTrack = false
        defer { if lostTrack { onEvent(.stateChanged(.stopped)) } }
        try reconfigure.withLock { (_: inout Void) throws(StreamError) in
            let reopen = control.withLock { c in
                c.output == nil || c.requestedFormat != format || c.requestedSampleFormat != width
                    || shared.deviceError.load(ordering: .relaxed) != 0
            }
            guard reopen else { return }
            detachReader()
            do throws(StreamError) {
                try reopenReleasingControl(for: format, preferring: width)
            } catch {
                // What played was let go of: say so (stopped), as a play's failed reopen does.
                let wasPlaying = control.withLock { c -> Bool in
                    let was = c.transport.state != .stopped
                    c.transport = Transport()
                    c.track = nil
                    c.newGeneration()
                    c.pendingPosition = 0
                    return was
                }
                shared.wantPlaying.store(false, ordering: .relaxed)
                lostTrack = wasPlaying
                throw error
            }
        }
    }

    /// Whether playing `decoder` would reopen the device (another format, or none open):
    /// a caller that must not wait for a device's open makes it first, off its thread
    /// (``openOutput(for:preferring:)``). Thread: any.
    public func needsReopen(for decoder: AudioDecoder) -> Bool {
        let wanted = PCMFormat(sampleRate: decoder.info.sampleRate, channels: decoder.info.channels)
        let width = decoder.info.preferredDeviceFormat
        return control.withLock { c in
            c.output == nil || c.requestedFormat != wanted || c.requestedSampleFormat != width
                || shared.deviceError.load(ordering: .relaxed) != 0
        }
    }

    /// ``reopenOutput(_:for:preferring:)``'s three steps with `control` let go during the
    /// device's open. Called holding `reconfigure`, the reader detached.
    func reopenReleasingControl(for format: PCMFormat, preferring width: DeviceSampleFormat) throws(StreamError) {
        // Step 1 in two parts: the render thread and the device taken out under `control`,
        // then joined and closed without it (a write to, or a close of, a sound server
        // that hangs returns only when the server answers).
        let (render, old, fallbackTaken) = control.withLock { c in
            // Until the track that follows is loaded, `status` shows the one let go of
            // where it last showed it: with no device it falls back to `pendingPosition`,
            // which is where the track was started or sought (a poller saw 5.4 s, then
            // 0.0 in the same track, PositionTests).
            if let last = c.lastReported, last.generation == c.generation { c.pendingPosition = last.frame }
            let render = askRenderThreadToStop(&c)
            let old = c.output
            c.output = nil
            c.negotiated = nil
            c.requestedFormat = nil
            return (render, old, c.usingNullFallback)
        }
        joinRenderThread(render)
        old?.close()
        let output: any AudioOutput
        if let old {
            output = old
        } else {
            output = try control.withLock { (c: inout Control) throws(StreamError) in try makeOutput(&c) }
        }
        let opened: OpenedOutput
        do throws(StreamError) {
            opened = try openDevice(output, for: format, preferring: width, nullFallbackTaken: fallbackTaken)
        } catch {
            control.withLock { $0.output = output }
            throw error
        }
        // Shut down while the open hung (``shutdown()`` stopped waiting for it): nothing
        // is installed, and what was opened is closed.
        let installed = control.withLock { c in
            guard !shutDown.load(ordering: .relaxed) else { return false }
            installOutput(&c, opened, for: format, preferring: width)
            return true
        }
        if !installed { opened.output.close() }
    }

    /// After the output failed (``Status/deviceError``; an `.error` event with
    /// `output_failed`): closes it and opens it again in the format it had. Throws while
    /// the device is still gone. What was playing is not resumed here: the reader has
    /// let go of it; `play(path:from:paused:)` from the position heard goes on (the
    /// daemon does that, with backoff between attempts).
    /// Returns false when there was nothing to recover (a `play` reopened it already).
    ///
    /// Thread: any; the daemon runs it on a worker (issue 38). The device's open holds
    /// `reconfigure` only, not `control`: a sound server that accepts the connection and
    /// never answers (a PulseAudio stopped while it restarts) hangs the ALSA plugin's
    /// open for as long as it lasts, and `status` takes `control`. Meanwhile `status`
    /// shows the output closed, and a `play` does not wait for it: it throws
    /// `output_unavailable` (``play(decoder:from:paused:)``).
    @discardableResult
    public func recoverOutput() throws(StreamError) -> Bool {
        try reconfigure.withLock { (_: inout Void) throws(StreamError) -> Bool in
            let last = control.withLock { c in
                shared.deviceError.load(ordering: .relaxed) != 0 || c.output == nil ? c.lastOpened : nil
            }
            guard let last else { return false }
            detachReader()
            try reopenReleasingControl(for: last.format, preferring: last.width)
            return true
        }
    }

    /// Tells the local output what plays, where it shows it (a PipeWire stream's media
    /// properties; other outputs ignore it). Control side. Under the control lock: an
    /// open in progress would otherwise free the connection beneath it.
    public func setOutputMedia(artist: String?, title: String?, album: String?) {
        control.withLock { c in
            (c.output as? PipeWireOutput)?.setMedia(artist: artist, title: title, album: album)
        }
    }

    /// Sets the local output's own volume (0…1 in amplitude), where it has one: a
    /// PipeWire stream (`volume.mixer = "pipewire"`). Kept by the output for the streams
    /// it makes later. Control side.
    public func setOutputVolume(_ amplitude: Float) throws(StreamError) {
        try control.withLock { (c: inout Control) throws(StreamError) in
            guard let pw = c.output as? PipeWireOutput else {
                if c.output == nil, c.lastOpened != nil {
                    // Taken out while ``recoverOutput()`` opens it on a worker.
                    throw StreamError(.outputUnavailable, "the output is being reopened; its volume can be set once it is back")
                }
                throw StreamError(.invalidArgument, "the output \(configuration.output) has no volume of its own (volume.mixer = \"pipewire\" needs the pipewire output)")
            }
            try pw.setVolume(amplitude)
        }
    }

    /// The local output and the feeds, with their state and counters. Thread: any.
    public func outputs() -> [OutputReport] {
        let (negotiated, spec, resolved) = control.withLock { c in
            (c.negotiated, c.usingNullFallback ? "null" : configuration.output,
             c.usingNullFallback ? "null" : configuration.output == "auto" ? c.autoSpec ?? "alsa:default" : configuration.output)
        }
        let kind = (try? OutputSpec.parse(resolved))?.kind.name ?? "?"
        var list = [OutputReport(name: Self.localOutputName, kind: kind, spec: spec,
                                 enabled: !shared.localMuted.load(ordering: .relaxed),
                                 state: negotiated == nil ? "closed" : "open",
                                 format: negotiated?.description)]
        for f in configuration.feeds {
            list.append(OutputReport(name: f.name, kind: f.sink == nil ? "fifo" : "http", spec: f.spec, enabled: f.isEnabled,
                                     state: f.state.name, format: f.format.description,
                                     framesWritten: f.framesWritten, framesDropped: f.framesDropped,
                                     error: f.lastError))
        }
        return list
    }

    /// Enables or disables an output by name. A disabled feed gets nothing and closes
    /// its FIFO; the disabled local output stays open, silent, as the clock that paces
    /// the feeds (configure `null` as the device to leave the sound card alone).
    /// Thread: any.
    public func setOutputEnabled(_ name: String, _ on: Bool) throws(StreamError) {
        if name == Self.localOutputName {
            guard shared.localMuted.exchange(!on, ordering: .relaxed) == on else { return }
        } else if let f = configuration.feeds.first(where: { $0.name == name }) {
            guard f.isEnabled != on else { return }
            f.setEnabled(on)
        } else {
            let names = ([Self.localOutputName] + configuration.feeds.map(\.name)).joined(separator: ", ")
            throw StreamError(.invalidArgument, "no output named '\(name)' (outputs: \(names))")
        }
        logger.info("output \(on ? "enabled" : "disabled")", metadata: ["output.name": "\(name)"])
        onEvent(.outputChanged(name: name))
    }
}
