// libFuzzer entry point for the JSON control parser (scripts/fuzz json). Compiled into
// the PlaydProtocol module; the properties checked are in FuzzChecks.jsonRequest.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzJSONRequest(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    FuzzChecks.jsonRequest(UnsafeBufferPointer(start: data, count: size))
    return 0
}
