import ProxyTrace

/// What is known about a live exchange at a rule point, for `FilterCondition.matches(_:)`. A rule stage fills in
/// what its point knows and leaves the rest nil or empty; `FilterCondition.unknownKeys(at:)` refuses, when a rule is
/// read, a condition on a field its point never knows, so a nil here never silently turns a rule off.
///
/// | point        | known                                                                     |
/// |--------------|---------------------------------------------------------------------------|
/// | `connection` | host, port                                                                |
/// | `request`    | the above, method, URL, path, request headers                             |
/// | `response`   | the above, status, response headers, verdict, error codes, interruption   |
public struct ExchangeFacts: Sendable, Equatable {
    /// The latest point the facts come from.
    public var point: FilterPoint
    /// The host, lowercased by the initializer (`host:` compares it so).
    public var host: String
    public var port: Int
    /// The request method as sent; nil at the connection point.
    public var method: String?
    /// The absolute URL, as the capture records it (what `text:` searches); nil at the connection point.
    public var url: String?
    /// The path and query (`/v1/users?page=2`); nil at the connection point.
    public var path: String?
    public var requestHeaders: [(name: String, value: String)]
    /// The response status; nil before the response point, or when there is none (a blocked or failed exchange).
    public var status: Int?
    public var responseHeaders: [(name: String, value: String)]
    /// The ATS verdict; nil before the response point.
    public var outcome: ExchangeSummary.ATSOutcome?
    /// The codes of the exchange's errors (NSURLError `-1200`, SSL `-9836`).
    public var errorCodes: [Int]
    /// The exchange ended before its end (a cut-off body, a reset).
    public var interrupted: Bool

    public init(
        point: FilterPoint, host: String, port: Int, method: String? = nil, url: String? = nil, path: String? = nil,
        requestHeaders: [(name: String, value: String)] = [], status: Int? = nil,
        responseHeaders: [(name: String, value: String)] = [], outcome: ExchangeSummary.ATSOutcome? = nil,
        errorCodes: [Int] = [], interrupted: Bool = false
    ) {
        self.point = point
        self.host = host.lowercased()
        self.port = port
        self.method = method
        self.url = url
        self.path = path
        self.requestHeaders = requestHeaders
        self.status = status
        self.responseHeaders = responseHeaders
        self.outcome = outcome
        self.errorCodes = errorCodes
        self.interrupted = interrupted
    }

    public static func == (a: ExchangeFacts, b: ExchangeFacts) -> Bool {
        a.point == b.point && a.host == b.host && a.port == b.port && a.method == b.method && a.url == b.url
            && a.path == b.path && a.requestHeaders.elementsEqual(b.requestHeaders, by: ==) && a.status == b.status
            && a.responseHeaders.elementsEqual(b.responseHeaders, by: ==) && a.outcome == b.outcome
            && a.errorCodes == b.errorCodes && a.interrupted == b.interrupted
    }
}

/// Where in an exchange a condition is evaluated: each point knows more than the one before it.
public enum FilterPoint: Int, Sendable, Comparable, CaseIterable, CustomStringConvertible {
    /// Before the upstream is contacted: the host and port (a CONNECT's or the SNI's).
    case connection
    /// The request head has arrived (and, at the request-body point, its body: no filter key reads it).
    case request
    /// The response head has arrived (or the exchange failed without one).
    case response

    public static func < (a: FilterPoint, b: FilterPoint) -> Bool { a.rawValue < b.rawValue }

    public var description: String {
        switch self {
        case .connection: "connection"
        case .request: "request"
        case .response: "response"
        }
    }
}
