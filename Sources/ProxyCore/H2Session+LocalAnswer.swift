import HTTP1Core
import HTTP2Core

extension H2Session {
    /// Answers a client's stream with a complete response of the proxy's own (a block, an error), server role.
    func answerLocally(streamID: Int32, status: Int, headers: [H2Header], body: [UInt8]) throws(H2Error) {
        // A head that carries its length (a rule's answer, a HEAD's) keeps it: two content-length fields would make
        // the client refuse the stream.
        let length = headers.contains { $0.name == "content-length" } ? [] : [H2Header("content-length", String(body.count))]
        let fields = [H2Header(":status", String(status))] + headers + length
        try submitResponse(streamID: streamID, headers: fields, body: body.isEmpty ? .none : .streaming)
        if !body.isEmpty { try sendData(streamID: streamID, body, endStream: true) }
    }

    /// Answers with an HTTP/1 response head the proxy built (connection-specific fields dropped, names lowercased).
    /// A HEAD request gets the head alone.
    func answerLocally(streamID: Int32, response: HTTPResponseHead, body: [UInt8], requestMethod: String) throws(H2Error) {
        let headers = response.headers.fields
            .filter { !H2HeaderTranslation.connectionSpecificFields.contains($0.name.lowercased()) }
            .map { H2Header($0.name.lowercased(), $0.value) }
        try answerLocally(streamID: streamID, status: response.status, headers: headers, body: requestMethod == "HEAD" ? [] : body)
    }
}
