internal import COpenSSL
import ATSPolicy

/// One TLS connection as a sans-io state machine over in-memory ciphertext (`CiphertextTransport`): feed it the
/// peer's ciphertext, step it, and send whatever `takeOutput()` returns. It never touches a socket.
///
/// Theory of operation:
/// 1. `feed(_:)` appends received ciphertext (or `withLentInput(_:_:)` lends it without a copy);
///    `feedEndOfInput()` says the transport closed.
/// 2. `handshake()` advances the handshake as far as the input allows and returns `.needsMoreInput`, `.complete`
///    or `.failed(TLSError)`. After every step, send `takeOutput()` to the peer (even on failure: it may hold the
///    alert that tells the peer why).
/// 3. After `.complete`: `read()` for plaintext, `write(_:)` to encrypt, `close()` for close_notify.
///
/// Confined to one thread at a time (the loop thread that owns the connection); explicitly not `Sendable`.
public final class TLSEngine {
    /// The context this engine was made from (kept alive: the C callbacks read its configuration).
    public let context: TLSContext
    let ssl: OpaquePointer
    private let transport: CiphertextTransport

    /// Result of one handshake step.
    public enum HandshakeStep: Hashable, Sendable {
        /// Feed more bytes from the peer (after sending `takeOutput()`).
        case needsMoreInput
        case complete
        case failed(TLSError)
    }

    /// Result of one read of plaintext.
    public enum ReadResult: Hashable, Sendable {
        case data([UInt8])
        case needsMoreInput
        /// The peer sent close_notify.
        case closed
        case failed(TLSError)
    }

    /// Server role: ALPN preference for this connection (defaults to the configuration's list). Set it before the
    /// ClientHello is processed, e.g. to the protocol the upstream chose.
    public var alpnPreference: [String]
    /// Server role: the ALPN list the client offered (known once the ClientHello is processed).
    public private(set) var offeredALPN: [String] = []
    /// Last alert the peer sent (warning or fatal) and whether it was fatal.
    public private(set) var lastAlertReceived: (alert: TLSAlert, fatal: Bool)?
    /// Last alert we sent (warning or fatal) and whether it was fatal.
    public private(set) var lastAlertSent: (alert: TLSAlert, fatal: Bool)?
    /// The alert a server aborts the handshake with (`abortHandshake(with:)`).
    private(set) var pendingAbortAlert: TLSAlert?
    private var firstInputByte: UInt8?
    /// The transport closed (`feedEndOfInput()`); the BIO keeps the flag, which decides what an empty read means.
    private var endOfInput: Bool { transport.endOfInput }
    private var receivedCloseNotify = false
    private var failure: TLSError?
    /// Client: session resumption through a `TLSSessionCache` (TLSEngine+Resumption.swift); nil when not offered.
    var resumption: SessionResumption?

    /// Creates an engine. Clients pass the SNI `serverName` (omit it for IP literals, as iOS does) and may
    /// override the configuration's ALPN offer with `alpn`.
    public init(context: TLSContext, serverName: String? = nil, alpn: [String]? = nil) throws(OpenSSLError) {
        self.context = context
        self.alpnPreference = alpn ?? context.configuration.alpnProtocols
        // Configure the SSL while this function still owns it, and assign it last: once every stored property
        // is set, a throw runs deinit, which frees `ssl` too (a double free, reachable with a long SNI).
        let ssl = try checkNotNull("SSL_new") { SSL_new(context.ctx) }
        let transport: CiphertextTransport
        do throws(OpenSSLError) {
            transport = try CiphertextTransport()
            SSL_set_bio(ssl, transport.bio, transport.bio)  // one BIO both ways; the SSL now owns it
            try TLSEngine.configure(ssl, role: context.configuration.role, serverName: serverName,
                                    alpn: alpn ?? context.configuration.alpnProtocols)
        } catch {
            SSL_free(ssl)
            throw error
        }
        self.ssl = ssl
        self.transport = transport
        _ = copenssl_SSL_set_app_data(ssl, Unmanaged.passUnretained(self).toOpaque())
    }

    deinit { SSL_free(ssl) }

    /// Sets the connection's role, SNI and ALPN offer on a new `SSL`. Throws without freeing it: the caller owns it.
    private static func configure(_ ssl: OpaquePointer, role: TLSConfiguration.Role, serverName: String?,
                                  alpn: [String]) throws(OpenSSLError) {
        guard role == .client else {
            SSL_set_accept_state(ssl)
            return
        }
        SSL_set_connect_state(ssl)
        if let serverName, !serverName.isEmpty {
            try checkPositive("SSL_set_tlsext_host_name") { copenssl_SSL_set_tlsext_host_name(ssl, serverName) }
        }
        let wire = ALPNWire.encode(alpn)
        if !wire.isEmpty {
            // SSL_set_alpn_protos copies the list and returns 0 on success.
            OpenSSLError.clear()
            let rc = wire.withUnsafeBufferPointer { SSL_set_alpn_protos(ssl, $0.baseAddress, UInt32($0.count)) }
            if rc != 0 { throw OpenSSLError.drain("SSL_set_alpn_protos") }
        }
    }

    // MARK: Ciphertext in and out

    /// Appends ciphertext received from the peer. Concrete overloads rather than one generic over collections:
    /// called from other modules, a generic version runs unspecialised (witness-table calls for `isEmpty` and the
    /// storage access on every socket read).
    public func feed(_ bytes: UnsafeRawBufferPointer) {
        guard !bytes.isEmpty else { return }
        if firstInputByte == nil { firstInputByte = bytes[0] }
        transport.keep(bytes)
    }

    /// Appends ciphertext received from the peer.
    public func feed(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { feed($0) }
    }

    /// Appends ciphertext received from the peer, written from the slice in place.
    public func feed(_ bytes: ArraySlice<UInt8>) {
        bytes.withUnsafeBytes { feed($0) }
    }

    /// Runs `body` with `bytes` fed without copying them: OpenSSL reads them where they are. What it has not read
    /// when `body` returns (usually part of a record) is copied and stays fed. For a socket read's bytes, which
    /// are only valid during the call that hands them over.
    public func withLentInput<Result>(_ bytes: UnsafeRawBufferPointer, _ body: () -> Result) -> Result {
        guard !bytes.isEmpty else { return body() }
        if firstInputByte == nil { firstInputByte = bytes[0] }
        transport.lend(bytes)
        defer { transport.endLoan() }
        return body()
    }

    /// The transport reached end of file: further reads that need data fail instead of waiting.
    public func feedEndOfInput() {
        transport.endOfInput = true
    }

    /// Ciphertext to send to the peer (empty when there is none).
    public func takeOutput() -> [UInt8] { transport.takeOutput() }

    /// True when `takeOutput()` would return bytes.
    public var hasOutput: Bool { !transport.output.isEmpty }

    // MARK: Handshake

    /// Advances the handshake with the input fed so far.
    public func handshake() -> HandshakeStep {
        if let failure { return .failed(failure) }
        if SSL_is_init_finished(ssl) == 1 { return .complete }
        OpenSSLError.clear()
        let rc = SSL_do_handshake(ssl)
        if rc == 1 {
            resumption?.handshakeCompleted(reused: SSL_session_reused(ssl) == 1)
            return .complete
        }
        switch classify(rc, context: "SSL_do_handshake") {
        case .none: return .needsMoreInput
        case .some(let error):
            failure = error
            resumption?.invalidate()
            return .failed(error)
        }
    }

    /// True once the handshake has completed.
    public var isHandshakeComplete: Bool { SSL_is_init_finished(ssl) == 1 }

    /// True once the peer has sent any bytes, TLS or not: a `closedByPeer` failure without them means the peer
    /// closed before answering at all.
    public var hasReceivedInput: Bool { firstInputByte != nil }

    /// Server role: makes the handshake fail with `alert` as soon as the ClientHello is processed (the next
    /// `handshake()` with the ClientHello fed returns `.failed(.aborted(alert))` and `takeOutput()` holds the
    /// alert record). Returns false when it is too late (not a server, or the ClientHello was already processed).
    @discardableResult
    public func abortHandshake(with alert: TLSAlert) -> Bool {
        guard context.configuration.role == .server, SSL_in_before(ssl) == 1 else { return false }
        pendingAbortAlert = alert
        return true
    }

    // MARK: Application data

    /// Reads decrypted application data: up to 16 KiB per call, across records (`read(into:)` into a new array).
    public func read() -> ReadResult {
        // Nothing buffered and more input to come (the read that ends every drain): no record-sized array.
        if failure == nil, !endOfInput, !receivedCloseNotify, transport.unreadCount == 0, SSL_has_pending(ssl) == 0
        {
            return .needsMoreInput
        }
        var stop = ReadStop.needsMoreInput
        let buffer = [UInt8](unsafeUninitializedCapacity: 16_384) { raw, count in
            (count, stop) = read(into: UnsafeMutableRawBufferPointer(raw))
        }
        if !buffer.isEmpty { return .data(buffer) }
        switch stop {
        case .needsMoreInput, .bufferFull: return .needsMoreInput
        case .closed: return .closed
        case .failed(let error): return .failed(error)
        }
    }

    /// Why `read(into:)` stopped.
    public enum ReadStop: Sendable {
        /// Everything fed so far is decrypted.
        case needsMoreInput
        /// The buffer is full; more may be readable.
        case bufferFull
        /// The peer closed the TLS session (close_notify, or the end of input where OpenSSL accepts it).
        case closed
        case failed(TLSError)
    }

    /// At least as many bytes as reads could return now without more input: the ciphertext not yet read by OpenSSL,
    /// plus a record's worth when OpenSSL holds unprocessed or undelivered bytes (decrypting never makes a record
    /// longer, so fed ciphertext bounds the plaintext it carries).
    public var readableBound: Int {
        transport.unreadCount + (SSL_has_pending(ssl) == 1 ? 16_384 + 512 : 0)
    }

    /// Reads decrypted application data into `buffer`, record after record, until it is full or OpenSSL needs more
    /// input: the bytes land where the caller wants them, with no array per record. Returns the byte count and why it
    /// stopped. At the end of input, give it at least one byte of room so that it can tell a close from a truncation.
    public func read(into buffer: UnsafeMutableRawBufferPointer) -> (count: Int, stop: ReadStop) {
        if let failure { return (0, .failed(failure)) }
        guard let base = buffer.baseAddress else { return (0, .bufferFull) }  // only an empty buffer has none
        var count = 0
        while true {
            if transport.unreadCount == 0, SSL_has_pending(ssl) == 0 {
                // As in `read()`: without buffered input OpenSSL could only say "want read", except at the end.
                if receivedCloseNotify { return (count, .closed) }
                guard endOfInput else { return (count, .needsMoreInput) }
            }
            guard count < buffer.count else { return (count, .bufferFull) }
            OpenSSLError.clear()
            let n = SSL_read(ssl, base + count, Int32(clamping: buffer.count - count))
            if n > 0 {
                count += Int(n)
                continue
            }
            if SSL_get_error(ssl, n) == SSL_ERROR_ZERO_RETURN {
                receivedCloseNotify = true
                return (count, .closed)
            }
            switch classify(n, context: "SSL_read") {
            case .none: return (count, .needsMoreInput)
            case .some(let error):
                failure = error
                return (count, .failed(error))
            }
        }
    }

    /// Encrypts `bytes`; the ciphertext is then in `takeOutput()`.
    public func write(_ bytes: [UInt8]) throws(TLSError) {
        if let failure { throw failure }
        var offset = 0
        // Room for the records: each adds at most a header, an explicit IV, a MAC or tag and padding.
        transport.reserveOutput(bytes.count + (bytes.count / 16_384 + 1) * Self.recordOverheadBound)
        // The transport takes every record, so every SSL_write makes progress; bounded by the byte count.
        while offset < bytes.count {
            OpenSSLError.clear()
            let n = bytes[offset...].withUnsafeBytes { SSL_write(ssl, $0.baseAddress, Int32($0.count)) }
            if n > 0 {
                offset += Int(n)
                continue
            }
            let error = classify(n, context: "SSL_write") ?? .localFailure(
                alertSent: nil, error: OpenSSLError(context: "SSL_write needs input before writing", entries: []))
            failure = error
            throw error
        }
    }

    /// Gives OpenSSL's record buffers (about 17 KiB each way) back to the heap; they are allocated again when the
    /// next record comes or goes. Call it when the connection has gone quiet: keeping them while traffic flows
    /// saves an allocation and a free per record. Does nothing while a record is partly read or written.
    public func releaseBuffers() {
        _ = SSL_free_buffers(ssl)
        transport.releaseStorage()
    }

    /// More than a record adds to its payload in any suite OpenSSL offers (5 header + 16 IV + 48 MAC + 16 padding
    /// for CBC with SHA-384; 5 + 8 + 16 for GCM in TLS 1.2; 5 + 1 + 16 in TLS 1.3).
    static let recordOverheadBound = 96

    /// Sends close_notify (the bytes are then in `takeOutput()`).
    public func close() {
        OpenSSLError.clear()
        _ = SSL_shutdown(ssl)
        ERR_clear_error()
    }

    // MARK: What was negotiated

    /// Client: the SNI sent; server: the SNI the client sent (nil when none).
    public var serverName: String? {
        SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name).map { String(cString: $0) }
    }

    /// Negotiated version, suite, group and ALPN; nil before the handshake has chosen a suite.
    public var negotiated: TLSNegotiatedParameters? {
        guard let cipher = SSL_get_current_cipher(ssl) else { return nil }
        let versionCode = Int(SSL_version(ssl))
        let code = UInt16(truncatingIfNeeded: SSL_CIPHER_get_protocol_id(cipher))
        let openSSLName = SSL_CIPHER_get_name(cipher).map { String(cString: $0) } ?? ""
        let standard = SSL_CIPHER_standard_name(cipher).map { String(cString: $0) } ?? openSSLName
        let kx = SSL_CIPHER_get_kx_nid(cipher)
        let forwardSecret = kx == NID_kx_ecdhe || kx == NID_kx_dhe || kx == NID_kx_any
        var group: String?
        if forwardSecret {
            let nid = copenssl_SSL_get_negotiated_group(ssl)
            if nid != 0 { group = SSL_group_to_name(ssl, nid).map { String(cString: $0) } }
        }
        var alpnPointer: UnsafePointer<UInt8>?
        var alpnLength: UInt32 = 0
        SSL_get0_alpn_selected(ssl, &alpnPointer, &alpnLength)
        let alpn = alpnPointer.flatMap { p in
            alpnLength > 0 ? String(decoding: UnsafeBufferPointer(start: p, count: Int(alpnLength)), as: UTF8.self) : nil
        }
        return TLSNegotiatedParameters(
            version: TLSVersion(wireCode: versionCode),
            versionName: SSL_get_version(ssl).map { String(cString: $0) } ?? "unknown",
            cipherSuiteCode: code, cipherSuiteName: standard, cipherSuiteOpenSSLName: openSSLName,
            isForwardSecret: forwardSecret, keyExchangeGroup: group, alpn: alpn, serverName: serverName)
    }

    /// The chain the peer sent, leaf first (empty before the peer's Certificate message).
    public var peerCertificateChain: [Certificate] {
        // On the client side SSL_get_peer_cert_chain includes the leaf; on the server it does not.
        var result: [Certificate] = []
        if context.configuration.role == .server, let leaf = SSL_get1_peer_certificate(ssl) {
            result.append(Certificate(taking: leaf))
        }
        if let stack = SSL_get_peer_cert_chain(ssl) {
            for i in 0..<copenssl_sk_X509_num(stack) {
                if let x = copenssl_sk_X509_value(stack, i) { result.append(Certificate(retaining: x)) }
            }
        }
        return result
    }

    /// The chain verification result OpenSSL computed during the handshake (`X509_V_OK` = 0).
    public var verifyResult: Int { Int(SSL_get_verify_result(ssl)) }

    // MARK: Callback hooks (called from the C callbacks in TLSContext.swift)

    func recordAlert(received alert: TLSAlert, fatal: Bool) {
        lastAlertReceived = (alert, fatal)
        if fatal { resumption?.invalidate() }
    }

    func recordAlert(sent alert: TLSAlert, fatal: Bool) {
        lastAlertSent = (alert, fatal)
        // After the end of input, OpenSSL's fatal alert only reports the missing close_notify; nobody receives it.
        if fatal, !endOfInput { resumption?.invalidate() }
    }
    func recordOfferedALPN(_ list: [String]) { offeredALPN = list }

    // MARK: Error classification

    /// nil when the call only needs more I/O; otherwise the typed failure.
    private func classify(_ rc: Int32, context label: String) -> TLSError? {
        let code = SSL_get_error(ssl, rc)
        switch code {
        case SSL_ERROR_WANT_READ, SSL_ERROR_WANT_WRITE:
            if endOfInput && code == SSL_ERROR_WANT_READ {
                ERR_clear_error()
                return .closedByPeer
            }
            return nil
        case SSL_ERROR_ZERO_RETURN:
            return .closedByPeer
        default:
            let error = OpenSSLError.drain(label)
            if let first = firstInputByte, !(0x14...0x17).contains(first) { return .notTLS }
            if let abort = pendingAbortAlert { return .aborted(abort) }
            if let received = lastAlertReceived, received.fatal { return .peerAlert(received.alert) }
            if error.entries.contains(where: { $0.reason.contains("unexpected eof") }) || (error.entries.isEmpty
                && endOfInput)
            {
                return .closedByPeer
            }
            return .localFailure(alertSent: lastAlertSent.flatMap { $0.fatal ? $0.alert : nil }, error: error)
        }
    }
}

@available(*, unavailable, message: "A TLSEngine is confined to the thread that drives its connection.")
extension TLSEngine: Sendable {}

/// What a finished (or far enough advanced) handshake negotiated.
public struct TLSNegotiatedParameters: Sendable, Hashable {
    /// nil for versions ATS has no name for (SSL 3).
    public var version: TLSVersion?
    /// OpenSSL's spelling: `TLSv1.2`.
    public var versionName: String
    /// The IANA code point (`SSL_CIPHER_get_protocol_id`), e.g. 0xC02F.
    public var cipherSuiteCode: UInt16
    /// IANA name (`TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256`).
    public var cipherSuiteName: String
    /// OpenSSL's name (`ECDHE-RSA-AES128-GCM-SHA256`).
    public var cipherSuiteOpenSSLName: String
    /// ECDHE/DHE key exchange, or TLS 1.3.
    public var isForwardSecret: Bool
    /// Key-exchange group as OpenSSL names it (`x25519`, `secp256r1`); nil for static RSA.
    public var keyExchangeGroup: String?
    public var alpn: String?
    public var serverName: String?
}
