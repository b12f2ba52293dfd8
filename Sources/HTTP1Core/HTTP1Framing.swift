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

    /// The framing of a request body, validated against smuggling: CL together with TE, differing CLs, and any
    /// transfer coding but `chunked` alone are all rejected.
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
            // Only `chunked` is implemented (RFC 9112 §6.1: a coding the server does not understand gets 501, as
            // nginx answers). A final coding other than chunked cannot be delimited at all, and one before it
            // (`identity, chunked`, `gzip, chunked`) is a coding a next hop may implement differently, or not at all.
            guard codings == ["chunked"] else {
                throw HTTP1Error(
                    .remote, .unsupportedTransferEncoding, status: isRequest ? 501 : 502,
                    detail: "Transfer-Encoding other than chunked alone is not implemented: "
                        + codings.joined(separator: ", "))
            }
            return .chunked
        }
        if hasCL {
            // Exactly one Content-Length field holding one decimal number, or the message is refused. RFC 9110 §8.6
            // lets a recipient accept `42, 42` or a repeated identical field, but we forward heads as they came: a
            // next hop that reads the other copy, or an empty one as 0, would frame the body differently (request
            // smuggling, RFC 9112 §6.3). nginx refuses a repeated Content-Length the same way.
            var length: Int?
            var fields = 0
            try headers.forEachValue(of: .contentLength) { (field) throws(HTTP1Error) in
                fields += 1
                guard fields == 1 else {
                    throw HTTP1Error(
                        .remote, .conflictingContentLength, status: errorStatus,
                        detail: "more than one Content-Length field")
                }
                length = try contentLengthValue(field, errorStatus: errorStatus)
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

    /// The value of one Content-Length field: digits only after OWS is trimmed, at most 18 of them. A list
    /// (`42, 42`), an empty value, a sign or anything else is refused.
    private static func contentLengthValue(_ field: ArraySlice<UInt8>, errorStatus: Int) throws(HTTP1Error) -> Int {
        var lo = field.startIndex
        var hi = field.endIndex
        while lo < hi, field[lo] == 0x20 || field[lo] == 0x09 { lo += 1 }
        while hi > lo, field[hi - 1] == 0x20 || field[hi - 1] == 0x09 { hi -= 1 }
        guard lo < hi else {
            throw HTTP1Error(.remote, .invalidContentLength, status: errorStatus, detail: "empty Content-Length")
        }
        if field[lo..<hi].contains(UInt8(ascii: ",")) {
            throw HTTP1Error(
                .remote, .conflictingContentLength, status: errorStatus,
                detail: "a list of Content-Length values (\(HTTP1Syntax.string(field[lo..<hi])))")
        }
        var value = 0
        for byte in field[lo..<hi] {
            guard byte >= 0x30 && byte <= 0x39, hi - lo <= 18 else {
                throw HTTP1Error(
                    .remote, .invalidContentLength, status: errorStatus,
                    detail: "invalid Content-Length \(HTTP1Syntax.string(field[lo..<hi]).asciiLowercased())")
            }
            value = value * 10 + Int(byte - 0x30)
        }
        return value
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
