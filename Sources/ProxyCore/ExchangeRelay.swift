/// A relay of HTTP exchanges between a client's and an upstream's plaintext byte streams (HTTP/1.1 or HTTP/2).
protocol ExchangeRelay: AnyObject {
    func clientBytes(_ bytes: [UInt8]) -> RelayOutput
    func clientEOF() -> RelayOutput
    func upstreamBytes(_ bytes: [UInt8]) -> RelayOutput
    func upstreamEOF() -> RelayOutput
    /// No exchange in flight: closing now loses nothing.
    var isIdle: Bool { get }
}

extension HTTP1Relay: ExchangeRelay {}
