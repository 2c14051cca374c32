import Foundation
import Testing
import CoreStreamTestSupport

/// Every relative link and anchor in README.md and docs/ leads somewhere
/// (scripts/check-links, issue 47), and the checker finds a broken one.
@Suite("Links in the docs", .checksSomething)
struct LinkCheckTests {
    static var script: String { Fixtures.repositoryRoot.path + "/scripts/check-links" }

    @Test func everyRelativeLinkAndAnchorResolves() throws {
        let r = try Shell.run([Self.script])
        #expect(r.status == 0, "\(String(decoding: r.stdout, as: UTF8.self))\(r.stderr)")
    }

    /// A page with a missing file, a missing anchor, a good anchor (a heading with code
    /// and punctuation, and a repeated one) and a link inside a code block: the first
    /// two are reported with their lines, nothing else.
    @Test func aBrokenLinkOrAnchorIsReported() throws {
        let dir = try freshTestDirectory("links", "broken")
        try FileManager.default.createDirectory(atPath: dir + "/docs", withIntermediateDirectories: true)
        try """
        # Title

        [gone](docs/nothing.md) and [here](docs/a.md#a-heading-with-code-and-punctuation)
        [twice](docs/a.md#again-1) and [no such](docs/a.md#no-such-heading)

        ```sh
        [in code](docs/also-nothing.md)
        ```
        """.write(toFile: dir + "/README.md", atomically: true, encoding: .utf8)
        try "## A heading, with `code` and punctuation!\n## Again\n## Again\n"
            .write(toFile: dir + "/docs/a.md", atomically: true, encoding: .utf8)
        let r = try Shell.run([Self.script, dir])
        let out = String(decoding: r.stdout, as: UTF8.self)
        #expect(r.status == 1)
        let lines: [String] = out.split(separator: "\n").map(String.init)
        #expect(lines == [
            "README.md:3: docs/nothing.md: no such file",
            "README.md:4: docs/a.md#no-such-heading: no heading makes #no-such-heading in docs/a.md",
        ], "\(out)")
    }
}
