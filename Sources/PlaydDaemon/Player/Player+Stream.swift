import CoreStream

/// Network streams (http/https URLs): opened off the control thread, since a connect
/// and a probe may take up to `streams.timeout`, then handed to the engine; their ICY
/// titles and reconnects. Control thread.
extension Player {
    /// A stream being opened: the queue entry it is for (nil: played by URL, outside the
    /// queue), where to start, and how to call the open off.
    struct StreamOpening {
        var serial: Int
        var url: String
        var entry: Int?
        var at: Int64?
        var atSeconds: Double?
        /// Loaded paused (an output's return while it was paused).
        var paused = false
        var cancel: StreamCancel
        /// How much of the network buffer's prefill has arrived (status `buffer_percent`).
        var percent = 0
    }

    /// What a network stream may do, from the config, with a cancel flag.
    func streamOptions(_ cancel: StreamCancel) -> StreamOptions {
        var o = StreamOptions()
        o.timeoutSeconds = Double(config.streamTimeout)
        o.reconnectAttempts = config.streamReconnects
        o.bufferBytes = config.streamBufferKiB * 1024
        o.prefillBytes = config.streamPrefillKiB * 1024
        o.allowedHosts = config.streamHosts
        o.cancel = cancel
        return o
    }

    /// Starts opening `url` (admitted already) on the opener thread; what played stops
    /// now, as in MPD. The answer comes back in ``streamOpened(_:_:)``.
    func openStream(_ url: String, entry: Int?, at: Int64? = nil, atSeconds: Double? = nil, paused: Bool = false) {
        cancelStreamOpening()
        openSerial += 1
        let cancel = StreamCancel()
        let serial = openSerial, post = self.post
        var o = streamOptions(cancel)
        o.onPrefill = { percent in post { [weak self] in self?.streamPrefilled(serial, percent) } }
        let options = o
        streamOpening = StreamOpening(serial: serial, url: url, entry: entry, at: at, atSeconds: atSeconds, paused: paused, cancel: cancel)
        if engine.status().state != .stopped { engine.stop() }
        logger.info("opening stream", metadata: ["track.path": "\(url)"])
        emit(.buffering(url: url))
        opener.submit {
            let result: Result<Handoff<AudioDecoder>, StreamError>
            do throws(StreamError) {
                result = .success(Handoff(try AudioDecoder(path: url, stream: options)))
            } catch {
                result = .failure(error)
            }
            post { [weak self] in self?.streamOpened(serial, result) }
        }
    }

    /// The prefill of the stream being opened grew.
    func streamPrefilled(_ serial: Int, _ percent: Int) {
        guard streamOpening?.serial == serial else { return }
        streamOpening?.percent = percent
    }

    /// Drops an open in progress (a newer play, a stop, a clear): its connect gives up
    /// and its result is ignored.
    func cancelStreamOpening() {
        guard let o = streamOpening else { return }
        o.cancel.cancel()
        streamOpening = nil
    }

    /// An open finished, on the control thread: play it, or report it and (for a queue
    /// entry) go on with the next entry.
    func streamOpened(_ serial: Int, _ opened: Result<Handoff<AudioDecoder>, StreamError>) {
        guard let o = streamOpening, o.serial == serial else { return }  // superseded: dropped
        var result = opened
        if case .success(let decoder) = opened {
            // The output lost, or in another format: its reopen runs on a worker, and
            // this plays after it.
            do {
                try awaitOutput()
                try awaitDevice(for: decoder.value, path: o.url)
            } catch let p as PlayerError where p.code == .workPending {
                deferredStreamOpen = (serial, opened)
                return
            } catch {
                result = .failure(error as? StreamError ?? StreamError(.outputUnavailable, "\(error)"))
            }
        }
        streamOpening = nil
        do {
            let decoder = try result.get().value
            if let s = o.atSeconds {
                guard s.isFinite, s >= 0, let f = FrameTime.checkedFrames(seconds: s, rate: decoder.info.sampleRate) else {
                    throw StreamError(.invalidArgument, "\(o.url): start position \(s) s is out of range")
                }
                try engine.play(decoder: decoder, from: f, paused: o.paused)
            } else {
                try engine.play(decoder: decoder, from: o.at, paused: o.paused)
            }
            streamTitle = decoder.info.streamTitle
            streamReconnecting = nil
            streamFailures = 0
            reportedSkips.removeAll()
            queueChanged(edited: false)
        } catch {
            let e = error as? StreamError ?? StreamError(.internalError, "\(error)")
            logger.warning("stream could not be opened", metadata: ["track.path": "\(o.url)", "error": "\(e.message)"])
            guard let id = o.entry, let index = queue.index(ofID: id) else {
                emit(.error(code: e.code.name, message: e.message))
                return
            }
            reportSkipped(id: id, path: o.url, e)
            // On to the next entry, once round the queue at most.
            streamFailures += 1
            if streamFailures < queue.count, let n = queue.successor(of: index, manual: true), n != index {
                playEntryLater(n)
            } else {
                streamFailures = 0
                queue.setCurrent(nil)
                queueChanged(edited: false)
            }
        }
    }

    /// A playing stream's news from the engine.
    func streamEvent(path: String, _ e: StreamEvent) {
        guard engine.status().track?.path == path else { return }
        switch e {
        case .title(let t):
            streamTitle = t
            emit(.streamTitle(path: path, title: t))
        case .reconnecting(let attempt, let cause):
            streamReconnecting = attempt
            emit(.streamReconnecting(path: path, attempt: attempt, cause: cause))
        case .reconnected:
            streamReconnecting = nil
            emit(.streamReconnected(path: path))
        }
    }

    /// The current stream's title split as "Artist - Title" (ICY carries one string).
    public var streamTitleParts: (artist: String?, title: String)? {
        streamTitle.map(NetworkInput.splitTitle)
    }
}
