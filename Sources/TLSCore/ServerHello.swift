import ATSPolicy

/// What a server chose in its ServerHello, read from the raw bytes of a connection the proxy relays without
/// terminating (a tunnel). Version and suite are sent in clear in every TLS version; the certificate is not
/// (TLS 1.3 encrypts it), so this is all a tunnel shows for sure.
public struct ServerHello: Sendable, Hashable {
    /// `legacy_version` (0x0303 for TLS 1.2 and 1.3).
    public var legacyVersion: UInt16
    /// What the `supported_versions` extension selected (TLS 1.3 servers send it), if present.
    public var selectedVersion: UInt16?
    public var cipherSuite: UInt16
    /// A HelloRetryRequest (asks the client for another key share); version and suite are already chosen.
    public var isHelloRetryRequest: Bool

    /// The negotiated version: the `supported_versions` selection, else `legacy_version`.
    public var version: TLSVersion? { TLSVersion(wireCode: Int(selectedVersion ?? legacyVersion)) }
}

/// How a server answered a ClientHello.
public enum ServerAnswer: Sendable, Hashable {
    case hello(ServerHello)
    /// The server refused the hello with an alert, sent in clear before any key exists.
    case alert(TLSAlert)
}

/// Parses the server's first flight: the ServerHello, or the alert that refuses the client's hello.
public enum ServerHelloParser {
    /// Real ServerHellos are a few hundred bytes; post-quantum key shares add about 1 KiB.
    public static let maximumHelloLength = 16 * 1024

    /// The `random` of a HelloRetryRequest (RFC 8446 §4.1.3): SHA-256 of "HelloRetryRequest".
    static let helloRetryRandom: [UInt8] = [
        0xCF, 0x21, 0xAD, 0x74, 0xE5, 0x9A, 0x61, 0x11, 0xBE, 0x1D, 0x8C, 0x02, 0x1E, 0x65, 0xB8, 0x91,
        0xC2, 0xA2, 0x11, 0x16, 0x7A, 0xBB, 0x8C, 0x5E, 0x07, 0x9E, 0x09, 0xE2, 0xC8, 0xA8, 0x33, 0x9C,
    ]

    /// nil = need more data. Feed it everything the server sent so far.
    public static func parse(_ bytes: some Collection<UInt8>) throws(TLSHelloError) -> ServerAnswer? {
        let data = Array(bytes)
        if data.first == 0x15 {
            // An alert record: type, version (2), length (2), then level and description.
            guard data.count >= 7 else { return nil }
            return .alert(TLSAlert(data[6]))
        }
        guard let message = try HandshakeRecords.firstMessage(
            data, type: 0x02, name: "ServerHello", maximumLength: maximumHelloLength)
        else { return nil }
        return .hello(try parseBody(message.body))
    }

    private static func parseBody(_ body: [UInt8]) throws(TLSHelloError) -> ServerHello {
        var r = ByteCursor(body)
        let legacyVersion = try r.u16("legacy_version")
        let random = try r.sub(32, "random")
        let sessionIDLength = Int(try r.u8("session_id length"))
        guard sessionIDLength <= 32 else {
            throw TLSHelloError(kind: .malformed, detail: "session_id length \(sessionIDLength)")
        }
        try r.skip(sessionIDLength, "session_id")
        var hello = ServerHello(
            legacyVersion: legacyVersion, selectedVersion: nil, cipherSuite: try r.u16("cipher_suite"),
            isHelloRetryRequest: Array(random.rest) == helloRetryRandom)
        try r.skip(1, "compression_method")
        // Servers of SSL 3.0 vintage may end here, without extensions.
        if r.isAtEnd { return hello }
        var extensions = try r.sub(Int(try r.u16("extensions length")), "extensions")
        while !extensions.isAtEnd {
            let type = try extensions.u16("extension type")
            var ext = try extensions.sub(Int(try extensions.u16("extension length")), "extension \(type)")
            if type == 0x002B {  // supported_versions: the one version selected
                hello.selectedVersion = try ext.u16("selected_version")
            }
        }
        return hello
    }
}
