import HTTP1Core

/// A local file turned into a response, as a small static file server would: conditional requests, single ranges,
/// HEAD, and a size limit. Shared by map local and by answers with a file body.
enum FileAnswer {
    static func serve(
        path: String, info: FileInfo, request: LocalRequest, files: some FileReading, limit: Int
    ) -> LocalResponse {
        let isHead = request.method == "HEAD"
        let etag = "\"\(String(info.size, radix: 16))-\(String(info.modified, radix: 16))\""
        var headers: HTTPHeaders = [("Content-Type", MediaTypes.contentType(forPath: path)), ("ETag", etag)]

        if let condition = request.headers[first: "If-None-Match"], ["GET", "HEAD"].contains(request.method),
            matches(condition, etag: etag)
        {
            return LocalResponse(
                head: HTTPResponseHead(status: 304, reason: LocalResponse.reasonPhrase(304), headers: headers),
                body: [],
                servedFile: path)
        }
        headers.add(name: "Accept-Ranges", value: "bytes")

        var range = ByteRange.ignored
        if request.method == "GET" {
            let ifRange = request.headers[first: "If-Range"]
            if ifRange == nil || ifRange == etag {
                range = ByteRange(header: request.headers[first: "Range"], size: info.size)
            }
        }
        var status = 200
        var offset = 0
        var length = info.size
        switch range {
        case .ignored:
            break
        case .unsatisfiable:
            headers.add(name: "Content-Range", value: "bytes */\(info.size)")
            headers.add(name: "Content-Length", value: "0")
            return LocalResponse(
                head: HTTPResponseHead(status: 416, reason: LocalResponse.reasonPhrase(416), headers: headers),
                body: [],
                servedFile: path)
        case .satisfiable(let lower, let upper):
            status = 206
            offset = lower
            length = upper - lower + 1
            headers.add(name: "Content-Range", value: "bytes \(lower)-\(upper)/\(info.size)")
        }
        headers.add(name: "Content-Length", value: String(length))
        if isHead {
            return LocalResponse(
                head: HTTPResponseHead(status: status, reason: LocalResponse.reasonPhrase(status), headers: headers),
                body: [],
                servedFile: path)
        }
        guard length <= limit else {
            var response = plain(
                status: 500,
                "ATSProxy map local: \(path) is \(length) bytes, over the limit of \(limit) bytes"
                    + " (a Range request can ask for a part of it)\n",
                method: request.method)
            response.notices = [
                ActionNotice(.tooLarge, "map local: \(path) is \(length) bytes, over the limit of \(limit)")
            ]
            return response
        }
        guard let body = files.read(path, offset: offset, count: length), body.count == length else {
            var response = plain(status: 500, "ATSProxy map local: cannot read \(path)\n", method: request.method)
            response.notices = [ActionNotice(.missingFile, "map local: cannot read \(path) (or it changed size)")]
            return response
        }
        return LocalResponse(
            head: HTTPResponseHead(status: status, reason: LocalResponse.reasonPhrase(status), headers: headers),
            body: body,
            servedFile: path)
    }

    /// Whether an `If-None-Match` list names this ETag, by the weak comparison RFC 9110 §13.1.2 asks for.
    static func matches(_ condition: String, etag: String) -> Bool {
        condition.split(separator: ",").contains { tag in
            let tag = tag.trimmingSpaces
            return tag == "*" || tag == etag || tag == "W/" + etag
        }
    }

    /// A short text/plain response (errors, 404s); its body omitted for HEAD.
    static func plain(status: Int, _ text: String, method: String) -> LocalResponse {
        let body = Array(text.utf8)
        let headers: HTTPHeaders = [
            ("Content-Type", "text/plain; charset=utf-8"), ("Content-Length", String(body.count)),
        ]
        return LocalResponse(
            head: HTTPResponseHead(status: status, reason: LocalResponse.reasonPhrase(status), headers: headers),
            body: method == "HEAD" ? [] : body)
    }
}
