import CoreStream
import PlaydProtocol

/// How the JSON protocol shows the player: events, `status`, tracks, songs, outputs
/// (docs/protocol.md).
enum JSONEncoding {
    /// A player event as an event line, or nil for events the JSON protocol does not
    /// send (none today).
    static func event(_ e: PlayerEvent, _ player: Player) -> JSON? {
        func ev(_ name: EventName, _ members: [(String, JSON)]) -> JSON { .object([("event", .string(name.rawValue))] + members) }
        switch e {
        case .track(let t): return ev(.track, [("file", .string(t.path))] + metadata(t))
        case .trackEnd(let p): return ev(.trackEnd, [("file", .string(p))])
        case .state(let s, let at):
            return ev(.state, [("state", .string(s.rawValue))]
                      + (at.map { [("position", .number($0.seconds)), ("position_frames", .int($0.frame))] } ?? []))
        case .seeked(let f, let s): return ev(.seeked, [("position", .number(s)), ("position_frames", .int(f))])
        case .underruns(let n): return ev(.underrun, [("underruns", .int(n))])
        case .corruptPackets(let p, let n): return ev(.corruptPackets, [("file", .string(p)), ("count", .int(n))])
        case .error(let code, let message): return ev(.error, [("code", .string(code)), ("message", .string(message))])
        case .loopWrapped(let pass, let remaining):
            return ev(.loopWrapped, [("passes", .int(pass)), ("remaining", remaining.map(JSON.int) ?? .null)])
        case .loop(let l): return ev(.loop, [("loop", loop(l))])
        case .direction(let d): return ev(.direction, [("direction", .string(d.rawValue))])
        case .volume(let v, let muted): return ev(.volume, [("volume", .int(v)), ("muted", .bool(muted))])
        case .queue(let length, let current, _):
            return ev(.queue, [("length", .int(length)), ("current", current.map { JSON.int($0) } ?? .null)])
        case .options(let repeats, let single, let shuffle, let consume):
            return ev(.options, options(repeats: repeats, single: single, shuffle: shuffle, consume: consume))
        case .crossfade(let c): return ev(.crossfade, crossfade(c))
        case .output(let o): return ev(.output, outputMembers(o))
        case .skipped(let id, let path, let code, let message):
            return ev(.skipped, [("entry", .int(id)), ("file", .string(path)), ("code", .string(code)), ("message", .string(message))])
        case .outputLost(let code, let message, let retry):
            return ev(.outputLost, [("code", .string(code)), ("message", .string(message)), ("retry_in_ms", .int(retry))])
        case .outputRestored(let ms, let attempts):
            return ev(.outputRestored, [("after_ms", .int(ms)), ("attempts", .int(attempts))])
        case .updateStarted(let job): return ev(.update, [("state", .string("started")), ("job", .int(job))])
        case .updateRunning(let job, let scanned, let rate):
            return ev(.update, [("state", .string("running")), ("job", .int(job)), ("scanned", .int(scanned)),
                                 ("rate", .number((rate * 10).rounded() / 10))])
        case .buffering(let url): return ev(.buffering, [("file", .string(url))])
        case .storedPlaylist(let name): return ev(.storedPlaylist, [("name", .string(name))])
        case .announcementStarted(let source, let frame):
            return ev(.announcementStarted, [("source", .string(source)), ("music_frame", frame.map(JSON.int) ?? .null)])
        case .announcementEnded(let source, let cancelled, let error):
            var m: [(String, JSON)] = [("source", .string(source)), ("cancelled", .bool(cancelled))]
            if let error { m += [("error", .obj(("code", .string(error.jsonCode)), ("message", .string(error.message))))] }
            return ev(.announcementEnded, m)
        case .streamTitle(let path, let title):
            let parts = title.map(NetworkInput.splitTitle)
            return ev(.metadata, [("file", .string(path)), ("stream_title", title.map(JSON.string) ?? .null),
                                   ("title", parts.map { JSON.string($0.title) } ?? .null),
                                   ("artist", parts?.artist.map(JSON.string) ?? .null)])
        case .streamReconnecting(let path, let attempt, let cause):
            return ev(.reconnecting, [("file", .string(path)), ("attempt", .int(Int64(attempt))), ("cause", .string(cause))])
        case .streamReconnected(let path): return ev(.reconnected, [("file", .string(path))])
        case .schedule: return ev(.schedule, schedule(player.scheduleView()))
        case .updateFinished(let r, let songs):
            return ev(.update, [("state", .string("finished")), ("job", .int(r.job)),
                                 ("scanned", .int(r.scanned)), ("added", .int(r.added)), ("updated", .int(r.updated)),
                                 ("removed", .int(r.removed)), ("tag_errors", .int(r.tagErrors)),
                                 ("skipped_links", .int(r.skippedLinks)),
                                 ("unreadable", .array(r.unreadable.map(JSON.string))), ("seconds", .number(r.seconds)),
                                 ("songs", .int(songs))])
        }
    }

    /// The schedule now (`schedule` and its event; docs/schedule.md).
    static func schedule(_ v: Player.ScheduleView) -> [(String, JSON)] {
        var m: [(String, JSON)] = [("configured", .bool(v.configured)), ("timezone", .string(v.timezone)),
                                   ("now", .string(WallClock.iso(v.now))),
                                   ("block", v.block.map(JSON.string) ?? .null), ("programme", v.programme.map(JSON.string) ?? .null),
                                   ("since", v.since.map(JSON.string) ?? .null),
                                   ("override", .bool(v.overridden)), ("override_mode", .string(v.override)),
                                   ("next", v.next.map { n in .obj(("at", .string(WallClock.iso(n.at))), ("in_seconds", .int(Int64(n.at - v.now))),
                                                                   ("block", .string(n.block)), ("programme", .string(n.programme))) } ?? .null)]
        if let d = v.day {
            m.append(("day", .obj(("date", .string(d.date.description)),
                                  ("blocks", .array(d.stretches.map { s in
                                      .obj(("from", .string(s.from)), ("to", .string(s.to)), ("block", .string(s.block)),
                                           ("programme", .string(s.programme)), ("seconds", .int(Int64(s.seconds))))
                                  })),
                                  ("announcements", .array(d.announcements.map { a in
                                      .obj(("at", .string(a.at)), ("name", .string(a.name)), ("source", .string(a.source)))
                                  }))))
            )
        }
        return m
    }

    static func options(repeats: Bool, single: PlayQueue.Single, shuffle: Bool, consume: Bool) -> [(String, JSON)] {
        [("repeat", .string(RepeatWord(repeats: repeats, single: single).rawValue)), ("single", .string(single.rawValue)),
                ("shuffle", .bool(shuffle)), ("consume", .bool(consume))]
    }

    /// `mixramp_delay` is null when MixRamp is off (MPD's status leaves the line out).
    static func crossfade(_ c: Player.CrossfadeSettings) -> [(String, JSON)] {
        [("seconds", .int(Int64(c.seconds))), ("mixramp_db", .number(c.mixrampDB)),
         ("mixramp_delay", c.mixrampOn ? .number(c.mixrampDelay) : .null)]
    }

    static func options(_ q: PlayQueue) -> [(String, JSON)] {
        options(repeats: q.repeats, single: q.single, shuffle: q.shuffle, consume: q.consume)
    }

    static func loop(_ l: Player.LoopView?) -> JSON {
        guard let l else { return .null }
        return .obj(("start", .number(FrameTime.seconds(l.start, rate: l.rate))), ("end", .number(FrameTime.seconds(l.end, rate: l.rate))),
                    ("start_frames", .int(l.start)), ("end_frames", .int(l.end)),
                    ("count", l.count.map(JSON.int) ?? .null), ("ping_pong", .bool(l.pingPong)),
                    ("passes", .int(l.passes)), ("remaining", l.remaining.map(JSON.int) ?? .null))
    }

    /// One output as `outputs` and `output` events show it.
    static func outputMembers(_ o: PlaybackEngine.OutputReport) -> [(String, JSON)] {
        var m: [(String, JSON)] = [("name", .string(o.name)), ("kind", .string(o.kind)), ("spec", .string(o.spec)),
                                   ("enabled", .bool(o.enabled)), ("state", .string(o.state)),
                                   ("format", o.format.map(JSON.string) ?? .null)]
        if let w = o.framesWritten { m.append(("frames_written", .int(w))) }
        if let d = o.framesDropped { m.append(("frames_dropped", .int(d))) }
        m.append(("error", o.error.map(JSON.string) ?? .null))
        return m
    }

    /// Tags and stream facts of a track, for `status` and `track` events.
    static func metadata(_ t: TrackInfo) -> [(String, JSON)] {
        var m: [(String, JSON)] = []
        func add(_ key: String, _ v: String?) { if let v { m.append((key, .string(v))) } }
        func add(_ key: String, _ v: Int?) { if let v { m.append((key, .int(Int64(v)))) } }
        add("title", t.title)
        add("artist", t.artist)
        add("album", t.album)
        add("album_artist", t.albumArtist)
        add("track", t.trackNumber)
        add("disc", t.discNumber)
        add("date", t.date)
        add("genre", t.genre)
        m += [("duration", t.durationSeconds.map(JSON.number) ?? .null),
              ("codec", .string(t.codec)), ("sample_rate", .int(Int64(t.sampleRate))), ("channels", .int(Int64(t.channels)))]
        add("bitrate", t.bitRate)
        add("bit_depth", t.bitsPerSample)
        m.append(("cover", t.cover.map { .obj(("mime", .string($0.mime)), ("size", .int(Int64($0.size)))) } ?? .null))
        return m
    }

    static func song(_ s: LibrarySong) -> JSON {
        var m: [(String, JSON)] = [("file", .string(s.path))]
        func add(_ k: String, _ v: String?) { if let v { m.append((k, .string(v))) } }
        func add(_ k: String, _ v: Int?) { if let v { m.append((k, .int(v))) } }
        add("title", s.title); add("artist", s.artist); add("album", s.album); add("album_artist", s.albumArtist)
        add("genre", s.genre); add("date", s.date); add("track", s.track); add("disc", s.disc)
        m.append(("duration", s.duration.map(JSON.number) ?? .null))
        add("codec", s.codec); add("sample_rate", s.sampleRate); add("channels", s.channels)
        if let e = s.error { m.append(("error", .string(e))) }
        return .object(m)
    }

    static func entry(_ player: Player, _ index: Int, _ e: PlayQueue.Entry) -> JSON {
        let summary = player.probeSummary(e.path)
        return .obj(("index", .int(Int64(index))), ("entry", .int(Int64(e.id))), ("file", .string(e.path)),
                    ("title", summary.title.map(JSON.string) ?? .null), ("artist", summary.artist.map(JSON.string) ?? .null),
                    ("duration", summary.duration.map(JSON.number) ?? .null), ("current", .bool(index == player.queue.current)))
    }

    static func current(_ player: Player) -> [(String, JSON)] {
        [("current", player.queue.current.map { JSON.int(Int64($0)) } ?? .null),
         ("entry", player.queue.currentEntry.map { JSON.int(Int64($0.id)) } ?? .null)]
    }

    /// `status`.
    static func status(_ player: Player, _ server: ServerCounters) -> [(String, JSON)] {
        let s = player.snapshot().status
        let opening = player.openingStream
        var m: [(String, JSON)] = [("state", .string(opening != nil ? "buffering" : s.state.rawValue))]
        // Stopped, by `stop` or at the end of the last track alike, names no file (the
        // engine keeps an ended track to restart it; MPD's status drops it too).
        if let url = opening {
            m += [("file", .string(url)), ("position", .number(0)), ("duration", .null), ("position_frames", .int(0)),
                  ("duration_frames", .null), ("loop", .null),
                  ("stream", .obj(("live", .null), ("station", .null), ("stream_title", .null), ("reconnecting", .null),
                                  ("buffer_percent", .int(Int64(player.openingPercent)))))]
        } else if let t = s.track, s.state != .stopped {
            m += [("file", .string(t.path)),
                  ("position", .number(s.positionSeconds)),
                  ("duration", t.durationSeconds.map(JSON.number) ?? .null),
                  ("position_frames", .int(s.positionFrames)),
                  ("duration_frames", t.durationFrames.map(JSON.int) ?? .null),
                  ("duration_is_estimate", .bool(t.durationIsEstimate))]
            var meta = metadata(t).filter { $0.0 != "duration" }
            if NetworkInput.isStreamURL(t.path) {
                // A radio's ICY title, split where it reads "Artist - Title".
                if let parts = player.streamTitleParts {
                    meta = meta.filter { $0.0 != "title" && $0.0 != "artist" }
                    meta.insert(("title", .string(parts.title)), at: 0)
                    if let a = parts.artist { meta.insert(("artist", .string(a)), at: 1) }
                }
                meta.append(("stream", .obj(("live", .bool(t.isLive)), ("station", t.stationName.map(JSON.string) ?? .null),
                                            ("stream_title", player.streamTitle.map(JSON.string) ?? .null),
                                            ("reconnecting", player.streamReconnecting.map { JSON.int(Int64($0)) } ?? .null),
                                            ("buffer_percent", .null))))
            }
            m += meta
            m.append(("loop", loop(player.loopView(s))))
        } else {
            m += [("file", .null), ("position", .number(0)), ("duration", .null), ("position_frames", .int(0)),
                  ("duration_frames", .null), ("loop", .null)]
        }
        m.append(("direction", .string(s.direction.rawValue)))
        let q = player.queue
        let heard = player.heardEntries(s)
        m.append(("queue", .object([("length", .int(Int64(q.count))), ("current", heard.current.map { JSON.int(Int64($0)) } ?? .null),
                                    ("current_id", heard.current.map { JSON.int(Int64(q.entries[$0].id)) } ?? .null),
                                    ("next_id", heard.next.map { JSON.int(Int64(q.entries[$0].id)) } ?? .null)] + options(q))))
        m.append(("crossfade", .object(crossfade(player.crossfade))))
        if let a = player.announcing {
            m.append(("announcing", .obj(("source", .string(a.request.source)), ("mode", .string(a.request.pause ? "pause" : "duck")),
                                         ("duck_db", .number(a.request.duckDB)), ("gain_db", .number(a.request.gainDB)),
                                         ("waiting", .int(a.waiting)))))
        } else {
            m.append(("announcing", .null))
        }
        if let library = player.library {
            var l: [(String, JSON)] = [("songs", .int(player.librarySongs)), ("updating", .bool(player.libraryJob != 0))]
            if player.libraryJob != 0, let p = library.progress {
                l += [("job", .int(p.job)), ("scanned", .int(p.scanned)), ("rate", .number((p.rate * 10).rounded() / 10))]
            }
            if let p = player.loudness.libraryProgress {
                l.append(("loudness", .obj(("measured", .int(p.measured)), ("songs", .int(p.songs)), ("measuring", .bool(p.running)),
                                           ("measured_since_start", .int(p.sinceStart)))))
            }
            m.append(("library", .object(l)))
        } else {
            m.append(("library", .null))
        }
        if let o = s.output {
            m.append(("output", .obj(("device", .string(o.device)), ("format", .string(o.sampleFormat.rawValue)),
                                     ("sample_rate", .int(o.pcm.sampleRate)), ("channels", .int(o.pcm.channels)),
                                     ("period_frames", .int(o.periodFrames)), ("buffer_frames", .int(o.bufferFrames)))))
        } else {
            m.append(("output", .null))
        }
        var outputError = JSON.null
        if let loss = player.outputLoss {
            outputError = .obj(("code", .string(loss.error.code.name)), ("message", .string(loss.error.message)),
                               ("since_ms", .int(loss.sinceMillis)), ("attempts", .int(loss.attempts)),
                               ("next_retry_ms", .int(loss.nextRetryMillis)))
        }
        m += [("volume", .int(Int64(player.currentLevel().volume))), ("muted", .bool(s.level.muted)),
              ("mixer", .string(player.mixerKind)),
              ("replay_gain", .obj(("mode", .string(s.level.replayGain.rawValue)),
                                   ("applied_db", s.replayGainAppliedDB.map(JSON.number) ?? .null),
                                   ("track_gain_db", s.replayGain.trackGainDB.map(JSON.number) ?? .null),
                                   ("album_gain_db", s.replayGain.albumGainDB.map(JSON.number) ?? .null),
                                   ("source", s.replayGain.source.map(JSON.string) ?? .null),
                                   ("stream_gain_db", s.streamGainDB.map { JSON.number(($0 * 10).rounded() / 10) } ?? .null),
                                   ("measured", .int(Int64(player.loudness.measuredCount))),
                                   ("measuring", .int(Int64(player.loudness.pendingCount))))),
              ("underruns", .int(s.underruns)), ("device_xruns", .int(s.deviceXruns)),
              ("corrupt_packets", .int(s.corruptPackets)),
              ("clients_dropped", .int(server.dropped)), ("clients_refused", .int(server.refused)),
              ("clients_connected", .int(server.connected)), ("clients_over_limits", .int(server.overLimits)),
              ("clients_timed_out", .int(server.timedOut)),
              ("output_error", outputError)]
        if let hub = player.streamHub {
            // The listen streams (http.streams): listeners now, and those dropped for
            // falling behind (a stalled phone).
            let c = hub.counts
            m.append(("listen", .obj(("listeners", .int(Int64(c.listeners))), ("dropped", .int(Int64(c.dropped))),
                                     ("error", c.error.map(JSON.string) ?? .null))))
        }
        if let ns = s.lastStartLatencyNanoseconds {
            // From the last play/seek request to its first frame written to the output.
            m.append(("start_latency_ms", .number(Double(ns) / 1e6)))
            // Where it went: the first frames' decode, and the device's reset beside it
            // (issue 25's breakdown).
            if let d = s.lastStartDecodeNanoseconds { m.append(("start_decode_ms", .number(Double(d) / 1e6))) }
            if let r = s.lastStartDeviceResetNanoseconds { m.append(("device_reset_ms", .number(Double(r) / 1e6))) }
        }
        return m
    }

    static func position(_ player: Player) -> JSON {
        let s = player.snapshot().status
        return .obj(("event", .string(EventName.position.rawValue)), ("state", .string(s.state.rawValue)),
                    ("position", .number(s.positionSeconds)), ("position_frames", .int(s.positionFrames)))
    }
}

/// The server's connection counters, as `status` shows them.
public struct ServerCounters: Sendable {
    public var dropped = 0, refused = 0, connected = 0, overLimits = 0, timedOut = 0
    public init() {}
}
