import TLSCore

/// What every connection of a run says, prepared once so that a request costs no serialisation: the GET request's
/// bytes, the CONNECT request that opens a tunnel first (https through a proxy), and the TLS client context.
struct ConnectionRecipe: Sendable {
    /// The request sent for every exchange.
    let request: [UInt8]
    /// Sent first, in plaintext, when the connection goes through a proxy's CONNECT tunnel; nil otherwise.
    let tunnelRequest: [UInt8]?
    /// The TLS client context for https; nil for plain http.
    let tls: TLSContext?
    /// The SNI name; nil for IP literals.
    let serverName: String?

    init(request: [UInt8], tunnelRequest: [UInt8]?, tls: TLSContext?, serverName: String?) {
        self.request = request
        self.tunnelRequest = tunnelRequest
        self.tls = tls
        self.serverName = serverName
    }

    /// The recipe for `target`, sent to a forward proxy when `viaProxy` (CONNECT for https, absolute-form requests
    /// for http) or straight to the origin otherwise.
    init(target: LoadTarget, viaProxy: Bool) throws(LoadUsageError) {
        let requestTarget = viaProxy && target.scheme == .http ? "http://\(target.authority)\(target.path)" : target.path
        request = Array(
            "GET \(requestTarget) HTTP/1.1\r\nHost: \(target.hostHeader)\r\nUser-Agent: atsproxy-load\r\nAccept: */*\r\n\r\n"
                .utf8)
        tunnelRequest =
            viaProxy && target.scheme == .https
            ? Array("CONNECT \(target.authority) HTTP/1.1\r\nHost: \(target.authority)\r\n\r\n".utf8) : nil
        serverName = target.scheme == .https && !target.hostIsIPLiteral ? target.host : nil
        if target.scheme == .https {
            do {
                tls = try TLSContext(Self.tlsConfiguration)
            } catch {
                throw LoadUsageError("cannot set up TLS: \(error)")
            }
        } else {
            tls = nil
        }
    }

    /// No certificate verification (a benchmark checks its path once with curl), ALPN http/1.1, and TLS 1.3 suites
    /// in the order Go's client offers them, so the servers measured do the same cipher work as for `hey`.
    static var tlsConfiguration: TLSConfiguration {
        var configuration = TLSConfiguration.client(alpn: ["http/1.1"])
        configuration.verifyPeer = false
        configuration.tls13CipherSuites = "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256"
        return configuration
    }
}
