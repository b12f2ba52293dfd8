import FuzzSupport
import TLSCore

// Input: the first bytes a peer sends, given whole to the ClientHello parser (what a client sends after CONNECT)
// and the ServerHello parser (what an upstream answers). Both must return, throw a TLSHelloError, or ask for more.

/// One input; see above.
func fuzzTLSHello(_ data: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: count))
    _ = ClientHelloParser.looksLikeTLS(bytes)
    do {
        if let hello = try ClientHelloParser.parse(bytes) {
            invariant(
                hello.recordBytesConsumed <= bytes.count,
                "ClientHello consumed \(hello.recordBytesConsumed) of \(bytes.count) bytes")
            _ = hello.offeredVersions
        }
    } catch {
        // Malformed hellos are refused with a TLSHelloError: the expected outcome for most inputs.
    }
    do {
        if case .hello(let hello) = try ServerHelloParser.parse(bytes) {
            _ = hello.version
        }
    } catch {
        // As above.
    }
    return 0
}
