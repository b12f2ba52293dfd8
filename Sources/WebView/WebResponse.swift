import Foundation
import HTTP1Core

/// A complete answer of the web view: status, fields and body. The connection adds the framing
/// (`Content-Length`) and the fields every answer carries when it serialises it.
public struct WebResponse: Sendable {
    public var status: Int
    public var headers: HTTPHeaders
    public var body: [UInt8]

    public init(status: Int, headers: HTTPHeaders = [], body: [UInt8] = []) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// `value` as JSON (keys sorted, so answers are stable).
    static func json(_ value: some Encodable, status: Int = 200) -> WebResponse {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        do {
            let data = try encoder.encode(value)
            return WebResponse(
                status: status, headers: [("Content-Type", "application/json; charset=utf-8")], body: Array(data))
        } catch {
            return problem(500, "cannot encode the answer: \(error)")
        }
    }

    /// An error answer: `{"error": message, "status": status}`, which scripts and the page show as it is.
    static func problem(_ status: Int, _ message: String) -> WebResponse {
        var response = json(WebProblem(error: message, status: status), status: status)
        response.status = status
        return response
    }

    /// The head and body as bytes for the wire: `Content-Length`, `Cache-Control: no-store` (a capture changes
    /// under the page), `X-Content-Type-Options: nosniff` and `Cross-Origin-Resource-Policy: same-origin` added; no
    /// body for `HEAD`.
    func serialized(headOnly: Bool, keepAlive: Bool) -> [UInt8] {
        var head = HTTPResponseHead(status: status, reason: Self.reason(status), headers: headers)
        head.headers.replaceOrAdd(name: "Content-Length", value: String(body.count))
        if !head.headers.contains(name: "Cache-Control") { head.headers.add(name: "Cache-Control", value: "no-store") }
        head.headers.add(name: "X-Content-Type-Options", value: "nosniff")
        // Another site's page may not embed what the view serves (a captured image: its size would tell).
        head.headers.add(name: "Cross-Origin-Resource-Policy", value: "same-origin")
        if !keepAlive { head.headers.add(name: "Connection", value: "close") }
        var out: [UInt8] = []
        out.reserveCapacity(256 + (headOnly ? 0 : body.count))
        do { try HTTP1Serializer.write(head, into: &out) } catch {
            // Only a field with a line break fails to serialise, and every field here is the router's own.
            return Array("HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".utf8)
        }
        if !headOnly { out += body }
        return out
    }

    static func reason(_ status: Int) -> String {
        switch status {
        case 200: "OK"
        case 201: "Created"
        case 304: "Not Modified"
        case 400: "Bad Request"
        case 401: "Unauthorized"
        case 403: "Forbidden"
        case 404: "Not Found"
        case 405: "Method Not Allowed"
        case 413: "Content Too Large"
        case 414: "URI Too Long"
        case 422: "Unprocessable Content"
        case 421: "Misdirected Request"
        case 431: "Request Header Fields Too Large"
        case 500: "Internal Server Error"
        case 501: "Not Implemented"
        case 503: "Service Unavailable"
        case 505: "HTTP Version Not Supported"
        default: ""
        }
    }
}

struct WebProblem: Encodable {
    var error: String
    var status: Int
}
