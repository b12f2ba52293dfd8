internal import COpenSSL
import ATSPolicy
import Foundation

/// A short human summary of a certificate (for `atsproxy ca info`).
public struct CertificateInfo: Sendable, Hashable {
    public var subject: String
    public var issuer: String
    public var notBefore: Date
    public var notAfter: Date
    /// `AB:CD:…` SHA-256 of the DER certificate.
    public var sha256Fingerprint: String
    /// Base64 SHA-256 of the SubjectPublicKeyInfo: the `SPKI-SHA256-BASE64` form `NSPinnedDomains` uses.
    public var spkiSHA256Base64: String
}

/// Reads an X.509 certificate into the facts ATS judges (`ATSPolicy.CertificateFacts`).
public enum CertificateInspector {
    /// Everything ATS looks at in one certificate.
    public static func facts(_ certificate: Certificate) -> CertificateFacts {
        let x = certificate.x509
        let key = publicKeyFacts(x)
        let (dns, ips) = subjectAlternativeNames(x)
        return CertificateFacts(
            subject: certificate.subject, issuer: certificate.issuer, keyType: key.type, keyBits: key.bits,
            curve: key.curve, signatureHash: signatureHash(x), isSelfSigned: X509_self_signed(x, 0) == 1,
            isCA: isCA(x), notBefore: date(X509_get0_notBefore(x)), notAfter: date(X509_get0_notAfter(x)),
            dnsNames: dns, ipAddresses: ips, extendedKeyUsages: extendedKeyUsages(x),
            embeddedSCTCount: embeddedSCTCount(x), spkiSHA256Base64: spkiSHA256Base64(x),
            sha256Fingerprint: Digest.hex(Digest.sha256(certificate.derBytes)))
    }

    /// Subject, validity, fingerprint (colon-separated) and SPKI pin.
    public static func info(_ certificate: Certificate) -> CertificateInfo {
        let x = certificate.x509
        return CertificateInfo(
            subject: certificate.subject, issuer: certificate.issuer, notBefore: date(X509_get0_notBefore(x)),
            notAfter: date(X509_get0_notAfter(x)),
            sha256Fingerprint: Digest.hex(Digest.sha256(certificate.derBytes), separator: ":"),
            spkiSHA256Base64: spkiSHA256Base64(x))
    }

    /// Whether `host` is named by the leaf the way iOS checks it: SAN only (CN ignored); DNS hosts against dNSName
    /// entries (case-insensitive, a `*` only as the whole leftmost label matching exactly one label); IP hosts
    /// against iPAddress entries.
    public static func hostnameMatches(_ host: String, leaf: CertificateFacts) -> Bool {
        var h = host
        if h.hasPrefix("["), h.hasSuffix("]") { h = String(h.dropFirst().dropLast()) }
        if let ip = IPAddress.canonical(h) {
            return leaf.ipAddresses.contains { IPAddress.canonical($0) == ip }
        }
        h = h.lowercased()
        if h.hasSuffix(".") { h.removeLast() }
        let hostLabels = h.split(separator: ".", omittingEmptySubsequences: false)
        guard !h.isEmpty, !hostLabels.contains(where: \.isEmpty) else { return false }
        for name in leaf.dnsNames {
            var pattern = name.lowercased()
            if pattern.hasSuffix(".") { pattern.removeLast() }
            if pattern == h { return true }
            let labels = pattern.split(separator: ".", omittingEmptySubsequences: false)
            // "*.example.com": wildcard is the entire leftmost label, at least two labels follow it.
            guard labels.count >= 3, labels[0] == "*", !labels.dropFirst().contains(where: { $0.contains("*") }),
                labels.count == hostLabels.count
            else { continue }
            if Array(labels.dropFirst()) == Array(hostLabels.dropFirst()) { return true }
        }
        return false
    }

    /// The certificate's common name, if any (display only; never used for host matching).
    static func commonName(_ x: OpaquePointer) -> String? {
        guard let name = X509_get_subject_name(x) else { return nil }
        let index = X509_NAME_get_index_by_NID(name, NID_commonName, -1)
        guard index >= 0, let entry = X509_NAME_get_entry(name, index),
            let data = X509_NAME_ENTRY_get_data(entry)
        else { return nil }
        return asn1String(data)
    }

    // MARK: Pieces

    private static func publicKeyFacts(_ x: OpaquePointer) -> (
        type: CertificateFacts.KeyType, bits: Int, curve: String?
    ) {
        guard let pkey = X509_get0_pubkey(x) else { return (.other, 0, nil) }
        let bits = Int(EVP_PKEY_get_bits(pkey))
        switch EVP_PKEY_get_base_id(pkey) {
        case EVP_PKEY_RSA, EVP_PKEY_RSA_PSS: return (.rsa, bits, nil)
        case EVP_PKEY_EC:
            var buffer = [CChar](repeating: 0, count: 80)
            var length = 0
            let curve =
                EVP_PKEY_get_utf8_string_param(pkey, "group", &buffer, buffer.count, &length) == 1
                ? cString(buffer) : nil
            return (.ec, bits, curve)
        case EVP_PKEY_ED25519: return (.ed25519, bits, nil)
        case EVP_PKEY_ED448: return (.ed448, bits, nil)
        case EVP_PKEY_DSA: return (.dsa, bits, nil)
        default: return (.other, bits, nil)
        }
    }

    private static func signatureHash(_ x: OpaquePointer) -> CertificateFacts.SignatureHash {
        let sigNID = X509_get_signature_nid(x)
        var mdNID: Int32 = 0
        var pkNID: Int32 = 0
        guard OBJ_find_sigid_algs(sigNID, &mdNID, &pkNID) == 1 else { return .unknown }
        switch mdNID {
        case NID_md2: return .md2
        case NID_md4: return .md4
        case NID_md5: return .md5
        case NID_sha1: return .sha1
        case NID_sha224: return .sha224
        case NID_sha256: return .sha256
        case NID_sha384: return .sha384
        case NID_sha512: return .sha512
        case NID_undef:
            // Ed25519/Ed448 hash internally; RSA-PSS carries its hash in parameters (treated as unknown here).
            return pkNID == NID_ED25519 || pkNID == NID_ED448 ? .intrinsic : .unknown
        default: return .unknown
        }
    }

    private static func isCA(_ x: OpaquePointer) -> Bool {
        guard let bc = X509_get_ext_d2i(x, NID_basic_constraints, nil, nil) else { return false }
        defer { copenssl_BASIC_CONSTRAINTS_free_any(bc) }
        return copenssl_BASIC_CONSTRAINTS_is_ca(bc) != 0
    }

    static func date(_ time: UnsafePointer<ASN1_TIME>?) -> Date {
        guard let time else { return Date(timeIntervalSince1970: 0) }
        var parts = tm()
        guard ASN1_TIME_to_tm(time, &parts) == 1 else { return Date(timeIntervalSince1970: 0) }
        return Date(timeIntervalSince1970: TimeInterval(timegm(&parts)))
    }

    private static func subjectAlternativeNames(_ x: OpaquePointer) -> (dns: [String], ips: [String]) {
        guard let raw = X509_get_ext_d2i(x, NID_subject_alt_name, nil, nil) else { return ([], []) }
        defer { copenssl_GENERAL_NAMES_free_any(raw) }
        let names = OpaquePointer(raw)
        var dns: [String] = []
        var ips: [String] = []
        for i in 0..<copenssl_sk_GENERAL_NAME_num(names) {
            guard let gn = copenssl_sk_GENERAL_NAME_value(names, i), let str = copenssl_GENERAL_NAME_string(gn)
            else { continue }
            let bytes = asn1Bytes(str)
            if copenssl_GENERAL_NAME_type(gn) == GEN_DNS {
                dns.append(String(decoding: bytes, as: UTF8.self))
            } else if let ip = IPAddress.format(bytes) {
                ips.append(ip)
            }
        }
        return (dns, ips)
    }

    private static func extendedKeyUsages(_ x: OpaquePointer) -> [String]? {
        guard let raw = X509_get_ext_d2i(x, NID_ext_key_usage, nil, nil) else { return nil }
        defer { copenssl_EXTENDED_KEY_USAGE_free_any(raw) }
        let stack = OpaquePointer(raw)
        var oids: [String] = []
        for i in 0..<copenssl_sk_ASN1_OBJECT_num(stack) {
            guard let obj = copenssl_sk_ASN1_OBJECT_value(stack, i) else { continue }
            var buffer = [CChar](repeating: 0, count: 128)
            if OBJ_obj2txt(&buffer, 128, obj, 1) > 0 { oids.append(cString(buffer)) }
        }
        return oids
    }

    private static func embeddedSCTCount(_ x: OpaquePointer) -> Int {
        guard let raw = X509_get_ext_d2i(x, NID_ct_precert_scts, nil, nil) else { return 0 }
        defer { copenssl_SCT_LIST_free_any(raw) }
        return Int(copenssl_sk_SCT_num_any(raw))
    }

    private static func spkiSHA256Base64(_ x: OpaquePointer) -> String {
        guard let spki = X509_get_X509_PUBKEY(x) else { return "" }
        var out: UnsafeMutablePointer<UInt8>?
        let length = i2d_X509_PUBKEY(spki, &out)
        guard length > 0, let out else { return "" }
        defer { copenssl_OPENSSL_free(out) }
        return Digest.base64(Digest.sha256(Array(UnsafeBufferPointer(start: out, count: Int(length)))))
    }

    private static func asn1Bytes(_ s: UnsafePointer<ASN1_STRING>) -> [UInt8] {
        guard let p = ASN1_STRING_get0_data(s) else { return [] }
        return Array(UnsafeBufferPointer(start: p, count: Int(ASN1_STRING_length(s))))
    }

    private static func asn1String(_ s: UnsafePointer<ASN1_STRING>) -> String? {
        var out: UnsafeMutablePointer<UInt8>?
        let length = ASN1_STRING_to_UTF8(&out, s)
        guard length >= 0, let out else { return nil }
        defer { copenssl_OPENSSL_free(out) }
        return String(decoding: UnsafeBufferPointer(start: out, count: Int(length)), as: UTF8.self)
    }
}

extension Certificate {
    /// The subject CN (display only).
    public var commonName: String? { CertificateInspector.commonName(x509) }
    /// ATS facts of this certificate.
    public var facts: CertificateFacts { CertificateInspector.facts(self) }
}
