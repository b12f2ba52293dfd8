internal import COpenSSL

/// An X.509 certificate. Immutable once built.
///
/// `@unchecked Sendable`: the wrapped `X509` is never mutated after init, and OpenSSL's read accessors and
/// reference counting are thread-safe.
public final class Certificate: @unchecked Sendable, Hashable, CustomStringConvertible {
    let x509: OpaquePointer

    /// Takes ownership of one reference to `x509`.
    init(taking x509: OpaquePointer) { self.x509 = x509 }

    /// Adds a reference to `x509` (which stays owned by the caller too).
    init(retaining x509: OpaquePointer) {
        X509_up_ref(x509)
        self.x509 = x509
    }

    deinit { X509_free(x509) }

    /// Parses one DER-encoded certificate.
    public convenience init(der: [UInt8]) throws(OpenSSLError) {
        let x = try checkNotNull("d2i_X509") { () -> OpaquePointer? in
            der.withUnsafeBufferPointer { buf -> OpaquePointer? in
                var p: UnsafePointer<UInt8>? = buf.baseAddress
                return d2i_X509(nil, &p, buf.count)
            }
        }
        self.init(taking: x)
    }

    /// Parses the first certificate of a PEM text.
    public convenience init(pem: String) throws(OpenSSLError) {
        let all = try Certificate.chain(pem: pem)
        guard let first = all.first else {
            throw OpenSSLError(context: "PEM_read_bio_X509", entries: [])
        }
        self.init(retaining: first.x509)
    }

    /// Parses every certificate of a PEM text, in order. Throws when there is none.
    public static func chain(pem: String) throws(OpenSSLError) -> [Certificate] {
        let bio = try MemoryBIO(bytes: Array(pem.utf8))
        var result: [Certificate] = []
        OpenSSLError.clear()
        // Bounded by the input size: each iteration consumes at least one PEM block.
        while result.count <= pem.utf8.count / 64 + 1, let x = PEM_read_bio_X509(bio.bio, nil, nil, nil) {
            result.append(Certificate(taking: x))
        }
        // Reading stops at end of input with a "no start line" entry: expected, not an error.
        ERR_clear_error()
        guard !result.isEmpty else {
            throw OpenSSLError(
                context: "PEM_read_bio_X509",
                entries: [.init(code: 0, library: "PEM routines", reason: "no certificate found", reasonCode: 0)])
        }
        return result
    }

    /// DER encoding.
    public var derBytes: [UInt8] {
        let len = i2d_X509(x509, nil)
        guard len > 0 else { return [] }
        var out = [UInt8](repeating: 0, count: Int(len))
        out.withUnsafeMutableBufferPointer { buf in
            var p = buf.baseAddress
            _ = i2d_X509(x509, &p)
        }
        return out
    }

    /// PEM encoding (`-----BEGIN CERTIFICATE-----`).
    public var pem: String {
        guard let bio = try? MemoryBIO() else { return "" }
        PEM_write_bio_X509(bio.bio, x509)
        return String(decoding: bio.readAll(), as: UTF8.self)
    }

    /// Subject in RFC 2253 form (`CN=example.com,O=Example`).
    public var subject: String { Certificate.nameString(X509_get_subject_name(x509)) }
    /// Issuer in RFC 2253 form.
    public var issuer: String { Certificate.nameString(X509_get_issuer_name(x509)) }

    public var description: String { "Certificate(\(subject))" }

    public static func == (a: Certificate, b: Certificate) -> Bool { X509_cmp(a.x509, b.x509) == 0 }
    public func hash(into hasher: inout Hasher) { hasher.combine(derBytes) }

    static func nameString(_ name: OpaquePointer?) -> String {
        guard let name, let bio = try? MemoryBIO() else { return "" }
        X509_NAME_print_ex(bio.bio, name, 0, copenssl_XN_FLAG_RFC2253())
        return String(decoding: bio.readAll(), as: UTF8.self)
    }
}

/// A private key (EC or RSA). Immutable once built.
///
/// `@unchecked Sendable`: the wrapped `EVP_PKEY` is never mutated after init; signing with it only reads it.
public final class PrivateKey: @unchecked Sendable {
    let pkey: OpaquePointer

    init(taking pkey: OpaquePointer) { self.pkey = pkey }
    deinit { EVP_PKEY_free(pkey) }

    /// Key algorithms the minter can generate.
    public enum Kind: Sendable, Hashable, CustomStringConvertible {
        /// ECDSA on P-256 (prime256v1).
        case p256
        /// RSA with the given modulus size.
        case rsa(bits: Int)
        /// ECDSA on another named curve (`secp224r1`, `prime192v1`): mirror mode copies an upstream's small curve.
        case ec(curve: String)

        public static let rsa2048 = Kind.rsa(bits: 2048)

        public var description: String {
            switch self {
            case .p256: "P-256"
            case .rsa(let bits): "RSA-\(bits)"
            case .ec(let curve): "EC \(curve)"
            }
        }
    }

    /// Generates a fresh key.
    public static func generate(_ kind: Kind) throws(OpenSSLError) -> PrivateKey {
        switch kind {
        case .p256:
            return PrivateKey(taking: try checkNotNull("EVP_EC_gen") { copenssl_EVP_EC_gen("P-256") })
        case .rsa(let bits):
            return PrivateKey(taking: try checkNotNull("EVP_RSA_gen") { copenssl_EVP_RSA_gen(UInt32(bits)) })
        case .ec(let curve):
            return PrivateKey(taking: try checkNotNull("EVP_EC_gen(\(curve))") { copenssl_EVP_EC_gen(curve) })
        }
    }

    /// Parses an unencrypted PEM private key (PKCS#8 or traditional).
    public convenience init(pem: String) throws(OpenSSLError) {
        let bio = try MemoryBIO(bytes: Array(pem.utf8))
        let k = try checkNotNull("PEM_read_bio_PrivateKey") { PEM_read_bio_PrivateKey(bio.bio, nil, nil, nil) }
        self.init(taking: k)
    }

    /// Unencrypted PKCS#8 PEM.
    public var pem: String {
        guard let bio = try? MemoryBIO() else { return "" }
        PEM_write_bio_PrivateKey(bio.bio, pkey, nil, nil, 0, nil, nil)
        return String(decoding: bio.readAll(), as: UTF8.self)
    }

    /// True for RSA keys (which also need keyEncipherment in a leaf's key usage).
    public var isRSA: Bool { EVP_PKEY_get_base_id(pkey) == EVP_PKEY_RSA }
    /// Key size in bits.
    public var bits: Int { Int(EVP_PKEY_get_bits(pkey)) }
}

/// A scoped memory BIO (`BIO_s_mem`), freed on deinit.
final class MemoryBIO {
    let bio: OpaquePointer

    init() throws(OpenSSLError) {
        bio = try checkNotNull("BIO_new") { BIO_new(BIO_s_mem()) }
    }

    convenience init(bytes: [UInt8]) throws(OpenSSLError) {
        try self.init()
        if !bytes.isEmpty {
            _ = bytes.withUnsafeBytes { BIO_write(bio, $0.baseAddress, Int32($0.count)) }
        }
    }

    deinit { BIO_free(bio) }

    func readAll() -> [UInt8] { MemoryBIO.drain(bio) }

    /// Reads everything pending in a memory BIO. Bounded by what is pending.
    static func drain(_ bio: OpaquePointer) -> [UInt8] {
        var out: [UInt8] = []
        var pending = Int(BIO_ctrl_pending(bio))
        while pending > 0 {
            var n: Int32 = 0
            // Uninitialized capacity: no zero-fill; a memory BIO hands over everything pending in one read.
            let chunk = [UInt8](unsafeUninitializedCapacity: pending) { raw, count in
                n = BIO_read(bio, raw.baseAddress, Int32(raw.count))
                count = n > 0 ? Int(n) : 0
            }
            if n <= 0 { break }
            if out.isEmpty { out = chunk } else { out += chunk }
            pending = Int(BIO_ctrl_pending(bio))
        }
        return out
    }
}
