/// Serializes message heads. Bodies are framed separately by ``HTTP1BodyWriter``, so a proxy can re-frame a body
/// (for example turn a read-until-close upstream body into chunked for a keep-alive client).
///
/// Every name and value is validated first, so a caller cannot inject header lines (CR/LF) by accident.
public enum HTTP1Serializer {
    /// Appends `METHOD target HTTP/1.x\r\n`, the fields and the empty line.
    public static func write(_ head: HTTPRequestHead, into out: inout [UInt8]) throws(HTTP1Error) {
        guard !head.method.isEmpty, head.method.utf8.allSatisfy(HTTP1Syntax.isToken) else {
            throw HTTP1Error(.local, .invalidMethod, status: 500, detail: "invalid method \(head.method)")
        }
        guard !head.target.isEmpty, head.target.utf8.allSatisfy(HTTP1Syntax.isTargetByte) else {
            throw HTTP1Error(.local, .invalidTarget, status: 500, detail: "invalid request-target \(head.target)")
        }
        try checkVersion(head.version)
        out.append(contentsOf: head.method.utf8)
        out.append(0x20)
        out.append(contentsOf: head.target.utf8)
        out.append(0x20)
        appendVersion(head.version, to: &out)
        out.append(0x0D)
        out.append(0x0A)
        try writeFields(head.headers, into: &out)
    }

    /// Appends `HTTP/1.x status reason\r\n`, the fields and the empty line.
    public static func write(_ head: HTTPResponseHead, into out: inout [UInt8]) throws(HTTP1Error) {
        guard head.status >= 100 && head.status <= 999 else {
            throw HTTP1Error(.local, .invalidStatus, status: 500, detail: "invalid status \(head.status)")
        }
        guard FieldBytes.allBytes(of: head.reason, satisfy: HTTP1Syntax.isFieldValueByte) else {
            throw HTTP1Error(.local, .invalidStartLine, status: 500, detail: "control character in reason phrase")
        }
        try checkVersion(head.version)
        appendVersion(head.version, to: &out)
        out.append(0x20)
        out.append(contentsOf: String(head.status).utf8)
        out.append(0x20)
        FieldBytes.append(head.reason, to: &out)
        out.append(0x0D)
        out.append(0x0A)
        try writeFields(head.headers, into: &out)
    }

    /// Appends a head as received from a peer (``HTTP1Parser/lastHeadBytes``) with `fields` added after its own:
    /// the received bytes up to their final empty line, the new field lines, the empty line. A proxy annotating a
    /// response this way relays the peer's fields byte for byte instead of serialising them again.
    public static func write(
        rawHead: ArraySlice<UInt8>, adding fields: [(String, String)], into out: inout [UInt8]
    ) throws(HTTP1Error) {
        let end = rawHead.endIndex
        guard rawHead.count >= 4, rawHead[end - 4] == 0x0D, rawHead[end - 3] == 0x0A, rawHead[end - 2] == 0x0D,
            rawHead[end - 1] == 0x0A
        else {
            throw HTTP1Error(.local, .invalidState, status: 500, detail: "a raw head must end with CRLF CRLF")
        }
        // Validated before anything is appended, so a failure leaves `out` as it was.
        for (name, value) in fields { try checkField(name: name, value: value) }
        out.append(contentsOf: rawHead[..<(end - 2)])
        for (name, value) in fields { appendField(name: name, value: value, to: &out) }
        out.append(0x0D)
        out.append(0x0A)
    }

    /// Appends field lines and the terminating empty line (also used for chunked trailers).
    static func writeFields(_ headers: HTTPHeaders, into out: inout [UInt8]) throws(HTTP1Error) {
        for field in headers.fields {
            try checkField(name: field.name, value: field.value)
            appendField(name: field.name, value: field.value, to: &out)
        }
        out.append(0x0D)
        out.append(0x0A)
    }

    /// Refuses what would not stay one field line: a name that is no token, a value with CR, LF or other controls.
    private static func checkField(name: String, value: String) throws(HTTP1Error) {
        guard !name.isEmpty, name.utf8.allSatisfy(HTTP1Syntax.isToken) else {
            throw HTTP1Error(.local, .invalidHeaderName, status: 500, detail: "invalid field name \(name)")
        }
        guard FieldBytes.allBytes(of: value, satisfy: HTTP1Syntax.isFieldValueByte) else {
            throw HTTP1Error(.local, .invalidHeaderValue, status: 500, detail: "control character in field \(name)")
        }
    }

    private static func appendField(name: String, value: String, to out: inout [UInt8]) {
        out.append(contentsOf: name.utf8)
        out.append(UInt8(ascii: ":"))
        out.append(0x20)
        FieldBytes.append(value, to: &out)
        out.append(0x0D)
        out.append(0x0A)
    }

    private static func checkVersion(_ version: HTTPVersion) throws(HTTP1Error) {
        guard version.major == 1 else {
            throw HTTP1Error(.local, .unsupportedVersion, status: 500, detail: "cannot serialize \(version)")
        }
    }

    /// HTTP/1.0 stays 1.0 (its framing rules are what the head was parsed with); any later 1.x is written as ours,
    /// HTTP/1.1: a recipient processes a higher minor version as the highest it implements, and an intermediary sends
    /// its own version (RFC 9110 §2.5).
    private static func appendVersion(_ version: HTTPVersion, to out: inout [UInt8]) {
        out.append(contentsOf: (version.minor == 0 ? "HTTP/1.0" : "HTTP/1.1").utf8)
    }
}

/// Frames one message body for sending: Content-Length (checked), chunked (encoded), until-close (raw) or none.
public struct HTTP1BodyWriter: Sendable {
    public let framing: HTTP1BodyFraming
    private var written = 0
    private var finished = false

    public init(framing: HTTP1BodyFraming) {
        self.framing = framing
    }

    /// Appends one piece of body, framed. Empty pieces write nothing (an empty chunk would end a chunked body).
    /// Specialized for arrays and slices: called from other modules, the generic version pays a metadata lookup per
    /// piece.
    @_specialize(exported: true, where Piece == [UInt8])
    @_specialize(exported: true, where Piece == ArraySlice<UInt8>)
    public mutating func write<Piece: Collection<UInt8>>(_ piece: Piece, into out: inout [UInt8]) throws(HTTP1Error) {
        guard !finished else {
            throw HTTP1Error(.local, .invalidState, status: 500, detail: "body written after finish")
        }
        if piece.isEmpty { return }
        switch framing {
        case .none, .switchProtocols:
            throw HTTP1Error(.local, .bodyLengthMismatch, status: 500, detail: "this message cannot have a body")
        case .contentLength(let length):
            guard written + piece.count <= length else {
                throw HTTP1Error(
                    .local, .bodyLengthMismatch, status: 500, detail: "body exceeds Content-Length \(length)")
            }
            out.append(contentsOf: piece)
        case .chunked:
            out.append(contentsOf: String(piece.count, radix: 16).utf8)
            out.append(0x0D)
            out.append(0x0A)
            out.append(contentsOf: piece)
            out.append(0x0D)
            out.append(0x0A)
        case .untilClose:
            out.append(contentsOf: piece)
        }
        written += piece.count
    }

    /// Appends one piece of body, framed, as `write(_:into:)` does for any collection; but when `out` is empty and
    /// the framing adds no bytes (Content-Length, until-close), `out` takes the piece's storage instead of a copy:
    /// a relay streaming a download then moves each read's bytes from the parser to TLS without copying them.
    public mutating func write(_ piece: [UInt8], into out: inout [UInt8]) throws(HTTP1Error) {
        switch framing {
        case .contentLength(let length) where out.isEmpty && !finished && written + piece.count <= length:
            out = piece
            written += piece.count
        case .untilClose where out.isEmpty && !finished:
            out = piece
            written += piece.count
        default:
            try write(piece[...], into: &out)
        }
    }

    /// Ends the body: the last chunk and trailers for chunked, a length check for Content-Length.
    /// For `.untilClose` the caller must close the connection afterwards.
    public mutating func finish(trailers: HTTPHeaders = [], into out: inout [UInt8]) throws(HTTP1Error) {
        guard !finished else {
            throw HTTP1Error(.local, .invalidState, status: 500, detail: "body finished twice")
        }
        if !trailers.isEmpty && framing != .chunked {
            throw HTTP1Error(.local, .invalidState, status: 500, detail: "trailers need chunked framing")
        }
        switch framing {
        case .contentLength(let length) where written != length:
            throw HTTP1Error(
                .local, .bodyLengthMismatch, status: 500, detail: "body has \(written) of \(length) bytes")
        case .chunked:
            out.append(UInt8(ascii: "0"))
            out.append(0x0D)
            out.append(0x0A)
            try HTTP1Serializer.writeFields(trailers, into: &out)
        default:
            break
        }
        finished = true
    }
}
