import ArgumentParser
import CoreStream
import PlaydProtocol
#if canImport(Glibc)
import Glibc
#endif

@main
struct Playctl: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "playctl",
        abstract: "Control a running playd over its Unix socket.",
        discussion: """
        TIME is 83.5, 1:23.5 or 1:02:03 (seconds), +10 / -10 (relative), or 123456f (exact frames).
        The socket is --socket (before or after the subcommand), else $PLAYD_SOCKET, else
        $XDG_RUNTIME_DIR/playd/control.sock if it exists, else /run/playd/control.sock.
        Without a subcommand, playctl shows the status (as mpc does).
        Shell completion: playctl --generate-completion-script bash|zsh|fish.
        """,
        version: "0.2.0",
        subcommands: [Play.self, Pause.self, Resume.self, Toggle.self, Stop.self, Seek.self, Loop.self, Direction.self,
                      Volume.self, Mute.self, Unmute.self, Cover.self, Outputs.self, Output.self,
                      Add.self, Insert.self, Remove.self, Move.self, Clear.self, Queue.self, Next.self, Prev.self,
                      RepeatMode.self, SingleMode.self, Shuffle.self, Consume.self, CrossfadeCommand.self, Export.self, Loudness.self,
                      Update.self, Search.self, Find.self, List.self, Ls.self, Save.self, Load.self, Playlists.self, Current.self,
                      Announce.self, ScheduleCommand.self, Status.self, Watch.self, Ping.self])

    /// The arguments as bytes, escaped as ``PathBytes`` says: `CommandLine.arguments`
    /// turns bytes that are not UTF-8 into U+FFFD, so a file with a Latin-1 name could
    /// not be named at all.
    static func main() {
        main(arranged(ProcessArguments.afterName()))
    }

    /// mpc's habits: `--socket PATH` (and `--json`) may come before the subcommand as
    /// well as after it, and a bare `playctl` shows the status.
    static func arranged(_ args: [String]) -> [String] {
        var globals: [String] = []
        var rest = args[...]
        while let a = rest.first, a == "--socket" || a.hasPrefix("--socket=") || a == "--json" {
            globals.append(a)
            rest = rest.dropFirst()
            if a == "--socket", let value = rest.first {
                globals.append(value)
                rest = rest.dropFirst()
            }
        }
        guard let first = rest.first else { return ["status"] + globals }
        if first.hasPrefix("-") { return args }  // --help, --version, completion scripts
        return [first] + globals + rest.dropFirst()
    }
}
