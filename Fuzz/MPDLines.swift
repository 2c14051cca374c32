// libFuzzer entry point for the MPD protocol parser (scripts/fuzz mpd). Compiled into
// the PlaydSessions module; the properties checked are in SessionFuzzChecks.mpdLines.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzMPDLines(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    SessionFuzzChecks.mpdLines(UnsafeBufferPointer(start: data, count: size))
    return 0
}
