// libFuzzer entry point for ICY StreamTitle blocks (scripts/fuzz icy). Compiled with
// Sources/CoreStream/Decoding/ICYText.swift alone; the properties are ICYText.fuzzStreamTitle.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzICYMetadata(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    ICYText.fuzzStreamTitle(UnsafeBufferPointer(start: data, count: size))
    return 0
}
