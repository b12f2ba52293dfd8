import Foundation
import HTTP1Core
import ProxyCore

// The held exchanges' API (issue 34's breakpoints), over the proxy's HoldRegistry:
//
//   GET  /api/held       the exchanges held now, oldest first (heads and bodies, for the editor)
//   POST /api/held/ID    {"action": "execute"|"abort"|"answer", "request"|"response": {…}}: releases one
//
// The registry is the whole state: the page lists what it holds and releases by id; a release that comes too late
// (released already from another page, timed out, its client gone) answers 409. An edit is checked here for what
// the page can get wrong (a method, a header name or value, a status, a URL elsewhere). Framing is not the page's
// to get wrong: an edited body's head loses its `Content-Length` (the core frames the body it sends), and a
// request body that goes on unedited keeps the held head's `Content-Length`/`Transfer-Encoding`. Pages hear of every change through their live
// stream (`event: held`) and read the list again.

/// One held exchange as `GET /api/held` lists it.
struct HeldJSON: Encodable {
    var id: UInt64
    var connection: UInt64
    /// `request` or `response`.
    var phase: String
    var url: String
    var method: String
    var request: HeldRequestJSON
    var requestBody: HeldBodyJSON
    var response: HeldResponseJSON?
    var responseBody: HeldBodyJSON?
    var breakpoint: String
    var heldAt: Double
    var deadline: Double

    init(_ held: HeldExchange) {
        id = held.id
        connection = held.connectionID
        phase = held.phase.rawValue
        url = held.url
        method = held.request.method
        request = HeldRequestJSON(
            method: held.request.method, target: held.request.target, version: held.request.version.description,
            headers: held.request.headers.fields.map { [$0.name, FieldBytes.display($0.value)] })
        requestBody = HeldBodyJSON(held.requestBody)
        response = held.response.map {
            HeldResponseJSON(
                status: $0.status, reason: $0.reason, version: $0.version.description,
                headers: $0.headers.fields.map { [$0.name, FieldBytes.display($0.value)] })
        }
        responseBody = held.response == nil ? nil : HeldBodyJSON(held.responseBody)
        breakpoint = held.breakpoint
        heldAt = held.heldAt
        deadline = held.deadline
    }
}

struct HeldRequestJSON: Encodable {
    var method: String
    var target: String
    var version: String
    var headers: [[String]]
}

struct HeldResponseJSON: Encodable {
    var status: Int
    var reason: String
    var version: String
    var headers: [[String]]
}

/// A held body: `text` when it is UTF-8, else `base64` (the editor then offers it unchanged).
struct HeldBodyJSON: Encodable {
    var size: Int
    var text: String?
    var base64: String?

    init(_ bytes: [UInt8]) {
        size = bytes.count
        if let text = String(validating: bytes, as: UTF8.self) {
            self.text = text
        } else {
            base64 = Data(bytes).base64EncodedString()
        }
    }
}

struct HeldListJSON: Encodable {
    var held: [HeldJSON]
    /// The server's clock (seconds since 1970), so the page counts down to `deadline` on the proxy's time.
    var now: Double
}

/// `POST /api/held/ID`'s body.
struct HoldReleaseBody: Decodable {
    var action: String
    var request: EditedRequest?
    var response: EditedResponse?

    struct EditedRequest: Decodable {
        var method: String?
        var url: String?
        var headers: [[String]]?
        var body: String?
        /// The body as base64 (a body that is not UTF-8); `body` wins when both are given.
        var bodyBase64: String?
    }

    struct EditedResponse: Decodable {
        var status: Int?
        var reason: String?
        var headers: [[String]]?
        var body: String?
        var bodyBase64: String?
    }
}

extension WebRouter {
    func heldList() -> WebResponse {
        guard let holds = context.extensions.holds else { return Self.noHolds }
        return .json(HeldListJSON(held: holds.list().map(HeldJSON.init), now: Date().timeIntervalSince1970))
    }

    static let noHolds = WebResponse.problem(404, "held exchanges exist only in a running proxy (atsproxy run --web)")

    func postHeld(_ request: WebRequest, id text: String) -> WebResponse {
        if let refusal = Self.crossSiteRefusal(request, what: "a held exchange's release") {
            return .problem(403, refusal)
        }
        guard let holds = context.extensions.holds else { return Self.noHolds }
        guard let id = UInt64(text) else { return .problem(404, "no held exchange '\(text)': ids are numbers") }
        guard let held = holds.list().first(where: { $0.id == id }) else {
            return .problem(409, "exchange \(id) is no longer held (released, timed out, or its client went)")
        }
        let body: HoldReleaseBody
        do { body = try JSONDecoder().decode(HoldReleaseBody.self, from: Data(request.body)) } catch {
            return .problem(400, "expected {\"action\": \"execute\"|\"abort\"|\"answer\", …}")
        }
        let release: HoldRelease
        switch Self.holdRelease(body, for: held) {
        case .failure(let error): return .problem(400, error.message)
        case .success(let made): release = made
        }
        guard holds.release(id, release) else {
            return .problem(409, "exchange \(id) is no longer held (released, timed out, or its client went)")
        }
        return .json(["released": id])
    }

    /// The release a POST asks for, checked against the held exchange.
    static func holdRelease(_ body: HoldReleaseBody, for held: HeldExchange) -> Result<HoldRelease, WebRuleError> {
        switch body.action {
        case "abort":
            return .success(.abort)
        case "answer":
            guard held.phase == .request else {
                return .failure(WebRuleError("only a held request is answered locally (this one's response is held)"))
            }
            guard let edited = body.response else {
                return .failure(WebRuleError("an answer needs \"response\": {\"status\", \"headers\", \"body\"}"))
            }
            return response(edited, base: nil).map { .answer($0.0, $0.1 ?? []) }
        case "execute":
            switch held.phase {
            case .request:
                if body.response != nil {
                    return .failure(WebRuleError("this exchange's request is held: edit \"request\" (or answer it)"))
                }
                guard let edited = body.request else { return .success(.execute()) }
                return request(edited, held: held).map { .execute(request: $0.0, requestBody: $0.1) }
            case .response:
                if body.request != nil {
                    return .failure(WebRuleError("this exchange's response is held: its request went already"))
                }
                guard let edited = body.response else { return .success(.execute()) }
                return response(edited, base: held.response).map { .execute(response: $0.0, responseBody: $0.1) }
            }
        default:
            return .failure(WebRuleError("no action '\(body.action)': execute, abort or answer"))
        }
    }

    private static func request(
        _ edited: HoldReleaseBody.EditedRequest, held: HeldExchange
    ) -> Result<(HTTPRequestHead, [UInt8]?), WebRuleError> {
        var head = held.request
        if let method = edited.method {
            guard !method.isEmpty, method.utf8.allSatisfy(isToken) else {
                return .failure(WebRuleError("\"\(method)\" is not a method (a token such as GET or POST)"))
            }
            head.method = method
        }
        if let url = edited.url, url != held.url {
            switch target(url, held: held) {
            case .failure(let error): return .failure(error)
            case .success(let target): head.target = target
            }
        }
        if let fields = edited.headers {
            switch headers(fields) {
            case .failure(let error): return .failure(error)
            case .success(let made): head.headers = made
            }
        }
        switch body(edited.body, base64: edited.bodyBase64) {
        case .failure(let error): return .failure(error)
        case .success(let bytes):
            // An edited body is framed by the core: an edited head's length would contradict it. A body going on
            // as it came keeps the framing it came with, whatever the edited head says.
            head.headers.remove(name: "Content-Length")
            if bytes == nil {
                head.headers.remove(name: "Transfer-Encoding")
                for field in held.request.headers.fields
                where field.name.lowercased() == "content-length" || field.name.lowercased() == "transfer-encoding" {
                    head.headers.add(name: field.name, value: field.value)
                }
            }
            return .success((head, bytes))
        }
    }

    private static func response(
        _ edited: HoldReleaseBody.EditedResponse, base: HTTPResponseHead?
    ) -> Result<(HTTPResponseHead, [UInt8]?), WebRuleError> {
        var head = base ?? HTTPResponseHead(status: 200)
        if let status = edited.status {
            guard (200...599).contains(status) else {
                return .failure(WebRuleError("status \(status) is not a final status (200 to 599)"))
            }
            if status != head.status || base == nil { head.reason = WebResponse.reason(status) }
            head.status = status
        } else if base == nil {
            return .failure(WebRuleError("an answer needs a \"status\""))
        }
        if let reason = edited.reason {
            guard !reason.utf8.contains(where: { $0 == 13 || $0 == 10 }) else {
                return .failure(WebRuleError("a reason phrase is one line"))
            }
            head.reason = reason
        }
        if let fields = edited.headers {
            switch headers(fields) {
            case .failure(let error): return .failure(error)
            case .success(let made): head.headers = made
            }
        }
        switch body(edited.body, base64: edited.bodyBase64) {
        case .failure(let error): return .failure(error)
        case .success(let bytes):
            if edited.headers != nil || bytes != nil || base == nil { head.headers.remove(name: "Content-Length") }
            return .success((head, bytes))
        }
    }

    /// The edited URL as the held request's target: same scheme and host (the connection upstream is chosen
    /// already), origin-form when the held target was, absolute otherwise.
    private static func target(_ url: String, held: HeldExchange) -> Result<String, WebRuleError> {
        guard let edited = URLComponents(string: url), let original = URLComponents(string: held.url) else {
            return .failure(WebRuleError("\"\(url)\" is not a URL"))
        }
        guard edited.scheme?.lowercased() == original.scheme?.lowercased(),
            edited.host?.lowercased() == original.host?.lowercased(), edited.port == original.port
        else {
            return .failure(WebRuleError(
                "a held request goes on to the server it was held for: keep \(original.scheme ?? "")://"
                    + "\(original.percentEncodedHost ?? "")\(original.port.map { ":\($0)" } ?? "") in the URL"))
        }
        guard !url.utf8.contains(where: { $0 <= 0x20 || $0 == 0x7F }) else {
            return .failure(WebRuleError("a URL holds no spaces or control characters (percent-encode them)"))
        }
        if held.request.target.hasPrefix("/") || held.request.target == "*" {
            var path = edited.percentEncodedPath
            if path.isEmpty { path = "/" }
            if let query = edited.percentEncodedQuery { path += "?" + query }
            return .success(path)
        }
        return .success(url)
    }

    private static func headers(_ fields: [[String]]) -> Result<HTTPHeaders, WebRuleError> {
        var headers = HTTPHeaders()
        for (index, field) in fields.enumerated() {
            guard field.count == 2 else {
                return .failure(WebRuleError("header \(index + 1) is not a [name, value] pair"))
            }
            let (name, value) = (field[0].trimmingCharacters(in: .whitespaces), field[1])
            if name.isEmpty && value.isEmpty { continue }
            guard !name.isEmpty, name.utf8.allSatisfy(isToken) else {
                return .failure(WebRuleError("\"\(name)\" is not a header name (letters, digits and !#$%&'*+-.^_`|~)"))
            }
            guard !value.utf8.contains(where: { $0 == 13 || $0 == 10 || $0 == 0 }) else {
                return .failure(WebRuleError("the value of \(name) is one line (no line breaks)"))
            }
            headers.add(name: name, value: value.trimmingCharacters(in: .whitespaces))
        }
        return .success(headers)
    }

    private static func body(_ text: String?, base64: String?) -> Result<[UInt8]?, WebRuleError> {
        if let text { return .success(Array(text.utf8)) }
        guard let base64 else { return .success(nil) }
        guard let data = Data(base64Encoded: base64) else {
            return .failure(WebRuleError("\"bodyBase64\" is not base64"))
        }
        return .success(Array(data))
    }

    /// tchar (RFC 9110 §5.6.2).
    private static func isToken(_ b: UInt8) -> Bool {
        switch b {
        case 0x30...0x39, 0x41...0x5A, 0x61...0x7A: true
        case 0x21, 0x23, 0x24, 0x25, 0x26, 0x27, 0x2A, 0x2B, 0x2D, 0x2E, 0x5E, 0x5F, 0x60, 0x7C, 0x7E: true
        default: false
        }
    }
}
