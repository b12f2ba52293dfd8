/// An HTTP/1.x request head as the relay bridges it to and from HTTP/2.
///
/// A deliberately small type of this module; the proxy maps it to and from HTTP1Core's own head types.
public struct H1RequestHead: Sendable, Hashable {
    /// Request method, e.g. `GET`.
    public var method: String
    /// Request target: origin-form (`/a?b`), absolute-form (`http://h/a`), authority-form (`h:443`) or `*`.
    public var target: String
    /// Protocol version token, e.g. `HTTP/1.1`.
    public var version: String
    /// Header fields in wire order, names as written.
    public var headers: [H2Header]

    /// Creates a request head.
    public init(method: String, target: String, version: String = "HTTP/1.1", headers: [H2Header]) {
        self.method = method
        self.target = target
        self.version = version
        self.headers = headers
    }
}

/// An HTTP/1.x response head as the relay bridges it to and from HTTP/2.
public struct H1ResponseHead: Sendable, Hashable {
    /// Status code, 100...999.
    public var status: Int
    /// Reason phrase (may be empty).
    public var reason: String
    /// Protocol version token, e.g. `HTTP/1.1`.
    public var version: String
    /// Header fields in wire order, names as written.
    public var headers: [H2Header]

    /// Creates a response head.
    public init(status: Int, reason: String, version: String = "HTTP/1.1", headers: [H2Header]) {
        self.status = status
        self.reason = reason
        self.version = version
        self.headers = headers
    }
}

/// Why a head could not be translated between HTTP/1 and HTTP/2.
public enum H2TranslationError: Error, Sendable, Equatable {
    /// A required pseudo-header (`:method`, `:scheme`, `:path`, `:authority`, `:status`) is absent.
    case missingPseudoHeader(String)
    /// A pseudo-header appears twice.
    case duplicatePseudoHeader(String)
    /// A pseudo-header that does not belong in this message (e.g. `:status` in a request, `:protocol`).
    case unexpectedPseudoHeader(String)
    /// `:status` is not a three-digit code.
    case invalidStatus(String)
    /// An HTTP/1 request has neither a Host field nor an absolute-form target, so `:authority` is unknown.
    case missingHost
    /// The request target cannot be expressed as HTTP/2 pseudo-headers.
    case invalidTarget(String)
    /// An extended CONNECT (RFC 8441) for a protocol the proxy does not relay: only `websocket` is. An `h2c` one
    /// would turn the origin's connection into HTTP/2 that nobody parses.
    case unsupportedProtocol(String)
    /// `:authority` (or `host`) is not host[:port] (userinfo, a list, RFC 9113 §8.3.1), or `host` names another
    /// host than `:authority`: the proxy and the origin could read different hosts.
    case invalidAuthority(String)
}
