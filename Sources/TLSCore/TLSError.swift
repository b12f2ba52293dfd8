import ATSPolicy

/// Why a TLS operation failed.
public enum TLSError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The peer sent a fatal alert, e.g. `protocol_version (70)` when it refuses every offered version.
    case peerAlert(TLSAlert)
    /// Our side failed (OpenSSL's reasons in `error`); `alertSent` is the alert we told the peer, if any.
    case localFailure(alertSent: TLSAlert?, error: OpenSSLError)
    /// The handshake was aborted on purpose with this alert (`TLSEngine.abortHandshake(with:)`).
    case aborted(TLSAlert)
    /// The transport ended (EOF) before the handshake finished or without close_notify.
    case closedByPeer
    /// The peer's first bytes were not a TLS record.
    case notTLS

    public var description: String {
        switch self {
        case .peerAlert(let a): "peer sent alert \(a)"
        case .localFailure(let sent, let error):
            sent.map { "\(error) (sent alert \($0))" } ?? error.description
        case .aborted(let a): "handshake aborted with alert \(a)"
        case .closedByPeer: "connection closed by peer"
        case .notTLS: "peer did not speak TLS"
        }
    }
}
