import Foundation
import Testing
import CoreStreamTestSupport

/// `scripts/check-tests` (issue 41), run on test files written to show each finding:
/// an early return, a trait that switches a test off, a sleep used as synchronisation
/// (one outside a loop without a `// hold:` reason) and a test that checks nothing,
/// beside the forms it accepts (a poll loop, a hold with its reason, a return inside a
/// closure, a check made by a helper, a `checks("…")` reason, a guarded suite), and
/// the runtime guard itself (`ChecksSomething`, ExpectationGuard.swift).
@Suite("check-tests", .checksSomething)
struct CheckTestsTests {
    @Test func eachFindingIsReportedAndTheAcceptedFormsAreNot() throws {
        let dir = try freshTestDirectory("check-tests", "findings")
        let file = dir + "/SampleTests.swift"
        try """
        @Test func early() throws {
            guard tool() else { return }
            #expect(true)
        }

        @Test(.enabled(if: tool())) func switchedOff() {}

        @Test func sleeps() throws {
            startTheSampleMusic()
            usleep(500_000)
            while !done() { usleep(10_000) }
            for _ in 0..<3 {
                Thread.sleep(forTimeInterval: 0.1)
            }
            usleep(200_000)  // hold: the pause held 200 ms
            let xs = [1].map { x in return x }
            #expect(xs == [1])
        }

        @Test func onlyRuns() throws {
            startTheSampleMusic()
        }

        func helper() { #expect(done()) }

        @Test func checksThroughAHelper() throws {
            helper()
        }

        @Test func checksByTrapping() throws {
            checks("a precondition inside")
            startTheSampleMusic()
        }

        @Test func recordsOnlyAFailure() throws {
            if !done() { Issue.record("not done") }
        }

        @Suite("unguarded") struct Unguarded {}
        @Suite(.serialized, .checksSomething) struct Guarded {}
        """.write(toFile: file, atomically: true, encoding: .utf8)
        let r = try Shell.run([Fixtures.repositoryRoot.path + "/scripts/check-tests", file])
        let lines = String(decoding: r.stdout, as: UTF8.self).split(separator: "\n").map(String.init)
        #expect(r.status == 1)
        #expect(lines.count == 7, "\(lines)")
        #expect(lines.contains { $0.hasPrefix(file + ":2: test early returns early") }, "\(lines)")
        #expect(lines.contains { $0.hasPrefix(file + ":6: a test that can switch itself off") }, "\(lines)")
        #expect(lines.contains { $0.hasPrefix(file + ":10: a sleep used as synchronisation") }, "\(lines)")
        #expect(lines.contains { $0.hasPrefix(file + ":6: test switchedOff checks nothing") }, "\(lines)")
        #expect(lines.contains { $0.hasPrefix(file + ":20: test onlyRuns checks nothing") }, "\(lines)")
        #expect(lines.contains { $0.hasPrefix(file + ":35: test recordsOnlyAFailure checks nothing") }, "\(lines)")
        #expect(lines.contains { $0.hasPrefix(file + ":39: a suite without .checksSomething") }, "\(lines)")
    }
    /// The runtime guard on a body that evaluates nothing records its finding (the known
    /// issue below; `withKnownIssue` fails this test if none is recorded); on a body that
    /// evaluates one expectation, on this task or a detached one, it records none (any
    /// issue there fails this test).
    @Test func theRuntimeGuardFailsATestThatEvaluatedNothing() async throws {
        let test = try #require(Test.current)
        let testCase = try #require(Test.Case.current)
        await withKnownIssue("the guard's finding on a body that checks nothing") {
            try await ChecksSomething().provideScope(for: test, testCase: testCase) { _ = [1].count }
        }
        try await ChecksSomething().provideScope(for: test, testCase: testCase) { #expect([1].count == 1) }
        try await ChecksSomething().provideScope(for: test, testCase: testCase) {
            await Task.detached { #expect([1].count == 1) }.value
        }
    }
}
