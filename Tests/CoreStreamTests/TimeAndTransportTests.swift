import Testing
import CoreStream

@Suite("Exact time arithmetic", .checksSomething)
struct FrameTimeTests {
    /// Messages give positions as people write times.
    @Test(arguments: [
        (Int64(0), 44100, "0:00"), (Int64(6_615_000), 44100, "2:30"), (Int64(3_660_750), 44100, "1:23.01"),
        (Int64(66_150), 44100, "0:01.5"), (Int64(178_734_000), 48000, "1:02:03.625"), (Int64(-44100), 44100, "-0:01"),
        (Int64(1), 48000, "0:00"), (Int64(24), 48000, "0:00.001"), (Int64.max, 44100, "9223372036854775807f"),
    ])
    func clock(_ frames: Int64, _ rate: Int, _ text: String) {
        #expect(FrameTime.clock(frames, rate: rate) == text)
    }

    @Test(arguments: [
        (Int64(44100), 44100, 48000, Int64(48000)),
        (Int64(1), 44100, 48000, Int64(1)),           // 1.088… rounds to 1
        (Int64(441), 44100, 48000, Int64(480)),
        (Int64(518_400_000), 48000, 44100, Int64(476_280_000)),  // 3 h, exact
        (Int64(-441), 44100, 48000, Int64(-480)),
    ])
    func convertsBetweenRates(_ frames: Int64, _ from: Int, _ to: Int, _ expected: Int64) {
        #expect(FrameTime.convert(frames, from: from, to: to) == expected)
    }

    @Test func rescaleHandlesLargeProductsWithoutOverflow() {
        // mp3 time base 1/14112000: 10 hours of 44.1 kHz frames.
        let frames: Int64 = 44100 * 36000
        let ts = FrameTime.rescale(frames, 14_112_000, 44100)
        #expect(ts == frames * 320)
        #expect(FrameTime.rescale(ts, 44100, 14_112_000) == frames)
    }

    @Test func floorRoundsTowardNegativeInfinity() {
        #expect(FrameTime.rescaleFloor(7, 1, 2) == 3)
        #expect(FrameTime.rescaleFloor(-7, 1, 2) == -4)
    }

    @Test func secondsKeepPrecisionForLongPositions() {
        #expect(FrameTime.seconds(48000 * 3600 * 3 + 24000, rate: 48000) == 10800.5)
    }
}

@Suite("Transport state machine", .checksSomething)
struct TransportTests {
    typealias E = Transport.Event
    @Test(arguments: [
        ([E.play], Transport.State.playing),
        ([.play, .pause], .paused),
        ([.play, .toggle], .paused),
        ([.play, .toggle, .toggle], .playing),
        ([.play, .pause, .resume], .playing),
        ([.pause], .stopped),
        ([.resume], .stopped),
        ([.play, .stop], .stopped),
        ([.play, .pause, .stop], .stopped),
        ([.play, .ended], .stopped),
        ([.play, .stop, .play], .playing),
    ])
    func sequences(_ events: [E], _ final: Transport.State) {
        var t = Transport()
        for e in events { _ = t.on(e) }
        #expect(t.state == final)
    }

    @Test func actions() {
        var t = Transport()
        #expect(t.on(.pause) == .none)
        #expect(t.on(.play) == .setPlaying(true))
        #expect(t.on(.resume) == .none)
        #expect(t.on(.pause) == .setPlaying(false))
        #expect(t.on(.pause) == .none)
        #expect(t.on(.stop) == .unload)
        #expect(t.on(.stop) == .none)
    }
}
