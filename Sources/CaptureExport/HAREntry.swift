import ATSPolicy
import CaptureStore
import Foundation
import HTTP1Core
import ProxyTrace

/// One captured exchange as a HAR 1.2 `entry` (http://www.softwareishard.com/blog/har-12-spec/), with ATSProxy's
/// own facts in underscore-prefixed fields, as the spec allows for custom fields.
///
/// What each kind of exchange becomes (docs/capture.md, "HAR export"):
/// - **An exchange** (HTTP/1.1 or HTTP/2, relayed, annotated, or answered by the proxy): request as the client
///   sent it, response as the client got it (`_atsproxy.upstreamResponse` has the upstream's when the proxy changed
///   it). HTTP/2 heads have no wire size: `headersSize` is -1 there.
/// - **A tunnel** (`CONNECT` not intercepted) and **a blocked handshake** (`--block tls`): a `CONNECT` entry whose
///   URL is `https://host[:port]`, with status 0 (no HTTP response: the HAR convention for a request that got
///   none), `_atsproxy.kind` `tunnel` or `blockedHandshake`, and the bytes each way in `_atsproxy`.
/// - **An upgraded connection** (a 101, e.g. a WebSocket): its 101 exchange is an entry like any other; when the raw
///   relay after it ends, a second entry (`_atsproxy.kind` `upgraded`, status 101) holds the bytes each way and how
///   long it lasted.
/// - **Bodies**: decoded text when the bytes are UTF-8 text, else base64 (`encoding: "base64"`); `gzip` and
///   `deflate` are inflated first (HAR wants decoded content); a body cut at the capture's cap has `_truncated`,
///   `_originalSize` (the real size, as `size`) and `_keptSize`. A request body that is not text is base64 in
///   `postData.text` with `_encoding: "base64"` (HAR 1.2 has no encoding field for requests).
/// - **Rules** (issue 33): an exchange a rule answered or changed has `_atsproxyRules` (each rule's `id`, `action`,
///   `point` and `note`, in the order they acted) and says so in `comment`.
/// - **Timings**: `send` from the request's first byte to its last byte upstream, `wait` to the response's first
///   byte, `receive` to the end; a local answer is all `wait`. `blocked`, `dns`, `connect` and `ssl` are -1: the
///   capture does not time the upstream connect per exchange.
public enum HAREntry {
    /// The entry for `exchange` (read with its bodies: `CaptureReader.exchange(id:)`).
    public static func make(_ exchange: CapturedExchange, run: CapturedRun?) -> HARValue {
        let e = exchange.record
        let detail = e.detail
        let timings = detail?.timings ?? ExchangeTimings(started: 0, ended: e.durationMilliseconds / 1000)
        let kind = Kind(e)
        let parts = Timings(timings)

        var entry = HARObject()
        entry.add("startedDateTime", HARDate.iso8601(timings.started))
        entry.add("time", .double(parts.total))
        entry.add("request", request(e, detail, kind: kind))
        entry.add("response", response(e, detail, kind: kind, bodyLimit: run?.bodyLimit))
        entry.add("cache", .object([]))
        entry.add("timings", parts.value)
        if let address = e.connection?.upstreamAddress { entry.add("serverIPAddress", Self.ipAddress(address)) }
        if let connection = e.connection { entry.add("connection", String(connection.connectionID)) }
        // A rule's part in the exchange is in the comment too: a HAR viewer shows the comment, not custom fields.
        let ruled = e.rules.isEmpty ? nil : "changed by rules: " + e.rules.map(\.summary).joined(separator: "; ")
        let comment = [e.note, ruled].compactMap { $0 }.joined(separator: "; ")
        if !comment.isEmpty { entry.add("comment", comment) }
        entry.add("_ats", ats(e))
        entry.add("_tls", tls(e.connection))
        entry.add("_atsproxy", atsproxy(exchange, kind: kind))
        if !e.rules.isEmpty { entry.add("_atsproxyRules", .array(e.rules.map(rule))) }
        return entry.value
    }

    /// What an exchange record stands for.
    enum Kind: String {
        case exchange, tunnel, blockedHandshake, upgraded

        init(_ e: ExchangeSummary) {
            switch e.kind {
            case .tunnel: self = .tunnel
            case .refusedHandshake: self = .blockedHandshake
            case .http: self = e.httpVersion == "UPGRADED" ? .upgraded : .exchange
            }
        }
    }

    // MARK: - Request and response

    private static func request(_ e: ExchangeSummary, _ detail: ExchangeDetail?, kind: Kind) -> HARValue {
        let head = detail?.request
        let url = absoluteURL(e.url, kind: kind)
        let version = clientSpeaksH2(e)
            ? "HTTP/2" : httpVersion(head?.version.description ?? (kind == .exchange ? e.httpVersion : "HTTP/1.1"))
        let headers = visibleFields(head?.headers)
        var request = HARObject()
        request.add("method", e.method)
        request.add("url", url)
        request.add("httpVersion", version)
        request.add("cookies", .array(requestCookies(headers)))
        request.add("headers", .array(headers.map(nameValue)))
        request.add("queryString", .array(queryString(url)))
        let body = detail?.requestBody
        if kind == .exchange, let body, body.totalBytes > 0 {
            request.add("postData", postData(body, contentType: head?.headers[first: "Content-Type"]))
        }
        let requestLine = head.map { $0.method + " " + $0.target + " " + version }
        request.add("headersSize", head.map { headSize(version: version, line: requestLine ?? "", $0.headers) } ?? -1)
        request.add("bodySize", kind == .exchange ? (body?.totalBytes ?? e.requestBytes) : 0)
        return request.value
    }

    private static func response(
        _ e: ExchangeSummary, _ detail: ExchangeDetail?, kind: Kind, bodyLimit: Int?
    ) -> HARValue {
        let head = detail?.clientResponse ?? detail?.response
        let headers = visibleFields(head?.headers)
        let version = clientSpeaksH2(e)
            ? "HTTP/2" : httpVersion(head?.version.description ?? (kind == .exchange ? e.httpVersion : "HTTP/1.1"))
        let status = head?.status ?? e.status ?? 0
        var response = HARObject()
        response.add("status", status)
        // HTTP/2 has no reason phrase: "" as browsers write it.
        response.add("statusText", head?.reason ?? "")
        response.add("httpVersion", version)
        response.add("cookies", .array(responseCookies(headers)))
        response.add("headers", .array(headers.map(nameValue)))
        response.add(
            "content",
            content(
                detail?.responseBody, bodyKept: (bodyLimit ?? 0) > 0, size: kind == .exchange ? e.responseBytes : 0,
                contentType: head?.headers[first: "Content-Type"], coding: head?.headers[first: "Content-Encoding"]))
        response.add("redirectURL", head?.headers[first: "Location"] ?? "")
        let statusLine = version + " " + String(status) + (head.map { $0.reason.isEmpty ? "" : " " + $0.reason } ?? "")
        response.add("headersSize", head.map { headSize(version: version, line: statusLine, $0.headers) } ?? -1)
        response.add("bodySize", kind == .exchange ? (detail?.responseBody?.totalBytes ?? e.responseBytes) : 0)
        return response.value
    }

    /// The client spoke HTTP/2 to the proxy (ALPN `h2` on its leg). Its recorded request head is the HTTP/1.1 view
    /// of its header list (what the policy and the traces read), so the leg's ALPN says which version it was.
    private static func clientSpeaksH2(_ e: ExchangeSummary) -> Bool {
        e.connection?.clientTLS?.alpn == "h2"
    }

    /// The absolute URL HAR requires: a `CONNECT`'s bare authority becomes `https://host:port`; what is neither (a
    /// malformed request the proxy refused, logged as `-` or its raw target) goes under `http://unknown.invalid`,
    /// with the recorded text in `_atsproxy.recordedURL`.
    static func absoluteURL(_ url: String, kind: Kind) -> String {
        if url.contains("://") { return url }
        if !url.isEmpty, !url.contains("/"), url != "-" { return "https://" + url }
        return "http://unknown.invalid" + (url.hasPrefix("/") ? url : "/")
    }

    /// `HTTP/2` for HTTP/2 (what Firefox writes and mitmproxy reads), the record's text otherwise.
    static func httpVersion(_ text: String) -> String {
        text == "HTTP/2.0" || text == "HTTP/2" ? "HTTP/2" : text
    }

    /// The fields as the peer sent them, without HTTP/2's pseudo-headers (the request line has them).
    static func visibleFields(_ headers: HTTPHeaders?) -> [HTTPHeaders.Field] {
        (headers?.fields ?? []).filter { !$0.name.hasPrefix(":") }
    }

    /// A header as HAR's `{name, value}`; a value that is not UTF-8 (kept as bytes, `FieldBytes`) reads as Latin-1.
    static func nameValue(_ field: HTTPHeaders.Field) -> HARValue {
        .object([HARMember("name", .string(field.name)), HARMember("value", .string(FieldBytes.display(field.value)))])
    }

    /// Bytes from the head's first byte to the blank line after it, as HTTP/1.x sends it; -1 for HTTP/2, whose
    /// heads are compressed on the wire (their size is not the text's).
    private static func headSize(version: String, line: String, _ headers: HTTPHeaders) -> Int {
        guard version.hasPrefix("HTTP/1") else { return -1 }
        var size = line.utf8.count + 2
        for field in headers.fields { size += field.name.utf8.count + 2 + FieldBytes.bytes(field.value).count + 2 }
        return size + 2
    }

    // MARK: - Cookies, query, bodies

    private static func requestCookies(_ headers: [HTTPHeaders.Field]) -> [HARValue] {
        headers.filter { $0.name.lowercased() == "cookie" }.flatMap { field in
            field.value.split(separator: ";").compactMap { pair -> HARValue? in
                let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                let name = parts[0].trimmingCharacters(in: .whitespaces)
                guard !name.isEmpty else { return nil }
                let value = parts.count > 1 ? parts[1].trimmingCharacters(in: .whitespaces) : ""
                return .object([HARMember("name", .string(name)), HARMember("value", .string(value))])
            }
        }
    }

    private static func responseCookies(_ headers: [HTTPHeaders.Field]) -> [HARValue] {
        headers.filter { $0.name.lowercased() == "set-cookie" }.compactMap { field in
            let attributes = field.value.split(separator: ";").map { $0.trimmingCharacters(in: .whitespaces) }
            guard let first = attributes.first, let equals = first.firstIndex(of: "=") else { return nil }
            var cookie = HARObject()
            cookie.add("name", String(first[..<equals]))
            cookie.add("value", String(first[first.index(after: equals)...]))
            var httpOnly = false
            var secure = false
            for attribute in attributes.dropFirst() {
                let parts = attribute.split(separator: "=", maxSplits: 1)
                let key = parts.first.map { $0.lowercased() } ?? ""
                let value = parts.count > 1 ? String(parts[1]) : ""
                switch key {
                case "path": cookie.add("path", value)
                case "domain": cookie.add("domain", value)
                case "expires": cookie.add("expires", HARDate.fromHTTPDate(value).map { HARDate.iso8601($0) })
                case "httponly": httpOnly = true
                case "secure": secure = true
                default: break
                }
            }
            cookie.add("httpOnly", httpOnly)
            cookie.add("secure", secure)
            return cookie.value
        }
    }

    /// The URL's query as name/value pairs, percent-decoded (`+` as a space); a pair that does not decode is kept
    /// as it was sent.
    static func queryString(_ url: String) -> [HARValue] {
        guard let question = url.firstIndex(of: "?") else { return [] }
        var query = url[url.index(after: question)...]
        if let hash = query.firstIndex(of: "#") { query = query[..<hash] }
        return formPairs(String(query)).map {
            .object([HARMember("name", .string($0.0)), HARMember("value", .string($0.1))])
        }
    }

    private static func formPairs(_ text: String) -> [(String, String)] {
        text.split(separator: "&").map { pair in
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            func decoded(_ s: Substring) -> String {
                let spaced = s.replacingOccurrences(of: "+", with: " ")
                return spaced.removingPercentEncoding ?? String(s)
            }
            return (decoded(parts[0]), parts.count > 1 ? decoded(parts[1]) : "")
        }
    }

    private static func postData(_ body: CapturedBody, contentType: String?) -> HARValue {
        let mime = contentType ?? ""
        var data = HARObject()
        data.add("mimeType", mime)
        let text = BodyText(body.bytes, truncated: body.isTruncated)
        // Browsers write `text` always and add `params` for a form; mitmproxy reads `text` only.
        if let string = text.string {
            if mime.lowercased().hasPrefix("application/x-www-form-urlencoded"), !body.isTruncated {
                data.add("params", .array(formPairs(string).map {
                    .object([HARMember("name", .string($0.0)), HARMember("value", .string($0.1))])
                }))
            }
            data.add("text", string)
        } else {
            data.add("text", text.base64)
            data.add("_encoding", "base64")
        }
        addCut(body, kept: body.bytes.count, to: &data)
        return data.value
    }

    private static func content(
        _ body: CapturedBody?, bodyKept: Bool, size: Int, contentType: String?, coding: String?
    ) -> HARValue {
        var content = HARObject()
        let mime = contentType ?? "x-unknown"
        guard let body, body.totalBytes > 0 else {
            content.add("size", body == nil ? size : 0)
            content.add("mimeType", mime)
            if body == nil, size > 0, !bodyKept { content.add("comment", "body not captured (--capture-bodies 0)") }
            return content.value
        }
        var bytes = body.bytes
        var decodedSize = body.totalBytes
        if let coding, coding.lowercased() != "identity" {
            if !body.isTruncated, let decoded = ContentDecoding.decode(body.bytes, coding: coding) {
                bytes = decoded
                decodedSize = decoded.count
            } else {
                // Left out rather than given undecoded: a consumer would take the bytes for the decoded content.
                content.add("size", body.totalBytes)
                content.add("mimeType", mime)
                let why = body.isTruncated ? "cut at the capture's cap" : "not a coding this export decodes"
                content.add("comment", "body sent with Content-Encoding: \(coding), \(why); atsproxy show has its bytes")
                addCut(body, kept: body.bytes.count, to: &content)
                return content.value
            }
        }
        content.add("size", decodedSize)
        if decodedSize != body.totalBytes { content.add("compression", decodedSize - body.totalBytes) }
        content.add("mimeType", mime)
        let text = BodyText(bytes, truncated: body.isTruncated)
        if let string = text.string {
            content.add("text", string)
        } else {
            content.add("text", text.base64)
            content.add("encoding", "base64")
        }
        addCut(body, kept: body.bytes.count, to: &content)
        return content.value
    }

    private static func addCut(_ body: CapturedBody, kept: Int, to object: inout HARObject) {
        guard body.isTruncated else { return }
        object.add("_truncated", true)
        object.add("_originalSize", body.totalBytes)
        object.add("_keptSize", kept)
    }

    /// `93.184.216.34:443` → `93.184.216.34`, `[::1]:8443` → `::1`.
    static func ipAddress(_ address: String) -> String {
        if address.hasPrefix("["), let close = address.firstIndex(of: "]") {
            return String(address[address.index(after: address.startIndex)..<close])
        }
        if let colon = address.lastIndex(of: ":") { return String(address[..<colon]) }
        return address
    }
}
