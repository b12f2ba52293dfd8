import ATSPolicy
import Foundation

/// What a full handshake learned from the server's certificates: the chain, each certificate's facts and the trust
/// evaluation. Kept with the sessions that handshake produced, since a resumed handshake carries no certificate.
public struct PeerCertificateFacts: Sendable {
    /// Leaf first, as served (kept so trust can be evaluated again, see `trustHolds(at:)`).
    public var chain: [Certificate]
    public var certificates: [CertificateFacts]
    public var trust: TrustEvaluation
    /// When `trust` was evaluated.
    public var evaluatedAt: Date

    public init(chain: [Certificate], certificates: [CertificateFacts], trust: TrustEvaluation, evaluatedAt: Date) {
        self.chain = chain
        self.certificates = certificates
        self.trust = trust
        self.evaluatedAt = evaluatedAt
    }

    /// Whether `trust` is what an evaluation at `date` would find: both times lie in the validity window of every
    /// certificate the evaluation looked at, so no date check can come out differently. Otherwise (a certificate
    /// expired since, or was already out of date) the chain must be evaluated again.
    public func trustHolds(at date: Date) -> Bool {
        let window = trust.validFrom...max(trust.validFrom, trust.validUntil)
        return trust.validFrom <= trust.validUntil && window.contains(evaluatedAt) && window.contains(date)
    }
}
