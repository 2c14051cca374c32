// libFuzzer entry point for the MPD protocol parser (scripts/fuzz mpd). Compiled into
// the PlaydProtocol module; the properties checked are in FuzzChecks.mpdLines.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzMPDLines(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    FuzzChecks.mpdLines(UnsafeBufferPointer(start: data, count: size))
    return 0
}
