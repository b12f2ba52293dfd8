/// The device's WireGuard configuration in wg-quick's format (what the WireGuard app imports from a file or a QR
/// code): its own key and tunnel address, the proxy's tunnel address as DNS server, and the proxy as its one peer
/// for all traffic.
public struct WireGuardClientConfig: Sendable {
    /// The device's key pair (its private key is in the text: the configuration is a secret).
    public var device: WireGuardKeyPair
    public var proxyPublicKey: [UInt8]
    /// `HOST:PORT` the device reaches the proxy's UDP port at (`[v6]:PORT` for IPv6).
    public var endpoint: String
    /// The device's address in the tunnel, with its prefix (`198.19.0.2/32`).
    public var deviceAddress: String
    /// The proxy's address in the tunnel, given as the device's DNS server.
    public var dns: String

    public init(device: WireGuardKeyPair, proxyPublicKey: [UInt8], endpoint: String, deviceAddress: String, dns: String)
    {
        self.device = device
        self.proxyPublicKey = proxyPublicKey
        self.endpoint = endpoint
        self.deviceAddress = deviceAddress
        self.dns = dns
    }

    /// The configuration text. Kept short (about 240 bytes) so that its QR code fits version 10 at level L.
    public var text: String {
        let proxyKey = WireGuardKeyPair.base64(proxyPublicKey)
        return """
            [Interface]
            PrivateKey = \(device.privateKeyBase64)
            Address = \(deviceAddress)
            DNS = \(dns)

            [Peer]
            PublicKey = \(proxyKey)
            AllowedIPs = 0.0.0.0/0, ::/0
            Endpoint = \(endpoint)

            """
    }

    /// The device's and the proxy's tunnel addresses when none is configured: from 198.18.0.0/15, the benchmarking
    /// range (RFC 2544), which no Wi-Fi network or destination on the internet uses, so it collides with nothing.
    public static let defaultDeviceAddress: [UInt8] = [198, 19, 0, 2]
    public static let defaultProxyAddress: [UInt8] = [198, 19, 0, 1]
}
