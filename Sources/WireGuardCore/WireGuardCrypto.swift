import COpenSSL

/// WireGuard's primitives (the paper §5.4), each one call into OpenSSL 3.0's EVP APIs: X25519, ChaCha20-Poly1305
/// with the 64-bit counter as nonce, BLAKE2s-256, HMAC-BLAKE2s (by `EVP_MAC` "HMAC") and the keyed BLAKE2s-128
/// of MAC1 (`EVP_MAC` "BLAKE2SMAC").
///
/// Every function takes plain byte arrays and returns nil (or false) on any OpenSSL failure, never traps: their
/// inputs can come from the network.
public enum WireGuardCrypto {
    /// Key, public key and DH output length (X25519), and the hash length (BLAKE2s-256).
    public static let keyLength = 32
    /// The Poly1305 tag appended to every AEAD ciphertext.
    public static let tagLength = 16

    // MARK: Hashes and KDF

    /// BLAKE2s-256 of the concatenation of `parts`.
    static func hash(_ parts: [UInt8]...) -> [UInt8] {
        let data = parts.flatMap { $0 }
        var out = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 0
        let ok = data.withUnsafeBytes { input in
            EVP_Digest(input.baseAddress, input.count, &out, &length, EVP_blake2s256(), nil)
        }
        // A digest of memory cannot fail but for an allocation failure; a zero hash then fails every MAC and AEAD.
        return ok == 1 && length == 32 ? out : [UInt8](repeating: 0, count: 32)
    }

    /// HMAC-BLAKE2s(key, data), 32 bytes.
    static func hmac(key: [UInt8], _ data: [UInt8]) -> [UInt8] {
        mac(hmacAlgorithm, key: key, data: data, outputLength: 32, digest: "BLAKE2S-256")
    }

    /// MAC(key, data) of the paper: keyed BLAKE2s with a 16-byte output (MAC1 and MAC2).
    static func mac(key: [UInt8], _ data: ArraySlice<UInt8>) -> [UInt8] {
        mac(blake2sMACAlgorithm, key: key, data: Array(data), outputLength: 16, digest: nil)
    }

    /// The KDF_n of the paper (HKDF over HMAC-BLAKE2s): `count` 32-byte outputs from the chaining key and `input`.
    static func kdf(_ count: Int, key: [UInt8], input: [UInt8]) -> [[UInt8]] {
        let prk = hmac(key: key, input)
        var outputs: [[UInt8]] = []
        var previous: [UInt8] = []
        for i in 1...count {
            previous = hmac(key: prk, previous + [UInt8(i)])
            outputs.append(previous)
        }
        return outputs
    }

    /// The MAC implementations, fetched once (a fetch searches the provider's tables; an `EVP_MAC` may be used by
    /// many contexts at once, on any thread).
    nonisolated(unsafe) private static let hmacAlgorithm = EVP_MAC_fetch(nil, "HMAC", nil)
    nonisolated(unsafe) private static let blake2sMACAlgorithm = EVP_MAC_fetch(nil, "BLAKE2SMAC", nil)

    private static func mac(
        _ algorithm: OpaquePointer?, key: [UInt8], data: [UInt8], outputLength: Int, digest: String?
    ) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: outputLength)
        guard let mac = algorithm else { return out }
        guard let context = EVP_MAC_CTX_new(mac) else { return out }
        defer { EVP_MAC_CTX_free(context) }
        var size = outputLength
        var written = 0
        let ok: Bool = "digest".withCString { digestKey in
            (digest ?? "").withCString { digestName in
                "size".withCString { sizeKey in
                    var params: [OSSL_PARAM] =
                        digest != nil
                        ? [OSSL_PARAM_construct_utf8_string(digestKey, UnsafeMutablePointer(mutating: digestName), 0)]
                        : [OSSL_PARAM_construct_size_t(sizeKey, &size)]
                    params.append(OSSL_PARAM_construct_end())
                    return key.withUnsafeBufferPointer { k in
                        EVP_MAC_init(context, k.baseAddress, k.count, &params) == 1
                    }
                }
            }
        }
        guard ok,
            data.withUnsafeBufferPointer({ EVP_MAC_update(context, $0.baseAddress, $0.count) }) == 1,
            EVP_MAC_final(context, &out, &written, outputLength) == 1, written == outputLength
        else { return [UInt8](repeating: 0, count: outputLength) }
        return out
    }

    // MARK: AEAD

    /// ChaCha20-Poly1305 with the nonce 32 zero bits then `counter` little-endian (as WireGuard): the ciphertext
    /// with its tag appended.
    static func seal(key: [UInt8], counter: UInt64, plaintext: [UInt8], aad: [UInt8]) -> [UInt8]? {
        guard key.count == 32, let context = EVP_CIPHER_CTX_new() else { return nil }
        defer { EVP_CIPHER_CTX_free(context) }
        let nonce = nonce(counter)
        var out = [UInt8](repeating: 0, count: plaintext.count + tagLength)
        var length: Int32 = 0
        guard EVP_EncryptInit_ex(context, EVP_chacha20_poly1305(), nil, key, nonce) == 1,
            aad.isEmpty || EVP_EncryptUpdate(context, nil, &length, aad, Int32(aad.count)) == 1
        else { return nil }
        let ok = out.withUnsafeMutableBufferPointer { o -> Bool in
            var n: Int32 = 0
            var final: Int32 = 0
            guard
                plaintext.isEmpty
                    || EVP_EncryptUpdate(context, o.baseAddress, &n, plaintext, Int32(plaintext.count)) == 1,
                EVP_EncryptFinal_ex(context, o.baseAddress! + Int(n), &final) == 1
            else { return false }
            return EVP_CIPHER_CTX_ctrl(
                context, EVP_CTRL_AEAD_GET_TAG, Int32(tagLength), o.baseAddress! + plaintext.count) == 1
        }
        return ok ? out : nil
    }

    /// Opens what `seal` made; nil when the tag does not verify (or the input is shorter than a tag).
    static func open(key: [UInt8], counter: UInt64, ciphertext: ArraySlice<UInt8>, aad: [UInt8]) -> [UInt8]? {
        guard key.count == 32, ciphertext.count >= tagLength, let context = EVP_CIPHER_CTX_new() else { return nil }
        defer { EVP_CIPHER_CTX_free(context) }
        let body = Array(ciphertext.dropLast(tagLength))
        var tag = Array(ciphertext.suffix(tagLength))
        var out = [UInt8](repeating: 0, count: body.count + 16)
        var length: Int32 = 0
        guard EVP_DecryptInit_ex(context, EVP_chacha20_poly1305(), nil, key, nonce(counter)) == 1,
            aad.isEmpty || EVP_DecryptUpdate(context, nil, &length, aad, Int32(aad.count)) == 1
        else { return nil }
        var n: Int32 = 0
        if !body.isEmpty {
            guard EVP_DecryptUpdate(context, &out, &n, body, Int32(body.count)) == 1 else { return nil }
        }
        guard EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_AEAD_SET_TAG, Int32(tagLength), &tag) == 1 else { return nil }
        var final: Int32 = 0
        let verified = out.withUnsafeMutableBufferPointer {
            EVP_DecryptFinal_ex(context, $0.baseAddress! + Int(n), &final) == 1
        }
        guard verified else { return nil }
        return Array(out[0..<body.count])
    }

    private static func nonce(_ counter: UInt64) -> [UInt8] {
        [0, 0, 0, 0] + (0..<8).map { UInt8(truncatingIfNeeded: counter >> (8 * $0)) }
    }

    // MARK: X25519

    /// The public key of a 32-byte private key (clamped by X25519 itself).
    public static func publicKey(privateKey: [UInt8]) -> [UInt8]? {
        guard privateKey.count == 32,
            let key = EVP_PKEY_new_raw_private_key(EVP_PKEY_X25519, nil, privateKey, 32)
        else { return nil }
        defer { EVP_PKEY_free(key) }
        var out = [UInt8](repeating: 0, count: 32)
        var length = 32
        guard EVP_PKEY_get_raw_public_key(key, &out, &length) == 1, length == 32 else { return nil }
        return out
    }

    /// X25519(private, public); nil for a public key of small order (an all-zero result), which WireGuard refuses.
    static func dh(privateKey: [UInt8], publicKey: [UInt8]) -> [UInt8]? {
        guard privateKey.count == 32, publicKey.count == 32,
            let mine = EVP_PKEY_new_raw_private_key(EVP_PKEY_X25519, nil, privateKey, 32)
        else { return nil }
        defer { EVP_PKEY_free(mine) }
        guard let theirs = EVP_PKEY_new_raw_public_key(EVP_PKEY_X25519, nil, publicKey, 32) else { return nil }
        defer { EVP_PKEY_free(theirs) }
        guard let context = EVP_PKEY_CTX_new(mine, nil) else { return nil }
        defer { EVP_PKEY_CTX_free(context) }
        var out = [UInt8](repeating: 0, count: 32)
        var length = 32
        guard EVP_PKEY_derive_init(context) == 1, EVP_PKEY_derive_set_peer(context, theirs) == 1,
            EVP_PKEY_derive(context, &out, &length) == 1, length == 32, out.contains(where: { $0 != 0 })
        else { return nil }
        return out
    }

    /// `count` bytes from OpenSSL's CSPRNG; nil if it cannot deliver.
    public static func randomBytes(_ count: Int) -> [UInt8]? {
        var out = [UInt8](repeating: 0, count: count)
        return RAND_bytes(&out, Int32(count)) == 1 ? out : nil
    }

    /// Equality in time independent of where the bytes differ.
    static func constantTimeEqual(_ a: [UInt8], _ b: ArraySlice<UInt8>) -> Bool {
        guard a.count == b.count else { return false }
        return a.withUnsafeBytes { x in
            Array(b).withUnsafeBytes { y in CRYPTO_memcmp(x.baseAddress, y.baseAddress, a.count) == 0 }
        }
    }
}
