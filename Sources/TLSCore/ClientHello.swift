import ATSPolicy

/// What a client offered in its ClientHello, read from raw bytes before any TLS object exists.
public struct ClientHello: Sendable, Hashable {
    /// Version in the record header (usually 0x0301).
    public var recordVersion: UInt16
    /// `legacy_version` of the hello (0x0303 for TLS 1.2 and 1.3 clients).
    public var legacyVersion: UInt16
    /// The `supported_versions` extension, in the client's order (empty when absent).
    public var supportedVersions: [UInt16]
    /// Offered cipher suite codes, in order (GREASE values included as sent).
    public var cipherSuites: [UInt16]
    /// The SNI host name, if any.
    public var serverName: String?
    /// The ALPN protocols, in order (empty when absent).
    public var alpnProtocols: [String]
    /// Extension types in the order sent.
    public var extensionTypes: [UInt16]
    /// Bytes of the records that carried the hello (the caller can replay them into a `TLSEngine`).
    public var recordBytesConsumed: Int

    /// TLS versions the client offers that ATS knows, lowest first: from `supported_versions` when present,
    /// otherwise every version from TLS 1.0 up to `legacy_version`.
    public var offeredVersions: [TLSVersion] {
        if !supportedVersions.isEmpty {
            return Set(supportedVersions.compactMap { TLSVersion(wireCode: Int($0)) }).sorted()
        }
        return TLSVersion.allCases.filter { $0.rawValue <= Int(legacyVersion) }
    }
}

/// Parses a TLS ClientHello from the first bytes of a connection. Pure Swift; never reads out of bounds.
///
/// Feed it everything received so far: it returns nil while the hello is incomplete (it may span several records
/// or arrive byte by byte), the hello once complete, or throws when the bytes cannot be a ClientHello.
public enum ClientHelloParser {
    /// Hellos larger than this are refused (real ones are well under 2 KiB; post-quantum ones ~ 2–3 KiB).
    public static let maximumHelloLength = 64 * 1024

    /// nil = need more data.
    public static func parse(_ bytes: some Collection<UInt8>) throws(TLSHelloError) -> ClientHello? {
        guard let message = try HandshakeRecords.firstMessage(
            Array(bytes), type: 0x01, name: "ClientHello", maximumLength: maximumHelloLength)
        else { return nil }
        var hello = try parseBody(message.body)
        hello.recordVersion = message.recordVersion
        hello.recordBytesConsumed = message.consumed
        return hello
    }

    /// True/false once the first byte says whether the stream is TLS; nil when there are no bytes yet.
    public static func looksLikeTLS(_ bytes: some Collection<UInt8>) -> Bool? {
        guard let first = bytes.first else { return nil }
        return first == 0x16
    }

    private static func parseBody(_ body: [UInt8]) throws(TLSHelloError) -> ClientHello {
        var r = ByteCursor(body)
        let legacyVersion = try r.u16("legacy_version")
        try r.skip(32, "random")
        let sessionIDLength = Int(try r.u8("session_id length"))
        guard sessionIDLength <= 32 else { throw malformed("session_id length \(sessionIDLength)") }
        try r.skip(sessionIDLength, "session_id")
        let suitesLength = Int(try r.u16("cipher_suites length"))
        guard suitesLength % 2 == 0, suitesLength > 0 else { throw malformed("cipher_suites length \(suitesLength)") }
        var suites = try r.sub(suitesLength, "cipher_suites")
        var cipherSuites: [UInt16] = []
        while !suites.isAtEnd { cipherSuites.append(try suites.u16("cipher suite")) }
        let compressionLength = Int(try r.u8("compression_methods length"))
        guard compressionLength > 0 else { throw malformed("no compression methods") }
        try r.skip(compressionLength, "compression_methods")

        var hello = ClientHello(
            recordVersion: 0, legacyVersion: legacyVersion, supportedVersions: [], cipherSuites: cipherSuites,
            serverName: nil, alpnProtocols: [], extensionTypes: [], recordBytesConsumed: 0)
        // SSL 3.0-style hellos may end here, without extensions.
        if r.isAtEnd { return hello }
        let extensionsLength = Int(try r.u16("extensions length"))
        var extensions = try r.sub(extensionsLength, "extensions")
        guard r.isAtEnd else { throw malformed("\(r.remaining) bytes after the extensions") }
        while !extensions.isAtEnd {
            let type = try extensions.u16("extension type")
            let length = Int(try extensions.u16("extension length"))
            var ext = try extensions.sub(length, "extension \(type)")
            hello.extensionTypes.append(type)
            switch type {
            case 0x0000:  // server_name
                var list = try ext.sub(Int(try ext.u16("server_name_list length")), "server_name_list")
                while !list.isAtEnd {
                    let nameType = try list.u8("name_type")
                    let name = try list.sub(Int(try list.u16("host_name length")), "host_name")
                    if nameType == 0, hello.serverName == nil {
                        hello.serverName = String(decoding: name.rest, as: UTF8.self)
                    }
                }
            case 0x0010:  // application_layer_protocol_negotiation
                var list = try ext.sub(Int(try ext.u16("protocol_name_list length")), "protocol_name_list")
                while !list.isAtEnd {
                    let length = Int(try list.u8("protocol name length"))
                    guard length > 0 else { throw malformed("empty ALPN protocol name") }
                    let name = try list.sub(length, "protocol name")
                    hello.alpnProtocols.append(String(decoding: name.rest, as: UTF8.self))
                }
            case 0x002B:  // supported_versions
                let count = Int(try ext.u8("supported_versions length"))
                guard count % 2 == 0 else { throw malformed("odd supported_versions length") }
                var list = try ext.sub(count, "supported_versions")
                while !list.isAtEnd { hello.supportedVersions.append(try list.u16("version")) }
            default:
                break
            }
        }
        return hello
    }

    private static func malformed(_ detail: String) -> TLSHelloError {
        TLSHelloError(kind: .malformed, detail: detail)
    }
}
