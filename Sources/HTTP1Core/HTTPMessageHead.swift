/// The head of an HTTP/1.x request: request line plus header section.
public struct HTTPRequestHead: Equatable, Sendable {
    /// The method token exactly as received (methods are case-sensitive, RFC 9110 §9.1).
    public var method: String
    /// The request-target exactly as received; see ``HTTPRequestTarget`` to interpret it.
    public var target: String
    public var version: HTTPVersion
    public var headers: HTTPHeaders

    public init(method: String, target: String, version: HTTPVersion = .http1_1, headers: HTTPHeaders = []) {
        self.method = method
        self.target = target
        self.version = version
        self.headers = headers
    }

    /// Whether the client allows the connection to stay open after this exchange (RFC 9112 §9.3).
    public var keepAlive: Bool { HTTP1Framing.keepAlive(version: version, headers: headers) }

    /// Whether the client sent `Expect: 100-continue` and waits for an interim response before the body.
    public var expectsContinue: Bool {
        version.minor >= 1 && headers.containsToken(.continue100, for: .expect)
    }

    /// Whether this request may switch protocols when answered (CONNECT → 2xx tunnel, Upgrade → 101).
    public var mayChangeProtocol: Bool {
        method == "CONNECT" || headers.contains(.upgrade)
    }
}

/// The head of an HTTP/1.x response: status line plus header section. Interim (1xx) responses are heads too.
public struct HTTPResponseHead: Equatable, Sendable {
    public var version: HTTPVersion
    public var status: Int
    /// The reason phrase as received; may be empty.
    public var reason: String
    public var headers: HTTPHeaders

    public init(version: HTTPVersion = .http1_1, status: Int, reason: String = "", headers: HTTPHeaders = []) {
        self.version = version
        self.status = status
        self.reason = reason
        self.headers = headers
    }

    /// Whether this is an interim (1xx) response, other than 101 which ends HTTP/1 on the connection.
    public var isInterim: Bool { status >= 100 && status < 200 && status != 101 }

    /// Whether the server allows the connection to stay open after this exchange (RFC 9112 §9.3).
    public var keepAlive: Bool { HTTP1Framing.keepAlive(version: version, headers: headers) }
}
