import ATSPolicy
import Foundation
import TLSCore

/// How `--block tls` reproduces a violation on the client's own handshake.
enum BlockPlan: Equatable {
    /// Refuse the handshake with this fatal alert (version and cipher violations: the client sees what the app's
    /// stack would see from a server that cannot agree).
    case alert(TLSAlert)
    /// Complete the handshake with a leaf that carries the same flaw, so the client's own trust evaluation fails.
    case flawedLeaf(LeafOptions, flaw: String)

    init(for violation: ATSViolation?, upstreamLeafName: String?, now: Date) {
        // Whole days keep flawed leaves cacheable (one per host and flaw per day).
        let day = Date(timeIntervalSince1970: (now.timeIntervalSince1970 / 86_400).rounded(.down) * 86_400)
        switch violation?.kind {
        case .tlsVersionTooLow?, .tlsVersionRefusedByOS?:
            self = .alert(.protocolVersion)
        case .cipherSuiteNotAllowed?, .noSharedCipherOrVersion?, .notTLS?, .connectionFailed?, .timedOut?,
            .unreachable?, nil:
            self = .alert(.handshakeFailure)
        case .certificateTransparencyMissing?:
            // A user-installed root is exempt from CT (reference §3.5): no certificate can make the client's
            // evaluation fail for CT, so the handshake is refused instead.
            self = .alert(.handshakeFailure)
        case .weakKey?:
            self = .flawedLeaf(.weakRSA, flaw: "RSA-1024")
        case .weakSignatureHash?:
            self = .flawedLeaf(.sha1Signed, flaw: "SHA-1 signed")
        case .untrustedRoot?, .selfSigned?, .pinMismatch?, .invalidChain?:
            self = .flawedLeaf(.untrusted, flaw: "issued by an untrusted CA")
        case .hostnameMismatch?:
            self = .flawedLeaf(.wrongHost(upstreamLeafName ?? "wrong.host.invalid"), flaw: "issued for another host name")
        case .expired?:
            self = .flawedLeaf(.expired(now: day), flaw: "expired")
        case .notYetValid?:
            self = .flawedLeaf(.notYetValid(now: day), flaw: "not yet valid")
        case .missingServerAuthEKU?:
            self = .flawedLeaf(LeafOptions(includeServerAuthEKU: false), flaw: "without the serverAuth EKU")
        case .validityTooLong?:
            self = .flawedLeaf(
                LeafOptions(notBefore: day.addingTimeInterval(-86_400), notAfter: day.addingTimeInterval(900 * 86_400)),
                flaw: "valid for 900 days")
        case .cleartextNotAllowed?:
            self = .alert(.handshakeFailure)
        }
    }
}
