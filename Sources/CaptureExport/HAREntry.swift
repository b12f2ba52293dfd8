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
        if let comment = e.note { entry.add("comment", comment) }
        entry.add("_ats", ats(e))
        entry.add("_tls", tls(e.connection))
        entry.add("_atsproxy", atsproxy(exchange, kind: kind))
        return entry.value
    }

    /// What an exchange record stands for.
    enum Kind: String {
        case exchange, tunnel, blockedHandshake, upgraded

        init(_ e: ExchangeSummary) {
            switch (e.method, e.httpVersion) {
            case ("CONNECT", "TUNNEL"): self = .tunnel
            case ("CONNECT", "TLS"): self = .blockedHandshake
            case (_, "UPGRADED"): self = .upgraded
            default: self = .exchange
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
    private static func visibleFields(_ headers: HTTPHeaders?) -> [HTTPHeaders.Field] {
        (headers?.fields ?? []).filter { !$0.name.hasPrefix(":") }
    }

    private static func nameValue(_ field: HTTPHeaders.Field) -> HARValue {
        .object([HARMember("name", .string(field.name)), HARMember("value", .string(field.value))])
    }

    /// Bytes from the head's first byte to the blank line after it, as HTTP/1.x sends it; -1 for HTTP/2, whose
    /// heads are compressed on the wire (their size is not the text's).
    private static func headSize(version: String, line: String, _ headers: HTTPHeaders) -> Int {
        guard version.hasPrefix("HTTP/1") else { return -1 }
        var size = line.utf8.count + 2
        for field in headers.fields { size += field.name.utf8.count + 2 + field.value.utf8.count + 2 }
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

    // MARK: - ATSProxy's fields

    private static func ats(_ e: ExchangeSummary) -> HARValue {
        var ats = HARObject()
        ats.add("verdict", e.outcome.rawValue)
        if let first = e.errors.first {
            ats.add("urlError", code(first.urlError.code, first.urlError.name))
            ats.add("sslError", first.sslError.map { code($0.code, $0.name) })
        }
        if let decision = e.connection?.decision {
            ats.add("decidedBy", decision.keyPath.isEmpty ? "ATS defaults" : decision.keyPathString)
            ats.add("keyPath", .array(decision.keyPath.map(HARValue.string)))
            ats.add("reason", decision.reason)
            if !decision.notes.isEmpty { ats.add("notes", .array(decision.notes.map(HARValue.string))) }
        }
        let violations = e.connection?.violations ?? []
        ats.add("violations", .array(violations.map { v in
            var o = HARObject()
            o.add("kind", v.kind.rawValue)
            o.add("explanation", v.explanation)
            o.add("fix", v.fix.summary)
            o.add("fixPlist", v.fix.plistSnippet)
            o.add("urlError", code(v.urlError.code, v.urlError.name))
            o.add("sslError", v.sslError.map { code($0.code, $0.name) })
            return o.value
        }))
        return ats.value
    }

    private static func code(_ code: Int, _ name: String) -> HARValue {
        .object([HARMember("code", .int(code)), HARMember("name", .string(name))])
    }

    private static func tls(_ connection: ConnectionRecord?) -> HARValue? {
        guard let connection, connection.clientTLS != nil || connection.upstreamTLS != nil
            || connection.upstreamHandshake != nil
        else { return nil }
        var tls = HARObject()
        tls.add("client", connection.clientTLS.map { leg($0).value })
        if connection.upstreamTLS != nil || connection.upstreamHandshake != nil {
            var upstream = HARObject()
            if let facts = connection.upstreamTLS { upstream.members = leg(facts).members }
            if let facts = connection.upstreamHandshake {
                if connection.upstreamTLS == nil {
                    upstream.add("version", facts.version?.plistName)
                    upstream.add("cipherSuite", facts.cipherSuiteName)
                    upstream.add("alpn", facts.alpn)
                }
                upstream.add("keyExchangeGroup", facts.keyExchangeGroup)
                upstream.add("failure", facts.failure.map { String(describing: $0) })
                upstream.add("trust", String(describing: facts.trust))
                upstream.add("hostnameMatches", facts.hostnameMatches)
                upstream.add("chain", .array(facts.chain.map(certificate)))
            }
            tls.add("upstream", upstream.value)
        }
        return tls.value
    }

    private static func leg(_ facts: TLSLegFacts) -> HARObject {
        var leg = HARObject()
        leg.add("version", facts.version)
        leg.add("cipherSuite", facts.cipherSuite)
        leg.add("alpn", facts.alpn)
        leg.add("serverName", facts.serverName)
        leg.add("resumed", facts.resumed)
        return leg
    }

    private static func certificate(_ c: CertificateFacts) -> HARValue {
        var o = HARObject()
        o.add("subject", c.subject)
        o.add("issuer", c.issuer)
        o.add("key", c.keyType.rawValue + " " + String(c.keyBits) + (c.curve.map { " " + $0 } ?? ""))
        o.add("signatureHash", c.signatureHash.rawValue)
        o.add("notBefore", HARDate.iso8601(c.notBefore.timeIntervalSince1970))
        o.add("notAfter", HARDate.iso8601(c.notAfter.timeIntervalSince1970))
        if c.isSelfSigned { o.add("selfSigned", true) }
        if c.isCA { o.add("ca", true) }
        o.add("sha256", c.sha256Fingerprint)
        return o.value
    }

    private static func atsproxy(_ exchange: CapturedExchange, kind: Kind) -> HARValue {
        let e = exchange.record
        var o = HARObject()
        o.add("id", Int(exchange.id))
        o.add("run", Int(exchange.runID))
        o.add("kind", kind.rawValue)
        o.add("action", e.action?.rawValue)
        o.add("recordedVersion", e.httpVersion)
        if absoluteURL(e.url, kind: kind) != e.url, kind == .exchange { o.add("recordedURL", e.url) }
        if kind != .exchange {
            o.add("bytesFromClient", e.requestBytes)
            o.add("bytesToClient", e.responseBytes)
        }
        o.add("interruption", e.interruption)
        if let client = e.connection?.clientAddress { o.add("clientAddress", client) }
        if let upstream = e.connection?.upstreamAddress { o.add("upstreamAddress", upstream) }
        if let detail = e.detail, detail.clientResponse != nil, let original = detail.response {
            var head = HARObject()
            head.add("status", original.status)
            head.add("statusText", original.reason)
            head.add("headers", .array(visibleFields(original.headers).map(nameValue)))
            o.add("upstreamResponse", head.value)
        }
        if let detail = e.detail, let forwarded = detail.forwardedRequest {
            var head = HARObject()
            head.add("method", forwarded.method)
            head.add("target", forwarded.target)
            head.add("httpVersion", httpVersion(forwarded.version.description))
            head.add("headers", .array(visibleFields(forwarded.headers).map(nameValue)))
            o.add("forwardedRequest", head.value)
        }
        return o.value
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

/// HAR's timings from the exchange's four instants, in milliseconds. `time` is their sum, as the spec requires.
struct Timings {
    var send: Double
    var wait: Double
    var receive: Double

    init(_ t: ExchangeTimings) {
        func ms(_ from: Double, _ to: Double) -> Double { max(0, ((to - from) * 1_000_000).rounded() / 1000) }
        // Each instant clamped between the one before and the end, so no part is negative.
        let ended = max(t.ended, t.started)
        let sent = min(max(t.requestSent ?? t.started, t.started), ended)
        let first = min(max(t.firstResponseByte ?? ended, sent), ended)
        send = ms(t.started, sent)
        wait = ms(sent, first)
        receive = ms(first, ended)
    }

    var total: Double { ((send + wait + receive) * 1000).rounded() / 1000 }

    var value: HARValue {
        .object([
            HARMember("blocked", .int(-1)), HARMember("dns", .int(-1)), HARMember("connect", .int(-1)),
            HARMember("send", .double(send)), HARMember("wait", .double(wait)),
            HARMember("receive", .double(receive)), HARMember("ssl", .int(-1)),
        ])
    }
}

/// A body as HAR text: the UTF-8 text when it is text (a cut body may end inside a character: up to three bytes
/// are dropped to find the boundary), else base64.
struct BodyText {
    var string: String?
    private let bytes: [UInt8]
    /// The bytes as base64, for bodies that are not text (made only when asked for).
    var base64: String { Data(bytes).base64EncodedString() }

    init(_ bytes: [UInt8], truncated: Bool) {
        self.bytes = bytes
        string = nil
        let drops = truncated ? 0...3 : 0...0
        for drop in drops where bytes.count >= drop {
            let slice = bytes.dropLast(drop)
            guard let text = String(validating: slice, as: UTF8.self) else { continue }
            // NUL and other C0 controls than tab and line breaks mark binary data, valid UTF-8 or not.
            if text.unicodeScalars.contains(where: { $0.value < 0x20 && $0 != "\t" && $0 != "\n" && $0 != "\r" }) {
                break
            }
            string = text
            break
        }
    }
}

/// Dates as HAR writes them: ISO 8601 in UTC with milliseconds (`2026-11-27T12:00:00.125Z`).
enum HARDate {
    static func iso8601(_ seconds: Double) -> String {
        let millis = Int64((seconds * 1000).rounded(.down))
        var whole = time_t(millis / 1000)
        var parts = tm()
        gmtime_r(&whole, &parts)
        func two(_ n: Int32) -> String { n < 10 ? "0" + String(n) : String(n) }
        let ms = Int(millis % 1000)
        let msText = ms < 10 ? "00" + String(ms) : ms < 100 ? "0" + String(ms) : String(ms)
        return String(parts.tm_year + 1900) + "-" + two(parts.tm_mon + 1) + "-" + two(parts.tm_mday) + "T"
            + two(parts.tm_hour) + ":" + two(parts.tm_min) + ":" + two(parts.tm_sec) + "." + msText + "Z"
    }

    /// An HTTP date (`Wed, 21 Oct 2015 07:28:00 GMT`, RFC 9110's preferred form) as Unix seconds.
    static func fromHTTPDate(_ text: String) -> Double? {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss zzz"
        return formatter.date(from: text)?.timeIntervalSince1970
    }
}
