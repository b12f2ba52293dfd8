/// How the body of one HTTP/1 message is delimited on the wire (RFC 9112 §6.3).
public enum HTTP1BodyFraming: Equatable, Sendable {
    /// No body at all (HEAD responses, 1xx/204/304, requests without framing headers).
    case none
    /// Exactly this many bytes.
    case contentLength(Int)
    /// Chunked transfer coding, possibly with trailers.
    case chunked
    /// Everything until the peer closes the connection (responses only).
    case untilClose
    /// The connection stops speaking HTTP/1 after this head (101, or 2xx to CONNECT).
    case switchProtocols
}

/// The framing rules shared by the parser and the serializer.
public enum HTTP1Framing {
    /// RFC 9112 §9.3: HTTP/1.1 is persistent unless `Connection: close`; HTTP/1.0 only with `keep-alive`.
    public static func keepAlive(version: HTTPVersion, headers: HTTPHeaders) -> Bool {
        if headers.containsToken(.close, for: .connection) { return false }
        if version.major == 1 && version.minor == 0 { return headers.containsToken(.keepAlive, for: .connection) }
        return true
    }

    /// The framing of a request body, validated against smuggling: CL together with TE, differing CLs, and a final
    /// coding other than chunked are all rejected.
    public static func forRequest(_ head: HTTPRequestHead, limits: HTTP1Limits = .init()) throws(HTTP1Error)
        -> HTTP1BodyFraming
    {
        try framing(version: head.version, headers: head.headers, isRequest: true, limits: limits)
    }

    /// The framing of a response body, which depends on the method of the request it answers.
    public static func forResponse(
        _ head: HTTPResponseHead, requestMethod: String, limits: HTTP1Limits = .init()
    ) throws(HTTP1Error) -> HTTP1BodyFraming {
        if head.status == 101 { return .switchProtocols }
        if requestMethod == "CONNECT" && head.status >= 200 && head.status < 300 { return .switchProtocols }
        if head.status < 200 || head.status == 204 || head.status == 304 || requestMethod == "HEAD" {
            return .none
        }
        return try framing(version: head.version, headers: head.headers, isRequest: false, limits: limits)
    }

    private static func framing(version: HTTPVersion, headers: HTTPHeaders, isRequest: Bool, limits: HTTP1Limits)
        throws(HTTP1Error) -> HTTP1BodyFraming
    {
        let errorStatus = isRequest ? 400 : 502
        let hasTE = headers.contains(.transferEncoding)
        let hasCL = headers.contains(.contentLength)
        if hasTE {
            if hasCL {
                throw HTTP1Error(
                    .remote, .contentLengthWithTransferEncoding, status: errorStatus,
                    detail: "message has both Content-Length and Transfer-Encoding")
            }
            if version.minor == 0 {
                throw HTTP1Error(
                    .remote, .transferEncodingInHTTP10, status: errorStatus,
                    detail: "Transfer-Encoding in an HTTP/1.0 message")
            }
            let codings = headers.listTokens(for: .transferEncoding)
            // Only `chunked` is understood; a final coding other than chunked cannot be delimited safely. Other codings
            // before chunked (e.g. "gzip, chunked") stay in the body untouched, which is what a relaying proxy wants.
            guard codings.last == "chunked", codings.filter({ $0 == "chunked" }).count == 1 else {
                throw HTTP1Error(
                    .remote, .unsupportedTransferEncoding, status: isRequest ? 501 : 502,
                    detail: "Transfer-Encoding must end with exactly one chunked: \(codings.joined(separator: ", "))")
            }
            return .chunked
        }
        if hasCL {
            var length: Int?
            // The list elements of every Content-Length field (`listTokens`), read straight from the bytes: this runs
            // for nearly every message, and digits need neither lower-casing nor Strings.
            try headers.forEachValue(of: .contentLength) { (field) throws(HTTP1Error) in
                try HTTPHeaders.forEachListElement(field) { (token) throws(HTTP1Error) in
                    var value = 0
                    var digits = 0
                    for byte in token {
                        guard byte >= 0x30 && byte <= 0x39, digits < 18 else {
                            throw HTTP1Error(
                                .remote, .invalidContentLength, status: errorStatus,
                                detail: "invalid Content-Length \(HTTP1Syntax.string(token).asciiLowercased())")
                        }
                        value = value * 10 + Int(byte - 0x30)
                        digits += 1
                    }
                    if let length, length != value {
                        throw HTTP1Error(
                            .remote, .conflictingContentLength, status: errorStatus,
                            detail: "Content-Length values differ: \(length) and \(value)")
                    }
                    length = value
                }
            }
            guard let length else {
                throw HTTP1Error(.remote, .invalidContentLength, status: errorStatus, detail: "empty Content-Length")
            }
            if length > limits.maxBodyBytes {
                throw HTTP1Error(
                    .remote, .bodyTooLarge, status: isRequest ? 413 : 502,
                    detail: "Content-Length \(length) exceeds the limit \(limits.maxBodyBytes)")
            }
            return length == 0 ? .none : .contentLength(length)
        }
        return isRequest ? .none : .untilClose
    }
}

/// Resource limits for parsing. Every limit breach is a remote protocol error with a fitting status.
public struct HTTP1Limits: Equatable, Sendable {
    /// Maximum bytes of the start line (request line → 414, status line → 502).
    public var maxStartLineBytes: Int = 8 * 1024
    /// Maximum bytes of the whole head: start line plus header fields (→ 431).
    public var maxHeaderSectionBytes: Int = 64 * 1024
    /// Maximum number of header fields (→ 431). Also bounds trailer fields.
    public var maxHeaderCount: Int = 256
    /// Maximum bytes of one chunk-size line including extensions.
    public var maxChunkLineBytes: Int = 4 * 1024
    /// Maximum declared Content-Length (→ 413). Chunked bodies stream and are not limited here.
    public var maxBodyBytes: Int = Int.max

    public init() {}
}
