import Foundation
import Testing
import CoreStreamTestSupport

@Suite("systemd unit", .checksSomething)
struct SystemdUnitTests {
    /// `systemd-analyze security --offline=true systemd/playd.service` must report an
    /// exposure of 2.0 or lower.
    @Test func exposureIsAtMostTwo() throws {
        try #require(FileManager.default.isExecutableFile(atPath: "/usr/bin/systemd-analyze"),
                     "no systemd-analyze: scripts/install-deps --test installs systemd")
        let unit = Fixtures.repositoryRoot.appendingPathComponent("systemd/playd.service").path
        let r = try Shell.run(["systemd-analyze", "security", "--offline=true", unit])
        let text = String(decoding: r.stdout, as: UTF8.self) + r.stderr
        let line = try #require(text.split(separator: "\n").first { $0.contains("Overall exposure level") })
        let number = line.split(separator: ":").last!.split(separator: " ").first { Double($0) != nil }
        let exposure = try #require(number.flatMap { Double($0) })
        #expect(exposure <= 2.0, "\(line)")
    }
}
