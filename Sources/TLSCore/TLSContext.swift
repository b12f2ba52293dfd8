internal import COpenSSL
import ATSPolicy

/// An immutable, shareable TLS context (`SSL_CTX`) built from a `TLSConfiguration`. Make one per configuration and
/// create a `TLSEngine` per connection from it.
///
/// `@unchecked Sendable`: the `SSL_CTX` is fully configured in init and never changed afterwards; creating `SSL`
/// objects from a configured context is thread-safe in OpenSSL.
public final class TLSContext: @unchecked Sendable {
    let ctx: OpaquePointer
    /// The configuration this context was built from.
    public let configuration: TLSConfiguration
    /// What of the configuration shapes a client's ClientHello, as part of a `TLSSessionKey`.
    let sessionProfile: String

    public init(_ configuration: TLSConfiguration) throws(OpenSSLError) {
        self.configuration = configuration
        let method = configuration.role == .client ? TLS_client_method() : TLS_server_method()
        let ctx = try checkNotNull("SSL_CTX_new") { SSL_CTX_new(method) }
        do throws(OpenSSLError) {
            try TLSContext.configure(ctx, configuration)
        } catch {
            SSL_CTX_free(ctx)
            throw error
        }
        self.ctx = ctx
        let c = configuration
        self.sessionProfile = [
            c.minimumVersion.map { "\($0.rawValue)" }, c.maximumVersion.map { "\($0.rawValue)" }, c.cipherList,
            c.tls13CipherSuites, c.groups?.joined(separator: ":"), c.securityLevel.map { "\($0)" },
        ].map { $0 ?? "-" }.joined(separator: "|")
    }

    deinit { SSL_CTX_free(ctx) }

    private static func configure(_ ctx: OpaquePointer, _ c: TLSConfiguration) throws(OpenSSLError) {
        // A client (browsers, curl, URLSession) may end with a FIN and no close_notify. OpenSSL 3 would answer with
        // a fatal decode_error alert, which the proxy then sent to a client that did nothing wrong; as a server,
        // take it as a close and answer with close_notify. Upstream legs stay strict: an origin's missing
        // close_notify can be a truncation.
        if c.role == .server { copenssl_SSL_CTX_ignore_unexpected_eof(ctx) }
        // Security level first: it also filters the cipher list and versions set below.
        if let level = c.securityLevel { SSL_CTX_set_security_level(ctx, Int32(level)) }
        if let v = c.minimumVersion {
            try checkPositive("SSL_CTX_set_min_proto_version") {
                copenssl_SSL_CTX_set_min_proto_version(ctx, v.openSSLVersion)
            }
        }
        if let v = c.maximumVersion {
            try checkPositive("SSL_CTX_set_max_proto_version") {
                copenssl_SSL_CTX_set_max_proto_version(ctx, v.openSSLVersion)
            }
        }
        if let list = c.cipherList {
            // A configured security level would be overridden by an @SECLEVEL in the list; keep ours.
            let full = c.securityLevel.map { "\(list):@SECLEVEL=\($0)" } ?? list
            try checkPositive("SSL_CTX_set_cipher_list(\(list))") { SSL_CTX_set_cipher_list(ctx, full) }
        }
        if let suites = c.tls13CipherSuites {
            try checkPositive("SSL_CTX_set_ciphersuites(\(suites))") { SSL_CTX_set_ciphersuites(ctx, suites) }
        }
        if let groups = c.groups, !groups.isEmpty {
            let list = groups.joined(separator: ":")
            try checkPositive("SSL_CTX_set1_groups_list(\(list))") { copenssl_SSL_CTX_set1_groups_list(ctx, list) }
        }
        // Partial writes let the engine hand out whatever fits; moving buffers are safe because we copy. Record buffers
        // are kept while traffic flows (SSL_MODE_RELEASE_BUFFERS would free and reallocate ~17 KiB per record) and
        // given back when a connection goes quiet (`TLSEngine.releaseBuffers()`).
        _ = copenssl_SSL_CTX_set_mode(
            ctx,
            Int(SSL_MODE_ENABLE_PARTIAL_WRITE) | Int(SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER))
        // Read-ahead: a record's header and body come out of the transport in one read instead of two. The data is
        // already in memory, so nothing waits for it; `TLSEngine.read` checks `SSL_has_pending` for what OpenSSL
        // holds beyond the record it returned.
        copenssl_SSL_CTX_set_read_ahead(ctx, 1)
        // No session tickets: every probe must be a full handshake that shows the real chain.
        SSL_CTX_set_options(ctx, copenssl_SSL_OP_NO_TICKET())

        SSL_CTX_set_verify(ctx, c.verifyPeer ? SSL_VERIFY_PEER : SSL_VERIFY_NONE, nil)
        if c.useSystemTrustStore {
            try checkPositive("SSL_CTX_set_default_verify_paths") { SSL_CTX_set_default_verify_paths(ctx) }
        }
        if !c.additionalTrustRoots.isEmpty {
            let store = SSL_CTX_get_cert_store(ctx)
            for root in c.additionalTrustRoots {
                OpenSSLError.clear()
                if X509_STORE_add_cert(store, root.x509) != 1 {
                    // Adding the same root twice is harmless; anything else is a real failure.
                    let err = OpenSSLError.drain("X509_STORE_add_cert")
                    if !err.entries.allSatisfy({ $0.reason.contains("already in hash table") }) { throw err }
                }
            }
        }

        SSL_CTX_set_info_callback(ctx, tlsInfoCallback)
        if c.sessionResumption {
            // The exception to "no session tickets" above: a context made to resume (the proxy's upstream client and
            // its per-host server contexts for clients; probes never are). Clients see their sessions only through the callback, which hands them to the
            // engine's TLSSessionCache.
            SSL_CTX_clear_options(ctx, copenssl_SSL_OP_NO_TICKET())
            if c.role == .client {
                _ = copenssl_SSL_CTX_set_session_cache_mode(ctx, copenssl_SSL_SESS_CACHE_CLIENT_ONLY_CALLBACK())
                SSL_CTX_sess_set_new_cb(ctx, tlsNewSessionCallback)
            } else {
                try TLSContext.configureServerResumption(ctx, c)
            }
        }
        if c.role == .server {
            if let identity = c.identity {
                try TLSContext.install(identity, on: ctx)
            }
            SSL_CTX_set_alpn_select_cb(ctx, tlsALPNSelectCallback, nil)
            SSL_CTX_set_client_hello_cb(ctx, tlsClientHelloCallback, nil)
            if c.certificateSelector != nil {
                SSL_CTX_set_cert_cb(ctx, tlsCertificateCallback, nil)
            }
        }
    }

    /// A server context that resumes: TLS 1.3 tickets and TLS 1.2 tickets and session IDs, for the sessions of this
    /// context's own identity only. Stateless tickets: with `SSL_OP_NO_TICKET` OpenSSL's TLS 1.3 tickets are stateful,
    /// two sessions kept in the context's cache per full handshake (up to 20,480), held while nobody resumes them.
    ///
    /// Tickets are sealed with keys OpenSSL draws at random for each `SSL_CTX`, and session IDs are looked up in the
    /// context's own cache, so a session resumes only on the context that made it: the proxy builds one per host
    /// and leaf (`TLSContextKey.server`), so a session for host A never resumes on a connection for host B, and a
    /// context rebuilt with a new leaf starts with new keys (its clients make one full handshake and see the new
    /// leaf). The session ID context, the leaf's SHA-256, states the same binding where OpenSSL checks it (a
    /// session carries it and is refused on a connection whose context differs). A context that picks its
    /// certificate per connection (`certificateSelector`) serves several names from one cache, and the choice is
    /// made after OpenSSL has looked the session up, so it never resumes.
    private static func configureServerResumption(_ ctx: OpaquePointer, _ c: TLSConfiguration) throws(OpenSSLError) {
        guard c.certificateSelector == nil, let leaf = c.identity?.chain.first else {
            SSL_CTX_set_options(ctx, copenssl_SSL_OP_NO_TICKET())
            _ = copenssl_SSL_CTX_set_session_cache_mode(ctx, 0)
            return
        }
        let sessionContext = Digest.sha256(leaf.derBytes)
        try checkPositive("SSL_CTX_set_session_id_context") {
            SSL_CTX_set_session_id_context(ctx, sessionContext, UInt32(sessionContext.count))
        }
        // TLS 1.2 session IDs live in the context's cache; bound it (OpenSSL's default is 20,480 per context, and
        // the proxy has a context per host).
        _ = SSL_CTX_ctrl(ctx, SSL_CTRL_SET_SESS_CACHE_SIZE, Self.serverSessionCacheSize, nil)
    }

    /// Sessions a resuming server context keeps for TLS 1.2 session-ID resumption (tickets need no cache).
    static let serverSessionCacheSize = 1024

    private static func install(_ identity: TLSConfiguration.ServerIdentity, on ctx: OpaquePointer)
        throws(OpenSSLError)
    {
        guard let leaf = identity.chain.first else {
            throw OpenSSLError(context: "server identity has an empty chain", entries: [])
        }
        try checkPositive("SSL_CTX_use_certificate") { SSL_CTX_use_certificate(ctx, leaf.x509) }
        try checkPositive("SSL_CTX_use_PrivateKey") { SSL_CTX_use_PrivateKey(ctx, identity.key.pkey) }
        try checkPositive("SSL_CTX_check_private_key") { SSL_CTX_check_private_key(ctx) }
        for cert in identity.chain.dropFirst() {
            try checkPositive("SSL_CTX_add1_chain_cert") { copenssl_SSL_CTX_add1_chain_cert(ctx, cert.x509) }
        }
    }
}

// MARK: C callbacks. Each recovers its engine from the SSL's app data (an unretained pointer: the engine frees the
// SSL in its deinit, so the pointer is valid whenever OpenSSL can call back).

private func engine(of ssl: OpaquePointer?) -> TLSEngine? {
    guard let ssl, let raw = copenssl_SSL_get_app_data(ssl) else { return nil }
    return Unmanaged<TLSEngine>.fromOpaque(raw).takeUnretainedValue()
}

/// Records alerts in both directions, so callers can tell "peer sent protocol_version (70)".
private func tlsInfoCallback(_ ssl: OpaquePointer?, _ where_: Int32, _ ret: Int32) {
    guard where_ & SSL_CB_ALERT != 0, let engine = engine(of: ssl) else { return }
    let level = UInt8((ret >> 8) & 0xFF)
    let alert = TLSAlert(UInt8(ret & 0xFF))
    let fatal = level == 2
    if where_ & SSL_CB_READ != 0 {
        engine.recordAlert(received: alert, fatal: fatal)
    } else {
        engine.recordAlert(sent: alert, fatal: fatal)
    }
}

/// Chooses ALPN by *our* preference among the client's offers. The result must point into `input` (the client's
/// list, owned by OpenSSL for the duration of the handshake), never into Swift temporaries (house style §5.3.6).
private func tlsALPNSelectCallback(
    _ ssl: OpaquePointer?, _ out: UnsafeMutablePointer<UnsafePointer<UInt8>?>?,
    _ outLength: UnsafeMutablePointer<UInt8>?, _ input: UnsafePointer<UInt8>?, _ inputLength: UInt32,
    _ arg: UnsafeMutableRawPointer?
) -> Int32 {
    guard let engine = engine(of: ssl), let out, let outLength, let input else { return SSL_TLSEXT_ERR_NOACK }
    let offered = UnsafeBufferPointer(start: input, count: Int(inputLength))
    engine.recordOfferedALPN(ALPNWire.decode(Array(offered)))
    for wanted in engine.alpnPreference {
        let w = Array(wanted.utf8)
        var i = 0
        while i < offered.count {
            let len = Int(offered[i])
            guard i + 1 + len <= offered.count else { break }
            if len == w.count, Array(offered[(i + 1)..<(i + 1 + len)]) == w {
                out.pointee = input + i + 1
                outLength.pointee = UInt8(len)
                return SSL_TLSEXT_ERR_OK
            }
            i += 1 + len
        }
    }
    return SSL_TLSEXT_ERR_NOACK
}

/// Hands a client's new session (a full TLS ≤ 1.2 handshake's, or a TLS 1.3 ticket read after the handshake) to the
/// engine's session cache, which keeps a copy. Returns 0: the reference OpenSSL passed stays OpenSSL's to free.
private func tlsNewSessionCallback(_ ssl: OpaquePointer?, _ session: OpaquePointer?) -> Int32 {
    guard let session, let engine = engine(of: ssl) else { return 0 }
    engine.resumption?.received(session)
    return 0
}

/// Lets a server abort right after the ClientHello with a chosen fatal alert (the proxy's `--block tls`).
private func tlsClientHelloCallback(
    _ ssl: OpaquePointer?, _ alert: UnsafeMutablePointer<Int32>?, _ arg: UnsafeMutableRawPointer?
) -> Int32 {
    guard let engine = engine(of: ssl), let abort = engine.pendingAbortAlert else { return SSL_CLIENT_HELLO_SUCCESS }
    alert?.pointee = Int32(abort.code)
    return SSL_CLIENT_HELLO_ERROR
}

/// Picks a per-host certificate from the SNI name once it is known.
private func tlsCertificateCallback(_ ssl: OpaquePointer?, _ arg: UnsafeMutableRawPointer?) -> Int32 {
    guard let ssl, let engine = engine(of: ssl), let selector = engine.context.configuration.certificateSelector
    else { return 1 }
    let name = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name).map { String(cString: $0) }
    guard let identity = selector(name), let leaf = identity.chain.first else { return 1 }
    guard SSL_use_certificate(ssl, leaf.x509) == 1, SSL_use_PrivateKey(ssl, identity.key.pkey) == 1 else { return 0 }
    // Replace any chain from the context's default identity.
    _ = SSL_ctrl(ssl, SSL_CTRL_CHAIN, 0, nil)
    for cert in identity.chain.dropFirst() where copenssl_SSL_add1_chain_cert(ssl, cert.x509) != 1 {
        return 0
    }
    return 1
}

/// The ALPN wire format: length-prefixed protocol names.
enum ALPNWire {
    static func encode(_ protocols: [String]) -> [UInt8] {
        var out: [UInt8] = []
        for p in protocols {
            let b = Array(p.utf8)
            guard !b.isEmpty, b.count <= 255 else { continue }
            out.append(UInt8(b.count))
            out.append(contentsOf: b)
        }
        return out
    }

    static func decode(_ bytes: [UInt8]) -> [String] {
        var out: [String] = []
        var i = 0
        while i < bytes.count {
            let len = Int(bytes[i])
            guard len > 0, i + 1 + len <= bytes.count else { break }
            out.append(String(decoding: bytes[(i + 1)..<(i + 1 + len)], as: UTF8.self))
            i += 1 + len
        }
        return out
    }
}
