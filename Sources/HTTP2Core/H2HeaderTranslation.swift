import HTTP1Core

/// Pure translations between HTTP/2 header lists and HTTP/1.1 heads for the relay (RFC 9113 §8.2–8.3).
///
/// Rules applied:
/// - Connection-specific fields are dropped both ways: Connection, Keep-Alive, Proxy-Connection,
///   Transfer-Encoding, Upgrade, any field named in a Connection header, and TE unless it is "trailers"
///   (RFC 9113 §8.2.2).
/// - `:authority` and Host map onto each other; both must be host[:port] (no userinfo), and a request that carries
///   both must name the same host in each, or it is malformed (RFC 9113 §8.3.1): the proxy and the origin would
///   read different hosts.
/// - An extended CONNECT (`:protocol`, RFC 8441) is relayed for `websocket` only.
/// - Cookie crumbs are joined with "; " for HTTP/1 (RFC 9113 §8.2.3).
/// - Names are lowercased for HTTP/2 (RFC 9113 §8.2.1).
public enum H2HeaderTranslation {
    /// Fields that describe one hop's connection and never cross a protocol boundary.
    public static let connectionSpecificFields: Set<String> = [
        "connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade",
    ]

    // MARK: Requests

    /// HTTP/2 request header list → HTTP/1.1 request head.
    ///
    /// The target is `:path` (or `:authority` for CONNECT); Host comes first, from `:authority`. An extended CONNECT
    /// (`:protocol`, RFC 8441) becomes a GET of `:path` with `Connection: Upgrade` and `Upgrade: <protocol>`.
    public static func h1Request(from fields: [H2Header]) throws(H2TranslationError) -> H1RequestHead {
        var pseudo: [String: String] = [:]
        for field in fields where field.isPseudo {
            guard [":method", ":scheme", ":authority", ":path", ":protocol"].contains(field.name) else {
                throw .unexpectedPseudoHeader(field.name)
            }
            guard pseudo.updateValue(field.value, forKey: field.name) == nil else {
                throw .duplicatePseudoHeader(field.name)
            }
        }
        guard var method = pseudo[":method"] else { throw .missingPseudoHeader(":method") }
        let regular = fields.filter { !$0.isPseudo }
        let hostField = regular.first(named: "host")
        let authority = pseudo[":authority"] ?? hostField
        if let authority, !HTTPRequestTarget.isValidAuthority(authority) { throw .invalidAuthority(authority) }
        if let stated = pseudo[":authority"], let hostField, hostField.lowercased() != stated.lowercased() {
            throw .invalidAuthority("\(stated) with host \(hostField)")
        }
        let target: String
        var upgrade: String?
        if let upgradeTo = pseudo[":protocol"] {
            // RFC 8441 §4/§5: an extended CONNECT is HTTP/1.1's GET with Upgrade (the WebSocket handshake).
            guard method == "CONNECT" else { throw .unexpectedPseudoHeader(":protocol") }
            guard upgradeTo.lowercased() == "websocket" else { throw .unsupportedProtocol(upgradeTo) }
            guard pseudo[":scheme"] != nil else { throw .missingPseudoHeader(":scheme") }
            guard let path = pseudo[":path"], !path.isEmpty else { throw .missingPseudoHeader(":path") }
            method = "GET"
            target = path
            upgrade = upgradeTo
        } else if method == "CONNECT" {
            guard let authority = pseudo[":authority"] else { throw .missingPseudoHeader(":authority") }
            target = authority
        } else {
            guard pseudo[":scheme"] != nil else { throw .missingPseudoHeader(":scheme") }
            guard let path = pseudo[":path"], !path.isEmpty else { throw .missingPseudoHeader(":path") }
            target = path
        }
        guard let authority else { throw .missingHost }

        var headers = [H2Header("host", authority)]
        var cookieIndex: Int?
        for field in withoutConnectionSpecific(regular) where field.name.lowercased() != "host" {
            if field.name.lowercased() == "cookie" {
                if let cookieIndex {
                    headers[cookieIndex].value += "; " + field.value
                    continue
                }
                cookieIndex = headers.count
            }
            headers.append(field)
        }
        if let upgrade {
            headers += [H2Header("connection", "Upgrade"), H2Header("upgrade", upgrade)]
        }
        return H1RequestHead(method: method, target: target, headers: headers)
    }

    /// HTTP/1.1 request head → HTTP/2 request header list (pseudo-headers first, lowercase names).
    ///
    /// - Parameter scheme: `:scheme` for origin-form targets (`https` for intercepted TLS); an absolute-form
    ///   target brings its own.
    public static func h2Request(from head: H1RequestHead, scheme: String) throws(H2TranslationError) -> [H2Header] {
        let host = head.headers.first(named: "host")
        var result: [H2Header]
        if head.method == "CONNECT" {
            let authority = head.target.isEmpty ? host : head.target
            guard let authority, !authority.isEmpty else { throw .missingHost }
            result = [H2Header(":method", "CONNECT"), H2Header(":authority", authority)]
        } else if head.target.hasPrefix("/") || head.target == "*" {
            guard let host, !host.isEmpty else { throw .missingHost }
            result = [
                H2Header(":method", head.method), H2Header(":scheme", scheme), H2Header(":authority", host),
                H2Header(":path", head.target),
            ]
        } else if let schemeEnd = head.target.firstRange(of: "://") {
            // absolute-form, as a client talks to a forward proxy
            let targetScheme = head.target[..<schemeEnd.lowerBound].lowercased()
            let rest = head.target[schemeEnd.upperBound...]
            let pathStart = rest.firstIndex { $0 == "/" || $0 == "?" } ?? rest.endIndex
            let authority = String(rest[..<pathStart])
            guard !authority.isEmpty, !targetScheme.isEmpty else { throw .invalidTarget(head.target) }
            var path = String(rest[pathStart...])
            if !path.hasPrefix("/") { path = "/" + path }
            result = [
                H2Header(":method", head.method), H2Header(":scheme", targetScheme),
                H2Header(":authority", authority), H2Header(":path", path),
            ]
        } else {
            throw .invalidTarget(head.target)
        }
        for field in withoutConnectionSpecific(head.headers) where field.name.lowercased() != "host" {
            result.append(H2Header(field.name.lowercased(), field.value))
        }
        return result
    }

    // MARK: Responses

    /// HTTP/2 response header list → HTTP/1.1 response head (reason phrase from the status).
    public static func h1Response(from fields: [H2Header]) throws(H2TranslationError) -> H1ResponseHead {
        var status: String?
        for field in fields where field.isPseudo {
            guard field.name == ":status" else { throw .unexpectedPseudoHeader(field.name) }
            guard status == nil else { throw .duplicatePseudoHeader(":status") }
            status = field.value
        }
        guard let status else { throw .missingPseudoHeader(":status") }
        guard status.utf8.count == 3, let code = Int(status), code >= 100 else { throw .invalidStatus(status) }
        let headers = withoutConnectionSpecific(fields.filter { !$0.isPseudo })
        return H1ResponseHead(status: code, reason: reasonPhrase(code), headers: headers)
    }

    /// HTTP/1.1 response head → HTTP/2 response header list (`:status` first, lowercase names).
    public static func h2Response(from head: H1ResponseHead) -> [H2Header] {
        [H2Header(":status", String(head.status))] + h2Trailers(from: head.headers)
    }

    // MARK: Trailers

    /// Field section for HTTP/2 (trailers or any head without pseudo-headers): lowercase names, no
    /// connection-specific or pseudo fields.
    public static func h2Trailers(from fields: [H2Header]) -> [H2Header] {
        withoutConnectionSpecific(fields.filter { !$0.isPseudo }).map { H2Header($0.name.lowercased(), $0.value) }
    }

    /// Field section for HTTP/1 chunked trailers: no pseudo or connection-specific fields.
    public static func h1Trailers(from fields: [H2Header]) -> [H2Header] {
        withoutConnectionSpecific(fields.filter { !$0.isPseudo })
    }

    // MARK: Helpers

    /// Drops connection-specific fields, fields nominated by Connection, and TE other than "trailers".
    static func withoutConnectionSpecific(_ fields: [H2Header]) -> [H2Header] {
        var nominated = connectionSpecificFields
        for field in fields where field.name.lowercased() == "connection" {
            for token in field.value.split(separator: ",") {
                nominated.insert(token.trimmingSpaces().lowercased())
            }
        }
        var result: [H2Header] = []
        for field in fields {
            let name = field.name.lowercased()
            if nominated.contains(name) { continue }
            if name == "te" {
                let tokens = field.value.split(separator: ",").map { $0.trimmingSpaces().lowercased() }
                // RFC 9113 §8.2.2: TE may only carry "trailers" on HTTP/2.
                if tokens.contains(where: { $0 == "trailers" || $0.hasPrefix("trailers;") }) {
                    result.append(H2Header(field.name, "trailers"))
                }
                continue
            }
            result.append(field)
        }
        return result
    }

    /// The IANA reason phrase for common status codes; empty for others (allowed by RFC 9112 §4).
    public static func reasonPhrase(_ status: Int) -> String {
        switch status {
        case 100: "Continue"
        case 101: "Switching Protocols"
        case 103: "Early Hints"
        case 200: "OK"
        case 201: "Created"
        case 202: "Accepted"
        case 203: "Non-Authoritative Information"
        case 204: "No Content"
        case 205: "Reset Content"
        case 206: "Partial Content"
        case 300: "Multiple Choices"
        case 301: "Moved Permanently"
        case 302: "Found"
        case 303: "See Other"
        case 304: "Not Modified"
        case 307: "Temporary Redirect"
        case 308: "Permanent Redirect"
        case 400: "Bad Request"
        case 401: "Unauthorized"
        case 403: "Forbidden"
        case 404: "Not Found"
        case 405: "Method Not Allowed"
        case 406: "Not Acceptable"
        case 407: "Proxy Authentication Required"
        case 408: "Request Timeout"
        case 409: "Conflict"
        case 410: "Gone"
        case 411: "Length Required"
        case 412: "Precondition Failed"
        case 413: "Content Too Large"
        case 414: "URI Too Long"
        case 415: "Unsupported Media Type"
        case 416: "Range Not Satisfiable"
        case 417: "Expectation Failed"
        case 421: "Misdirected Request"
        case 422: "Unprocessable Content"
        case 425: "Too Early"
        case 426: "Upgrade Required"
        case 428: "Precondition Required"
        case 429: "Too Many Requests"
        case 431: "Request Header Fields Too Large"
        case 451: "Unavailable For Legal Reasons"
        case 500: "Internal Server Error"
        case 501: "Not Implemented"
        case 502: "Bad Gateway"
        case 503: "Service Unavailable"
        case 504: "Gateway Timeout"
        case 505: "HTTP Version Not Supported"
        default: ""
        }
    }
}

extension Substring {
    /// Drops leading and trailing spaces and tabs (HTTP optional whitespace).
    func trimmingSpaces() -> String {
        var slice = self[...]
        while let first = slice.first, first == " " || first == "\t" { slice = slice.dropFirst() }
        while let last = slice.last, last == " " || last == "\t" { slice = slice.dropLast() }
        return String(slice)
    }
}
