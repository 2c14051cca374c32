/// The user-visible transport state machine: a pure value, tested without threads.
///
/// `mutating func on(_:) -> Action` in the style of swift-nio's protocol state machines:
/// the engine feeds it events and performs the returned action.
public struct Transport: Sendable, Equatable {
    public enum State: String, Sendable {
        case stopped, playing, paused
    }

    public enum Event: Sendable, Equatable {
        case play       // a track was loaded to play
        case pause
        case resume
        case toggle
        case stop
        case ended      // the last frame of the track was heard
    }

    public enum Action: Sendable, Equatable {
        /// Tell the render thread to make (or stop making) sound.
        case setPlaying(Bool)
        /// Drop the stream.
        case unload
        /// Nothing to do (e.g. pause while stopped).
        case none
    }

    public private(set) var state: State = .stopped

    public init() {}

    public mutating func on(_ event: Event) -> Action {
        switch (state, event) {
        case (_, .play):
            state = .playing
            return .setPlaying(true)
        case (.playing, .pause), (.playing, .toggle):
            state = .paused
            return .setPlaying(false)
        case (.paused, .resume), (.paused, .toggle):
            state = .playing
            return .setPlaying(true)
        case (.stopped, _) where event != .play:
            return .none
        case (_, .stop), (_, .ended):
            state = .stopped
            return .unload
        case (.playing, .resume), (.paused, .pause):
            return .none
        default:
            return .none
        }
    }
}
