import HTTP1Core
import HTTP2Core
import ProxyTrace

// Theory of operation:
//
// 1. Used when the client speaks HTTP/1.1 and the upstream chose h2 (an h2-only origin, or `--upstream-alpn ios`).
//    The client side is an HTTP1Parser; the upstream side an H2Session in the client role.
// 2. As in HTTP1Relay, one exchange is in flight at a time: pipelined requests wait in the parser. Each request
//    becomes a new stream (H2HeaderTranslation: Host → :authority, connection-specific fields dropped). As there,
//    the owner decides each head (`RelayOutput.toDecide`, answered by `resolve`, now or later); the connection's
//    further bytes wait in the parser meanwhile, and past `HTTP1Relay.heldLimit` the client is not read.
// 3. Response heads are translated back. HTTP/1 needs a framing HTTP/2 does not: a response without
//    Content-Length is sent chunked to an HTTP/1.1 client, and close-delimited to an HTTP/1.0 one. A body a body
//    rule held whole (`HeldBody`) goes with its length, known by then.
// 4. Flow control: response DATA is credited back as soon as it is handed to the client connection, whose socket
//    backpressure stops reading the upstream when the client is slow. Request bodies wait in the stream's outbound
//    queue for the upstream's window; past `queueHighWater` the client connection stops being read.
// 5. An upstream reset or GOAWAY before the response head becomes a 502; after it, the client connection is reset
//    (`abortClient`: HTTP/1 has no other way to say a body is incomplete, and a close would end a close-delimited
//    one). Upgrade requests cannot cross to HTTP/2: the first
//    request of a connection asks the session to reconnect the upstream offering only http/1.1 and replay it
//    (`retryUpgradeOverHTTP1`, as with `--upstream-alpn ios` the upstream chose h2 only because it was offered);
//    a later one, or CONNECT, gets a 501.
// 6. A GOAWAY that refuses the request in flight (its stream above the last stream id: never processed) makes the
//    session send it again on a new connection (`RelayRetry.onNewConnection`), as URLSession does, when the relay kept it
//    whole (a head, and a Content-Length body up to `replayLimit`) and nothing is pipelined behind it; else 502.

final class H1ToH2Relay: ExchangeRelay {
    private var requests = HTTP1Parser(role: .requests)
    private let upstream: H2Session
    private let now: () -> Double
    private var out = RelayOutput()

    /// A request head waiting for the owner's decision, with what `begin` needs of the parser.
    private struct Undecided {
        let head: HTTPRequestHead
        let received: ArraySlice<UInt8>?
        let asksUpgrade: Bool
        let number: Int
        let arrived: Double
    }

    private var undecided: Undecided?
    /// Request heads begun on this connection, numbering them for `resolve`.
    private var headsBegun = 0

    private struct Exchange: ExchangeRecording, LocallyAnsweredExchange {
        let method: String
        let url: String
        let outcome: ExchangeSummary.ATSOutcome
        let codes: [ExchangeError]
        let annotation: [(String, String)]
        let started: Double
        let clientVersion: HTTPVersion
        var requestKeepAlive: Bool
        var streamID: Int32?
        /// The request head went out without END_STREAM: DATA or trailers must end it.
        var requestStreaming = false
        var requestEnded = false
        var requestBytes = 0
        var responseBytes = 0
        var status: Int?
        var responseHeadSent = false
        var responseWriter: HTTP1BodyWriter?
        var responseTrailers: HTTPHeaders = []
        var responseEnded = false
        /// A local answer: the request body is read and dropped, then this goes out.
        var localAnswer: [UInt8]?
        var recorder: ExchangeRecorder?
        var rules: ExchangeRules?
        /// The response body a body rule holds whole; its head waits with it (`responseHeadSent` is false).
        var heldBody: HeldResponse?
        /// The whole response a breakpoint holds after the upstream ended it, until `releaseResponse`.
        var atBreakpoint: (head: HTTPResponseHead, body: [UInt8])?
        /// The request body a body rule holds whole; its stream opens at the body's end.
        var heldRequest: HeldRequest?
        /// The request as received, kept for a retry on a new connection (theory of operation, 6); nil when not
        /// kept (a chunked body, or one over `replayLimit`).
        var replay: [UInt8]?
        /// The upstream's GOAWAY refused the request: it is retried once read whole.
        var refused = false
    }

    private var exchange: Exchange?
    private var finished = false
    private var clientPaused = false
    /// The upstream said GOAWAY or closed: the exchange in flight may finish, then the client must reconnect.
    private var upstreamGone = false

    /// Request-body bytes allowed to wait for the upstream's flow-control window before the client is paused.
    static let queueHighWater = 1 << 20
    static let queueLowWater = 256 << 10
    private let recording: RecordingOptions?
    /// Whether an Upgrade as the connection's first request may be replayed over an http/1.1-only upstream.
    private let retryUpgradeOverHTTP1: Bool
    /// Whether a request the upstream's GOAWAY refused may be sent again on a new connection.
    private let retryRefused: Bool
    /// The largest request body kept for such a retry.
    static let replayLimit = 64 << 10
    /// No request has begun on this connection yet.
    private var firstRequest = true
    /// The first request's head, to replay over an http/1.1 upstream once its end is read.
    private var retryHead: [UInt8]?

    init(
        now: @escaping () -> Double, recording: RecordingOptions? = nil, retryUpgradeOverHTTP1: Bool = false,
        retryRefused: Bool = false
    ) throws(H2Error) {
        self.recording = recording
        self.retryUpgradeOverHTTP1 = retryUpgradeOverHTTP1
        self.retryRefused = retryRefused
        upstream = try H2Session(role: .client)
        self.now = now
        pump()
    }

    var isIdle: Bool { exchange == nil && undecided == nil }

    // MARK: - Input

    func clientBytes(_ bytes: [UInt8]) -> RelayOutput {
        requests.receive(bytes)
        pumpRequests()
        if undecided != nil, !clientPaused, requests.bufferedByteCount >= HTTP1Relay.heldLimit {
            clientPaused = true
            out.pauseReading[.client] = true
        }
        pump()
        return out.take()
    }

    func isHolding(_ id: Int) -> Bool { !finished && undecided?.number == id }

    func resolve(_ id: Int, _ decision: RequestDecision) -> RelayOutput {
        guard !finished, let u = undecided, u.number == id else { return out.take() }
        undecided = nil
        if clientPaused {
            clientPaused = false
            out.pauseReading[.client] = false
        }
        begin(u, decision)
        // The body and whatever the client sent after the head waited in the parser.
        pumpRequests()
        pump()
        return out.take()
    }

    func clientEOF() -> RelayOutput {
        requests.receiveEOF()
        pumpRequests()
        pump()
        return out.take()
    }

    func clientGone(_ reason: String) -> RelayOutput {
        // An undecided request ends unlogged: it never became an exchange, and its owner knows it asked.
        undecided = nil
        complete(keepParsing: false, interruption: reason)
        close()
        return out.take()
    }

    func upstreamBytes(_ bytes: [UInt8]) -> RelayOutput {
        guard !finished else { return out.take() }
        do {
            for event in try upstream.receive(bytes) { upstreamEvent(event) }
        } catch {
            upstreamGone = true
            failExchange(reason: "the upstream's HTTP/2 connection failed: \(error)")
            out.closeUpstream = true
        }
        pump()
        return out.take()
    }

    func upstreamEOF() -> RelayOutput {
        upstreamGone = true
        // A response a breakpoint holds came whole: it waits for its release.
        if exchange?.localAnswer == nil, exchange?.responseEnded == false, exchange?.atBreakpoint == nil {
            failExchange(reason: "the upstream closed the connection before the response ended")
        } else if exchange == nil {
            close()
        }
        out.closeUpstream = true
        return out.take()
    }

    // MARK: - Requests (client → upstream)

    private func pumpRequests() {
        while !finished, undecided == nil {
            let event: HTTP1Event
            do { event = try requests.nextEvent() } catch {
                clientProtocolError(error)
                return
            }
            switch event {
            case .requestHead(let head):
                ask(head)
            case .body(let piece):
                guard var ex = exchange else { return }
                ex.requestBytes += piece.count
                ex.recorder?.requestBody(piece)
                ex.replay? += piece
                exchange = ex
                if let held = ex.heldRequest {
                    if held.append(piece) { continue }
                    // Over the limit: what was held goes on unchanged, and the rest streams.
                    exchange?.heldRequest = nil
                    guard openHeldRequest(held.head, body: held.spill()) else { return }
                    continue
                }
                if let id = ex.streamID, !ex.refused {
                    do { try upstream.sendData(streamID: id, piece, endStream: false) } catch {
                        failExchange(reason: "the upstream refused the request body: \(error)")
                        return
                    }
                    if !clientPaused, upstream.outboundQueuedBytes(streamID: id) > Self.queueHighWater {
                        clientPaused = true
                        out.pauseReading[.client] = true
                    }
                }
            case .end(let trailers):
                if let head = retryHead {
                    // The request and whatever the client sent after it go again to the new upstream; this relay
                    // is done.
                    finished = true
                    do { out.retry = .overHTTP1(head + (try requests.switchProtocols())) } catch {
                        clientProtocolError(error)
                    }
                    return
                }
                guard var ex = exchange else { return }
                if let held = ex.heldRequest {
                    exchange?.heldRequest = nil
                    let (head, body) = held.release()
                    guard openHeldRequest(head, body: body), let opened = exchange else { return }
                    ex = opened
                }
                ex.requestEnded = true
                if ex.streamID != nil, let recorder = ex.recorder, recorder.requestSent == nil { recorder.requestSent = now() }
                exchange = ex
                if ex.refused {
                    retryRefusedRequest()
                    return
                }
                if let id = ex.streamID, ex.requestStreaming {
                    do {
                        if trailers.isEmpty {
                            try upstream.sendData(streamID: id, [], endStream: true)
                        } else {
                            try upstream.submitTrailers(
                                streamID: id,
                                H2HeaderTranslation.h2Trailers(from: trailers.fields.map { H2Header($0.name, $0.value) }))
                        }
                    } catch {
                        failExchange(reason: "the upstream refused the end of the request: \(error)")
                        return
                    }
                }
                if let answer = ex.localAnswer {
                    out.toClient += answer
                    complete()
                } else if ex.responseEnded {
                    complete()
                }
                return  // paused until the response ends
            case .needMoreData, .paused:
                return
            case .connectionClosed:
                if exchange == nil { close() }
                return
            case .switchedProtocols, .responseHead:
                return
            }
        }
    }

    /// Opens the stream of a request whose head waited for its body (HeldBody), and sends that body; false when the
    /// exchange failed.
    private func openHeldRequest(_ head: HTTPRequestHead, body: [UInt8]) -> Bool {
        guard var ex = exchange else { return false }
        do {
            let fields = try H2HeaderTranslation.h2Request(
                from: H1RequestHead(method: head.method, target: head.target,
                    headers: head.headers.fields.map { H2Header($0.name, $0.value) }),
                scheme: "https")
            let id = try upstream.submitRequest(fields, body: .streaming)
            ex.streamID = id
            ex.requestStreaming = true
            exchange = ex
            if !body.isEmpty { try upstream.sendData(streamID: id, body, endStream: false) }
        } catch {
            exchange = ex
            failExchange(reason: "the upstream refused the request: \(error)")
            return false
        }
        ex.recorder?.recordForwardedRequest(head)
        return true
    }

    /// Holds a request head for the owner's decision (the parser is not read again until `resolve`), unless it is
    /// replayed over HTTP/1.1, where it is decided on the new connection.
    private func ask(_ head: HTTPRequestHead) {
        let first = firstRequest
        firstRequest = false
        // An h2c upgrade is no upgrade the proxy relays (HopByHopFields): such a request goes as a plain one. Whatever
        // else Connection names, the translation to HTTP/2 drops (and frames the body itself).
        let asksUpgrade = head.headers.contains(name: "Upgrade")
            && !(head.headers.listTokens(for: "Upgrade").allSatisfy { $0 == "h2c" })
        if first, retryUpgradeOverHTTP1, head.method != "CONNECT", asksUpgrade,
            !head.headers.contains(name: "Content-Length"), !head.headers.contains(name: "Transfer-Encoding")
        {
            // Decided and logged on the new connection; sent there once the request's end is read.
            if let raw = requests.lastHeadBytes {
                retryHead = Array(raw)
            } else {
                var bytes: [UInt8] = []
                do { try HTTP1Serializer.write(head, into: &bytes) } catch {
                    clientProtocolError(error)
                    return
                }
                retryHead = bytes
            }
            return
        }
        headsBegun += 1
        undecided = Undecided(
            head: head, received: requests.lastHeadBytes, asksUpgrade: asksUpgrade, number: headsBegun, arrived: now())
        out.toDecide.append(DecisionRequest(id: headsBegun, head: head))
    }

    private func begin(_ u: Undecided, _ decision: RequestDecision) {
        let head = u.head
        let asksUpgrade = u.asksUpgrade
        switch decision {
        case .forward(let forwarded, let url, _, let annotation, let outcome, let codes, let rules):
            var ex = Exchange(
                method: head.method, url: url, outcome: outcome, codes: codes, annotation: annotation,
                started: u.arrived, clientVersion: head.version, requestKeepAlive: head.keepAlive)
            ex.rules = rules
            ex.recorder = ExchangeRecorder.make(recording)
            ex.recorder?.recordRequest(head, forwarded: forwarded)
            if head.method == "CONNECT" || asksUpgrade {
                exchange = ex
                answerLocally(head, &ex, status: 501, reason: "Not Implemented",
                    body: "ATSProxy: the upstream speaks HTTP/2, which cannot carry this \(head.method == "CONNECT" ? "CONNECT" : "Upgrade") request from an HTTP/1.1 client\n")
                return
            }
            let framing: HTTP1BodyFraming
            let fields: [H2Header]
            do {
                framing = try HTTP1Framing.forRequest(head)
                fields = try H2HeaderTranslation.h2Request(
                    from: H1RequestHead(method: forwarded.method, target: forwarded.target,
                        headers: forwarded.headers.fields.map { H2Header($0.name, $0.value) }),
                    scheme: "https")
            } catch let error as HTTP1Error {
                exchange = ex
                clientProtocolError(error)
                return
            } catch {
                exchange = ex
                answerLocally(head, &ex, status: 400, reason: "Bad Request", body: "ATSProxy: \(error)\n")
                return
            }
            guard !upstreamGone else {
                exchange = ex
                answerLocally(head, &ex, status: 502, reason: "Bad Gateway",
                    body: "ATSProxy: the upstream's HTTP/2 connection is going away; retry on a new connection\n")
                return
            }
            if retryRefused, let raw = u.received {
                switch framing {
                case .none: ex.replay = Array(raw)
                case .contentLength(let length) where length <= Self.replayLimit: ex.replay = Array(raw)
                case .contentLength, .chunked, .untilClose, .switchProtocols: break
                }
            }
            if let rules, framing.mayCarryBody, let held = rules.holdRequestBody(for: forwarded) {
                // The stream opens when the body rules have the whole body (HeldBody); the upstream never sees an
                // Expect, so the proxy answers it.
                ex.heldRequest = held
                if head.expectsContinue, head.version.minor >= 1 {
                    out.toClient += Array("HTTP/1.1 100 Continue\r\n\r\n".utf8)
                }
                exchange = ex
                return
            }
            do {
                ex.streamID = try upstream.submitRequest(fields, body: framing == .none ? .none : .streaming)
                ex.requestStreaming = framing != .none
            } catch {
                exchange = ex
                answerLocally(head, &ex, status: 502, reason: "Bad Gateway",
                    body: "ATSProxy: the upstream refused a new stream (\(error))\n")
                return
            }
            exchange = ex
        case .answer(let response, let body, let url, let outcome, let codes, let rules):
            var ex = Exchange(
                method: head.method, url: url, outcome: outcome, codes: codes, annotation: [], started: u.arrived,
                clientVersion: head.version, requestKeepAlive: head.keepAlive)
            ex.rules = rules
            ex.recorder = ExchangeRecorder.make(recording)
            ex.recorder?.recordRequest(head, forwarded: nil)
            exchange = ex
            answer(head, &ex, response: response, body: body)
        }
    }

    private func answerLocally(_ head: HTTPRequestHead, _ ex: inout Exchange, status: Int, reason: String, body: String) {
        let response = HTTPResponseHead(
            status: status, reason: reason, headers: [("Content-Type", "text/plain; charset=utf-8")])
        answer(head, &ex, response: response, body: Array(body.utf8))
    }

    private func answer(_ head: HTTPRequestHead, _ ex: inout Exchange, response: HTTPResponseHead, body: [UInt8]) {
        let local: HTTP1LocalAnswer
        do { local = try HTTP1LocalAnswer(response: response, body: body, request: head) } catch {
            clientProtocolError(error)
            return
        }
        ex.record(local)
        ex.recorder?.recordLocalResponse(response)
        exchange = ex
        if local.answerNow {
            out.toClient += local.bytes
            complete(keepParsing: false)
            close()
        }
    }

    // MARK: - Responses (upstream → client)

    private func upstreamEvent(_ event: H2Event) {
        switch event {
        case .headers(let id, let fields, .response, let endStream):
            guard var ex = exchange, ex.streamID == id else { return }
            let translated: H1ResponseHead
            do { translated = try H2HeaderTranslation.h1Response(from: fields) } catch {
                resetAndFail(id, reason: "the upstream sent an invalid response head: \(error)")
                return
            }
            if translated.status < 200 {
                // 100 Continue and other interim answers; an HTTP/1.0 client does not know them.
                guard ex.clientVersion.minor >= 1, translated.status != 101 else { return }
                writeHead(HTTPResponseHead(status: translated.status, reason: translated.reason,
                    headers: HTTPHeaders(translated.headers.map { ($0.name, $0.value) })))
                return
            }
            var head = HTTPResponseHead(
                status: translated.status, reason: translated.reason,
                headers: HTTPHeaders(translated.headers.map { ($0.name, $0.value) }))
            if let rules = ex.rules, let edited = rules.editResponse(head, outcome: ex.outcome) { head = edited }
            if let rules = ex.rules, !endStream || rules.mayBreakResponse,
                let held = rules.holdBody(for: head, outcome: ex.outcome)
            {
                // The head waits with the body for the body rules (HeldBody); DATA is credited as it comes anyway.
                ex.heldBody = endStream ? nil : held
                if let recorder = ex.recorder, let received = HTTPResponseHead(h2Response: fields) {
                    recorder.recordResponse(received, toClient: head, at: now())
                }
                exchange = ex
                if endStream {
                    // A bodiless response a breakpoint holds ends here.
                    let (head, body) = held.release()
                    if keepAtBreakpoint(held, head, body) { return }
                    if sendHeld(id, head: head, body: body, knownLength: body.count) { endResponse() }
                }
                return
            }
            guard let sent = frameResponseHead(head, &ex, streamID: id, knownLength: endStream ? 0 : nil) else { return }
            if let recorder = ex.recorder {
                // The upstream's h2 head as received, and the HTTP/1.1 head the client got.
                if let received = HTTPResponseHead(h2Response: fields) {
                    recorder.recordResponse(received, toClient: sent, at: now())
                }
            }
            exchange = ex
            writeHead(sent)
            if endStream { endResponse() }
        case .headers(let id, let fields, .trailers, _):
            guard exchange?.streamID == id else { return }
            exchange?.responseTrailers = HTTPHeaders(
                H2HeaderTranslation.h1Trailers(from: fields).map { ($0.name, $0.value) })
            if let held = exchange?.heldBody.take() {
                let (head, body) = held.release()
                if keepAtBreakpoint(held, head, body) { return }
                // Trailers need the chunked coding: no Content-Length given.
                guard sendHeld(id, head: head, body: body, knownLength: nil) else { return }
            }
            endResponse()
        case .data(let id, let bytes, let endStream):
            upstream.consume(streamID: id, count: bytes.count)
            if let held = exchange?.heldBody, exchange?.streamID == id {
                exchange?.responseBytes += bytes.count
                exchange?.recorder?.responseBody(bytes)
                let fits = held.append(bytes)
                if fits, !endStream { return }
                exchange?.heldBody = nil
                // At the end the length is known; past the limit the rest streams in the relay's own framing.
                let sent: Bool
                if fits {
                    let (head, body) = held.release()
                    if keepAtBreakpoint(held, head, body) { return }
                    sent = sendHeld(id, head: head, body: body, knownLength: body.count)
                } else {
                    sent = sendHeld(id, head: held.head, body: held.spill(), knownLength: nil)
                }
                if sent, endStream { endResponse() }
                return
            }
            guard var ex = exchange, ex.streamID == id, ex.responseWriter != nil else { return }
            ex.responseBytes += bytes.count
            ex.recorder?.responseBody(bytes)
            do { try ex.responseWriter!.write(bytes, into: &out.toClient) } catch {
                exchange = ex
                resetAndFail(id, reason: "the upstream's body does not match its Content-Length: \(error)")
                return
            }
            exchange = ex
            if endStream { endResponse() }
        case .rstStream(let id, let code):
            guard exchange?.streamID == id else { return }
            failExchange(reason: "the upstream reset the stream (\(code))")
        case .streamClosed(let id, let code):
            guard exchange?.streamID == id, code != .noError, exchange?.responseEnded == false,
                exchange?.refused == false
            else { return }
            failExchange(reason: "the upstream closed the stream (\(code))")
        case .goAway(let last, _, _):
            upstreamGone = true
            guard let ex = exchange, let id = ex.streamID, id > last else { return }
            if ex.replay != nil, !ex.responseHeadSent {
                exchange?.refused = true
                if ex.requestEnded { retryRefusedRequest() }
            } else {
                failExchange(reason: "the upstream went away (GOAWAY) before processing the request; retry it")
            }
        case .headers, .settings, .windowUpdate, .ping:
            break
        }
    }

    /// Hands the refused request, read whole, to the session to send again on a new connection (theory of
    /// operation, 6). With requests pipelined behind it (bytes the relay cannot hand over), a 502 instead.
    private func retryRefusedRequest() {
        guard let ex = exchange, let replay = ex.replay, requests.bufferedByteCount == 0 else {
            exchange?.refused = false
            failExchange(reason: "the upstream went away (GOAWAY) before processing the request; retry it")
            return
        }
        exchange = nil
        finished = true
        out.retry = .onNewConnection(replay)
    }

    /// The response head framed for the HTTP/1 client (theory of operation, 3) and annotated, the exchange's writer
    /// set for it; nil when it cannot be framed (the exchange failed). `knownLength`: the whole body's length, when
    /// known, for a head without Content-Length.
    private func frameResponseHead(
        _ head: HTTPResponseHead, _ ex: inout Exchange, streamID id: Int32, knownLength: Int?
    ) -> HTTPResponseHead? {
        var head = head
        let bodyless = ex.method == "HEAD" || head.status == 204 || head.status == 304
        if !bodyless, !head.headers.contains(name: "Content-Length") {
            if let knownLength {
                head.headers.add(name: "Content-Length", value: String(knownLength))
            } else if ex.clientVersion.minor >= 1 {
                head.headers.add(name: "Transfer-Encoding", value: "chunked")
            } else {
                ex.requestKeepAlive = false
            }
        }
        if !ex.requestKeepAlive || upstreamGone { head.headers.replaceOrAdd(name: "Connection", value: "close") }
        for (name, value) in ex.annotation { head.headers.add(name: name, value: value) }
        do {
            ex.responseWriter = HTTP1BodyWriter(framing: try HTTP1Framing.forResponse(head, requestMethod: ex.method))
        } catch {
            exchange = ex
            resetAndFail(id, reason: "the upstream's response cannot be framed for HTTP/1.1: \(error)")
            return nil
        }
        ex.status = head.status
        ex.responseHeadSent = true
        return head
    }

    /// Keeps a held response whole for its breakpoint (reported in `responseHolds`, numbered by its upstream
    /// stream); false when no breakpoint holds it.
    private func keepAtBreakpoint(_ held: HeldResponse, _ head: HTTPResponseHead, _ body: [UInt8]) -> Bool {
        guard let rule = held.breakpoint, var ex = exchange, let id = ex.streamID, let rules = ex.rules else {
            return false
        }
        ex.atBreakpoint = (head, body)
        exchange = ex
        out.responseHolds.append(
            ResponseToHold(
                id: Int(id), rule: rule, rules: rules, method: ex.method, url: ex.url, head: head, body: body))
        return true
    }

    func releaseResponse(_ id: Int, _ release: HoldRelease?) -> RelayOutput {
        guard !finished, var ex = exchange, let sid = ex.streamID, Int(sid) == id, let held = ex.atBreakpoint else {
            return out.take()
        }
        ex.atBreakpoint = nil
        exchange = ex
        guard let (head, body, edited) = (release ?? .execute()).response(held.head, held.body, method: ex.method)
        else {
            // Aborted: the client's connection is reset, as for a response cut off.
            complete(keepParsing: false, interruption: "aborted at a breakpoint: the connection was reset")
            close()
            out.abortClient = true
            return out.take()
        }
        if edited { exchange?.responseTrailers = [] }
        let trailers = exchange?.responseTrailers.isEmpty == false
        if sendHeld(sid, head: head, body: body, knownLength: trailers ? nil : body.count) { endResponse() }
        pump()
        return out.take()
    }

    /// A response head that waited for its body (HeldBody), then the body; false when the exchange failed.
    private func sendHeld(_ id: Int32, head: HTTPResponseHead, body: [UInt8], knownLength: Int?) -> Bool {
        guard var ex = exchange, let sent = frameResponseHead(head, &ex, streamID: id, knownLength: knownLength) else {
            return false
        }
        ex.recorder?.recordClientResponse(sent)
        exchange = ex
        writeHead(sent)
        guard exchange?.responseWriter != nil else { return false }
        do { try exchange!.responseWriter!.write(body, into: &out.toClient) } catch {
            resetAndFail(id, reason: "the rewritten body does not fit its framing: \(error)")
            return false
        }
        return true
    }

    private func writeHead(_ head: HTTPResponseHead) {
        do { try HTTP1Serializer.write(head, into: &out.toClient) } catch {
            failExchange(reason: "the upstream's response head cannot be written as HTTP/1.1: \(error)")
        }
    }

    private func endResponse() {
        guard var ex = exchange, !ex.responseEnded else { return }
        ex.responseEnded = true
        do { try ex.responseWriter?.finish(trailers: ex.responseTrailers, into: &out.toClient) } catch {
            exchange = ex
            failExchange(reason: "the upstream's body ended early: \(error)")
            return
        }
        exchange = ex
        if ex.responseWriter?.framing == .untilClose {
            complete(keepParsing: false)
            close()
        } else if ex.requestEnded {
            complete()
        }
    }

    // MARK: - Bookkeeping

    /// The exchange is over: log it and go on with the next request if both sides allow it.
    private func complete(keepParsing: Bool = true, interruption: String? = nil) {
        guard let ex = exchange else { return }
        exchange = nil
        out.exchanges.append(ex.summary(httpVersion: "HTTP/2.0", now: now(), interruption: interruption))
        if clientPaused {
            clientPaused = false
            out.pauseReading[.client] = false
        }
        guard keepParsing else { return }
        guard ex.requestKeepAlive, !upstreamGone else {
            close()
            return
        }
        do { try requests.startNextMessage() } catch {
            close()
            return
        }
        pumpRequests()
    }

    private func resetAndFail(_ id: Int32, reason: String) {
        do { try upstream.submitRSTStream(streamID: id, errorCode: .protocolError) } catch {
            upstreamGone = true
        }
        failExchange(reason: reason)
    }

    /// Ends the exchange in flight with a 502 if its response has not started, or by closing the client (the only
    /// way HTTP/1 has to say that a response is incomplete).
    private func failExchange(reason: String) {
        if let id = exchange?.streamID, upstream.streamState(id) != nil, !upstreamGone {
            do { try upstream.submitRSTStream(streamID: id, errorCode: .cancel) } catch { upstreamGone = true }
        }
        end(status: 502, text: reason)
    }

    private func clientProtocolError(_ error: HTTP1Error) {
        if exchange == nil {
            exchange = Exchange(
                method: "-", url: "-", outcome: .notEvaluated, codes: [], annotation: [], started: now(),
                clientVersion: .http1_1, requestKeepAlive: false)
        }
        end(status: error.suggestedStatus, text: "\(error)")
    }

    /// Answers `status` with `text` if no response head went out yet, else records the response as cut off; then
    /// closes the client.
    private func end(status: Int, text: String) {
        guard var ex = exchange else {
            close()
            return
        }
        let cutOff = ex.responseHeadSent ? text : nil
        // A response cut off after its head: only a reset tells the client (a close ends a close-delimited body).
        if ex.responseHeadSent, ex.localAnswer == nil { out.abortClient = true }
        if !ex.responseHeadSent {
            out.toClient += ex.recordClosingAnswer(status: status, reason: text)
            exchange = ex
        }
        complete(keepParsing: false, interruption: cutOff)
        close()
    }

    private func close() {
        finished = true
        out.closeClient = true
    }

    /// Writes what the upstream session queued and resumes the client once queued request bodies drained.
    private func pump() {
        out.toUpstream += upstream.pendingOutput()
        for event in upstream.takeEvents() { upstreamEvent(event) }
        if clientPaused, let id = exchange?.streamID, upstream.outboundQueuedBytes(streamID: id) < Self.queueLowWater {
            clientPaused = false
            out.pauseReading[.client] = false
        }
        out.toUpstream += upstream.pendingOutput()
    }
}
