/// A client that speaks something other than HTTP to the proxy port, recognised from its first byte (no HTTP
/// method starts with these bytes): a device or emulator set to a SOCKS proxy, or a client that opens TLS to the
/// proxy as if it were an https:// server. Each gets an answer at once in its own protocol where it has one, and the
/// user a notice naming the fix, instead of a client that waits for the request-head timeout and a 408.
enum ForeignGreeting: Equatable {
    case socks4
    case socks5
    case tls

    init?(firstByte: UInt8) {
        switch firstByte {
        case 0x04: self = .socks4
        case 0x05: self = .socks5
        case 0x16: self = .tls  // a TLS handshake record
        default: return nil
        }
    }

    /// The protocol's own refusal: SOCKS4 "request rejected or failed" (CD 91), SOCKS5 "no acceptable methods"
    /// (RFC 1928 §3). TLS gets none: an alert would only make the client report a handshake failure, and the close
    /// says as much.
    var refusal: [UInt8] {
        switch self {
        case .socks4: [0x00, 0x5B, 0, 0, 0, 0, 0, 0]
        case .socks5: [0x05, 0xFF]
        case .tls: []
        }
    }

    /// The notice: what the client did and what to set instead. `client` names the device when known.
    func notice(client: String?) -> String {
        let who = client ?? "a client"
        switch self {
        case .socks4, .socks5:
            let version = self == .socks4 ? "SOCKS4" : "SOCKS5"
            return "\(who) spoke \(version) to the proxy: ATSProxy is an HTTP proxy, so set an HTTP proxy, not SOCKS "
                + "(HOST:PORT as the HTTP and HTTPS proxy of the device or client); refused with \(version)'s own "
                + "refusal"
        case .tls:
            return "\(who) opened TLS to the proxy port: this is a proxy, not a TLS server: set it as the HTTP proxy, "
                + "an http:// proxy (http://HOST:PORT, not https://); https:// traffic goes through it with CONNECT"
        }
    }
}
