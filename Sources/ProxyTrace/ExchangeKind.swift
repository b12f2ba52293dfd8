/// What an exchange record stands for: a request (with its response, or a refused load), or a CONNECT that made no
/// request through the proxy. Readers tell them apart by this, never by the version text.
///
/// At the record's boundaries (the console line, the JSON `exchange` event, a capture's `http_version` column) a
/// tunnel and a refused handshake carry a label in place of an HTTP version, `TUNNEL` and `TLS`, as they always
/// have; `recorded(method:version:)` maps a stored record back, so captures written before the kind existed read
/// the same.
public enum ExchangeKind: String, Sendable, Codable {
    /// A request and its response, or a request the proxy answered or refused itself: `httpVersion` is the
    /// protocol spoken.
    case http
    /// A CONNECT relayed as a raw tunnel, not intercepted (passthrough, a pin check, a client that spoke no TLS).
    case tunnel
    /// A CONNECT whose TLS handshake with the client was refused (`--block tls`, or a device that refused what
    /// `--ats mirror` showed it): no request was made.
    case refusedHandshake

    /// The text recorded in place of an HTTP version: `TUNNEL`, `TLS`; nil for `http`, which records its own.
    public var versionLabel: String? {
        switch self {
        case .http: nil
        case .tunnel: "TUNNEL"
        case .refusedHandshake: "TLS"
        }
    }

    /// The kind of a record stored with this method and version text (a capture's row, a JSON event).
    public static func recorded(method: String, version: String) -> ExchangeKind {
        guard method == "CONNECT" else { return .http }
        switch version {
        case "TUNNEL": return .tunnel
        case "TLS": return .refusedHandshake
        default: return .http
        }
    }
}
