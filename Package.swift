// swift-tools-version:6.0
import PackageDescription

// The sanitizer builds in scripts/test compile only the test files that hold tests tagged
// for their sanitizer (scripts/tagged --files), given here as a space-separated list of
// paths; the test targets' other files are not built. Unset (every other build), the
// test targets hold every file.
let testSources: [String]? = Context.environment["PLAYD_TEST_SOURCES"].map { $0.split(separator: " ").map(String.init) }
func sources(of target: String) -> [String]? {
    testSources.map { $0.filter { $0.hasPrefix("Tests/\(target)/") }.map { String($0.dropFirst("Tests/\(target)/".count)) } }
}

let package = Package(
    name: "playd",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "CoreStream", targets: ["CoreStream"]),
        .library(name: "CoreStreamTestSupport", targets: ["CoreStreamTestSupport"]),
        .executable(name: "playd", targets: ["playd"]),
        .executable(name: "playctl", targets: ["playctl"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
    ],
    targets: [
        // Thin C modules. Everything that touches FFmpeg or ALSA in Swift lives in
        // CoreStream/Decoding and CoreStream/Output respectively.
        .systemLibrary(
            name: "CFFmpeg",
            pkgConfig: "libavformat",
            providers: [.apt(["libavformat-dev", "libavcodec-dev", "libavutil-dev", "libswresample-dev"])]
        ),
        .systemLibrary(
            name: "CALSA",
            pkgConfig: "alsa",
            providers: [.apt(["libasound2-dev"])]
        ),
        .systemLibrary(name: "CLinux"),
        // Zeroconf through Avahi, loaded with dlopen at run time (optional: see its header).
        .target(name: "CZeroconf"),
        // The web remote's HTTP (issue 44): libmicrohttpd, a C library of 0.3 MB with
        // the caps a daemon needs built in; swift-nio measured beside it in
        // docs/benchmarks.md. A C shim makes its two variadic calls.
        .target(name: "CMicroHTTPD", linkerSettings: [.linkedLibrary("microhttpd")]),
        // The native PipeWire output (issue 46): libpipewire's stream API is macros and
        // inline functions (SPA pods), so its calls live in a C shim; the ring the render
        // thread and PipeWire's data thread share is there too (see its header).
        // Debian 12's paths for libpipewire-0.3-dev (pkg-config --cflags libpipewire-0.3).
        .target(
            name: "CPipeWire",
            cSettings: [.unsafeFlags(["-I/usr/include/pipewire-0.3", "-I/usr/include/spa-0.2", "-D_REENTRANT"])],
            linkerSettings: [.linkedLibrary("pipewire-0.3")]
        ),
        // The music library's index. SQLite's C API directly rather than GRDB.swift:
        // GRDB imports Foundation, which adds ~0.8 MB of private memory to the daemon
        // (see docs/library.md), and the queries here are a handful of fixed statements.
        .systemLibrary(
            name: "CSQLite",
            pkgConfig: "sqlite3",
            providers: [.apt(["libsqlite3-dev"])]
        ),
        // EBU R128 loudness (issue 43): libebur128 rather than FFmpeg's `ebur128` filter
        // through libavfilter. A 49 KiB library with a five-call C API against a filter
        // graph to build and read back through frame metadata; the `ffmpeg` CLI's filter
        // stays the independent reference the tests compare with (docs/loudness.md).
        .systemLibrary(
            name: "CEBUR128",
            pkgConfig: "libebur128",
            providers: [.apt(["libebur128-dev"])]
        ),
        // Network streams' HTTP (issue 39): libcurl, so each redirect is checked before
        // it is followed and a response head is capped, which FFmpeg 5.1's http protocol
        // allows neither. The GnuTLS build: FFmpeg links GnuTLS already.
        .systemLibrary(
            name: "CCurl",
            providers: [.apt(["libcurl4-gnutls-dev"])]
        ),
        .target(
            name: "CoreStream",
            dependencies: [
                "CFFmpeg", "CALSA", "CLinux", "CEBUR128", "CPipeWire", "CCurl",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .target(
            name: "CoreStreamTestSupport",
            dependencies: ["CoreStream", .product(name: "Logging", package: "swift-log")]
        ),
        // What playd and playctl both speak: JSON, the line client, TIME arguments.
        .target(name: "PlaydProtocol", dependencies: ["CLinux"]),
        // The server's side of the line protocols: the session contract, MPD's session
        // state machine and its message channels. playctl does not link it (issue 40).
        .target(name: "PlaydSessions"),
        .target(
            name: "PlaydDaemon",
            dependencies: ["CoreStream", "CLinux", "CSQLite", "CZeroconf", "CMicroHTTPD", "PlaydProtocol", "PlaydSessions", .product(name: "Logging", package: "swift-log")]
        ),
        .executableTarget(
            name: "playd",
            dependencies: [
                "CoreStream", "PlaydDaemon", "PlaydProtocol",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        .executableTarget(
            name: "playctl",
            dependencies: [
                "PlaydProtocol",
                "CoreStream",  // export runs in playctl's own process
                "CLinux",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        .testTarget(
            name: "CoreStreamTests",
            dependencies: ["CoreStream", "CoreStreamTestSupport"],
            sources: sources(of: "CoreStreamTests")
        ),
        .testTarget(
            name: "PlaydTests",
            dependencies: ["PlaydDaemon", "PlaydProtocol", "PlaydSessions", "CoreStreamTestSupport"],
            sources: sources(of: "PlaydTests")
        ),
    ],
    swiftLanguageModes: [.v6]
)
