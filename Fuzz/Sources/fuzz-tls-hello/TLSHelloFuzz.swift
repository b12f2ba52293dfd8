import FuzzSupport
import ProxyCore
import TLSCore

// Input: the first bytes a peer sends, given whole to the ClientHello parser (what a client sends after CONNECT)
// and the ServerHello parser (what an upstream answers). Both must return, throw a TLSHelloError, or ask for more.
// The same bytes as a datagram a device sends to UDP 443 in transparent mode (QUICLongHeader): read or refused,
// and any answer smaller than the datagram (never an amplifier).

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
    bytes.withUnsafeBytes { datagram in
        if let (header, reply) = QUICLongHeader.refusal(of: datagram) {
            invariant(reply.count < datagram.count, "a \(reply.count)-byte answer to \(datagram.count) bytes")
            invariant(header.version != 0, "a Version Negotiation packet answered")
        }
        _ = QUICLongHeader(datagram: datagram)
    }
    return 0
}
