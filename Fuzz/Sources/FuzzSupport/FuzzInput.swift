/// A fuzzer's input read as a few control bytes (choices a harness makes: role, chunking, outcomes) followed by the
/// payload. Missing control bytes read as 0, so every input, even an empty one, is usable.
public struct FuzzInput {
    public private(set) var bytes: ArraySlice<UInt8>

    public init(_ data: UnsafePointer<UInt8>?, _ count: Int) {
        bytes = Array(UnsafeBufferPointer(start: data, count: count))[...]
    }

    /// The next control byte (0 once the input is used up).
    public mutating func control() -> UInt8 {
        bytes.popFirst() ?? 0
    }

    /// Everything not taken as control bytes.
    public var payload: [UInt8] { Array(bytes) }
}

/// Cuts `bytes` into reads the way a socket might deliver them: pieces of `2^(selector - 1)` bytes for a
/// selector of 1...8 (1 to 128 bytes), the whole stream in one read otherwise. The parsers must give the same
/// result whatever the cut, so varying it reaches their resumption paths.
public func reads(of bytes: [UInt8], selector: UInt8) -> [ArraySlice<UInt8>] {
    let selector = Int(selector & 0x0F)
    guard (1...8).contains(selector), !bytes.isEmpty else { return bytes.isEmpty ? [] : [bytes[...]] }
    let size = 1 << (selector - 1)
    return stride(from: 0, to: bytes.count, by: size).map { bytes[$0..<min($0 + size, bytes.count)] }
}

/// Stops the run with a message libFuzzer saves the input for: an invariant of the code under test broke.
public func invariant(_ condition: @autoclosure () -> Bool, _ message: @autoclosure () -> String) {
    if !condition() {
        fatalError("fuzz invariant: \(message())")
    }
}
