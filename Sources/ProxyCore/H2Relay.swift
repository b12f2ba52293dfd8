import HTTP1Core
import HTTP2Core
import ProxyTrace

// Theory of operation:
//
// 1. Used when both the client and the upstream negotiated h2 (ALPN mirroring makes that the case exactly when
//    the upstream speaks h2). Two H2Sessions: server role facing the client, client role facing the upstream.
// 2. Streams map one to one. The owner decides each request head as for HTTP/1 (forward with annotation, or answer
//    locally for `--block http`), now or later: the stream is held meanwhile (UndecidedStreams) while the others
//    go on. Header fields are copied as they are (both sides speak h2).
// 3. Flow control follows the slower side: bytes received on one session are consumed (WINDOW_UPDATE) only as
//    the other session actually sends them, so a slow reader stops the writer without unbounded buffering. The
//    connection windows hold every stream's full window, so only the stalled stream stops.
// 4. RST_STREAM affects only its stream, mirrored to the other side. A GOAWAY from the upstream refuses the
//    client streams it did not process and tells the client to go elsewhere for new ones.
// 5. nghttp2 is never re-entered: all submits happen after `receive` has returned, and output is pumped last.
// 6. A stream the proxy resets itself (nghttp2 on a frame that breaks the stream's rules), or that closes before
//    the upstream finished, has its upstream stream reset at once (RST_STREAM CANCEL); such resets count towards
//    the client's rapid-reset limit in H2Session (MadeYouReset). A response head over the upstream session's
//    header list limit costs its stream alone: a 502 when no head went out yet.
// 7. Each request keeps the deadlines of StreamDeadlines (head, body inactivity, response).
// 8. An upstream that sent its whole response and then RST_STREAM(NO_ERROR) wants no more of the request (RFC 9113
//    §8.1): the response still reaches the client whole; the rest of the request body is dropped, and once the
//    response's END_STREAM went out the client gets the same RST_STREAM(NO_ERROR).
// 9. A response body a body rule holds (`HeldBody`) is credited to the upstream as it arrives, so the upstream
//    keeps sending while the client has nothing to read (the holder's limit bounds it instead); its head and body
//    go to the client at END_STREAM or the trailers. A request body a body rule holds is credited to the client
//    the same way, and its upstream stream opens at the body's end.

final class H2Relay: ExchangeRelay {
    private let client: H2Session
    private let upstream: H2Session
    private let now: () -> Double
    private var out = RelayOutput()

    private struct Stream: H2ClientStream {
        var exchange: H2StreamExchange
        var upstreamID: Int32?
        /// Bytes handed to the upstream session (client → upstream) not yet credited back to the client.
        var uncreditedToUpstream = 0
        /// Bytes handed to the client session (upstream → client) not yet credited back to the upstream.
        var uncreditedToClient = 0
        /// The upstream sent the whole response (END_STREAM); what is left waits only for the client's reading.
        var upstreamEnded = false
        /// The response body a body rule holds whole, its head waiting with it (HeldBody).
        var heldBody: HeldResponse?
        /// The whole response a breakpoint holds after the upstream ended it, until `releaseResponse`.
        var atBreakpoint: (head: HTTPResponseHead, body: [UInt8], trailers: [H2Header]?)?
        /// The request body a body rule holds whole; the upstream stream opens at its end, with the client's fields
        /// (`heldRequestFields`) giving the scheme and authority.
        var heldRequest: HeldRequest?
        var heldRequestFields: [H2Header] = []

        /// Its DATA waits uncredited in the upstream session's queue for the upstream's window.
        var bodyHeldByProxy: Bool { uncreditedToUpstream > 0 }
    }

    private var book: H2StreamBook<Stream>
    private var byUpstream: [Int32: Int32] = [:]
    private var failed = false
    /// Set once the proxy relayed an upstream GOAWAY to the client. The client, told to go away, closes the
    /// connection itself when its streams are done, so the proxy does not close first: closing while the client
    /// still sends its last WINDOW_UPDATE/RST_STREAM frames makes the kernel answer with a TCP RST, which can
    /// destroy response bytes the client has not read yet (curl then failed finished streams with error 55).
    /// The idle timeout bounds a client that never closes.
    private var clientToldToGoAway = false
    /// The upstream connection is gone; what the upstream session still queues has nowhere to go.
    private var upstreamClosed = false
    private let recording: RecordingOptions?
    /// The upstream's first SETTINGS arrived: whether it accepts extended CONNECT is known.
    private var upstreamSettingsSeen = false
    /// Extended CONNECTs that arrived before that (the proxy advertised the setting at once), opened when it comes.
    private var heldExtendedConnects: [(id: Int32, fields: [H2Header], endStream: Bool)] = []
    /// Streams the upstream reset with NO_ERROR after its complete response: each is reset the same way towards
    /// the client once that response went out (theory of operation, 8).
    private var resetAfterResponse: Set<Int32> = []

    init(
        now: @escaping () -> Double, recording: RecordingOptions? = nil, limits: StreamDeadlineLimits = .init()
    ) throws(H2Error) {
        self.recording = recording
        book = H2StreamBook(limits: limits)
        // Credit follows the other side per stream, so uncredited bytes pile up per stream: a response whose
        // reader stopped (its window at the client is 0), or request bodies waiting for an upstream stream slot
        // (the origin allows fewer concurrent streams than the client opened). With the RFC's 64 KiB connection
        // window, one such stream holds the whole window and every other stream on the connection stalls. Room
        // for every stream's full window keeps the stream windows the only limit, so memory stays bounded by
        // them (at most 100 × 64 KiB per direction).
        let defaults = H2Settings()
        let settings = H2Settings(connectionWindowSize: defaults.maxConcurrentStreams * defaults.initialWindowSize)
        // Extended CONNECT (RFC 8441, WebSockets over h2) is relayed to an origin that advertises it too.
        var clientSettings = settings
        clientSettings.enableConnectProtocol = true
        client = try H2Session(role: .server, settings: clientSettings)
        upstream = try H2Session(role: .client, settings: settings)
        self.now = now
        pump()
    }

    var isIdle: Bool { book.isEmpty }

    func isHolding(_ id: Int) -> Bool { !failed && Int32(exactly: id).map(book.undecided.contains) == true }

    func resolve(_ id: Int, _ decision: RequestDecision) -> RelayOutput {
        guard !failed, let held = book.undecided.take(id) else { return out.take() }
        open(Int32(id), held, decision)
        for event in held.held { clientEvent(event) }
        pump()
        return out.take()
    }

    func clientBytes(_ bytes: [UInt8]) -> RelayOutput {
        guard !failed else { return out.take() }
        do {
            for event in try client.receive(bytes) { clientEvent(event) }
        } catch {
            connectionFailed(clientSide: true, error)
        }
        book.noteHeaderBlock(assembling: client.isReceivingHeaderBlock, at: now())
        pump()
        return out.take()
    }

    func upstreamBytes(_ bytes: [UInt8]) -> RelayOutput {
        guard !failed else { return out.take() }
        do {
            for event in try upstream.receive(bytes) { upstreamEvent(event) }
        } catch {
            connectionFailed(clientSide: false, error)
        }
        pump()
        return out.take()
    }

    func clientEOF() -> RelayOutput {
        clientGone("the client closed the connection")
    }

    func clientGone(_ reason: String) -> RelayOutput {
        out.closeClient = true
        failed = true
        _ = book.undecided.removeAll()
        finishAll(interruption: reason)
        return out.take()
    }

    func upstreamEOF() -> RelayOutput {
        upstreamClosed = true
        // Responses the upstream sent in full stay until the client has read them: they may be waiting for the
        // client's flow control, and an origin may close right after its last response. The other streams are
        // lost: reset towards the client and finished, so their exchanges are logged and traced (iterating a copy
        // of `streams`). The client is told to go away and closes once it has what is left.
        for (id, s) in book.streams where !s.upstreamEnded && !s.exchange.local {
            reset(client, id, .internalError)
            finish(clientID: id, interruption: "the upstream connection closed")
        }
        // Undecided streams have nowhere to go either.
        let last = book.highestID
        for id in book.undecided.removeAll() { reset(client, id, .internalError) }
        goAway(client, last: last, .noError)
        clientToldToGoAway = true
        pump()
        out.closeUpstream = true
        if book.streams.isEmpty { out.closeClient = true }
        return out.take()
    }

    // MARK: - Client → upstream

    private func clientEvent(_ event: H2Event) {
        if !book.undecided.isEmpty, book.undecided.keep(event, crediting: client) { return }
        switch event {
        case .headers(let id, let fields, .request, let endStream):
            openStream(id, fields: fields, endStream: endStream)
        case .headers(let id, let fields, .trailers, _):
            if let held = book.streams[id]?.heldRequest {
                book.streams[id]?.heldRequest = nil
                let (head, body) = held.release()
                openHeld(id, head: head, body: body, endStream: false)
            }
            guard let up = book.streams[id]?.upstreamID else { return }
            book.streams[id]?.exchange.clock.requestEnded(at: now())
            do { try upstream.submitTrailers(streamID: up, fields) } catch { resetBoth(clientID: id) }
        case .data(let id, let bytes, let endStream):
            guard var s = book.streams[id] else {
                client.consume(streamID: id, count: bytes.count)
                return
            }
            s.exchange.requestBytes += bytes.count
            s.exchange.recorder?.requestBody(bytes)
            if endStream, s.upstreamID != nil, let recorder = s.exchange.recorder { recorder.requestSent = now() }
            s.exchange.clock.lastRequestProgress = now()
            if endStream { s.exchange.clock.requestEnded(at: now()) }
            if let held = s.heldRequest {
                // Credited at once: nothing goes upstream until the end (theory of operation, 9).
                client.consume(streamID: id, count: bytes.count)
                let fits = held.append(bytes)
                if fits, !endStream {
                    book.streams[id] = s
                    return
                }
                s.heldRequest = nil
                book.streams[id] = s
                let (head, body) = fits ? held.release() : (held.head, held.spill())
                openHeld(id, head: head, body: body, endStream: endStream)
                return
            }
            if let up = s.upstreamID {
                s.uncreditedToUpstream += bytes.count
                book.streams[id] = s
                do { try upstream.sendData(streamID: up, bytes, endStream: endStream) } catch { resetBoth(clientID: id) }
            } else {
                // A locally answered request: its body is dropped, and credited at once.
                book.streams[id] = s
                client.consume(streamID: id, count: bytes.count)
            }
        case .rstStream(let id, let code):
            heldExtendedConnects.removeAll { $0.id == id }
            if let up = book.streams[id]?.upstreamID { reset(upstream, up, code) }
            finish(clientID: id, interruption: "reset by the client (\(code))")
        case .streamClosed(let id, let code):
            // A stream the proxy reset itself (nghttp2 on a WINDOW_UPDATE overflow, say) or that closed before the
            // upstream finished: its upstream request is cancelled now, never sent later (MadeYouReset).
            if let s = book.streams[id], let up = s.upstreamID, code != .noError || !s.upstreamEnded {
                reset(upstream, up, .cancel)
            }
            finish(clientID: id, interruption: code == .noError ? nil : "stream closed with \(code)")
        case .goAway:
            // The client opens no more streams; the ones in flight finish, then the client closes.
            break
        case .headers, .settings, .windowUpdate, .ping:
            break
        }
    }

    private func openStream(_ id: Int32, fields: [H2Header], endStream: Bool) {
        let head: HTTPRequestHead
        do { head = try HTTPRequestHead(h2Request: fields) } catch {
            reset(client, id, .protocolError, blamingPeer: true)
            return
        }
        let extendedConnect = fields.first(named: ":protocol") != nil
        if extendedConnect, !upstreamSettingsSeen {
            heldExtendedConnects.append((id, fields, endStream))
            return
        }
        book.undecided.hold(id, fields: fields, head: head, endStream: endStream, at: now(), asking: &out)
    }

    /// Carries out the owner's decision on a held stream.
    private func open(_ id: Int32, _ held: UndecidedStreams.Stream, _ decision: RequestDecision) {
        let (head, fields, endStream, started) = (held.head, held.fields, held.endStream, held.arrived)
        let extendedConnect = fields.first(named: ":protocol") != nil
        switch decision {
        case .forward(_, let url, _, _, let outcome, let codes, _)
            where extendedConnect && !upstream.remoteSettings.enableConnectProtocol:
            // The proxy advertised extended CONNECT before it knew the origin's settings: an origin without it
            // cannot take the stream (RFC 8441 §3), and the answer says so rather than a bare reset.
            var s = Stream(exchange: H2StreamExchange(
                method: head.method, url: url, outcome: outcome, codes: codes, annotation: [], started: started,
                clock: .answered(at: now())))
            s.exchange.local = true
            s.exchange.status = 501
            let body = Array(("ATSProxy: the origin does not accept extended CONNECT (it sent no "
                + "SETTINGS_ENABLE_CONNECT_PROTOCOL), so \(fields.first(named: ":protocol") ?? "") over HTTP/2 cannot "
                + "reach it\n").utf8)
            s.exchange.responseBytes = body.count
            book.streams[id] = s
            answer(id, status: 501, headers: [], body: body)
        case .forward(let forwarded, let url, _, let annotation, let outcome, let codes, let rules):
            var s = Stream(exchange: .forwarded(
                head, url: url, outcome: outcome, codes: codes, annotation: annotation, started: started, now: now(),
                recording: recording))
            s.exchange.rules = rules
            s.exchange.recorder?.recordRequest(head, forwarded: forwarded)
            if endStream, let recorder = s.exchange.recorder { recorder.requestSent = now() }
            // An extended CONNECT's DATA is a tunnel's, not a body with a deadline: only its answer is waited for.
            if endStream || extendedConnect { s.exchange.clock.requestEnded(at: now()) }
            if !endStream, !extendedConnect, let rules, let held = rules.holdRequestBody(for: forwarded) {
                // The upstream stream opens when the body rules have the whole body (theory of operation, 9); a
                // client waiting for 100 Continue gets it from the proxy.
                s.heldRequest = held
                s.heldRequestFields = fields
                book.streams[id] = s
                if head.expectsContinue { try? client.submitInformational(streamID: id, headers: [H2Header(":status", "100")]) }
                return
            }
            do {
                // The client's own fields when the decision left the head as it was (the common case); a
                // rewritten head is sent as rewritten, with the client's scheme and authority.
                // An extended CONNECT always goes as the client sent it: its h1 view (a GET with Upgrade) would lose
                // the upgrade in translation.
                let upstreamFields = forwarded == head || extendedConnect
                    ? fields : try Self.h2Fields(of: forwarded, like: fields)
                let up = try upstream.submitRequest(upstreamFields, body: endStream ? .none : .streaming)
                s.upstreamID = up
                byUpstream[up] = id
                book.streams[id] = s
            } catch {
                s.exchange.clock = .answered(at: now())
                book.streams[id] = s
                answer(id, status: 502, headers: [], body: Array("ATSProxy: the upstream refused a new stream (\(error))\n".utf8))
            }
        case .answer(let response, let body, let url, let outcome, let codes, let rules):
            var s = Stream(exchange: .answered(
                head, with: response, body: body, url: url, outcome: outcome, codes: codes, started: started,
                now: now(), recording: recording))
            s.exchange.rules = rules
            book.streams[id] = s
            do { try client.answerLocally(streamID: id, response: response, body: body, requestMethod: head.method) } catch {
                reset(client, id, .internalError)
            }
        }
    }

    private func answer(_ id: Int32, status: Int, headers: [H2Header], body: [UInt8]) {
        do { try client.answerLocally(streamID: id, status: status, headers: headers, body: body) } catch {
            reset(client, id, .internalError)
        }
    }

    // MARK: - Upstream → client

    private func upstreamEvent(_ event: H2Event) {
        switch event {
        case .settings(ack: false, _) where !upstreamSettingsSeen:
            upstreamSettingsSeen = true
            let held = heldExtendedConnects
            heldExtendedConnects = []
            for stream in held { openStream(stream.id, fields: stream.fields, endStream: stream.endStream) }
        case .headers(let up, let fields, .response, let endStream):
            guard let id = byUpstream[up], var s = book.streams[id] else { return }
            let status = fields.first(named: ":status").flatMap { Int($0) } ?? 0
            do {
                if (100..<200).contains(status) {
                    try client.submitInformational(streamID: id, headers: fields)
                } else {
                    s.exchange.status = status
                    s.exchange.clock.responseStarted = true
                    s.upstreamEnded = endStream
                    var sent = fields
                    if let rules = s.exchange.rules, let edited = rules.editResponse(fields, outcome: s.exchange.outcome) {
                        sent = edited
                    }
                    if let recorder = s.exchange.recorder {
                        Self.record(fields, sent: sent, annotation: s.exchange.annotation, in: recorder, at: now())
                    }
                    // Not an extended CONNECT's answer (a WebSocket): its body never ends.
                    if let rules = s.exchange.rules, s.exchange.method != "CONNECT",
                        !endStream || rules.mayBreakResponse,
                        let held = rules.holdBody(for: sent, outcome: s.exchange.outcome)
                    {
                        s.heldBody = endStream ? nil : held
                        book.streams[id] = s
                        // A bodiless response a breakpoint holds ends here.
                        if endStream { endHeld(id, held, fits: true, trailers: nil) }
                        return
                    }
                    book.streams[id] = s
                    try client.submitResponse(streamID: id, headers: sent + s.exchange.annotation, body: endStream ? .none : .streaming)
                }
            } catch {
                resetBoth(clientID: id)
            }
        case .headers(let up, let fields, .trailers, _):
            guard let id = byUpstream[up] else { return }
            book.streams[id]?.upstreamEnded = true
            if let held = book.streams[id]?.heldBody {
                book.streams[id]?.heldBody = nil
                if endHeld(id, held, fits: true, trailers: fields) { return }
            }
            do { try client.submitTrailers(streamID: id, fields) } catch { resetBoth(clientID: id) }
        case .data(let up, let bytes, let endStream):
            guard let id = byUpstream[up], var s = book.streams[id] else {
                upstream.consume(streamID: up, count: bytes.count)
                return
            }
            s.exchange.responseBytes += bytes.count
            s.exchange.recorder?.responseBody(bytes)
            if endStream { s.upstreamEnded = true }
            if let held = s.heldBody {
                // Credited at once: nothing reaches the client until the end (theory of operation, 9).
                upstream.consume(streamID: up, count: bytes.count)
                let fits = held.append(bytes)
                if fits, !endStream {
                    book.streams[id] = s
                    return
                }
                s.heldBody = nil
                book.streams[id] = s
                endHeld(id, held, fits: fits, endStream: endStream, trailers: nil)
                return
            }
            s.uncreditedToClient += bytes.count
            book.streams[id] = s
            do { try client.sendData(streamID: id, bytes, endStream: endStream) } catch { resetBoth(clientID: id) }
        case .rstStream(let up, let code):
            guard let id = byUpstream[up] else { return }
            if code == .noError, book.streams[id]?.upstreamEnded == true {
                stopRequest(clientID: id, upstreamID: up)
                return
            }
            reset(client, id, code)
            finish(clientID: id, interruption: "reset by the upstream (\(code))")
        case .streamClosed(let up, let code):
            guard let id = byUpstream[up], code != .noError else { return }
            if upstream.takeOversizedHeaderBlock(streamID: up), book.streams[id]?.exchange.status == nil {
                // Only this stream is lost, and the client is told why.
                let limit = upstream.localSettings.maxHeaderListSize
                let reason = "the upstream's response header section exceeds \(limit) bytes"
                book.streams[id]?.exchange.status = 502
                answer(id, status: 502, headers: [], body: Array("ATSProxy: \(reason)\n".utf8))
                finish(clientID: id, interruption: reason)
                return
            }
            reset(client, id, code)
            finish(clientID: id, interruption: "the upstream closed the stream with \(code)")
        case .goAway(let last, _, _):
            // Streams the upstream never processed are refused, so the client may retry them elsewhere.
            for (up, id) in byUpstream where up > last {
                reset(client, id, .refusedStream)
                finish(clientID: id, interruption: "refused by the upstream's GOAWAY (the client may retry)")
            }
            goAway(client, last: book.highestID, .noError)
            clientToldToGoAway = true
        case .headers, .settings, .windowUpdate, .ping:
            break
        }
    }

    /// Opens the upstream stream of a request whose head waited for its body (HeldBody), and sends that body (already
    /// credited to the client).
    private func openHeld(_ id: Int32, head: HTTPRequestHead, body: [UInt8], endStream: Bool) {
        guard var s = book.streams[id] else { return }
        do {
            let fields = try Self.h2Fields(of: head, like: s.heldRequestFields)
            let up = try upstream.submitRequest(fields, body: .streaming)
            s.upstreamID = up
            s.heldRequestFields = []
            byUpstream[up] = id
            book.streams[id] = s
            try upstream.sendData(streamID: up, body, endStream: endStream)
        } catch {
            s.exchange.clock = .answered(at: now())
            book.streams[id] = s
            answer(id, status: 502, headers: [], body: Array("ATSProxy: the upstream refused the request (\(error))\n".utf8))
            return
        }
        s.exchange.recorder?.recordForwardedRequest(head)
        if endStream, let recorder = s.exchange.recorder { recorder.requestSent = now() }
    }

    /// A held response's end (or its spill past the limit): sent on, or kept whole for a breakpoint (reported in
    /// `responseHolds`); true when kept. With `trailers`, the body ended with them and they are sent (or kept) too.
    @discardableResult
    private func endHeld(
        _ id: Int32, _ held: HeldResponse, fits: Bool, endStream: Bool = true, trailers: [H2Header]?
    ) -> Bool {
        let (head, body) = fits ? held.release() : (held.head, held.spill())
        if fits, let rule = held.breakpoint, let s = book.streams[id], let rules = s.exchange.rules {
            book.streams[id]?.atBreakpoint = (head, body, trailers)
            out.responseHolds.append(
                ResponseToHold(
                    id: Int(id), rule: rule, rules: rules, method: s.exchange.method, url: s.exchange.url, head: head,
                    body: body))
            return true
        }
        sendHeld(id, head: head, body: body, endStream: endStream && trailers == nil)
        return false
    }

    func releaseResponse(_ id: Int, _ release: HoldRelease?) -> RelayOutput {
        guard !failed, let sid = Int32(exactly: id), let s = book.streams[sid], let held = s.atBreakpoint else {
            return out.take()
        }
        book.streams[sid]?.atBreakpoint = nil
        let method = s.exchange.method
        guard let (head, body, _) = (release ?? .execute()).response(held.head, held.body, method: method)
        else {
            // Aborted: only this stream is reset; the connection's other streams go on.
            if !s.upstreamEnded, let up = s.upstreamID { reset(upstream, up, .cancel) }
            reset(client, sid, .cancel)
            finish(clientID: sid, interruption: "aborted at a breakpoint: the stream was reset")
            pump()
            return out.take()
        }
        book.streams[sid]?.exchange.status = head.status
        sendHeld(sid, head: head, body: body, endStream: held.trailers == nil)
        if let trailers = held.trailers {
            do { try client.submitTrailers(streamID: sid, trailers) } catch { resetBoth(clientID: sid) }
        }
        pump()
        return out.take()
    }

    /// A response head that waited for its body (HeldBody), then the body: both already credited to the upstream.
    private func sendHeld(_ id: Int32, head: HTTPResponseHead, body: [UInt8], endStream: Bool) {
        guard let s = book.streams[id] else { return }
        let fields = ExchangeRules.h2Fields(head) + s.exchange.annotation
        if let recorder = s.exchange.recorder, let sent = HTTPResponseHead(h2Response: fields) {
            recorder.recordClientResponse(sent)
        }
        do {
            try client.submitResponse(streamID: id, headers: fields, body: .streaming)
            try client.sendData(streamID: id, body, endStream: endStream)
        } catch {
            resetBoth(clientID: id)
        }
    }

    /// The HTTP/2 fields of a rewritten request head, keeping the client's `:scheme` (and `:authority` when the
    /// head has no Host).
    static func h2Fields(of head: HTTPRequestHead, like original: [H2Header]) throws(H2TranslationError) -> [H2Header] {
        let scheme = original.first(named: ":scheme") ?? "https"
        var fields = head.headers.fields.map { H2Header($0.name, $0.value) }
        if !head.headers.contains(name: "Host"), let authority = original.first(named: ":authority") {
            fields.insert(H2Header("host", authority), at: 0)
        }
        return try H2HeaderTranslation.h2Request(
            from: H1RequestHead(method: head.method, target: head.target, headers: fields), scheme: scheme)
    }

    /// Records an h2 response head (and the one the client got: changed by rules, annotated) in HTTP/1.1 terms.
    static func record(
        _ fields: [H2Header], sent: [H2Header], annotation: [H2Header], in recorder: ExchangeRecorder, at time: Double
    ) {
        guard let head = HTTPResponseHead(h2Response: fields) else { return }
        var annotated: HTTPResponseHead?
        if !annotation.isEmpty || sent != fields {
            annotated = sent == fields ? head : HTTPResponseHead(h2Response: sent) ?? head
            for field in annotation { annotated?.headers.add(name: field.name, value: field.value) }
        }
        recorder.recordResponse(head, toClient: annotated, at: time)
    }

    // MARK: - Bookkeeping

    /// Queues RST_STREAM. A session that cannot even queue a reset is beyond saving: the connection ends.
    private func reset(_ session: H2Session, _ id: Int32, _ code: H2ErrorCode, blamingPeer: Bool = false) {
        do { try session.submitRSTStream(streamID: id, errorCode: code, blamingPeer: blamingPeer) } catch { abandon() }
    }

    /// Queues GOAWAY, or ends the connection when even that is impossible.
    private func goAway(_ session: H2Session, last: Int32, _ code: H2ErrorCode) {
        do { try session.submitGoAway(lastStreamID: last, errorCode: code) } catch { abandon() }
    }

    private func abandon() {
        failed = true
        out.closeClient = true
        out.closeUpstream = true
    }

    private func finish(clientID id: Int32, interruption: String? = nil) {
        guard let s = book.streams.removeValue(forKey: id) else { return }
        if let up = s.upstreamID {
            byUpstream[up] = nil
            // Bytes of a reset stream that will never be relayed still count against the connection windows.
            if s.uncreditedToUpstream > 0 { client.consume(streamID: id, count: s.uncreditedToUpstream) }
            if s.uncreditedToClient > 0 { upstream.consume(streamID: up, count: s.uncreditedToClient) }
        }
        out.exchanges.append(s.exchange.summary(httpVersion: "HTTP/2.0", now: now(), interruption: interruption))
    }

    /// The upstream has answered in full and wants no more of the request: the stream lets go of its upstream
    /// stream (later request DATA is credited and dropped, as for a local answer) and is reset towards the client
    /// once the response is out (`resetAnsweredStreams`).
    private func stopRequest(clientID id: Int32, upstreamID up: Int32) {
        guard var s = book.streams[id] else { return }
        byUpstream[up] = nil
        s.upstreamID = nil
        if s.uncreditedToUpstream > 0 { client.consume(streamID: id, count: s.uncreditedToUpstream) }
        s.uncreditedToUpstream = 0
        s.uncreditedToClient = 0
        s.exchange.clock.requestEnded = true
        book.streams[id] = s
        resetAfterResponse.insert(id)
    }

    /// Resets (NO_ERROR) the client streams of `stopRequest` whose response END_STREAM has gone out; returns whether
    /// any was.
    private func resetAnsweredStreams() -> Bool {
        guard !resetAfterResponse.isEmpty else { return false }
        var any = false
        for id in resetAfterResponse {
            guard book.streams[id] != nil else {
                resetAfterResponse.remove(id)
                continue
            }
            switch client.streamState(id) {
            case .halfClosedLocal?:
                reset(client, id, .noError)
            case .closed?, nil:
                break  // the client had ended its request too: the stream closed by itself
            default:
                continue
            }
            resetAfterResponse.remove(id)
            finish(clientID: id)
            any = true
        }
        return any
    }

    /// Logs every stream still open as cut off: the connection is ending.
    private func finishAll(interruption: String) {
        _ = book.undecided.removeAll()
        for id in book.streams.keys.sorted() { finish(clientID: id, interruption: interruption) }
    }

    private func resetBoth(clientID id: Int32) {
        if let up = book.streams[id]?.upstreamID { reset(upstream, up, .internalError) }
        reset(client, id, .internalError)
        finish(clientID: id, interruption: "the relay could not pass the stream on")
    }

    private func connectionFailed(clientSide: Bool, _ error: H2Error) {
        failed = true
        finishAll(interruption: "the \(clientSide ? "client" : "upstream") connection failed: \(error)")
        if clientSide {
            // The client's GOAWAY is already queued by the session; the upstream is told we are going away.
            goAway(upstream, last: 0, .noError)
        } else {
            goAway(client, last: book.highestID, .internalError)
        }
        out.closeClient = true
        out.closeUpstream = true
    }

    /// Gives `receiver` credit (`consume`) for the bytes of `uncredited` that `sender` has sent on, that is, no
    /// longer holds in its queue; returns whether there were any.
    private static func credit(
        _ uncredited: inout Int, sentBy sender: H2Session, as sentID: Int32, to receiver: H2Session,
        as receivedID: Int32
    ) -> Bool {
        guard uncredited > 0 else { return false }
        let sent = uncredited - sender.outboundQueuedBytes(streamID: sentID)
        guard sent > 0 else { return false }
        receiver.consume(streamID: receivedID, count: sent)
        uncredited -= sent
        return true
    }

    /// Writes what both sessions have queued, and returns flow-control credit for bytes the other side sent.
    private func pump() {
        let toUpstream = upstream.pendingOutput()
        if !upstreamClosed { out.toUpstream += toUpstream }
        out.toClient += client.pendingOutput()
        var credited = false
        // By index, changing each stream where it lies: iterating `streams` while assigning to it copied the whole
        // dictionary on every pump.
        var index = book.streams.startIndex
        while index != book.streams.endIndex {
            let id = book.streams.keys[index]
            if let up = book.streams.values[index].upstreamID {
                let toUpstream = Self.credit(
                    &book.streams.values[index].uncreditedToUpstream, sentBy: upstream, as: up, to: client, as: id)
                // The client may send again: its body's inactivity counts from now.
                if toUpstream { book.streams.values[index].exchange.clock.lastRequestProgress = now() }
                let toClient = Self.credit(
                    &book.streams.values[index].uncreditedToClient, sentBy: client, as: id, to: upstream, as: up)
                credited = credited || toUpstream || toClient
            }
            book.streams.formIndex(after: &index)
        }
        // Events raised by our own output (a stream closed by the END_STREAM just sent, a frame nghttp2 could not
        // send) may queue frames as well, a reset or a credit. Nothing else would pump those out before the next
        // bytes arrive, so a connection waiting on them could wait for good: flush after them too.
        let clientRaised = client.takeEvents()
        for event in clientRaised { clientEvent(event) }
        let upstreamRaised = upstream.takeEvents()
        for event in upstreamRaised { upstreamEvent(event) }
        let answeredReset = resetAnsweredStreams()
        if credited || answeredReset || !clientRaised.isEmpty || !upstreamRaised.isEmpty {
            let more = upstream.pendingOutput()
            if !upstreamClosed { out.toUpstream += more }
            out.toClient += client.pendingOutput()
        }
        if !client.wantsRead && !client.wantsWrite && book.isEmpty && !clientToldToGoAway {
            out.closeClient = true
        }
    }
}

// MARK: - Deadlines

extension H2Relay {
    var nextStreamDeadline: Double? { book.nextDeadline }

    func clientReadingHeld(_ held: Bool, at time: Double) { book.clientReadingHeld(held, at: time) }

    func streamDeadlinesPassed(timeoutAnswer: ATSAnswer) -> RelayOutput {
        guard !failed else { return out.take() }
        let time = now()
        if book.headerBlockOverdue(at: time) {
            // Nothing else may cross the connection until the block ends: the connection goes.
            finishAll(interruption: "a request's header block was not complete within \(Int(book.limits.client)) s (--client-timeout)")
            goAway(client, last: 0, .enhanceYourCalm)
            pump()
            abandon()
            return out.take()
        }
        for (id, stall) in book.overdueStreams(at: time) {
            guard let s = book.streams[id] else { continue }
            if let up = s.upstreamID { reset(upstream, up, .cancel) }
            switch stall {
            case .requestBody:
                reset(client, id, .cancel)
                finish(clientID: id, interruption: "no byte of the request body for \(Int(book.limits.client)) s (--client-timeout)")
            case .response:
                let answer = streamTimeoutAnswer(timeoutAnswer, url: s.exchange.url)
                book.streams[id]?.exchange.status = 504
                book.streams[id]?.exchange.outcome = .failed
                book.streams[id]?.exchange.codes = timeoutAnswer.violations.map(ExchangeError.init)
                self.answer(id, status: 504, headers: answer.headers.map { H2Header($0.0, $0.1) }, body: answer.body)
                finish(clientID: id, interruption: "no response from the upstream within \(Int(book.limits.response)) s (--response-timeout)")
            }
        }
        pump()
        return out.take()
    }
}
