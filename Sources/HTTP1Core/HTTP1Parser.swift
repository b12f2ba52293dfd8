// Theory of operation (after h11's _state.py):
//
// 1. One parser reads one direction of one connection: either requests (from a client) or responses (from a server).
// 2. Bytes go in with `receive`, the end of the stream with `receiveEOF`; `nextEvent` is then called until it returns
//    `.needMoreData`, `.paused`, `.connectionClosed` or `.switchedProtocols`. Events come out in wire order:
//    head, zero or more body pieces, end.
// 3. After each message's end the parser is paused: the owner decides (after answering a request, or after relaying a
//    response) whether the connection goes on (`startNextMessage`) or stops speaking HTTP/1 (`switchProtocols`, for
//    CONNECT/Upgrade requests that got a 2xx/101). Pipelined bytes wait in the buffer meanwhile.
// 4. A response's framing depends on the request it answers, so the responses role must be told each request method
//    with `expectResponse(toRequestMethod:)` before its response arrives. Interim 1xx heads do not consume it.
// 5. Any error is sticky: the connection cannot be resynchronised, every later call rethrows it.
// 6. Line endings: the head accepts CRLF or a bare LF (RFC 9112 §2.2 allows it), but chunk-size lines and chunk data
//    terminators require CRLF, because lenient chunk parsing is a classic request-smuggling vector.
// 7. A proxy that relays a head unchanged can send the bytes it received instead of serialising the parsed head
//    again (`lastHeadBytes`, with the framing the parser already worked out in `lastBodyFraming`). Only heads in
//    canonical form qualify (CRLF everywhere, HTTP/1.0 or 1.1), so a bare LF is never passed on to a server that
//    might split lines differently.

/// An incremental, sans-io HTTP/1.1 parser for one direction of a connection.
///
/// Not thread-safe: a value type that belongs to whoever owns the connection (one loop thread).
public struct HTTP1Parser: Sendable {
    /// Which kind of message this parser reads.
    public enum Role: Equatable, Sendable {
        /// Parse requests (we are the server side, e.g. the proxy facing a client).
        case requests
        /// Parse responses (we are the client side, e.g. the proxy facing an upstream).
        case responses
    }

    public let role: Role
    public let limits: HTTP1Limits

    private enum BodyState: Sendable {
        case fixed(remaining: Int)
        case untilClose
        case chunkSize
        case chunkData(remaining: Int)
        case chunkDataEnd
        case trailers
    }

    private enum State: Sendable {
        case idle
        case body(BodyState)
        case paused
        case switchPending
        case switched
        case closed
        case failed(HTTP1Error)
    }

    private var buffer: [UInt8] = []
    private var start = 0
    private var headScanIndex = 0
    /// The current head's start line is known to end (an LF was found) within the start-line limit: checked once per
    /// head, not on every read while the rest of the head trickles in.
    private var startLineEnded = false
    private var eof = false
    private var state: State = .idle
    private var pendingMethods: [String] = []
    private var currentMayChangeProtocol = false
    /// The wire range of the last head, and whether it may be relayed verbatim (theory of operation, rule 7).
    private var lastHead: Range<Int> = 0..<0
    private var lastHeadIsCanonical = false

    /// Whether the last message (head) allows the connection to persist; meaningful once a head was parsed.
    /// For a whole exchange, combine the request's and the response's answer.
    public private(set) var lastMessageKeepAlive = true

    /// How the body of the last final (non-1xx) head is framed, as ``HTTP1Framing`` decided while parsing it.
    public private(set) var lastBodyFraming: HTTP1BodyFraming = .none

    /// The exact bytes of the head `nextEvent()` just returned (start line through the empty line) when they are in
    /// canonical form: every line ends with CRLF and the version is HTTP/1.0 or 1.1, so they are what
    /// ``HTTP1Serializer`` would produce for an unchanged head, up to the spelling the peer chose (`Name:value`
    /// spacing, trailing whitespace, non-UTF-8 bytes, all relayed as received). nil for other heads, and after any
    /// later call that changes the parser (`receive`, `nextEvent`, …).
    public var lastHeadBytes: ArraySlice<UInt8>? {
        lastHeadIsCanonical ? buffer[lastHead] : nil
    }

    public init(role: Role, limits: HTTP1Limits = .init()) {
        self.role = role
        self.limits = limits
    }

    /// Bytes received but not yet turned into events.
    public var bufferedByteCount: Int { buffer.count - start }

    /// Appends bytes read from the peer.
    public mutating func receive(_ bytes: some Sequence<UInt8>) {
        lastHeadIsCanonical = false
        compactIfWorthwhile()
        buffer.append(contentsOf: bytes)
    }

    /// Appends bytes read from the peer; when nothing is buffered the array is adopted without a copy (the usual
    /// case for a relay, where each read is parsed to the end before the next arrives).
    public mutating func receive(_ bytes: [UInt8]) {
        lastHeadIsCanonical = false
        compactIfWorthwhile()
        if buffer.isEmpty {
            buffer = bytes
        } else {
            buffer.append(contentsOf: bytes)
        }
    }

    /// Appends bytes read from the peer, straight from a (loop-owned) read buffer.
    public mutating func receive(_ bytes: UnsafeRawBufferPointer) {
        lastHeadIsCanonical = false
        compactIfWorthwhile()
        buffer.append(contentsOf: bytes)
    }

    /// Records that the peer closed its sending side.
    public mutating func receiveEOF() {
        eof = true
    }

    /// Responses role: records that a request with this method was sent, so its response can be framed.
    public mutating func expectResponse(toRequestMethod method: String) {
        pendingMethods.append(method)
    }

    /// Leaves the paused state after a message ended, to parse the next message on the same connection.
    ///
    /// Throws a local error when the last message said the connection must close.
    public mutating func startNextMessage() throws(HTTP1Error) {
        guard case .paused = state else {
            throw HTTP1Error(.local, .invalidState, status: 500, detail: "startNextMessage outside the paused state")
        }
        guard lastMessageKeepAlive else {
            throw HTTP1Error(
                .local, .connectionMustClose, status: 500, detail: "the last message did not allow keep-alive")
        }
        state = .idle
        currentMayChangeProtocol = false
    }

    /// Requests role: after a CONNECT or Upgrade request was answered with 2xx/101, stops parsing HTTP/1 and returns
    /// the bytes already received that belong to the new protocol (e.g. a TLS ClientHello).
    public mutating func switchProtocols() throws(HTTP1Error) -> [UInt8] {
        guard case .paused = state, currentMayChangeProtocol else {
            throw HTTP1Error(
                .local, .invalidState, status: 500,
                detail: "switchProtocols is only valid after a CONNECT or Upgrade request has ended")
        }
        state = .switched
        lastHeadIsCanonical = false
        return takeBuffered()
    }

    /// Returns the next event. See the theory of operation at the top of this file.
    public mutating func nextEvent() throws(HTTP1Error) -> HTTP1Event {
        lastHeadIsCanonical = false
        do {
            return try step()
        } catch {
            state = .failed(error)
            throw error
        }
    }

    private mutating func step() throws(HTTP1Error) -> HTTP1Event {
        switch state {
        case .failed(let error):
            throw error
        case .closed:
            return .connectionClosed
        case .paused:
            return .paused
        case .switchPending:
            state = .switched
            return .switchedProtocols(leftover: takeBuffered())
        case .switched:
            return bufferedByteCount > 0 ? .switchedProtocols(leftover: takeBuffered()) : .paused
        case .idle:
            return try parseHead()
        case .body(let body):
            return try parseBody(body)
        }
    }

    // MARK: - Buffer

    private mutating func compactIfWorthwhile() {
        if start == buffer.count {
            buffer.removeAll(keepingCapacity: true)
            headScanIndex = 0
            start = 0
        } else if start > 4096 && start * 2 > buffer.count {
            buffer.removeSubrange(0..<start)
            headScanIndex = max(0, headScanIndex - start)
            start = 0
        }
    }

    private mutating func takeBuffered() -> [UInt8] {
        let rest = Array(buffer[start...])
        start = buffer.count
        return rest
    }

    private func remoteError(_ reason: HTTP1Error.Reason, requestStatus: Int, _ detail: String) -> HTTP1Error {
        HTTP1Error(.remote, reason, status: role == .requests ? requestStatus : 502, detail: detail)
    }

    // MARK: - Heads

    private mutating func parseHead() throws(HTTP1Error) -> HTTP1Event {
        // RFC 9112 §2.2: a server should ignore empty lines received before the request line.
        while start < buffer.count {
            if buffer[start] == 0x0A {
                start += 1
            } else if buffer[start] == 0x0D, start + 1 < buffer.count, buffer[start + 1] == 0x0A {
                start += 2
            } else {
                break
            }
        }
        if bufferedByteCount == 0 || (bufferedByteCount == 1 && buffer[start] == 0x0D) {
            if eof {
                if bufferedByteCount == 0 {
                    state = .closed
                    return .connectionClosed
                }
                throw remoteError(.incompleteMessage, requestStatus: 400, "connection closed inside a message head")
            }
            return .needMoreData
        }
        if role == .responses && pendingMethods.isEmpty {
            throw HTTP1Error(.remote, .unexpectedData, status: 502, detail: "response bytes with no request outstanding")
        }
        guard let headEnd = findSectionEnd(from: start) else {
            if bufferedByteCount > limits.maxHeaderSectionBytes {
                throw remoteError(
                    .headerSectionTooLarge, requestStatus: 431,
                    "header section exceeds \(limits.maxHeaderSectionBytes) bytes")
            }
            let limit = limits.maxStartLineBytes
            if !startLineEnded && bufferedByteCount > limit {
                // A line at the limit may end with CR at `start + limit` and its LF just after.
                if buffer[start..<Swift.min(buffer.count, start + limit + 2)].contains(0x0A) {
                    startLineEnded = true
                } else if bufferedByteCount > limit + 1 || buffer[start + limit] != 0x0D {
                    throw remoteError(.startLineTooLong, requestStatus: 414, "start line exceeds \(limit) bytes")
                }
            }
            if eof {
                throw remoteError(.incompleteMessage, requestStatus: 400, "connection closed inside a message head")
            }
            return .needMoreData
        }
        if headEnd - start > limits.maxHeaderSectionBytes {
            throw remoteError(
                .headerSectionTooLarge, requestStatus: 431,
                "header section exceeds \(limits.maxHeaderSectionBytes) bytes")
        }
        let firstLF = buffer[start..<headEnd].firstIndex(of: 0x0A) ?? headEnd
        var lineEnd = firstLF
        if lineEnd > start && buffer[lineEnd - 1] == 0x0D { lineEnd -= 1 }
        if lineEnd - start > limits.maxStartLineBytes {
            throw remoteError(
                .startLineTooLong, requestStatus: 414, "start line exceeds \(limits.maxStartLineBytes) bytes")
        }
        let startLine = buffer[start..<lineEnd]
        var bareLF = lineEnd == firstLF
        let headers = try parseFields(from: firstLF + 1, to: headEnd, bareLF: &bareLF)
        let headStart = start
        start = headEnd
        headScanIndex = start
        startLineEnded = false

        switch role {
        case .requests:
            let head = try parseRequestLine(startLine, headers: headers)
            let framing = try HTTP1Framing.forRequest(head, limits: limits)
            lastMessageKeepAlive = head.keepAlive
            currentMayChangeProtocol = head.mayChangeProtocol
            lastBodyFraming = framing
            state = .body(bodyState(for: framing))
            recordHead(headStart..<headEnd, canonical: !bareLF && head.version.minor <= 1)
            return .requestHead(head)
        case .responses:
            let head = try parseStatusLine(startLine, headers: headers)
            let method = pendingMethods[0]
            let framing = try HTTP1Framing.forResponse(head, requestMethod: method, limits: limits)
            recordHead(headStart..<headEnd, canonical: !bareLF && head.version.minor <= 1)
            if head.isInterim { return .responseHead(head) }
            lastBodyFraming = framing
            pendingMethods.removeFirst()
            lastMessageKeepAlive = head.keepAlive && framing != .untilClose
            if framing == .switchProtocols {
                state = .switchPending
            } else {
                state = .body(bodyState(for: framing))
            }
            return .responseHead(head)
        }
    }

    private mutating func recordHead(_ range: Range<Int>, canonical: Bool) {
        lastHead = range
        lastHeadIsCanonical = canonical
    }

    private func bodyState(for framing: HTTP1BodyFraming) -> BodyState {
        switch framing {
        case .none, .switchProtocols: .fixed(remaining: 0)
        case .contentLength(let n): .fixed(remaining: n)
        case .chunked: .chunkSize
        case .untilClose: .untilClose
        }
    }

    /// Finds the end (index after the final LF) of a field section that ends with an empty line, scanning only bytes
    /// not scanned before so that byte-by-byte delivery stays linear.
    private mutating func findSectionEnd(from sectionStart: Int) -> Int? {
        let scanFrom = max(headScanIndex, sectionStart)
        // Every byte of every head passes through here: scan without per-byte bounds checks.
        let found: Int? = buffer.withUnsafeBufferPointer { b in
            var from = scanFrom
            while let i = HTTP1Syntax.firstIndex(of: 0x0A, in: b, from: from, to: b.count) {
                // An empty line: LF right at the section start, or preceded by LF or CRLF.
                if i == sectionStart || (i == sectionStart + 1 && b[sectionStart] == 0x0D) { return i + 1 }
                if b[i - 1] == 0x0A || (b[i - 1] == 0x0D && i - 2 >= sectionStart && b[i - 2] == 0x0A) { return i + 1 }
                from = i + 1
            }
            return nil
        }
        // Keep two bytes of look-behind for the CR LF check.
        headScanIndex = found == nil ? max(sectionStart, buffer.count - 2) : sectionStart
        return found
    }

    /// Parses the field lines in `from..<to` (which ends with the empty line); sets `bareLF` when a line, the empty
    /// one included, ends with LF alone.
    /// The fields are kept as a copy of the section's bytes with the position of each name and value: no String is
    /// made unless someone reads `HTTPHeaders.fields`.
    ///
    /// A usual line is read in one pass: the name up to the colon through the token table, then the value up to
    /// the first control byte or DEL, eight bytes at a time; that byte must be the line's CR LF or LF. Any other
    /// line (whitespace or a bad byte in the name, HTAB or a control byte in the value, a fold) goes to
    /// `parseFieldLineSlowly`, which decides it and names the error exactly as before. The section ends with LF,
    /// which is neither a tchar nor a value byte, so both scans stop inside it.
    private func parseFields(from: Int, to: Int, bareLF: inout Bool) throws(HTTP1Error) -> HTTPHeaders {
        // Every byte of every head is checked here: read them without per-byte bounds checks.
        var nameFilter: UInt64 = 0
        let ranges = try HTTP1Syntax.nonTokenTable.withUnsafeBufferPointer {
            (tokenTable) throws(HTTP1Error) -> [HTTPHeaders.WireRange] in
            try buffer.withUnsafeBufferPointer { (b) throws(HTTP1Error) -> [HTTPHeaders.WireRange] in
                let table = tokenTable.baseAddress.unsafelyUnwrapped
                var ranges: [HTTPHeaders.WireRange] = []
                ranges.reserveCapacity(16)
                var lineStart = from
                while lineStart < to {
                    let first = b[lineStart]
                    if first == 0x0A {
                        bareLF = true
                        break
                    }
                    if first == 0x0D && b[lineStart + 1] == 0x0A { break }
                    var colon = lineStart
                    while table[Int(b[colon])] == 0 { colon += 1 }
                    if colon > lineStart && b[colon] == UInt8(ascii: ":"),
                        let value = HTTP1Syntax.plainFieldValue(b, from: colon + 1, to: to)
                    {
                        if ranges.count >= limits.maxHeaderCount { throw tooManyFields() }
                        if value.bareLF { bareLF = true }
                        nameFilter |= HTTPHeaders.nameFilterBit(
                            count: colon - lineStart, first: first, last: b[colon - 1])
                        ranges.append(
                            HTTPHeaders.WireRange(
                                name: (lineStart - from)..<(colon - from),
                                value: (value.start - from)..<(value.end - from)))
                        lineStart = value.next
                        continue
                    }
                    guard
                        let (range, next) = try parseFieldLineSlowly(
                            b, lineStart: lineStart, to: to, fieldCount: ranges.count, table: table, bareLF: &bareLF)
                    else { break }
                    nameFilter |= HTTPHeaders.nameFilterBit(
                        count: range.name.count, first: b[range.name.lowerBound], last: b[range.name.upperBound - 1])
                    ranges.append(
                        HTTPHeaders.WireRange(
                            name: (range.name.lowerBound - from)..<(range.name.upperBound - from),
                            value: (range.value.lowerBound - from)..<(range.value.upperBound - from)))
                    lineStart = next
                }
                return ranges
            }
        }
        if ranges.isEmpty { return HTTPHeaders() }
        return HTTPHeaders(
            wire: HTTPHeaders.WireFields(bytes: Array(buffer[from..<to]), ranges: ranges, nameFilter: nameFilter))
    }

    private func tooManyFields() -> HTTP1Error {
        remoteError(.tooManyHeaders, requestStatus: 431, "more than \(limits.maxHeaderCount) fields")
    }

    /// One field line the one-pass scan did not take, checked rule by rule: returns its name and value (positions in
    /// `b`) and where the next line starts, nil for the empty line that ends the section, or the error.
    private func parseFieldLineSlowly(
        _ b: UnsafeBufferPointer<UInt8>, lineStart: Int, to: Int, fieldCount: Int, table: UnsafePointer<UInt8>,
        bareLF: inout Bool
    ) throws(HTTP1Error) -> (HTTPHeaders.WireRange, next: Int)? {
        guard let lf = HTTP1Syntax.firstIndex(of: 0x0A, in: b, from: lineStart, to: to) else { return nil }
        var lineEnd = lf
        if lineEnd > lineStart && b[lineEnd - 1] == 0x0D { lineEnd -= 1 } else { bareLF = true }
        if lineEnd == lineStart { return nil }
        let first = b[lineStart]
        if first == 0x20 || first == 0x09 {
            throw remoteError(.obsoleteLineFolding, requestStatus: 400, "obsolete line folding in header section")
        }
        if fieldCount >= limits.maxHeaderCount { throw tooManyFields() }
        let colon = HTTP1Syntax.firstIndex(of: UInt8(ascii: ":"), in: b, from: lineStart, to: lineEnd) ?? lineEnd
        guard colon < lineEnd, colon > lineStart else {
            throw remoteError(.invalidHeaderName, requestStatus: 400, "field line without a name and colon")
        }
        let last = b[colon - 1]
        if last == 0x20 || last == 0x09 {
            // RFC 9112 §5.1: whitespace between name and colon must be rejected (smuggling vector).
            throw remoteError(.whitespaceBeforeColon, requestStatus: 400, "whitespace before colon in field name")
        }
        guard HTTP1Syntax.allTokenBytes(b, from: lineStart, to: colon, table: table) else {
            throw remoteError(.invalidHeaderName, requestStatus: 400, "invalid character in field name")
        }
        var valueStart = colon + 1
        var valueEnd = lineEnd
        while valueStart < valueEnd, b[valueStart] == 0x20 || b[valueStart] == 0x09 { valueStart += 1 }
        while valueEnd > valueStart, b[valueEnd - 1] == 0x20 || b[valueEnd - 1] == 0x09 { valueEnd -= 1 }
        guard HTTP1Syntax.allFieldValueBytes(b, from: valueStart, to: valueEnd) else {
            throw remoteError(.invalidHeaderValue, requestStatus: 400, "control character in field value")
        }
        return (HTTPHeaders.WireRange(name: lineStart..<colon, value: valueStart..<valueEnd), lf + 1)
    }

    private func parseVersion(_ b: ArraySlice<UInt8>) throws(HTTP1Error) -> HTTPVersion {
        let i = b.startIndex
        // Byte by byte: `elementsEqual` against a `String.UTF8View` walks the view's indices, which costs more than the
        // rest of the start line.
        guard b.count == 8, b[i] == UInt8(ascii: "H"), b[i + 1] == UInt8(ascii: "T"), b[i + 2] == UInt8(ascii: "T"),
            b[i + 3] == UInt8(ascii: "P"), b[i + 4] == UInt8(ascii: "/"), b[i + 6] == UInt8(ascii: "."),
            b[i + 5] >= 0x30, b[i + 5] <= 0x39, b[i + 7] >= 0x30, b[i + 7] <= 0x39
        else {
            throw remoteError(.invalidStartLine, requestStatus: 400, "malformed HTTP version")
        }
        let version = HTTPVersion(major: Int(b[i + 5] - 0x30), minor: Int(b[i + 7] - 0x30))
        guard version.major == 1 else {
            throw remoteError(.unsupportedVersion, requestStatus: 505, "unsupported HTTP version \(version)")
        }
        return version
    }

    private func parseRequestLine(_ line: ArraySlice<UInt8>, headers: HTTPHeaders) throws(HTTP1Error)
        -> HTTPRequestHead
    {
        guard let sp1 = line.firstIndex(of: 0x20), let sp2 = line.lastIndex(of: 0x20), sp1 < sp2 else {
            throw remoteError(.invalidStartLine, requestStatus: 400, "request line needs method, target and version")
        }
        let methodBytes = line[line.startIndex..<sp1]
        guard !methodBytes.isEmpty, methodBytes.allSatisfy(HTTP1Syntax.isToken) else {
            throw remoteError(.invalidMethod, requestStatus: 400, "invalid method token")
        }
        let targetBytes = line[(sp1 + 1)..<sp2]
        guard !targetBytes.isEmpty, targetBytes.allSatisfy(HTTP1Syntax.isTargetByte) else {
            throw remoteError(.invalidTarget, requestStatus: 400, "invalid request-target")
        }
        // The target is kept as a String and written out again: bytes that are not UTF-8 (Latin-1 obs-text) would
        // reach the next hop re-encoded, a different target than the client sent. RFC 3986 wants them
        // percent-encoded; refuse rather than alter them.
        if targetBytes.contains(where: { $0 >= 0x80 }), String(validating: targetBytes, as: UTF8.self) == nil {
            throw remoteError(
                .invalidTarget, requestStatus: 400, "request-target bytes that are not UTF-8: percent-encode them")
        }
        let version = try parseVersion(line[(sp2 + 1)...])
        let head = HTTPRequestHead(
            method: HTTP1Syntax.string(methodBytes), target: HTTP1Syntax.string(targetBytes), version: version,
            headers: headers)
        // RFC 9112 §3.2: HTTP/1.1 requests need exactly one Host field, holding uri-host [":" port] (or nothing, for
        // a target without an authority). A list such as `a.test, b.test` would be read as one host by the proxy
        // and as another by the next hop.
        // One pass counts the fields and checks each value.
        var hosts = 0
        var invalid: ArraySlice<UInt8>?
        headers.forEachValue(of: .host) { value in
            hosts += 1
            if !value.isEmpty, HTTPRequestTarget.authorityParts(value) == nil { invalid = value }
        }
        if (version.minor >= 1 && hosts == 0) || hosts > 1 {
            throw remoteError(.invalidHeaderValue, requestStatus: 400, "HTTP/1.1 request needs exactly one Host field")
        }
        if let invalid {
            throw remoteError(
                .invalidHeaderValue, requestStatus: 400,
                "invalid Host \(HTTP1Syntax.string(invalid).debugDescription): not host[:port]")
        }
        if head.method == "CONNECT" {
            _ = try HTTPRequestTarget(parsing: head.target, method: head.method)
        }
        return head
    }

    private func parseStatusLine(_ line: ArraySlice<UInt8>, headers: HTTPHeaders) throws(HTTP1Error)
        -> HTTPResponseHead
    {
        guard let sp1 = line.firstIndex(of: 0x20) else {
            throw remoteError(.invalidStartLine, requestStatus: 400, "status line needs version and status")
        }
        let version = try parseVersion(line[line.startIndex..<sp1])
        let codeStart = sp1 + 1
        guard line.endIndex - codeStart >= 3,
            line[codeStart..<(codeStart + 3)].allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
            codeStart + 3 == line.endIndex || line[codeStart + 3] == 0x20
        else {
            throw remoteError(.invalidStatus, requestStatus: 400, "status code must be three digits")
        }
        let status = line[codeStart..<(codeStart + 3)].reduce(0) { $0 * 10 + Int($1 - 0x30) }
        guard status >= 100 else {
            throw remoteError(.invalidStatus, requestStatus: 400, "status code \(status) below 100")
        }
        let reasonBytes = codeStart + 4 <= line.endIndex ? line[(codeStart + 4)...] : []
        guard reasonBytes.allSatisfy(HTTP1Syntax.isFieldValueByte) else {
            throw remoteError(.invalidStartLine, requestStatus: 400, "control character in reason phrase")
        }
        return HTTPResponseHead(
            version: version, status: status, reason: HTTP1Syntax.string(reasonBytes), headers: headers)
    }

    // MARK: - Bodies

    private mutating func endMessage(trailers: HTTPHeaders = []) -> HTTP1Event {
        state = .paused
        return .end(trailers: trailers)
    }

    private mutating func takeBody(max: Int) -> [UInt8] {
        let n = Swift.min(max, bufferedByteCount)
        if start == 0 && n == buffer.count {
            // The whole buffer is body (the usual case while streaming): hand the array over instead of copying.
            let chunk = buffer
            buffer = []
            headScanIndex = 0
            return chunk
        }
        let chunk = Array(buffer[start..<(start + n)])
        start += n
        return chunk
    }

    private mutating func parseBody(_ body: BodyState) throws(HTTP1Error) -> HTTP1Event {
        switch body {
        case .fixed(let remaining):
            if remaining == 0 { return endMessage() }
            if bufferedByteCount == 0 {
                if eof { throw remoteError(.incompleteMessage, requestStatus: 400, "connection closed inside a body") }
                return .needMoreData
            }
            let chunk = takeBody(max: remaining)
            state = .body(.fixed(remaining: remaining - chunk.count))
            return .body(chunk)
        case .untilClose:
            if bufferedByteCount > 0 { return .body(takeBody(max: bufferedByteCount)) }
            if eof {
                lastMessageKeepAlive = false
                return endMessage()
            }
            return .needMoreData
        case .chunkData(let remaining):
            if bufferedByteCount == 0 {
                if eof { throw remoteError(.incompleteMessage, requestStatus: 400, "connection closed inside a chunk") }
                return .needMoreData
            }
            let chunk = takeBody(max: remaining)
            let left = remaining - chunk.count
            state = .body(left == 0 ? .chunkDataEnd : .chunkData(remaining: left))
            return .body(chunk)
        case .chunkDataEnd:
            if bufferedByteCount < 2 {
                if bufferedByteCount == 1 && buffer[start] != 0x0D {
                    throw remoteError(.invalidChunkTerminator, requestStatus: 400, "chunk data not followed by CRLF")
                }
                if eof { throw remoteError(.incompleteMessage, requestStatus: 400, "connection closed inside a chunk") }
                return .needMoreData
            }
            guard buffer[start] == 0x0D && buffer[start + 1] == 0x0A else {
                throw remoteError(.invalidChunkTerminator, requestStatus: 400, "chunk data not followed by CRLF")
            }
            start += 2
            state = .body(.chunkSize)
            return try parseBody(.chunkSize)
        case .chunkSize:
            return try parseChunkSize()
        case .trailers:
            return try parseTrailers()
        }
    }

    private mutating func parseChunkSize() throws(HTTP1Error) -> HTTP1Event {
        let searchEnd = Swift.min(buffer.count, start + limits.maxChunkLineBytes)
        guard let lf = buffer[start..<searchEnd].firstIndex(of: 0x0A) else {
            if bufferedByteCount >= limits.maxChunkLineBytes {
                throw remoteError(.chunkLineTooLong, requestStatus: 400, "chunk-size line too long")
            }
            if eof { throw remoteError(.incompleteMessage, requestStatus: 400, "connection closed inside a chunk") }
            return .needMoreData
        }
        guard lf > start, buffer[lf - 1] == 0x0D else {
            throw remoteError(.invalidChunkSize, requestStatus: 400, "chunk-size line must end with CRLF")
        }
        let lineEnd = lf - 1
        var i = start
        var size = 0
        while i < lineEnd, let digit = Self.hexValue(buffer[i]) {
            if size > (Int.max >> 4) {
                throw remoteError(.chunkSizeOverflow, requestStatus: 400, "chunk size overflows")
            }
            size = size << 4 | digit
            i += 1
        }
        guard i > start else { throw remoteError(.invalidChunkSize, requestStatus: 400, "chunk size is not hex") }
        // Anything after the size must be BWS and a chunk extension, which we ignore (RFC 9112 §7.1.1).
        while i < lineEnd, buffer[i] == 0x20 || buffer[i] == 0x09 { i += 1 }
        if i < lineEnd {
            guard buffer[i] == UInt8(ascii: ";") else {
                throw remoteError(.invalidChunkSize, requestStatus: 400, "garbage after chunk size")
            }
            for j in i..<lineEnd where !HTTP1Syntax.isFieldValueByte(buffer[j]) {
                throw remoteError(.invalidChunkSize, requestStatus: 400, "control character in chunk extension")
            }
        }
        start = lf + 1
        if size == 0 {
            state = .body(.trailers)
            return try parseTrailers()
        }
        if size > limits.maxBodyBytes {
            throw remoteError(.bodyTooLarge, requestStatus: 413, "chunk larger than the body limit")
        }
        state = .body(.chunkData(remaining: size))
        return try parseBody(.chunkData(remaining: size))
    }

    private mutating func parseTrailers() throws(HTTP1Error) -> HTTP1Event {
        guard let end = findSectionEnd(from: start) else {
            if bufferedByteCount > limits.maxHeaderSectionBytes {
                throw remoteError(.headerSectionTooLarge, requestStatus: 431, "trailer section too large")
            }
            if eof { throw remoteError(.incompleteMessage, requestStatus: 400, "connection closed inside trailers") }
            return .needMoreData
        }
        var bareLF = false
        let trailers = try parseFields(from: start, to: end, bareLF: &bareLF)
        start = end
        headScanIndex = start
        return endMessage(trailers: trailers)
    }

    @inline(__always) private static func hexValue(_ b: UInt8) -> Int? {
        switch b {
        case 0x30...0x39: Int(b - 0x30)
        case 0x41...0x46: Int(b - 0x41 + 10)
        case 0x61...0x66: Int(b - 0x61 + 10)
        default: nil
        }
    }
}
