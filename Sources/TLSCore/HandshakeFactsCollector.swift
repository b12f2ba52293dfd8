import ATSPolicy
import Foundation

/// Turns a finished or failed `TLSEngine` into the `HandshakeFacts` the ATS engine judges.
public struct HandshakeFactsCollector: Sendable {
    public let trust: TrustEvaluator

    public init(trust: TrustEvaluator) { self.trust = trust }

    /// Facts of the handshake `engine` ran against `host`. Pass the failure when the handshake did not complete.
    /// When the engine saw no certificate (the handshake failed before it), `fallbackChain` (e.g. the chain a
    /// permissive probe received) is judged instead, so certificate problems are reported alongside the failure.
    ///
    /// A handshake that resumed a cached session (`TLSEngine.offerSession`) is judged on the certificate facts of
    /// the full handshake that established the session, with trust evaluated again when a certificate's validity
    /// began or ended since; the negotiated parameters are this handshake's. A full handshake's certificate facts
    /// are recorded on the engine, for the sessions it produces.
    public func facts(
        from engine: TLSEngine, host: String, failure: TLSError? = nil, capabilities: ServerCapabilities? = nil,
        fallbackChain: [Certificate] = [], now: Date = Date()
    ) -> HandshakeFacts {
        let peer: PeerCertificateFacts
        if failure == nil, let resumed = engine.resumedPeerFacts {
            peer = resumed.trustHolds(at: now) ? resumed : peerFacts(chain: resumed.chain, at: now)
        } else {
            let seen = engine.peerCertificateChain
            peer = peerFacts(chain: seen.isEmpty ? fallbackChain : seen, at: now)
            if failure == nil, !seen.isEmpty { engine.recordPeerFacts(peer) }
        }
        let chainFacts = peer.certificates
        let negotiated = failure == nil ? engine.negotiated : nil
        let trustResult: TrustResult = chainFacts.isEmpty ? .untrusted(.noCertificate) : peer.trust.result
        return HandshakeFacts(
            failure: failure.map(HandshakeFactsCollector.handshakeFailure),
            version: negotiated?.version,
            cipherSuiteCode: negotiated?.cipherSuiteCode,
            cipherSuiteName: negotiated.map { n in
                CipherSuite.lookup(code: n.cipherSuiteCode)?.ianaName ?? n.cipherSuiteName
            },
            keyExchangeGroup: negotiated?.keyExchangeGroup,
            alpn: negotiated?.alpn,
            chain: chainFacts,
            trust: trustResult,
            hostnameMatches: chainFacts.first.map { CertificateInspector.hostnameMatches(host, leaf: $0) } ?? false,
            observedAt: now,
            serverCapabilities: capabilities)
    }

    /// Everything ATS reads from `chain` (leaf first) at `date`.
    public func peerFacts(chain: [Certificate], at date: Date = Date()) -> PeerCertificateFacts {
        PeerCertificateFacts(
            chain: chain, certificates: chain.map(CertificateInspector.facts), trust: trust.evaluate(chain: chain, at: date),
            evaluatedAt: date)
    }

    /// Facts for a connection that never produced a TLS engine result (e.g. TCP connect failed).
    public func facts(failure: HandshakeFailure, capabilities: ServerCapabilities? = nil, now: Date = Date())
        -> HandshakeFacts
    {
        HandshakeFacts(
            failure: failure, version: nil, cipherSuiteCode: nil, cipherSuiteName: nil, keyExchangeGroup: nil,
            alpn: nil, chain: [], trust: .untrusted(.noCertificate), hostnameMatches: false, observedAt: now,
            serverCapabilities: capabilities)
    }

    /// Maps an engine failure to the ATS vocabulary.
    public static func handshakeFailure(_ error: TLSError) -> HandshakeFailure {
        switch error {
        case .peerAlert(let alert): .alertReceived(alert.code)
        case .localFailure(let sent, let e):
            .localError(sent.map { "\(e.description) (sent \($0))" } ?? e.description)
        case .aborted(let alert): .localError("aborted with \(alert)")
        case .closedByPeer: .closedDuringHandshake
        case .notTLS: .notTLS
        }
    }
}

/// What one probe handshake learned.
public struct ProbeOutcome: Sendable, Hashable {
    /// Negotiated parameters when the handshake completed; nil when it failed.
    public var negotiated: TLSNegotiatedParameters?
    public var failure: TLSError?
    /// The chain the server sent, leaf first (empty when the handshake failed before it).
    public var chain: [Certificate]

    public init(negotiated: TLSNegotiatedParameters?, failure: TLSError?, chain: [Certificate] = []) {
        self.negotiated = negotiated
        self.failure = failure
        self.chain = chain
    }
}

/// The plan for probing a server's capabilities, and how to summarise the results. The caller runs each
/// handshake over its own transport (`TLSEngine.runHandshake`).
public enum ServerProbe {
    /// One permissive configuration per version, TLS 1.0 to 1.3.
    public static let versionProbes: [(version: TLSVersion, configuration: TLSConfiguration)] =
        TLSVersion.allCases.map { ($0, UpstreamTLS.permissiveProbeConfiguration(version: $0)) }

    /// Offers only forward-secret suites (all versions); run when no version probe negotiated one.
    public static let forwardSecrecyProbe = UpstreamTLS.permissiveProbeConfiguration(forwardSecretOnly: true)

    /// Summarises the version probes (and the optional forward-secrecy probe).
    public static func capabilities(
        versionOutcomes: [TLSVersion: ProbeOutcome], forwardSecrecyOutcome: ProbeOutcome? = nil
    ) -> ServerCapabilities {
        let supported = versionOutcomes.filter { $0.value.negotiated != nil }.keys.sorted()
        let best = supported.last.flatMap { versionOutcomes[$0]?.negotiated }
        let forwardSecret =
            versionOutcomes.values.contains { $0.negotiated?.isForwardSecret == true }
            || forwardSecrecyOutcome?.negotiated?.isForwardSecret == true
        return ServerCapabilities(
            supportedVersions: supported, preferredCipherCode: best?.cipherSuiteCode,
            preferredCipherName: best.map { CipherSuite.lookup(code: $0.cipherSuiteCode)?.ianaName ?? $0.cipherSuiteName },
            supportsForwardSecrecy: forwardSecret)
    }

    /// True when every version outcome already settles forward secrecy (one of them negotiated an FS suite).
    public static func needsForwardSecrecyProbe(_ versionOutcomes: [TLSVersion: ProbeOutcome]) -> Bool {
        !versionOutcomes.values.contains { $0.negotiated?.isForwardSecret == true }
            && versionOutcomes.values.contains { $0.negotiated != nil }
    }
}

extension TLSEngine {
    /// Drives the handshake over a caller-supplied transport: `send` writes bytes, `receive` returns the next
    /// bytes (nil at end of stream). Returns the final step; `.needsMoreInput` only when `maxRounds` receives
    /// were not enough.
    public func runHandshake(
        maxRounds: Int = 200, send: ([UInt8]) throws -> Void, receive: () throws -> [UInt8]?
    ) rethrows -> HandshakeStep {
        for _ in 0..<maxRounds {
            let step = handshake()
            if hasOutput { try send(takeOutput()) }
            guard step == .needsMoreInput else { return step }
            if let bytes = try receive() {
                feed(bytes)
            } else {
                feedEndOfInput()
            }
        }
        return handshake()
    }
}
