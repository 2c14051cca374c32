// libFuzzer entry point for a radio server's response headers (scripts/fuzz headers).
// Compiled with Sources/CoreStream/Decoding/ICYText.swift alone; the properties are
// ICYText.fuzzHeaders.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzHTTPHeaders(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    ICYText.fuzzHeaders(UnsafeBufferPointer(start: data, count: size))
    return 0
}
