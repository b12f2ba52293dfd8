import ATSPolicy
import HTTP1Core
import ProxyTrace

// Theory of operation:
//
// 1. The relay sits between the client's and the upstream's *plaintext* byte streams (inside TLS when
//    intercepting), parsing both directions with HTTP1Core. A head the owner leaves unchanged is relayed as the
//    bytes received (`HTTP1Parser.lastHeadBytes`), a response head being annotated as those bytes with the
//    `X-ATS-*` fields spliced in before the empty line; only a changed head, or one not in canonical form (bare LF),
//    is serialised again. Relaying the received bytes keeps the peer's exact spelling and saves the per-field work
//    on the hot path.
// 2. At most one exchange is in flight: after a request ends, the request parser stays paused until the response
//    has ended. Pipelined requests wait in the parser's buffer. This keeps local answers (blocks) and forwarded
//    responses in order without a queue, at no cost for the usual request → response → request pattern.
// 3. For every request head the owner decides: the relay asks (`RelayOutput.toDecide`, numbered by the head) and
//    holds the connection's further bytes, the request's body included, in the parser until the answer comes
//    (`resolve`), in the same step or later; past `heldLimit` the client is not read meanwhile. The answer forwards
//    the head (possibly rewritten, possibly to another upstream, with `X-ATS-*` annotation for the response) or
//    answers it locally (a block) and discards its body. No client deadline runs while the owner decides.
// 4. Bodies stream piece by piece in their original framing; nothing is buffered whole, except a request or response
//    body a body rule holds (`HeldBody`): its head and body go out at the body's end, in the same framing
//    (Content-Length set to the new length).
// 5. After a 101 (Upgrade) the relay hands both sides' leftover bytes back and stops parsing: the owner relays raw.
// 6. Any protocol error ends the client connection: a parseable error response if no response head was sent yet.
// 7. Upstream bytes with no request outstanding (a second response after the first, say) close the upstream
//    connection instead of waiting to be served as the answer to the next request; a 101 to a request that asked
//    for no upgrade is answered 502. The next request reconnects (plain HTTP) or the client does (intercepted).
// 8. Heads lose what belongs to one hop before they go on (`HopByHopFields`): the fields named in `Connection`, both
//    ways, and a request's `h2c` upgrade (an origin's 101 to it would hand the connection to HTTP/2 nobody parses).
//    A chunked response to an HTTP/1.0 client goes de-chunked and close-delimited. A cut-off response (the upstream
//    reset, or its framing broke after the head went out) resets the client's connection (`abortClient`).
// 9. `wait` tells the session what is outstanding (a head, a body, a response) so it can keep a deadline on it;
//    `deadlinePassed` ends the exchange when one passes (408, or 504 for a silent upstream).

// Exclusivity: the mutable state below is touched only by the relay's own methods, on its session's loop thread,
// and no method hands out a reference to it. The runtime's dynamic exclusivity check on each access (a thread-local
// lookup and a record; about thirty per request here) is switched off for these properties with
// `@exclusivity(unchecked)`; the compile-time checks still apply.
final class HTTP1Relay {
    @exclusivity(unchecked) private var requests = HTTP1Parser(role: .requests)
    @exclusivity(unchecked) private var responses = HTTP1Parser(role: .responses)
    private let now: () -> Double
    @exclusivity(unchecked) private var out = RelayOutput()

    /// A request head waiting for the owner's decision (theory of operation, 3), with what `begin` needs of the
    /// parser, read while it still describes this head.
    private struct Undecided {
        let head: HTTPRequestHead
        let received: ArraySlice<UInt8>?
        let framing: HTTP1BodyFraming
        let keepAlive: Bool
        let number: Int
        let arrived: Double
    }

    @exclusivity(unchecked) private var undecided: Undecided?
    /// `undecided`'s number, read without copying the held head (`isHolding`, once per request); set with it.
    private var undecidedNumber: Int?

    /// The exchange in flight. A class, so each parser event updates it in place instead of copying its strings and
    /// arrays out of the optional and back.
    private final class Exchange: ExchangeRecording, LocallyAnsweredExchange {
        let method: String
        let url: String
        /// Set to `.failed` (with -1001) when the upstream never answers.
        @exclusivity(unchecked) var outcome: ExchangeSummary.ATSOutcome
        @exclusivity(unchecked) var codes: [ExchangeError]
        let annotation: [(String, String)]
        let started: Double
        /// The exchange's number on the connection (1 for the first head), naming it in `RelayWait`.
        let number: Int
        /// The request carries `Upgrade`: only then may the upstream answer 101.
        let asksUpgrade: Bool
        /// The client spoke HTTP/1.0, which knows no chunked coding: a chunked response reaches it close-delimited.
        let clientIsHTTP10: Bool
        /// The client holds its body back for `100 Continue`: until the upstream answers or the body starts anyway,
        /// the wait is the upstream's, not the client's.
        @exclusivity(unchecked) var awaitingContinue = false
        /// The upstream sent a byte of its answer (an interim one counts).
        @exclusivity(unchecked) var responseStarted = false
        /// When the request (its head, then each body piece) last arrived.
        @exclusivity(unchecked) var lastRequestProgress: Double
        @exclusivity(unchecked) var requestBytes = 0
        @exclusivity(unchecked) var responseBytes = 0
        @exclusivity(unchecked) var status: Int?
        /// The version the upstream answered with (an HTTP/1.0 origin is shown as one).
        @exclusivity(unchecked) var responseVersion = HTTPVersion.http1_1
        @exclusivity(unchecked) var requestEnded = false
        @exclusivity(unchecked) var requestKeepAlive = true
        /// nil while discarding the body of a locally answered request.
        @exclusivity(unchecked) var requestWriter: HTTP1BodyWriter?
        @exclusivity(unchecked) var responseWriter: HTTP1BodyWriter?
        @exclusivity(unchecked) var localAnswer: [UInt8]?
        @exclusivity(unchecked) var responseHeadSent = false
        let recorder: ExchangeRecorder?
        @exclusivity(unchecked) var rules: ExchangeRules?
        /// The response body a body rule holds whole; its head waits with it (`responseHeadSent` is false).
        @exclusivity(unchecked) var heldBody: HeldResponse?
        /// The request body a body rule holds whole; its head waits with it.
        @exclusivity(unchecked) var heldRequest: HeldRequest?
        /// The whole response a breakpoint holds after the upstream ended it, until `releaseResponse`.
        @exclusivity(unchecked) var atBreakpoint: (head: HTTPResponseHead, body: [UInt8], trailers: HTTPHeaders)?

        init(
            method: String, url: String, outcome: ExchangeSummary.ATSOutcome, codes: [ExchangeError],
            annotation: [(String, String)], started: Double, recorder: ExchangeRecorder? = nil, number: Int = 0,
            asksUpgrade: Bool = false, clientIsHTTP10: Bool = false
        ) {
            self.recorder = recorder
            self.number = number
            self.asksUpgrade = asksUpgrade
            self.clientIsHTTP10 = clientIsHTTP10
            self.method = method
            self.url = url
            self.outcome = outcome
            self.codes = codes
            self.annotation = annotation
            self.started = started
            self.lastRequestProgress = started
        }
    }

    @exclusivity(unchecked) private var exchange: Exchange?
    /// Head bytes (and body) held while the upstream connects; past `heldLimit` the client is not read until then.
    @exclusivity(unchecked) private var held: [UInt8] = []
    /// The client is not read while the upstream connects or the owner decides (`heldLimit`).
    @exclusivity(unchecked) private var clientPausedByProxy = false
    /// As a tunnel holds a client's early bytes (`TunnelLayer`): a slow upstream, or an owner slow to decide, cannot
    /// make the proxy buffer more.
    static let heldLimit = 64 * 1024
    /// Prepared once: every forwarded request is asked whether it carries one.
    static let upgrade = HTTPFieldName("Upgrade")
    @exclusivity(unchecked) private(set) var awaitingUpstream = false
    @exclusivity(unchecked) private(set) var connectedUpstream: UpstreamTarget?
    @exclusivity(unchecked) private var finished = false
    /// Request heads begun on this connection.
    @exclusivity(unchecked) private var headsBegun = 0
    private let httpVersionLabel = "HTTP/1.1"
    private let recording: RecordingOptions?

    init(connectedTo upstream: UpstreamTarget?, now: @escaping () -> Double, recording: RecordingOptions? = nil) {
        self.recording = recording
        self.connectedUpstream = upstream
        self.now = now
    }

    /// True when no exchange is in flight (the connection may be closed without losing anything).
    var isIdle: Bool { exchange == nil && undecided == nil }

    /// Storage larger than this is not kept between steps (a download's read-sized buffers).
    private static let maxRecycledCapacity = 80 * 1024

    /// Keeps the storage of the byte arrays the owner has finished with as the next step's output buffers: without
    /// it, every request and every response allocates its output array afresh.
    func recycle(_ output: inout RelayOutput) {
        Self.adopt(&output.toClient, as: &out.toClient)
        Self.adopt(&output.toUpstream, as: &out.toUpstream)
    }

    private static func adopt(_ used: inout [UInt8], as buffer: inout [UInt8]) {
        guard buffer.isEmpty, buffer.capacity < used.capacity, used.capacity <= maxRecycledCapacity else { return }
        swap(&used, &buffer)
        buffer.removeAll(keepingCapacity: true)
    }

    func releaseBuffers() {
        if out.toClient.isEmpty { out.toClient = [] }
        if out.toUpstream.isEmpty { out.toUpstream = [] }
    }

    // MARK: - Input

    func clientBytes(_ bytes: [UInt8]) -> RelayOutput {
        requests.receive(bytes)
        pumpRequests()
        updateClientHold()
        return out.take()
    }

    /// Pauses the client while the proxy holds `heldLimit` of its bytes for the upstream to connect or for the
    /// owner to decide, and reads it again once it holds less (the wait is over).
    private func updateClientHold() {
        let holding = awaitingUpstream ? held.count : undecided != nil ? requests.bufferedByteCount : 0
        let full = holding >= Self.heldLimit
        guard full != clientPausedByProxy else { return }
        clientPausedByProxy = full
        out.pauseReading[.client] = full
    }

    func isHolding(_ id: Int) -> Bool { !finished && undecidedNumber == id }

    func resolve(_ id: Int, _ decision: RequestDecision) -> RelayOutput {
        guard !finished, undecidedNumber == id, let u = undecided.take() else { return out.take() }
        undecidedNumber = nil
        begin(u, decision)
        // The body and whatever the client sent after the head waited in the parser.
        pumpRequests()
        updateClientHold()
        return out.take()
    }

    func clientEOF() -> RelayOutput {
        requests.receiveEOF()
        pumpRequests()
        return out.take()
    }

    func clientGone(_ reason: String) -> RelayOutput {
        // An undecided request ends unlogged: it never became an exchange, and its owner knows it asked.
        undecided = nil
        undecidedNumber = nil
        complete(keepParsing: false, interruption: reason)
        out.closeClient = true
        finished = true
        return out.take()
    }

    func upstreamBytes(_ bytes: [UInt8]) -> RelayOutput {
        if !bytes.isEmpty, let ex = exchange { ex.responseStarted = true }
        responses.receive(bytes)
        pumpResponses()
        return out.take()
    }

    func upstreamEOF() -> RelayOutput {
        responses.receiveEOF()
        pumpResponses()
        // A response a breakpoint holds came whole (a close-delimited one ends with this EOF): it waits for its
        // release.
        if exchange != nil, !finished, exchange?.responseHeadSent == false, exchange?.localAnswer == nil,
            exchange?.atBreakpoint == nil
        {
            failExchange(status: 502, reason: "the upstream closed the connection before responding")
        }
        out.closeUpstream = true
        connectedUpstream = nil
        return out.take()
    }

    /// The upstream connection failed (a reset): a response in flight ends here cut off, even a close-delimited one
    /// that an EOF would have completed, and the client is told so by its own connection's reset.
    func upstreamReset(_ reason: String) -> RelayOutput {
        guard let ex = exchange, !finished, ex.localAnswer == nil, ex.atBreakpoint == nil else { return upstreamEOF() }
        failExchange(status: 502, reason: reason)
        out.closeUpstream = true
        connectedUpstream = nil
        return out.take()
    }

    /// The upstream asked for with `RelayOutput.connect` is open: release what was held for it.
    func upstreamConnected(_ target: UpstreamTarget) -> RelayOutput {
        connectedUpstream = target
        awaitingUpstream = false
        if let ex = exchange, ex.requestEnded, let recorder = ex.recorder { recorder.requestSent = now() }
        out.toUpstream += held
        held = []
        updateClientHold()
        return out.take()
    }

    /// The upstream asked for could not be reached: a network failure with the app's error (`failure`), not an
    /// ATS verdict.
    func upstreamFailed(_ message: String, failure: ConnectFailure? = nil) -> RelayOutput {
        awaitingUpstream = false
        held = []
        updateClientHold()
        if let failure, let ex = exchange, !ex.responseHeadSent {
            ex.outcome = .failed
            ex.codes = [ExchangeError(urlError: failure.urlError)]
        }
        failExchange(status: 502, reason: message)
        return out.take()
    }

    // MARK: - Requests (client → upstream)

    private func sendUpstream(_ bytes: some Collection<UInt8>) {
        if awaitingUpstream { held.append(contentsOf: bytes) } else { out.toUpstream.append(contentsOf: bytes) }
    }

    private func pumpRequests() {
        while !finished, undecided == nil {
            let event: HTTP1Event
            do { event = try requests.nextEvent() } catch {
                protocolError(error, fromClient: true)
                return
            }
            switch event {
            case .requestHead(let head):
                ask(head)
            case .body(let piece):
                guard let ex = exchange else { return }
                ex.requestBytes += piece.count
                ex.recorder?.requestBody(piece)
                ex.lastRequestProgress = now()
                ex.awaitingContinue = false
                if ex.heldRequest != nil {
                    guard holdRequestPiece(piece, ex) else { return }
                    continue
                }
                if ex.requestWriter != nil {
                    do {
                        if awaitingUpstream {
                            try ex.requestWriter!.write(piece, into: &held)
                        } else {
                            try ex.requestWriter!.write(piece, into: &out.toUpstream)
                        }
                    } catch {
                        protocolError(error, fromClient: true)
                        return
                    }
                }
            case .end(let trailers):
                guard let ex = exchange else { return }
                if ex.heldRequest != nil, !releaseHeldRequest(ex) { return }
                ex.requestEnded = true
                if let recorder = ex.recorder, !awaitingUpstream, ex.localAnswer == nil { recorder.requestSent = now() }
                if ex.requestWriter != nil {
                    var bytes: [UInt8] = []
                    do { try ex.requestWriter!.finish(trailers: trailers, into: &bytes) } catch {
                        protocolError(error, fromClient: true)
                        return
                    }
                    sendUpstream(bytes)
                }
                if let answer = ex.localAnswer {
                    out.toClient += answer
                    complete()
                }
                return  // paused until the response ends (rule 2)
            case .needMoreData, .paused:
                return
            case .connectionClosed:
                if exchange == nil {
                    out.closeClient = true
                    finished = true
                }
                return
            case .switchedProtocols:
                return
            case .responseHead:
                return
            }
        }
    }

    /// Holds a request head for the owner's decision; the parser is not read again until `resolve`.
    private func ask(_ head: HTTPRequestHead) {
        headsBegun += 1
        // Read before anything else touches the parser: they describe the head just parsed.
        undecided = Undecided(
            head: head, received: requests.lastHeadBytes, framing: requests.lastBodyFraming,
            keepAlive: requests.lastMessageKeepAlive, number: headsBegun, arrived: now())
        undecidedNumber = headsBegun
        out.toDecide.append(DecisionRequest(id: headsBegun, head: head))
    }

    private func begin(_ u: Undecided, _ decision: RequestDecision) {
        let head = u.head
        let received = u.received
        switch decision {
        case .forward(let decided, let url, let upstream, let annotation, let outcome, let codes, let rules):
            let forwarded: HTTPRequestHead
            do { forwarded = try HopByHopFields.request(decided) } catch {
                protocolError(error, fromClient: true)
                return
            }
            // What went up decides: an h2c upgrade removed there may not be answered 101.
            let ex = Exchange(
                method: head.method, url: url, outcome: outcome, codes: codes, annotation: annotation,
                started: u.arrived, recorder: ExchangeRecorder.make(recording), number: u.number,
                asksUpgrade: forwarded.headers.contains(Self.upgrade), clientIsHTTP10: head.version.minor == 0)
            ex.rules = rules
            ex.recorder?.recordRequest(head, forwarded: forwarded)
            // The body's inactivity counts from the decision: until then the proxy held it.
            ex.lastRequestProgress = now()
            ex.awaitingContinue = forwarded.expectsContinue
            ex.requestKeepAlive = u.keepAlive
            // The parser framed this very head (and refused it had the framing been invalid).
            ex.requestWriter = HTTP1BodyWriter(framing: u.framing)
            exchange = ex
            if let upstream, upstream != connectedUpstream {
                awaitingUpstream = true
                out.connect = upstream
                responses = HTTP1Parser(role: .responses)
            }
            if let rules, u.framing.mayCarryBody, let held = rules.holdRequestBody(for: forwarded) {
                // The head waits with the body for the body rules (HeldBody); the upstream never sees an Expect, so
                // the proxy answers it.
                ex.heldRequest = held
                if ex.awaitingContinue {
                    ex.awaitingContinue = false
                    out.toClient += Array("HTTP/1.1 100 Continue\r\n\r\n".utf8)
                }
                responses.expectResponse(toRequestMethod: head.method)
                return
            }
            // Unchanged (the common case: interception forwards the head as parsed; equal values share storage, so
            // the comparison is cheap): the received bytes go up as they came.
            if let received, forwarded == head {
                sendUpstream(received)
            } else {
                var bytes: [UInt8] = []
                do { try HTTP1Serializer.write(forwarded, into: &bytes) } catch {
                    protocolError(error, fromClient: true)
                    return
                }
                sendUpstream(bytes)
            }
            responses.expectResponse(toRequestMethod: head.method)
        case .answer(let response, let body, let url, let outcome, let codes, let rules):
            var ex = Exchange(
                method: head.method, url: url, outcome: outcome, codes: codes, annotation: [], started: u.arrived,
                recorder: ExchangeRecorder.make(recording), number: u.number)
            ex.rules = rules
            ex.recorder?.recordRequest(head, forwarded: nil)
            ex.recorder?.recordLocalResponse(response)
            ex.lastRequestProgress = now()
            let local: HTTP1LocalAnswer
            do { local = try HTTP1LocalAnswer(response: response, body: body, request: head) } catch {
                exchange = ex
                protocolError(error, fromClient: true)
                return
            }
            ex.record(local)
            exchange = ex
            if local.answerNow {
                out.toClient += local.bytes
                complete(keepParsing: false)
                out.closeClient = true
                finished = true
            }
        }
    }

    // MARK: - Responses (upstream → client)

    private func pumpResponses() {
        while !finished {
            let event: HTTP1Event
            do { event = try responses.nextEvent() } catch {
                if error.reason == .unexpectedData, exchange == nil || exchange?.localAnswer != nil {
                    upstreamSentUnasked()
                } else {
                    protocolError(error, fromClient: false)
                }
                return
            }
            switch event {
            case .responseHead(let head):
                guard let ex = exchange else {
                    // A response nobody asked for: the upstream is broken.
                    protocolError(nil, fromClient: false)
                    return
                }
                if head.status == 101, !ex.asksUpgrade {
                    // Relayed, it would turn the client's connection into a raw pipe to the upstream.
                    failExchange(
                        status: 502, reason: "the upstream switched protocols (101) but the request asked for no upgrade")
                    out.closeUpstream = true
                    return
                }
                // Fields the upstream named in Connection stay on its hop; nothing to remove leaves `head` as it
                // was, and its received bytes can go on as they came.
                var sent: HTTPResponseHead
                do { sent = try HopByHopFields.response(head) } catch {
                    protocolError(error, fromClient: false)
                    return
                }
                var framing = responses.lastBodyFraming
                if !head.isInterim, framing == .chunked, ex.clientIsHTTP10 {
                    // RFC 9112 §6.1: chunked must not reach an HTTP/1.0 recipient; the body is de-chunked and ends
                    // with the connection.
                    sent.headers.remove(name: "Transfer-Encoding")
                    sent.headers.replaceOrAdd(name: "Connection", value: "close")
                    framing = .untilClose
                }
                if !head.isInterim, let rules = ex.rules, applyResponseRules(rules, head, &sent, framing, ex) { continue }
                let received = sent == head ? responses.lastHeadBytes : nil
                if head.isInterim {
                    if let received {
                        out.toClient.append(contentsOf: received)
                    } else {
                        var bytes: [UInt8] = []
                        do { try HTTP1Serializer.write(sent, into: &bytes) } catch {
                            protocolError(error, fromClient: false)
                            return
                        }
                        out.toClient += bytes
                    }
                    continue
                }
                do {
                    if let received {
                        // Room for the head and the body bytes that came with it (already in memory, so bounded):
                        // the body is then framed in without the array growing and copying the head again.
                        let annotationRoom = 256 * ex.annotation.count
                        out.toClient.reserveCapacity(
                            out.toClient.count + received.count + annotationRoom + responses.bufferedByteCount)
                        // Validates the annotation before appending anything, so `out` stays whole on failure.
                        try HTTP1Serializer.write(rawHead: received, adding: ex.annotation, into: &out.toClient)
                    } else {
                        var annotated = sent
                        for (name, value) in ex.annotation { annotated.headers.add(name: name, value: value) }
                        var bytes: [UInt8] = []
                        try HTTP1Serializer.write(annotated, into: &bytes)
                        out.toClient += bytes
                    }
                } catch {
                    protocolError(error, fromClient: false)
                    return
                }
                // The parser framed this head for the method the request had (`expectResponse` in `begin`).
                ex.responseWriter = HTTP1BodyWriter(framing: framing)
                if let recorder = ex.recorder {
                    var annotated: HTTPResponseHead?
                    if !ex.annotation.isEmpty || sent != head {
                        annotated = sent
                        for (name, value) in ex.annotation { annotated?.headers.add(name: name, value: value) }
                    }
                    recorder.recordResponse(head, toClient: annotated, at: now())
                }
                ex.status = head.status
                ex.responseVersion = head.version
                ex.responseHeadSent = true
            case .body(let piece):
                guard let ex = exchange else { return }
                ex.responseBytes += piece.count
                ex.recorder?.responseBody(piece)
                if ex.heldBody != nil {
                    guard holdResponsePiece(piece, ex) else { return }
                    continue
                }
                // Framed straight into the output: a body piece is copied once here, not twice.
                do { try ex.responseWriter?.write(piece, into: &out.toClient) } catch {
                    protocolError(error, fromClient: false)
                    return
                }
            case .end(let trailers):
                guard let ex = exchange else { return }
                if ex.heldBody != nil, !releaseHeldResponse(ex, trailers: trailers) { return }
                var bytes: [UInt8] = []
                do { try ex.responseWriter?.finish(trailers: trailers, into: &bytes) } catch {
                    protocolError(error, fromClient: false)
                    return
                }
                out.toClient += bytes
                if ex.responseWriter?.framing == .untilClose { out.closeClient = true }
                complete()
                return
            case .switchedProtocols(let leftover):
                guard exchange != nil else { return }
                out.toClient += leftover
                do { out.toUpstream += try requests.switchProtocols() } catch {
                    // The request was not an Upgrade: the upstream switched protocols on its own.
                    protocolError(error, fromClient: false)
                    return
                }
                complete(keepParsing: false)
                out.switchedToRaw = true
                finished = true
                return
            case .needMoreData, .paused:
                return
            case .connectionClosed:
                out.closeUpstream = true
                connectedUpstream = nil
                if exchange == nil {
                    // Nothing in flight: the client may go on; the next request reconnects (plain HTTP) or, inside
                    // an intercepted tunnel, the client is closed so that it reconnects.
                    responses = HTTP1Parser(role: .responses)
                }
                return
            case .requestHead:
                return
            }
        }
    }

    // Held bodies (HeldBody), out of the pump loops' way: a body rule is rare, and its code inline in the loops cost
    // every keep-alive request copies of the parser's event (benchmarks/core-instructions.sh).

    /// The response head's rules: `sent` changed by the header rules, and true when a body rule holds the response
    /// (its head then waits with the body: HeldBody).
    @inline(never)
    private func applyResponseRules(
        _ rules: ExchangeRules, _ head: HTTPResponseHead, _ sent: inout HTTPResponseHead, _ framing: HTTP1BodyFraming,
        _ ex: Exchange
    ) -> Bool {
        if let edited = rules.editResponse(sent, outcome: ex.outcome) { sent = edited }
        // A breakpoint holds a bodiless response too, but never a 101: the connection is the upgrade's from there.
        guard framing.mayCarryBody || (rules.mayBreakResponse && framing != .switchProtocols),
            let held = rules.holdBody(for: sent, outcome: ex.outcome)
        else { return false }
        ex.heldBody = held
        ex.responseWriter = HTTP1BodyWriter(framing: framing)
        ex.recorder?.recordResponse(head, toClient: annotated(sent, ex), at: now())
        ex.responseVersion = head.version
        return true
    }

    /// A request body piece for the body rules; false when the relay failed (and said so).
    @inline(never)
    private func holdRequestPiece(_ piece: [UInt8], _ ex: Exchange) -> Bool {
        guard let held = ex.heldRequest else { return true }
        if held.append(piece) { return true }
        // Over the limit: what was held goes on unchanged, and the rest streams.
        ex.heldRequest = nil
        var bytes: [UInt8] = []
        do {
            try HTTP1Serializer.write(held.head, into: &bytes)
            try ex.requestWriter?.write(held.spill(), into: &bytes)
        } catch {
            protocolError(error, fromClient: true)
            return false
        }
        sendUpstream(bytes)
        return true
    }

    /// The held request's end: its edited head and body go upstream; false when the relay failed.
    @inline(never)
    private func releaseHeldRequest(_ ex: Exchange) -> Bool {
        guard let held = ex.heldRequest.take() else { return true }
        let (head, body) = held.release()
        if case .contentLength = ex.requestWriter?.framing {
            ex.requestWriter = HTTP1BodyWriter(framing: .contentLength(body.count))
        }
        var bytes: [UInt8] = []
        do {
            try HTTP1Serializer.write(head, into: &bytes)
            try ex.requestWriter?.write(body, into: &bytes)
        } catch {
            protocolError(error, fromClient: true)
            return false
        }
        sendUpstream(bytes)
        ex.recorder?.recordForwardedRequest(head)
        return true
    }

    /// A response body piece for the body rules; false when the relay failed.
    @inline(never)
    private func holdResponsePiece(_ piece: [UInt8], _ ex: Exchange) -> Bool {
        guard let held = ex.heldBody else { return true }
        if held.append(piece) { return true }
        // Over the limit: what was held goes on unchanged, and the rest streams.
        ex.heldBody = nil
        do {
            try sendHeldHead(held.head, ex)
            try ex.responseWriter?.write(held.spill(), into: &out.toClient)
        } catch {
            protocolError(error, fromClient: false)
            return false
        }
        return true
    }

    /// The held response's end: its edited head and body go to the client; false when the relay failed, or when a
    /// breakpoint holds the response (it waits whole for `releaseResponse`, the response parser paused at its end).
    @inline(never)
    private func releaseHeldResponse(_ ex: Exchange, trailers: HTTPHeaders = []) -> Bool {
        guard let held = ex.heldBody.take() else { return true }
        let (head, body) = held.release()
        if let rule = held.breakpoint, let rules = ex.rules {
            ex.atBreakpoint = (head, body, trailers)
            out.responseHolds.append(
                ResponseToHold(
                    id: ex.number, rule: rule, rules: rules, method: ex.method, url: ex.url, head: head, body: body))
            return false
        }
        if case .contentLength = ex.responseWriter?.framing {
            ex.responseWriter = HTTP1BodyWriter(framing: .contentLength(body.count))
        }
        do {
            try sendHeldHead(head, ex)
            try ex.responseWriter?.write(body, into: &out.toClient)
        } catch {
            protocolError(error, fromClient: false)
            return false
        }
        return true
    }

    func releaseResponse(_ id: Int, _ release: HoldRelease?) -> RelayOutput {
        guard !finished, let ex = exchange, ex.number == id, let held = ex.atBreakpoint.take() else {
            return out.take()
        }
        guard let (head, body, edited) = (release ?? .execute()).response(held.head, held.body, method: ex.method)
        else {
            // Aborted: the client's connection is reset, as for a response cut off.
            out.closeClient = true
            out.abortClient = true
            complete(keepParsing: false, interruption: "aborted at a breakpoint: the connection was reset")
            finished = true
            return out.take()
        }
        if edited, ex.responseWriter?.framing != HTTP1BodyFraming.none {
            ex.responseWriter = HTTP1BodyWriter(framing: .contentLength(body.count))
        } else if case .contentLength = ex.responseWriter?.framing {
            ex.responseWriter = HTTP1BodyWriter(framing: .contentLength(body.count))
        }
        do {
            try sendHeldHead(head, ex)
            try ex.responseWriter?.write(body, into: &out.toClient)
            try ex.responseWriter?.finish(
                trailers: ex.responseWriter?.framing == .chunked ? held.trailers : [], into: &out.toClient)
        } catch {
            protocolError(error, fromClient: false)
            return out.take()
        }
        if ex.responseWriter?.framing == .untilClose { out.closeClient = true }
        complete()
        return out.take()
    }

    /// A response head that waited for its body (HeldBody), annotated, to the client.
    private func sendHeldHead(_ head: HTTPResponseHead, _ ex: Exchange) throws(HTTP1Error) {
        let sent = annotated(head, ex)
        try HTTP1Serializer.write(sent, into: &out.toClient)
        ex.recorder?.recordClientResponse(sent)
        ex.status = head.status
        ex.responseHeadSent = true
    }

    private func annotated(_ head: HTTPResponseHead, _ ex: Exchange) -> HTTPResponseHead {
        var annotated = head
        for (name, value) in ex.annotation { annotated.headers.add(name: name, value: value) }
        return annotated
    }

    /// The exchange is over: log it and go on with the next request if both sides allow it.
    private func complete(keepParsing: Bool = true, interruption: String? = nil) {
        guard let ex = exchange else { return }
        exchange = nil
        let version = ex.responseVersion == .http1_1 ? httpVersionLabel : ex.responseVersion.description
        out.exchanges.append(ex.summary(httpVersion: version, now: now(), interruption: interruption))
        guard keepParsing else { return }
        let upstreamKeepAlive = ex.localAnswer != nil || responses.lastMessageKeepAlive
        guard ex.requestEnded, ex.requestKeepAlive, upstreamKeepAlive, !out.closeClient else {
            out.closeClient = true
            finished = true
            return
        }
        if ex.localAnswer == nil {
            do { try responses.startNextMessage() } catch {
                out.closeClient = true
                finished = true
                return
            }
            // Bytes that came after the response, before the next request went out, answer no request.
            if responses.bufferedByteCount > 0 {
                do { _ = try responses.nextEvent() } catch { upstreamSentUnasked() }
            }
        }
        do { try requests.startNextMessage() } catch {
            out.closeClient = true
            finished = true
            return
        }
        pumpRequests()
    }

    /// Ends the exchange in flight: an error answer if no response head went out yet, else it is logged as cut off
    /// and the client's connection is reset (`abortClient`: a close is how a close-delimited body ends, so only a
    /// reset says that the response is incomplete). The client connection ends.
    private func failExchange(status: Int, reason: String) {
        guard var ex = exchange else {
            out.closeClient = true
            finished = true
            return
        }
        if ex.responseHeadSent {
            if ex.localAnswer == nil { out.abortClient = true }
            complete(keepParsing: false, interruption: ex.localAnswer == nil ? reason : nil)
        } else {
            out.toClient += ex.recordClosingAnswer(status: status, reason: reason)
            complete(keepParsing: false)
        }
        out.closeClient = true
        finished = true
    }

    /// The upstream sent bytes with no request outstanding: its connection ends (the owner says so and closes it),
    /// and the next request goes to a new one.
    private func upstreamSentUnasked() {
        out.unsolicitedUpstream = connectedUpstream ?? UpstreamTarget(host: "-", port: 0)
        out.closeUpstream = true
        connectedUpstream = nil
        responses = HTTP1Parser(role: .responses)
    }

    private func protocolError(_ error: HTTP1Error?, fromClient: Bool) {
        let status = error?.suggestedStatus ?? 502
        let reason = error.map { $0.description } ?? "the upstream sent a response without a request"
        if exchange == nil, fromClient {
            exchange = Exchange(method: "-", url: "-", outcome: .notEvaluated, codes: [], annotation: [], started: now())
        }
        failExchange(status: fromClient ? status : 502, reason: reason)
        out.closeUpstream = true
    }
}

// MARK: - Deadlines

extension HTTP1Relay {
    var wait: RelayWait {
        // An undecided request waits for the owner, not for either peer.
        if finished || undecided != nil { return .nothing }
        guard let ex = exchange else {
            return requests.bufferedByteCount > 0 ? .requestHead(headsBegun + 1) : .nothing
        }
        if ex.localAnswer == nil, !ex.responseStarted, !awaitingUpstream, ex.requestEnded || ex.awaitingContinue {
            return .response(ex.number)
        }
        return ex.requestEnded ? .nothing : .requestBody(ex.number)
    }

    var lastRequestProgress: Double { exchange?.lastRequestProgress ?? 0 }

    /// The session suspends the body deadline while the client is held (ProxySession+Deadlines); on release the
    /// body in flight gets its full limit from then.
    func clientReadingHeld(_ held: Bool, at time: Double) {
        if !held { exchange?.lastRequestProgress = time }
    }

    func deadlinePassed(_ passed: RelayWait, limit: Duration, timeoutAnswer: ATSAnswer) -> RelayOutput {
        guard passed == wait else { return out.take() }
        switch passed {
        case .nothing:
            break
        case .requestHead:
            let ex = Exchange(method: "-", url: "-", outcome: .notEvaluated, codes: [], annotation: [], started: now())
            ex.requestBytes = requests.bufferedByteCount
            exchange = ex
            failExchange(status: 408, reason: "the request head did not arrive within \(limit)")
        case .requestBody:
            // A local answer waits for the body it drops: the 408 goes out in its place.
            if let ex = exchange, ex.localAnswer != nil {
                ex.localAnswer = nil
                ex.responseHeadSent = false
            }
            failExchange(status: 408, reason: "no byte of the request body arrived for \(limit)")
            out.closeUpstream = true
        case .response:
            guard var ex = exchange else { break }
            var answer = timeoutAnswer
            answer.url = ex.url
            ex.outcome = .failed
            ex.codes = answer.violations.map(ExchangeError.init)
            out.toClient += ex.recordClosingAnswer(
                status: 504, text: answer.blockBody, extraHeaders: answer.headers)
            complete(keepParsing: false)
            out.closeClient = true
            out.closeUpstream = true
            finished = true
        }
        return out.take()
    }
}
