// Only where Swift Testing is (a test build): a plain `swift build -c release` of the
// package builds this library too, without Testing's module on its search path, and
// failed here (issue 40).
#if canImport(Testing)
import Testing

/// What a test is run under besides the plain run. `scripts/test` builds the
/// sanitizer runs' `--filter` from these tags (`scripts/tagged`), so renaming a tagged
/// test cannot drop it out of a run, and tagging one puts it in.
extension Tag {
    /// Run again under ThreadSanitizer: rings, transport, lock order, splices, feeds,
    /// anything that hands data between threads.
    @Tag public static var threadSanitizer: Self
    /// Run again under AddressSanitizer: parsers, decoding and seeking, bad input.
    @Tag public static var addressSanitizer: Self
}
#endif
