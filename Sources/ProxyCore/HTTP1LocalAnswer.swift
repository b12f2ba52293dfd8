import HTTP1Core
import HTTP2Core

/// A response the proxy gives itself to an HTTP/1 client's request (a block, an error), framed for that client.
struct HTTP1LocalAnswer {
    /// Head and body, ready to send.
    let bytes: [UInt8]
    let status: Int
    let bodyCount: Int
    /// The client holds its body back for `Expect: 100-continue`: the answer goes out at once and the connection
    /// closes, since the body may or may not follow (RFC 9110 §10.1.1), instead of making the client wait for its
    /// timeout.
    let answerNow: Bool
    /// The connection can go on after the request body is read and dropped: the client allows it and the body's
    /// framing is known.
    let keepAlive: Bool

    init(response: HTTPResponseHead, body: [UInt8], request: HTTPRequestHead) throws(HTTP1Error) {
        var head = response
        // A HEAD's answer that states its length (a rule's, the length a GET would get) keeps it.
        if request.method != "HEAD" || !head.headers.contains(name: "Content-Length") {
            head.headers.replaceOrAdd(name: "Content-Length", value: String(body.count))
        }
        let hasBody = request.headers.contains(name: "Content-Length") || request.headers.contains(name: "Transfer-Encoding")
        answerNow = request.expectsContinue && hasBody
        var framable = true
        do { _ = try HTTP1Framing.forRequest(request) } catch { framable = false }
        keepAlive = request.keepAlive && framable && !answerNow
        if !request.keepAlive || answerNow { head.headers.replaceOrAdd(name: "Connection", value: "close") }
        var out: [UInt8] = []
        try HTTP1Serializer.write(head, into: &out)
        if request.method != "HEAD" { out += body }
        bytes = out
        status = head.status
        bodyCount = body.count
    }
}

extension HTTP1LocalAnswer {
    /// A complete plain-text answer after which the connection closes (errors and refusals of the proxy's own).
    static func closing(status: Int, text: String, extraHeaders: [(String, String)] = []) -> [UInt8] {
        let body = Array(text.utf8)
        let head = HTTPResponseHead(
            status: status, reason: H2HeaderTranslation.reasonPhrase(status),
            headers: HTTPHeaders(
                [("Content-Type", "text/plain; charset=utf-8"), ("Content-Length", String(body.count)),
                 ("Connection", "close")] + extraHeaders))
        var out: [UInt8] = []
        do { try HTTP1Serializer.write(head, into: &out) } catch {
            // Only our own fixed fields are here; should one ever be refused, the status line alone still answers.
            out = Array("HTTP/1.1 \(status) \(head.reason)\r\nConnection: close\r\n\r\n".utf8)
            return out
        }
        return out + body
    }
}

/// The exchange record of a relay with an HTTP/1.1 client, which a local answer fills in.
protocol LocallyAnsweredExchange {
    var localAnswer: [UInt8]? { get set }
    var status: Int? { get set }
    var responseBytes: Int { get set }
    var responseHeadSent: Bool { get set }
    var requestKeepAlive: Bool { get set }
}

extension LocallyAnsweredExchange {
    /// Makes `local` the exchange's response. The request's body is still read and dropped; a body that cannot be
    /// framed ends the connection after the answer.
    mutating func record(_ local: HTTP1LocalAnswer) {
        localAnswer = local.bytes
        status = local.status
        responseBytes = local.bodyCount
        responseHeadSent = true
        requestKeepAlive = local.keepAlive
    }

    /// Makes the proxy's own plain-text error answer the exchange's response and returns its bytes; the connection
    /// closes after it.
    mutating func recordClosingAnswer(status: Int, reason: String) -> [UInt8] {
        recordClosingAnswer(status: status, text: "ATSProxy: \(reason)\n", extraHeaders: [])
    }

    /// The same with the whole body text and extra fields (the `X-ATS-*` ones of a 504).
    mutating func recordClosingAnswer(status: Int, text: String, extraHeaders: [(String, String)]) -> [UInt8] {
        self.status = status
        responseBytes = text.utf8.count
        responseHeadSent = true
        return HTTP1LocalAnswer.closing(status: status, text: text, extraHeaders: extraHeaders)
    }
}
