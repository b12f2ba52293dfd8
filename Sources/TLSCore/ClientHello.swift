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

/// Why bytes are not a ClientHello.
public struct ClientHelloError: Error, Hashable, Sendable, CustomStringConvertible {
    public enum Kind: Hashable, Sendable {
        /// The first bytes are not a TLS handshake record (plain HTTP, SSH, garbage…).
        case notTLS
        /// A TLS handshake record, but not a ClientHello.
        case notClientHello
        /// A ClientHello whose lengths or fields do not add up.
        case malformed
        /// The hello is larger than the parser accepts.
        case tooLarge
    }

    public let kind: Kind
    public let detail: String

    public var description: String { "\(kind): \(detail)" }
}

/// Parses a TLS ClientHello from the first bytes of a connection. Pure Swift; never reads out of bounds.
///
/// Feed it everything received so far: it returns nil while the hello is incomplete (it may span several records
/// or arrive byte by byte), the hello once complete, or throws when the bytes cannot be a ClientHello.
public enum ClientHelloParser {
    /// Hellos larger than this are refused (real ones are well under 2 KiB; post-quantum ones ~ 2–3 KiB).
    public static let maximumHelloLength = 64 * 1024

    /// nil = need more data.
    public static func parse(_ bytes: some Collection<UInt8>) throws(ClientHelloError) -> ClientHello? {
        let data = Array(bytes)
        guard let first = data.first else { return nil }
        guard first == 0x16 else {
            throw ClientHelloError(kind: .notTLS, detail: "first byte 0x\(hex(first)) is not a handshake record")
        }
        if data.count >= 2, data[1] != 0x03 {
            throw ClientHelloError(kind: .notTLS, detail: "record version major \(data[1]) is not 3")
        }
        // Reassemble the handshake message from consecutive handshake records.
        var handshake: [UInt8] = []
        var offset = 0
        var recordVersion: UInt16 = 0
        var needed: Int?
        // Each iteration consumes a whole record of at least 5 bytes, so this is bounded by data.count / 5 + 1.
        while offset < data.count {
            guard data.count - offset >= 5 else { return nil }
            guard data[offset] == 0x16 else {
                throw ClientHelloError(kind: .malformed, detail: "record type \(data[offset]) inside the hello")
            }
            if offset == 0 { recordVersion = UInt16(data[1]) << 8 | UInt16(data[2]) }
            let length = Int(data[offset + 3]) << 8 | Int(data[offset + 4])
            guard length > 0, length <= 16_384 + 2048 else {
                throw ClientHelloError(kind: .malformed, detail: "record length \(length)")
            }
            guard data.count - offset - 5 >= length else { return nil }
            handshake.append(contentsOf: data[(offset + 5)..<(offset + 5 + length)])
            offset += 5 + length
            if needed == nil, handshake.count >= 4 {
                guard handshake[0] == 0x01 else {
                    throw ClientHelloError(kind: .notClientHello, detail: "handshake type \(handshake[0])")
                }
                let bodyLength = Int(handshake[1]) << 16 | Int(handshake[2]) << 8 | Int(handshake[3])
                guard bodyLength <= maximumHelloLength else {
                    throw ClientHelloError(kind: .tooLarge, detail: "hello of \(bodyLength) bytes")
                }
                needed = 4 + bodyLength
            }
            if let needed, handshake.count >= needed {
                var hello = try parseBody(Array(handshake[4..<needed]))
                hello.recordVersion = recordVersion
                hello.recordBytesConsumed = offset
                return hello
            }
        }
        // A first record shorter than 4 handshake bytes can still be followed by more records.
        if let firstType = handshake.first, firstType != 0x01 {
            throw ClientHelloError(kind: .notClientHello, detail: "handshake type \(firstType)")
        }
        return nil
    }

    /// True/false once the first byte says whether the stream is TLS; nil when there are no bytes yet.
    public static func looksLikeTLS(_ bytes: some Collection<UInt8>) -> Bool? {
        guard let first = bytes.first else { return nil }
        return first == 0x16
    }

    private static func parseBody(_ body: [UInt8]) throws(ClientHelloError) -> ClientHello {
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

    private static func malformed(_ detail: String) -> ClientHelloError {
        ClientHelloError(kind: .malformed, detail: detail)
    }

    private static func hex(_ b: UInt8) -> String {
        let s = String(b, radix: 16)
        return s.count == 1 ? "0" + s : s
    }
}

/// A bounds-checked reader over a byte array: every read checks the remaining length first.
struct ByteCursor {
    private let bytes: [UInt8]
    private var index: Int
    private let end: Int

    init(_ bytes: [UInt8]) {
        self.bytes = bytes
        self.index = 0
        self.end = bytes.count
    }

    private init(bytes: [UInt8], index: Int, end: Int) {
        self.bytes = bytes
        self.index = index
        self.end = end
    }

    var isAtEnd: Bool { index >= end }
    var remaining: Int { end - index }
    var rest: ArraySlice<UInt8> { bytes[index..<end] }

    private func truncated(_ what: String, _ need: Int) -> ClientHelloError {
        ClientHelloError(kind: .malformed, detail: "\(what): needs \(need) bytes, \(remaining) left")
    }

    mutating func u8(_ what: String) throws(ClientHelloError) -> UInt8 {
        guard remaining >= 1 else { throw truncated(what, 1) }
        defer { index += 1 }
        return bytes[index]
    }

    mutating func u16(_ what: String) throws(ClientHelloError) -> UInt16 {
        guard remaining >= 2 else { throw truncated(what, 2) }
        defer { index += 2 }
        return UInt16(bytes[index]) << 8 | UInt16(bytes[index + 1])
    }

    mutating func skip(_ count: Int, _ what: String) throws(ClientHelloError) {
        guard count >= 0, remaining >= count else { throw truncated(what, count) }
        index += count
    }

    /// A cursor over the next `count` bytes; this cursor moves past them.
    mutating func sub(_ count: Int, _ what: String) throws(ClientHelloError) -> ByteCursor {
        guard count >= 0, remaining >= count else { throw truncated(what, count) }
        defer { index += count }
        return ByteCursor(bytes: bytes, index: index, end: index + count)
    }
}
