// The runtime guard of issue 41: a test that ends having evaluated no expectation fails.
// One file, in both test targets (Tests/CoreStreamTests holds a link to it): the
// extension below must be declared in the module whose tests it counts.
//
// Swift Testing 6.3 has no public way to observe a passing expectation (its
// `expectationChecked` event is SPI, absent from the shipped module interface, and not
// in the JSON event stream). But each `#expect` and `#require` expands to a call of
// `Testing.__check…(…)` followed by `.__expected()` or `.__required()` on the `Result`
// it returns, looked up as a member. A member declared in a module that imports Testing
// shadows Testing's own for code in that module, so the four below run for every
// expectation these tests evaluate: each counts one and does exactly what Testing's does
// (its module interface shows the bodies: discard, `try get()`, `try? get()`, and unwrap
// or throw). `scripts/check-tests` requires every suite to carry `.checksSomething`, so the
// static scan and this guard look at the same tests.
import Synchronization
import Testing

/// The expectations evaluated by the test running on this task.
final class ExpectationCount: Sendable {
    let evaluated = Atomic<Int>(0)

    @TaskLocal static var current: ExpectationCount?

    /// Every test running now (writer: `ChecksSomething.provideScope`). An expectation
    /// evaluated off the test's task tree (a detached task, a thread of the code under
    /// test) has no `current`; it counts for every test running, which under
    /// `--no-parallel` (scripts/test) is the one that started it.
    static let running = Mutex<[ObjectIdentifier: ExpectationCount]>([:])

    static func count() {
        if let current {
            current.evaluated.add(1, ordering: .relaxed)
        } else {
            running.withLock { for c in $0.values { c.evaluated.add(1, ordering: .relaxed) } }
        }
    }
}

/// Thrown by `#require(x)` when `x` was nil but its check passed, as Testing's own unwrap
/// does (it cannot happen through the macro's public overloads).
struct RequiredValueWasNil: Error {}

extension Result {
    func __expected() where Success == () {
        ExpectationCount.count()
    }

    func __required() throws -> Success {
        ExpectationCount.count()
        return try get()
    }

    @discardableResult func __expected<T>() -> Success where Success == T? {
        ExpectationCount.count()
        return try? get()
    }

    @discardableResult func __required<T>() throws -> T where Success == T? {
        ExpectationCount.count()
        guard let value = try get() else { throw RequiredValueWasNil() }
        return value
    }
}

/// A check made some other way than an expectation, named for the reader and for
/// `scripts/check-tests` (a fuzz property's preconditions trap the run when broken).
func checks(_ how: String) {
    ExpectationCount.count()
}

/// The trait every suite carries: each of its test cases must evaluate an expectation.
struct ChecksSomething: SuiteTrait, TestTrait, TestScoping {
    var isRecursive: Bool { true }

    func provideScope(for test: Test, testCase: Test.Case?,
                      performing function: @Sendable () async throws -> Void) async throws {
        // Suites are scoped too; only a test's case runs a body.
        guard testCase != nil else { return try await function() }
        let count = ExpectationCount()
        let key = ObjectIdentifier(count)
        ExpectationCount.running.withLock { $0[key] = count }
        defer { _ = ExpectationCount.running.withLock { $0.removeValue(forKey: key) } }
        try await ExpectationCount.$current.withValue(count) { try await function() }
        if count.evaluated.load(ordering: .relaxed) == 0 {
            Issue.record("\(test.name) checked nothing: it ended without evaluating an #expect or #require (issue 41's runtime guard)")
        }
    }
}

extension Trait where Self == ChecksSomething {
    /// Fails each test of the suite that ends having evaluated no expectation.
    static var checksSomething: ChecksSomething { ChecksSomething() }
}
