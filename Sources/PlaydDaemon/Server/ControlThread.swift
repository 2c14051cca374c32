import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// The control thread's identity, for the debug-build check that a function documented
/// "Control thread" runs there (issue 38): the Player's fields have no lock, and one
/// touched from another thread is a data race no test may see. ``ControlServer/run()``
/// claims the thread it runs on; until a server runs (the in-process tests drive a
/// Player from their own thread) nothing is checked. Release builds check nothing.
enum ControlThread {
    /// `pthread_self()` of the thread running the server's loop; 0: none yet. Written
    /// once by ``claim()`` before the loop starts; read by any.
    private static let owner = Atomic<UInt>(0)

    static func claim() { owner.store(UInt(pthread_self()), ordering: .releasing) }

    /// Traps in a debug build when called off the control thread (once there is one).
    @inline(__always)
    static func check(_ function: StaticString = #function, file: StaticString = #fileID, line: UInt = #line) {
        #if DEBUG
        let o = owner.load(ordering: .acquiring)
        precondition(o == 0 || o == UInt(pthread_self()), "\(function) runs off the control thread", file: file, line: line)
        #endif
    }
}
