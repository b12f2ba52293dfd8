import HTTP1Core

/// A status / answer rule's action: a response made from a status, headers and a body, without contacting the
/// upstream (mock an endpoint, simulate a 503).
///
/// The body is text (sent as UTF-8) or a file read when the request comes (so editing the file changes the next
/// answer). Content-Length is always set by the answer; a Content-Type comes from the rule's headers, else from the
/// file's extension, else `text/plain; charset=utf-8` for a non-empty text body. Statuses without a body (1xx,
/// 204, 304) and HEAD requests get none.
public struct CannedAnswer: Equatable, Sendable {
    public enum Body: Equatable, Sendable {
        case text(String)
        case file(String)
    }

    public let status: Int
    public let headers: HTTPHeaders
    public let body: Body

    /// An answer; a status outside 200…599, or a header the answer frames itself, is refused when the rules load.
    public init(status: Int, headers: HTTPHeaders = [], body: Body = .text("")) throws(RuleActionError) {
        guard (200...599).contains(status) else {
            throw RuleActionError("answer: status \(status) is not a final status (200-599)")
        }
        for field in headers {
            // The same checks as a header rule, so nothing frames the message but the answer itself.
            _ = try HeaderModification(name: field.name, value: field.value)
        }
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// The answer to a request with this method.
    public func response(method: String, files: some FileReading, limit: Int = MapLocal.defaultLimit) -> LocalResponse {
        var headers = headers
        var bytes: [UInt8]
        var servedFile: String?
        switch body {
        case .text(let text):
            bytes = Array(text.utf8)
            if !bytes.isEmpty, !headers.contains(name: "Content-Type") {
                headers.add(name: "Content-Type", value: "text/plain; charset=utf-8")
            }
        case .file(let path):
            guard let info = files.info(path), info.isRegularFile else {
                var response = FileAnswer.plain(status: 500, "ATSProxy answer: no file \(path)\n", method: method)
                response.notices = [ActionNotice(.missingFile, "answer: \(path) does not exist")]
                return response
            }
            guard info.size <= limit else {
                var response = FileAnswer.plain(
                    status: 500, "ATSProxy answer: \(path) is \(info.size) bytes, over the limit of \(limit)\n",
                    method: method)
                response.notices = [ActionNotice(.tooLarge, "answer: \(path) is over the limit of \(limit) bytes")]
                return response
            }
            guard let read = files.read(path, offset: 0, count: info.size) else {
                var response = FileAnswer.plain(status: 500, "ATSProxy answer: cannot read \(path)\n", method: method)
                response.notices = [ActionNotice(.missingFile, "answer: cannot read \(path)")]
                return response
            }
            bytes = read
            servedFile = files.realPath(path) ?? path
            if !headers.contains(name: "Content-Type") {
                headers.add(name: "Content-Type", value: MediaTypes.contentType(forPath: path))
            }
        }
        let bodiless = status == 204 || status == 304
        if bodiless { bytes = [] } else { headers.add(name: "Content-Length", value: String(bytes.count)) }
        return LocalResponse(
            head: HTTPResponseHead(status: status, reason: LocalResponse.reasonPhrase(status), headers: headers),
            body: method == "HEAD" ? [] : bytes, servedFile: servedFile)
    }
}
