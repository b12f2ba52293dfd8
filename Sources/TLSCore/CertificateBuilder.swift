internal import COpenSSL
import Foundation

/// Which digest signs a certificate. SHA-1 exists only to mint deliberately flawed leaves.
public enum SignatureDigest: Sendable, Hashable {
    case sha256
    case sha1

    var md: OpaquePointer? {
        switch self {
        case .sha256: EVP_sha256()
        case .sha1: EVP_sha1()
        }
    }
}

/// Builds and signs one X.509 v3 certificate. Internal: the CA and the minter describe what they want here.
struct CertificateBuilder {
    var commonName: String?
    var organization: String?
    var notBefore: Date
    var notAfter: Date
    var subjectKey: PrivateKey
    /// nil = self-signed with `subjectKey`.
    var issuer: (certificate: Certificate, key: PrivateKey)?
    var digest: SignatureDigest = .sha256
    /// Extensions in OpenSSL config syntax, applied in order (SKI must precede AKI for self-signed certs).
    var extensions: [(nid: Int32, value: String)] = []

    func build() throws(OpenSSLError) -> Certificate {
        let x = try checkNotNull("X509_new") { X509_new() }
        let cert = Certificate(taking: x)  // frees x if anything below throws
        try checkPositive("X509_set_version") { X509_set_version(x, 2) }
        try setRandomSerial(x)

        let name = try checkNotNull("X509_NAME_new") { X509_NAME_new() }
        defer { X509_NAME_free(name) }
        if let organization { try addEntry(name, "O", organization) }
        if let commonName { try addEntry(name, "CN", String(commonName.prefix(64))) }
        try checkPositive("X509_set_subject_name") { X509_set_subject_name(x, name) }
        let issuerName = issuer.map { X509_get_subject_name($0.certificate.x509) } ?? name
        try checkPositive("X509_set_issuer_name") { X509_set_issuer_name(x, issuerName) }

        _ = try checkNotNull("ASN1_TIME_set(notBefore)") {
            ASN1_TIME_set(X509_getm_notBefore(x), time_t(notBefore.timeIntervalSince1970.rounded(.down)))
        }
        _ = try checkNotNull("ASN1_TIME_set(notAfter)") {
            ASN1_TIME_set(X509_getm_notAfter(x), time_t(notAfter.timeIntervalSince1970.rounded(.down)))
        }
        try checkPositive("X509_set_pubkey") { X509_set_pubkey(x, subjectKey.pkey) }

        var ctx = X509V3_CTX()
        X509V3_set_ctx(&ctx, issuer?.certificate.x509 ?? x, x, nil, nil, 0)
        for (nid, value) in extensions {
            let ext = try checkNotNull("X509V3_EXT_nconf_nid(\(String(cString: OBJ_nid2sn(nid))), \(value))") {
                X509V3_EXT_nconf_nid(nil, &ctx, nid, value)
            }
            defer { X509_EXTENSION_free(ext) }
            try checkPositive("X509_add_ext") { X509_add_ext(x, ext, -1) }
        }
        let signingKey = issuer?.key ?? subjectKey
        try checkPositive("X509_sign") { X509_sign(x, signingKey.pkey, digest.md) }
        return cert
    }

    private func addEntry(_ name: OpaquePointer, _ field: String, _ value: String) throws(OpenSSLError) {
        try checkPositive("X509_NAME_add_entry_by_txt(\(field))") {
            X509_NAME_add_entry_by_txt(name, field, copenssl_MBSTRING_UTF8(), value, -1, -1, 0)
        }
    }

    /// A positive, non-zero 128-bit random serial (CA/B Forum asks for ≥ 64 bits of entropy).
    private func setRandomSerial(_ x: OpaquePointer) throws(OpenSSLError) {
        var bytes = [UInt8](repeating: 0, count: 16)
        try checkPositive("RAND_bytes") { RAND_bytes(&bytes, 16) }
        bytes[0] = (bytes[0] & 0x7F) | 0x01
        let bn = try checkNotNull("BN_bin2bn") { BN_bin2bn(bytes, 16, nil) }
        defer { BN_free(bn) }
        let serial = try checkNotNull("BN_to_ASN1_INTEGER") { BN_to_ASN1_INTEGER(bn, nil) }
        defer { ASN1_INTEGER_free(serial) }
        try checkPositive("X509_set_serialNumber") { X509_set_serialNumber(x, serial) }
    }
}

/// Classifies a host as a DNS name or an IP literal, for SAN entries.
enum HostKind: Equatable {
    case dns(String)
    case ip(String)

    /// nil when `host` is neither a valid IP literal nor a plausible DNS name (only letters, digits, `-`, `_`,
    /// `.` and a leading `*.`), so it can go into OpenSSL's config syntax safely.
    init?(_ host: String) {
        var h = host
        if h.hasPrefix("["), h.hasSuffix("]") { h = String(h.dropFirst().dropLast()) }
        if let canonical = IPAddress.canonical(h) {
            self = .ip(canonical)
            return
        }
        h = h.lowercased()
        if h.hasSuffix(".") { h.removeLast() }
        let allowed = Set("abcdefghijklmnopqrstuvwxyz0123456789-_.*")
        guard !h.isEmpty, h.count <= 253, h.allSatisfy({ allowed.contains($0) }),
            !h.dropFirst(2).contains("*"), !h.hasPrefix("*") || h.hasPrefix("*.")
        else { return nil }
        self = .dns(h)
    }

    var sanEntry: String {
        switch self {
        case .dns(let n): "DNS:\(n)"
        case .ip(let a): "IP:\(a)"
        }
    }
}

/// IP literal helpers (inet_pton/inet_ntop), so IPv6 spellings compare equal.
enum IPAddress {
    /// The canonical text form of an IPv4 or IPv6 literal, or nil when `text` is not one.
    static func canonical(_ text: String) -> String? {
        if let bytes = parse(text) { return format(bytes) }
        return nil
    }

    static func parse(_ text: String) -> [UInt8]? {
        var v4 = in_addr()
        if inet_pton(AF_INET, text, &v4) == 1 {
            return withUnsafeBytes(of: &v4) { Array($0) }
        }
        var v6 = in6_addr()
        if inet_pton(AF_INET6, text, &v6) == 1 {
            return withUnsafeBytes(of: &v6) { Array($0) }
        }
        return nil
    }

    /// Text form of 4 or 16 raw bytes.
    static func format(_ bytes: [UInt8]) -> String? {
        guard bytes.count == 4 || bytes.count == 16 else { return nil }
        var buffer = [CChar](repeating: 0, count: 64)
        let family = bytes.count == 4 ? AF_INET : AF_INET6
        let ok = bytes.withUnsafeBytes { raw in inet_ntop(family, raw.baseAddress, &buffer, 64) } != nil
        return ok ? cString(buffer) : nil
    }
}

/// A Swift string from a NUL-terminated C buffer (stops at the first NUL, or the end).
func cString(_ buffer: [CChar]) -> String {
    String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
}
