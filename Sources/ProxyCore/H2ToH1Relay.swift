import HTTP1Core
import HTTP2Core
import ProxyTrace

// Theory of operation:
//
// 1. Used when the client speaks h2 and the upstream HTTP/1.1 (an origin without HTTP/2, reached by a client that
//    offered h2 alone), and for `--block http` answers to such a client. The client side is an H2Session in the
//    server role; the upstream side is a bounded pool of HTTP/1.1 connections ("lanes"), since HTTP/1.1 carries one
//    exchange at a time. Lane `.primary` is the session's own upstream (the connection whose handshake was
//    judged); the session opens the others on request (`RelayOutput.lanes`) with the same TLS settings.
// 2. Each request stream waits in a FIFO for an idle lane; a new lane is opened while the pool is below `maxLanes`
//    and more streams wait than lanes are connecting. A lane is reused when both sides allow keep-alive.
// 3. The owner decides each request head (`RelayOutput.toDecide`, answered by `resolve`, now or later); the stream
//    is held meanwhile (UndecidedStreams), its DATA uncredited, while the others go on.
//    Heads are translated (H2HeaderTranslation: :authority → Host, cookie crumbs joined). A request body without
//    Content-Length is sent chunked. Trailers cross both ways.
// 4. Flow control: request DATA is credited back once written to its lane (the lane's socket backpressure pauses
//    the client when the upstream reads slowly); DATA of a stream still waiting for a lane stays uncredited, so its
//    window bounds it. Response bytes go out as the client's stream and connection windows allow; what they hold
//    back waits in the stream's outbound queue. A lane stops being read while its stream holds more than
//    `streamQueueHighWater` or all streams together more than `connectionQueueHighWater` (a finished response
//    frees its lane but keeps its bytes until the client takes them), and resumes below the low waters. The
//    connection's bound spares a lane whose stream the client is draining (its queue below the low water, its
//    window open, and credit given back beyond the initial window): a client that reads one response at a time
//    while others wait unread would otherwise stall the very stream it reads, for good. A new stream earns that
//    only by being read, so streams nobody reads still stop at the bound. So the proxy holds at most about 512 KiB
//    of response per client connection beyond the client's windows, plus the stream's bound and one read per
//    lane, whatever windows the client advertises.
// 5. HTTP/1.1 cannot cancel one exchange: a client reset of a stream whose exchange is in flight closes its lane.
//    A lane that fails before the response head turns into a 502 on the stream; after it, into RST_STREAM. A lane
//    that sends bytes with no request outstanding (an extra response, in the same write as the one asked for or
//    later) is closed with a notice (`LaneCommands.unsolicited`), never read as the next stream's answer. A lane reset
//    (`laneReset`) is such a failure even for a close-delimited body, which its EOF would have ended.
// 6. WebSockets (RFC 8441): the client session advertises SETTINGS_ENABLE_CONNECT_PROTOCOL. An extended CONNECT
//    (`:protocol websocket`) becomes the HTTP/1.1 handshake (GET with Upgrade, and a Sec-WebSocket-Key the proxy
//    makes, since RFC 8441 §5 leaves it out); the origin's 101, its Sec-WebSocket-Accept checked, becomes the
//    stream's 200. From then on the lane is raw: its bytes are the stream's DATA and the stream's DATA its bytes,
//    until the lane ends (END_STREAM) or the client resets the stream (the lane closes).
// 7. A stream the proxy resets itself (nghttp2 on a frame that breaks the stream's rules) closes its lane like a
//    client's reset; such resets count towards the client's rapid-reset limit in H2Session (MadeYouReset).
// 8. Each request keeps the deadlines of StreamDeadlines: its body's inactivity once it has a lane (a stream
//    waiting for one cannot send: its window is held), and the response from the request's end on its lane.
// 9. A response body a body rule holds (`HeldBody`) queues nothing for the client, so its lane is read on (the
//    holder's limit bounds it); its head and body go to the client at the body's end. A request body a body rule
//    holds is credited to the client as it arrives, and the stream waits for a lane from the body's end on.

final class H2ToH1Relay: LaneRelay {
    private let client: H2Session
    private let now: () -> Double
    private let maxLanes: Int
    private var out = RelayOutput()
    /// An extra lane failed to connect (or to complete its TLS handshake) since the last one that connected or the
    /// last exchange that completed: no other lane is opened while one is left. Clearing it on a completed exchange
    /// lets the pool grow again later, at most one connect per exchange, never a storm.
    private var laneConnectFailed = false

    /// The pool of upstream HTTP/1.1 connections a browser would open per host (Chrome and Safari use 6).
    static let defaultMaxLanes = 6
    /// Response bytes one stream may hold for the client's windows before its lane stops being read, and the level
    /// below which it is read again.
    static let streamQueueHighWater = 64 << 10
    static let streamQueueLowWater = 16 << 10
    /// The same for all the connection's streams together: responses that ended wait for the client with their
    /// lanes serving other streams, so without this bound 100 streams would hold 100 × the stream's.
    static let connectionQueueHighWater = 512 << 10
    static let connectionQueueLowWater = 256 << 10

    private struct Lane {
        var connected: Bool
        var responses = HTTP1Parser(role: .responses)
        var streamID: Int32?
        var requestWriter: HTTP1BodyWriter?
        var paused = false
        /// After a 101: the lane carries the stream's bytes raw (a WebSocket).
        var raw = false
    }

    private struct Stream: H2ClientStream {
        var exchange: H2StreamExchange
        /// The serialised HTTP/1.1 head and its body framing, sent when a lane is free.
        var head: [UInt8] = []
        var framing: HTTP1BodyFraming = .none
        var keepAlive = true
        /// Body received before a lane was assigned (not yet credited to the client, unless `pendingCredited`).
        var pendingBody: [UInt8] = []
        /// `pendingBody` is a held body's (HeldBody), credited as it arrived.
        var pendingCredited = false
        /// The request body a body rule holds whole; the stream waits for a lane from its end on.
        var heldRequest: HeldRequest?
        var requestEnded = false
        var trailers: HTTPHeaders = []
        var lane: UpstreamLane?
        var responseHeadSent = false
        var responseEnded = false
        /// The response head went out without END_STREAM: DATA or trailers must end it.
        var responseStreaming = false
        /// The response body a body rule holds whole; its head waits with it (`responseHeadSent` is false).
        var heldBody: HeldResponse?
        /// The whole response a breakpoint holds after its lane ended it (the lane freed), until `releaseResponse`.
        var atBreakpoint: (head: HTTPResponseHead, body: [UInt8], trailers: HTTPHeaders)?
        /// Why the response was cut off, when it was.
        var interruption: String?
        /// An extended CONNECT: the Sec-WebSocket-Accept the origin's 101 must carry (RFC 6455 §4.2.2).
        var upgradeAccept: String?
        var isTunnel = false

        /// Waiting for a lane, it cannot send: its DATA stays uncredited.
        var bodyHeldByProxy: Bool { lane == nil }
    }

    private var lanes: [UpstreamLane: Lane] = [:]
    private var nextLane = 1
    private var book: H2StreamBook<Stream>
    private var waiting: [Int32] = []
    private var failed = false

    /// - Parameter primaryConnected: the session's upstream is connected and serves as the first lane (false when
    ///   every request is answered locally, as with `--block http`).
    private let recording: RecordingOptions?

    init(primaryConnected: Bool, maxLanes: Int = defaultMaxLanes, now: @escaping () -> Double,
         recording: RecordingOptions? = nil, limits: StreamDeadlineLimits = .init()) throws(H2Error) {
        self.recording = recording
        book = H2StreamBook(limits: limits)
        // As in H2Relay: the connection window holds every stream's full window, so a stream waiting for a lane
        // (its DATA uncredited) never stalls the others.
        let defaults = H2Settings()
        client = try H2Session(
            role: .server,
            settings: H2Settings(
                connectionWindowSize: defaults.maxConcurrentStreams * defaults.initialWindowSize,
                enableConnectProtocol: true))
        self.maxLanes = max(1, maxLanes)
        self.now = now
        if primaryConnected { lanes[.primary] = Lane(connected: true) }
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

    // MARK: - Input

    func clientBytes(_ bytes: [UInt8]) -> RelayOutput {
        guard !failed else { return out.take() }
        do {
            for event in try client.receive(bytes) { clientEvent(event) }
        } catch {
            // The session queued its GOAWAY; the lanes have nothing left to do.
            abandon()
        }
        book.noteHeaderBlock(assembling: client.isReceivingHeaderBlock, at: now())
        pump()
        return out.take()
    }

    func clientEOF() -> RelayOutput {
        clientGone("the client closed the connection")
    }

    func clientGone(_ reason: String) -> RelayOutput {
        abandon()
        _ = book.undecided.removeAll()
        for id in book.streams.keys.sorted() { finish(id, interruption: reason) }
        return out.take()
    }

    func upstreamBytes(_ bytes: [UInt8]) -> RelayOutput { laneBytes(.primary, bytes) }
    func upstreamEOF() -> RelayOutput { laneEOF(.primary) }
    func upstreamReset(_ reason: String) -> RelayOutput { laneReset(.primary, reason: reason) }

    func laneConnected(_ lane: UpstreamLane) -> RelayOutput {
        lanes[lane]?.connected = true
        laneConnectFailed = false
        assignLanes()
        pump()
        return out.take()
    }

    func laneFailed(_ lane: UpstreamLane, error: String) -> RelayOutput {
        lanes[lane] = nil
        laneConnectFailed = true
        if lanes.isEmpty {
            // Nothing left that could serve the waiting streams.
            for id in waiting { answer(id, status: 502, body: "ATSProxy: cannot connect to the upstream: \(error)\n") }
            waiting = []
        } else {
            assignLanes()
        }
        pump()
        return out.take()
    }

    func laneBytes(_ lane: UpstreamLane, _ bytes: [UInt8]) -> RelayOutput {
        guard !failed, lanes[lane] != nil else { return out.take() }
        if lanes[lane]?.raw == true {
            tunnelBytes(bytes, from: lane)
            pump()
            return out.take()
        }
        lanes[lane]?.responses.receive(bytes)
        pumpLane(lane)
        pump()
        return out.take()
    }

    func laneEOF(_ lane: UpstreamLane) -> RelayOutput {
        guard lanes[lane] != nil else { return out.take() }
        if lanes[lane]?.raw == true, let id = lanes[lane]?.streamID {
            // The origin ended the WebSocket's connection: the stream ends with it.
            do { try client.sendData(streamID: id, [], endStream: true) } catch {
                // The client reset the stream meanwhile.
            }
            book.streams[id]?.responseEnded = true
            lanes[lane]?.streamID = nil
            book.streams[id]?.lane = nil
            dropLane(lane, close: true)
            pump()
            return out.take()
        }
        lanes[lane]?.responses.receiveEOF()
        pumpLane(lane)
        if let id = lanes[lane]?.streamID {
            failStream(id, reason: "the upstream closed the connection before the response ended")
        }
        dropLane(lane, close: true)
        assignLanes()
        pump()
        return out.take()
    }

    func laneReset(_ lane: UpstreamLane, reason: String) -> RelayOutput {
        guard lanes[lane] != nil else { return out.take() }
        // Unlike an EOF, a reset ends no close-delimited body: the stream in flight is cut off (RST_STREAM once its
        // head went out, a 502 before), as the origin's reset would have told the client directly.
        if let id = lanes[lane]?.streamID { failStream(id, reason: reason) }
        dropLane(lane, close: true)
        assignLanes()
        pump()
        return out.take()
    }

    // MARK: - Client → lanes

    private func clientEvent(_ event: H2Event) {
        if !book.undecided.isEmpty, book.undecided.keep(event, crediting: client) { return }
        switch event {
        case .headers(let id, let fields, .request, let endStream):
            openStream(id, fields: fields, endStream: endStream)
        case .headers(let id, let fields, .trailers, _):
            guard book.streams[id] != nil else { return }
            book.streams[id]!.trailers = HTTPHeaders(H2HeaderTranslation.h1Trailers(from: fields).map { ($0.name, $0.value) })
            book.streams[id]!.exchange.clock.requestEnded = true
            if let held = book.streams[id]?.heldRequest {
                book.streams[id]?.heldRequest = nil
                let (head, body) = held.release()
                // Trailers need the chunked coding: no Content-Length given.
                queueHeld(id, head: head, body: body, length: nil, ended: true)
                return
            }
            endRequest(id)
        case .data(let id, let bytes, let endStream):
            guard var s = book.streams[id], !s.exchange.local else {
                client.consume(streamID: id, count: bytes.count)
                return
            }
            s.exchange.requestBytes += bytes.count
            s.exchange.recorder?.requestBody(bytes)
            s.exchange.clock.lastRequestProgress = now()
            if endStream { s.exchange.clock.requestEnded = true }
            if let held = s.heldRequest {
                // Credited at once: nothing goes to a lane until the end (theory of operation, 9).
                client.consume(streamID: id, count: bytes.count)
                let fits = held.append(bytes)
                if fits, !endStream {
                    book.streams[id] = s
                    return
                }
                s.heldRequest = nil
                book.streams[id] = s
                if fits {
                    let (head, body) = held.release()
                    queueHeld(id, head: head, body: body, length: body.count, ended: true)
                } else {
                    queueHeld(id, head: held.head, body: held.spill(), length: nil, ended: endStream)
                }
                return
            }
            if let lane = s.lane, lanes[lane]?.raw == true {
                book.streams[id] = s
                send(bytes, to: lane)
                client.consume(streamID: id, count: bytes.count)
                return
            } else if let lane = s.lane, !s.isTunnel {
                book.streams[id] = s
                writeBody(bytes, stream: id, lane: lane)
            } else {
                s.pendingBody += bytes
                // After a held body's bytes (credited as they came), so are these.
                if s.pendingCredited { client.consume(streamID: id, count: bytes.count) }
                book.streams[id] = s
            }
            if endStream { endRequest(id) }
        case .rstStream(let id, let code):
            finish(id, interruption: "reset by the client (\(code))")
        case .streamClosed(let id, let code):
            finish(id, interruption: code == .noError ? nil : "stream closed with \(code)")
        case .goAway, .headers, .settings, .windowUpdate, .ping:
            break
        }
    }

    private func openStream(_ id: Int32, fields: [H2Header], endStream: Bool) {
        let head: HTTPRequestHead
        do { head = try HTTPRequestHead(h2Request: fields) } catch {
            reset(id, .protocolError, blamingPeer: true)
            return
        }
        book.undecided.hold(id, fields: fields, head: head, endStream: endStream, at: now(), asking: &out)
    }

    /// Carries out the owner's decision on a held stream.
    private func open(_ id: Int32, _ held: UndecidedStreams.Stream, _ decision: RequestDecision) {
        let (head, fields, endStream, started) = (held.head, held.fields, held.endStream, held.arrived)
        switch decision {
        case .forward(var forwarded, let url, _, let annotation, let outcome, let codes, let rules):
            var s = Stream(exchange: .forwarded(
                head, url: url, outcome: outcome, codes: codes, annotation: annotation, started: started, now: now(),
                recording: recording))
            s.exchange.rules = rules
            s.exchange.clock.requestEnded = endStream
            book.streams[id] = s
            guard head.method != "CONNECT" else {
                answer(id, status: 501, body: "ATSProxy: CONNECT over HTTP/2 cannot be relayed to an HTTP/1.1 upstream\n")
                return
            }
            if let upgrade = fields.first(named: ":protocol") {
                // RFC 8441 §5: the HTTP/1.1 handshake the origin expects, with the key HTTP/2 leaves out.
                s.isTunnel = true
                // Its DATA is a tunnel's, not a body with a deadline: only the 101 is waited for.
                s.exchange.clock.requestEnded = true
                if upgrade.lowercased() == "websocket", !forwarded.headers.contains(name: "Sec-WebSocket-Key") {
                    let key = WebSocketKey.make()
                    forwarded.headers.add(name: "Sec-WebSocket-Key", value: key)
                    s.upgradeAccept = WebSocketKey.accept(for: key)
                }
                do { try HTTP1Serializer.write(forwarded, into: &s.head) } catch {
                    answer(id, status: 400, body: "ATSProxy: the request cannot be sent as HTTP/1.1: \(error)\n")
                    return
                }
                s.framing = .none
                s.keepAlive = false
                s.exchange.recorder?.recordRequest(head, forwarded: forwarded)
                book.streams[id] = s
                waiting.append(id)
                assignLanes()
                return
            }
            if !endStream, let rules, let held = rules.holdRequestBody(for: forwarded) {
                // The stream waits for a lane once the body rules have the whole body (theory of operation, 9); a
                // client waiting for 100 Continue gets it from the proxy.
                s.heldRequest = held
                s.exchange.recorder?.recordRequest(head, forwarded: forwarded)
                book.streams[id] = s
                if head.expectsContinue { try? client.submitInformational(streamID: id, headers: [H2Header(":status", "100")]) }
                return
            }
            // HTTP/1.1 needs the body's framing that HTTP/2 leaves to its frames.
            if !forwarded.headers.contains(name: "Content-Length") {
                if !endStream {
                    forwarded.headers.add(name: "Transfer-Encoding", value: "chunked")
                } else if ["POST", "PUT", "PATCH"].contains(head.method) {
                    forwarded.headers.add(name: "Content-Length", value: "0")
                }
            }
            do {
                s.framing = try HTTP1Framing.forRequest(forwarded)
                try HTTP1Serializer.write(forwarded, into: &s.head)
            } catch {
                answer(id, status: 400, body: "ATSProxy: the request cannot be sent as HTTP/1.1: \(error)\n")
                return
            }
            s.keepAlive = forwarded.keepAlive
            s.requestEnded = endStream
            s.exchange.recorder?.recordRequest(head, forwarded: forwarded)
            book.streams[id] = s
            waiting.append(id)
            assignLanes()
        case .answer(let response, let body, let url, let outcome, let codes, let rules):
            var s = Stream(exchange: .answered(
                head, with: response, body: body, url: url, outcome: outcome, codes: codes, started: started,
                now: now(), recording: recording))
            s.exchange.rules = rules
            s.responseHeadSent = true
            book.streams[id] = s
            do { try client.answerLocally(streamID: id, response: response, body: body, requestMethod: head.method) } catch {
                reset(id, .internalError)
            }
        }
    }

    /// Queues for a lane a request whose head waited for its body (HeldBody), with that body (already credited):
    /// framed by its Content-Length, else by `length` (the whole body's), else chunked.
    private func queueHeld(_ id: Int32, head: HTTPRequestHead, body: [UInt8], length: Int?, ended: Bool) {
        guard var s = book.streams[id] else { return }
        var forwarded = head
        if !forwarded.headers.contains(name: "Content-Length") {
            if let length {
                forwarded.headers.add(name: "Content-Length", value: String(length))
            } else {
                forwarded.headers.add(name: "Transfer-Encoding", value: "chunked")
            }
        }
        do {
            s.framing = try HTTP1Framing.forRequest(forwarded)
            try HTTP1Serializer.write(forwarded, into: &s.head)
        } catch {
            answer(id, status: 400, body: "ATSProxy: the request cannot be sent as HTTP/1.1: \(error)\n")
            return
        }
        s.keepAlive = forwarded.keepAlive
        s.requestEnded = ended
        s.pendingBody = body
        s.pendingCredited = true
        s.exchange.recorder?.recordForwardedRequest(forwarded)
        book.streams[id] = s
        waiting.append(id)
        assignLanes()
    }

    private func endRequest(_ id: Int32) {
        guard var s = book.streams[id], !s.exchange.local else { return }
        if s.isTunnel {
            // The client's half of the WebSocket ended; the origin's half runs until the lane ends.
            s.requestEnded = true
            book.streams[id] = s
            return
        }
        s.requestEnded = true
        book.streams[id] = s
        guard let lane = s.lane, var l = lanes[lane], l.streamID == id else { return }
        var bytes: [UInt8] = []
        do { try l.requestWriter?.finish(trailers: s.trailers, into: &bytes) } catch {
            failStream(id, reason: "the request body does not match its Content-Length: \(error)")
            return
        }
        l.requestWriter = nil
        lanes[lane] = l
        send(bytes, to: lane)
        if let recorder = s.exchange.recorder { recorder.requestSent = now() }
        book.streams[id]?.exchange.clock.requestSent = now()
        releaseIfDone(lane)
    }

    private func writeBody(_ bytes: [UInt8], stream id: Int32, lane: UpstreamLane, credit: Bool = true) {
        guard var l = lanes[lane], l.streamID == id, l.requestWriter != nil else {
            if credit { client.consume(streamID: id, count: bytes.count) }
            return
        }
        var framed: [UInt8] = []
        do { try l.requestWriter!.write(bytes, into: &framed) } catch {
            lanes[lane] = l
            failStream(id, reason: "the request body does not match its Content-Length: \(error)")
            return
        }
        lanes[lane] = l
        send(framed, to: lane)
        if credit { client.consume(streamID: id, count: bytes.count) }
    }

    // MARK: - Lanes

    private func assignLanes() {
        while let id = waiting.first {
            guard book.streams[id] != nil else {
                waiting.removeFirst()
                continue
            }
            guard let lane = lanes.first(where: { $0.value.connected && $0.value.streamID == nil })?.key else {
                let connecting = lanes.values.filter { !$0.connected }.count
                // After a failed connect, the streams wait for the lanes there are (the origin may refuse more
                // connections: opening the next one at once would retry forever while another lane is busy).
                if lanes.count < maxLanes, connecting < waiting.count, !laneConnectFailed || lanes.isEmpty {
                    let lane = UpstreamLane(nextLane)
                    nextLane += 1
                    lanes[lane] = Lane(connected: false)
                    out.lanes.open.append(lane)
                }
                return
            }
            waiting.removeFirst()
            assign(id, to: lane)
        }
    }

    private func assign(_ id: Int32, to lane: UpstreamLane) {
        guard var s = book.streams[id], var l = lanes[lane] else { return }
        l.streamID = id
        l.requestWriter = HTTP1BodyWriter(framing: s.framing)
        l.responses.expectResponse(toRequestMethod: s.exchange.method)
        lanes[lane] = l
        s.lane = lane
        // The stream may send now (its window was held while it waited): its body's inactivity counts from here.
        s.exchange.clock.lastRequestProgress = now()
        let pending = s.pendingBody
        s.pendingBody = []
        let ended = s.requestEnded
        s.requestEnded = false
        book.streams[id] = s
        send(s.head, to: lane)
        if s.isTunnel {
            book.streams[id]?.exchange.clock.requestSent = now()
            // The handshake has no body; DATA waits for the 101 (kept in pendingBody, uncredited).
            book.streams[id]?.pendingBody = pending
            book.streams[id]?.requestEnded = ended
            lanes[lane]?.requestWriter = nil
            return
        }
        if !pending.isEmpty { writeBody(pending, stream: id, lane: lane, credit: !s.pendingCredited) }
        if ended || s.framing == .none { endRequest(id) }
    }

    private func pumpLane(_ lane: UpstreamLane) {
        while !failed, var l = lanes[lane] {
            let event: HTTP1Event
            do { event = try l.responses.nextEvent() } catch {
                lanes[lane] = l
                if let id = l.streamID { failStream(id, reason: "the upstream sent an invalid response: \(error)") }
                dropLane(lane, close: true)
                return
            }
            lanes[lane] = l
            guard let id = l.streamID, var s = book.streams[id] else {
                switch event {
                case .connectionClosed:
                    // The end of an idle connection: the lane is done.
                    dropLane(lane, close: true)
                case .responseHead, .body, .end, .switchedProtocols:
                    // A response nobody asked for: the lane is done, and the session says so.
                    dropUnsolicited(lane)
                case .needMoreData, .paused, .requestHead:
                    break
                }
                return
            }
            switch event {
            case .responseHead(let head) where s.isTunnel && head.status == 101:
                guard s.upgradeAccept == nil
                    || head.headers.values(for: "Sec-WebSocket-Accept").first == s.upgradeAccept
                else {
                    failStream(id, reason: "the upstream's 101 carries a wrong Sec-WebSocket-Accept")
                    return
                }
                // RFC 8441 §5: the 101 is the stream's 200; the handshake's HTTP/1.1 fields stay on that hop.
                let kept = HTTPHeaders(head.headers.fields.filter { $0.name.lowercased() != "sec-websocket-accept" }
                    .map { ($0.name, $0.value) })
                let fields = [H2Header(":status", "200")] + h2Fields(kept) + s.exchange.annotation
                do { try client.submitResponse(streamID: id, headers: fields, body: .streaming) } catch {
                    failStream(id, reason: "\(error)")
                    return
                }
                s.exchange.status = 200
                s.responseHeadSent = true
                s.exchange.clock.responseStarted = true
                s.responseStreaming = true
                s.exchange.recorder?.recordResponse(head, toClient: HTTPResponseHead(h2Response: fields), at: now())
                book.streams[id] = s
            case .switchedProtocols(let leftover) where s.isTunnel && s.responseHeadSent:
                lanes[lane]?.raw = true
                let pending = s.pendingBody
                book.streams[id]?.pendingBody = []
                if !pending.isEmpty {
                    send(pending, to: lane)
                    client.consume(streamID: id, count: pending.count)
                }
                if !leftover.isEmpty { tunnelBytes(leftover, from: lane) }
                return
            case .responseHead(let head):
                if head.isInterim {
                    // 100 Continue and friends become an informational HEADERS frame.
                    let fields = [H2Header(":status", String(head.status))] + h2Fields(head.headers)
                    do { try client.submitInformational(streamID: id, headers: fields) } catch { failStream(id, reason: "\(error)") }
                    continue
                }
                let framing: HTTP1BodyFraming
                do { framing = try HTTP1Framing.forResponse(head, requestMethod: s.exchange.method) } catch {
                    failStream(id, reason: "the upstream's response cannot be framed: \(error)")
                    dropLane(lane, close: true)
                    return
                }
                let bodyless = framing == .none
                let edited = s.exchange.rules?.editResponse(head, outcome: s.exchange.outcome) ?? head
                // Not a tunnel's (extended CONNECT) answer: its body never ends.
                if let rules = s.exchange.rules, !s.isTunnel, framing.mayCarryBody || rules.mayBreakResponse,
                    let held = rules.holdBody(for: edited, outcome: s.exchange.outcome)
                {
                    // The head waits with the body for the body rules (theory of operation, 9).
                    s.heldBody = held
                    s.exchange.status = head.status
                    s.exchange.clock.responseStarted = true
                    s.exchange.recorder?.recordResponse(head, toClient: edited, at: now())
                    book.streams[id] = s
                    continue
                }
                let fields = [H2Header(":status", String(edited.status))] + h2Fields(edited.headers) + s.exchange.annotation
                do { try client.submitResponse(streamID: id, headers: fields, body: bodyless ? .none : .streaming) } catch {
                    failStream(id, reason: "\(error)")
                    continue
                }
                s.exchange.status = head.status
                s.responseHeadSent = true
                s.exchange.clock.responseStarted = true
                s.responseStreaming = !bodyless
                if let recorder = s.exchange.recorder {
                    // The upstream's HTTP/1.1 head as received, and the h2 head the client got.
                    recorder.recordResponse(head, toClient: HTTPResponseHead(h2Response: fields), at: now())
                }
                book.streams[id] = s
            case .body(let piece):
                s.exchange.responseBytes += piece.count
                s.exchange.recorder?.responseBody(piece)
                if let held = s.heldBody {
                    let fits = held.append(piece)
                    if !fits { s.heldBody = nil }
                    book.streams[id] = s
                    // Over the limit: what was held goes on unchanged, and the rest streams.
                    if !fits { sendHeld(id, head: held.head, body: held.spill()) }
                    continue
                }
                book.streams[id] = s
                do { try client.sendData(streamID: id, piece, endStream: false) } catch {
                    failStream(id, reason: "\(error)")
                    continue
                }
            case .end(let trailers):
                if let held = s.heldBody {
                    s.heldBody = nil
                    book.streams[id] = s
                    let (head, body) = held.release()
                    if let rule = held.breakpoint, let rules = s.exchange.rules {
                        // Kept whole for the breakpoint; the lane is free for other streams meanwhile.
                        s.atBreakpoint = (head, body, trailers)
                        s.responseEnded = true
                        book.streams[id] = s
                        out.responseHolds.append(
                            ResponseToHold(
                                id: Int(id), rule: rule, rules: rules, method: s.exchange.method, url: s.exchange.url,
                                head: head, body: body))
                        releaseIfDone(lane)
                        return
                    }
                    sendHeld(id, head: head, body: body)
                    guard let sent = book.streams[id] else { return }
                    s = sent
                }
                if s.responseStreaming {
                    do {
                        if trailers.isEmpty {
                            try client.sendData(streamID: id, [], endStream: true)
                        } else {
                            try client.submitTrailers(streamID: id, h2Fields(trailers))
                        }
                    } catch {
                        // The client reset the stream meanwhile: there is nothing left to end.
                    }
                }
                s.responseEnded = true
                book.streams[id] = s
                releaseIfDone(lane)
                return
            case .switchedProtocols:
                failStream(id, reason: "the upstream switched protocols, which HTTP/2 cannot carry")
                dropLane(lane, close: true)
                return
            case .connectionClosed:
                return
            case .needMoreData, .paused, .requestHead:
                return
            }
        }
    }

    func releaseResponse(_ id: Int, _ release: HoldRelease?) -> RelayOutput {
        guard !failed, let sid = Int32(exactly: id), let s = book.streams[sid], let held = s.atBreakpoint else {
            return out.take()
        }
        book.streams[sid]?.atBreakpoint = nil
        let method = s.exchange.method
        guard let (head, body, edited) = (release ?? .execute()).response(held.head, held.body, method: method)
        else {
            // Aborted: only this stream is reset; the connection's other streams go on.
            reset(sid, .cancel)
            finish(sid, interruption: "aborted at a breakpoint: the stream was reset")
            pump()
            return out.take()
        }
        book.streams[sid]?.exchange.status = head.status
        sendHeld(sid, head: head, body: body)
        if book.streams[sid]?.responseStreaming == true {
            do {
                if held.trailers.isEmpty || edited {
                    try client.sendData(streamID: sid, [], endStream: true)
                } else {
                    try client.submitTrailers(streamID: sid, h2Fields(held.trailers))
                }
            } catch {
                // The client reset the stream meanwhile: there is nothing left to end.
            }
        }
        pump()
        return out.take()
    }

    /// A response head that waited for its body (HeldBody), then the body; the stream streams from here on.
    private func sendHeld(_ id: Int32, head: HTTPResponseHead, body: [UInt8]) {
        guard var s = book.streams[id] else { return }
        let fields = [H2Header(":status", String(head.status))] + h2Fields(head.headers) + s.exchange.annotation
        do {
            try client.submitResponse(streamID: id, headers: fields, body: .streaming)
            if !body.isEmpty { try client.sendData(streamID: id, body, endStream: false) }
        } catch {
            failStream(id, reason: "\(error)")
            return
        }
        s.responseHeadSent = true
        s.responseStreaming = true
        s.exchange.recorder?.recordClientResponse(HTTPResponseHead(h2Response: fields) ?? head)
        book.streams[id] = s
    }

    /// Frees a lane whose exchange is over in both directions, for the next waiting stream, or closes it when
    /// either side did not allow keep-alive or the request is unfinished.
    private func releaseIfDone(_ lane: UpstreamLane) {
        guard var l = lanes[lane], let id = l.streamID, let s = book.streams[id], s.responseEnded else { return }
        guard s.requestEnded || l.requestWriter == nil else {
            // The upstream answered before the request body ended: that body would be read as the next request.
            dropLane(lane, close: true)
            assignLanes()
            return
        }
        l.streamID = nil
        l.requestWriter = nil
        let reusable = s.keepAlive && l.responses.lastMessageKeepAlive
        lanes[lane] = l
        if reusable {
            laneConnectFailed = false
            do { try lanes[lane]?.responses.startNextMessage() } catch {
                dropLane(lane, close: true)
                assignLanes()
                return
            }
            if lanes[lane]?.responses.bufferedByteCount ?? 0 > 0 {
                // More came with the response than was asked for (a second response in the same write): it must
                // not become the next stream's answer.
                dropUnsolicited(lane)
            }
        } else {
            dropLane(lane, close: true)
        }
        assignLanes()
    }

    /// Closes a lane that sent a response nobody asked for, for the session's notice.
    private func dropUnsolicited(_ lane: UpstreamLane) {
        guard lanes[lane] != nil else { return }
        dropLane(lane, close: true)
        out.lanes.unsolicited.append(lane)
    }

    private func dropLane(_ lane: UpstreamLane, close: Bool) {
        guard lanes.removeValue(forKey: lane) != nil else { return }
        guard close else { return }
        if lane == .primary { out.closeUpstream = true } else { out.lanes.close.append(lane) }
    }

    private func send(_ bytes: [UInt8], to lane: UpstreamLane) {
        guard !bytes.isEmpty else { return }
        if lane == .primary { out.toUpstream += bytes } else { out.lanes.bytes.append((lane, bytes)) }
    }

    private func peer(_ lane: UpstreamLane) -> ProxyPeer { lane == .primary ? .upstream : .lane(lane) }

    private func h2Fields(_ headers: HTTPHeaders) -> [H2Header] {
        H2HeaderTranslation.h2Trailers(from: headers.fields.map { H2Header($0.name, $0.value) })
    }

    /// Bytes of a WebSocket's lane after its 101: DATA on its stream.
    private func tunnelBytes(_ bytes: [UInt8], from lane: UpstreamLane) {
        guard let id = lanes[lane]?.streamID, book.streams[id] != nil else { return }
        book.streams[id]?.exchange.responseBytes += bytes.count
        book.streams[id]?.exchange.recorder?.responseBody(bytes)
        do { try client.sendData(streamID: id, bytes, endStream: false) } catch {
            failStream(id, reason: "\(error)")
        }
    }

    // MARK: - Bookkeeping

    private func answer(_ id: Int32, status: Int, body: String) {
        guard var s = book.streams[id] else { return }
        s.exchange.local = true
        s.exchange.status = status
        s.exchange.responseBytes = body.utf8.count
        s.responseHeadSent = true
        s.exchange.clock = .answered(at: now())
        book.streams[id] = s
        do {
            try client.answerLocally(
                streamID: id, status: status, headers: [H2Header("content-type", "text/plain; charset=utf-8")],
                body: s.exchange.method == "HEAD" ? [] : Array(body.utf8))
        } catch {
            reset(id, .internalError)
        }
    }

    /// Ends a stream whose lane failed: a 502 if no response head went out, else a reset.
    private func failStream(_ id: Int32, reason: String) {
        guard let s = book.streams[id] else { return }
        if let lane = s.lane, lanes[lane]?.streamID == id {
            lanes[lane]?.streamID = nil
            dropLane(lane, close: true)
        }
        book.streams[id]?.lane = nil
        if s.responseHeadSent {
            book.streams[id]?.interruption = reason
            reset(id, .internalError)
        } else {
            answer(id, status: 502, body: "ATSProxy: \(reason)\n")
        }
    }

    private func reset(_ id: Int32, _ code: H2ErrorCode, blamingPeer: Bool = false) {
        do { try client.submitRSTStream(streamID: id, errorCode: code, blamingPeer: blamingPeer) } catch { abandon() }
    }

    /// The client's stream is closed (normally or reset): log it, and free or close its lane.
    private func finish(_ id: Int32, interruption: String?) {
        guard let s = book.streams.removeValue(forKey: id) else { return }
        if let lane = s.lane, lanes[lane]?.streamID == id {
            // Its exchange is still in flight on HTTP/1.1, which cannot cancel one: the lane goes.
            dropLane(lane, close: true)
        }
        let unsent = s.pendingBody.count
        if unsent > 0 { client.consume(streamID: id, count: unsent) }
        out.exchanges.append(s.exchange.summary(httpVersion: "HTTP/1.1", now: now(), interruption: interruption ?? s.interruption))
        assignLanes()
    }

    /// Stops reading a lane whose stream, or the whole connection, holds more response bytes than the client's
    /// windows let out (theory of operation, 4); reads it again once both are below their low waters. An idle lane
    /// is always read (its end must be seen), and a lane whose stream the client is draining is spared the
    /// connection's bound.
    private func regulateLanes() {
        let total = client.outboundQueuedBytesTotal
        let initialWindow = Int(client.remoteSettings.initialWindowSize)
        // By index, changing each lane where it lies (no copy of the pool per step).
        var index = lanes.startIndex
        while index != lanes.endIndex {
            defer { lanes.formIndex(after: &index) }
            let (lane, l) = (lanes.keys[index], lanes.values[index])
            let queued = l.streamID.map { client.outboundQueuedBytes(streamID: $0) } ?? 0
            let pause: Bool
            if let id = l.streamID {
                let draining = queued <= Self.streamQueueLowWater && (client.sendWindow(streamID: id) ?? 0) > 0
                    && (book.streams[id].map { $0.exchange.responseBytes - queued > initialWindow } ?? false)
                if l.paused {
                    pause = queued > Self.streamQueueLowWater || (total > Self.connectionQueueLowWater && !draining)
                } else {
                    pause = queued > Self.streamQueueHighWater || (total > Self.connectionQueueHighWater && !draining)
                }
            } else {
                pause = false
            }
            guard pause != l.paused else { continue }
            lanes.values[index].paused = pause
            out.pauseReading[peer(lane)] = pause
        }
    }

    private func abandon() {
        failed = true
        out.closeClient = true
        for lane in Array(lanes.keys) { dropLane(lane, close: true) }
    }

    /// Writes what the client session queued, and pauses or resumes the lanes by what waits for the client.
    private func pump() {
        out.toClient += client.pendingOutput()
        for event in client.takeEvents() { clientEvent(event) }
        regulateLanes()
        out.toClient += client.pendingOutput()
        if !failed, !client.wantsRead, !client.wantsWrite, book.isEmpty {
            failed = true
            out.closeClient = true
            for lane in Array(lanes.keys) { dropLane(lane, close: true) }
        }
    }
}

// MARK: - Deadlines

extension H2ToH1Relay {
    // A local answer's clock is `.answered`: it waits for nothing.
    var nextStreamDeadline: Double? { book.nextDeadline }

    func clientReadingHeld(_ held: Bool, at time: Double) { book.clientReadingHeld(held, at: time) }

    func streamDeadlinesPassed(timeoutAnswer: ATSAnswer) -> RelayOutput {
        guard !failed else { return out.take() }
        let time = now()
        if book.headerBlockOverdue(at: time) {
            // Nothing else may cross the connection until the block ends: the connection goes.
            do { try client.submitGoAway(lastStreamID: 0, errorCode: .enhanceYourCalm) } catch {
                // The session is beyond sending anything: the close below is all there is.
            }
            out.toClient += client.pendingOutput()
            return clientGone("a request's header block was not complete within \(Int(book.limits.client)) s (--client-timeout)")
        }
        for (id, stall) in book.overdueStreams(at: time) {
            guard let s = book.streams[id], !s.exchange.local else { continue }
            switch stall {
            case .requestBody:
                reset(id, .cancel)
                // Its lane closes with it (HTTP/1.1 cannot cancel one exchange).
                finish(id, interruption: "no byte of the request body for \(Int(book.limits.client)) s (--client-timeout)")
            case .response:
                if let lane = s.lane, lanes[lane]?.streamID == id {
                    lanes[lane]?.streamID = nil
                    dropLane(lane, close: true)
                }
                let answer = streamTimeoutAnswer(timeoutAnswer, url: s.exchange.url)
                let body = s.exchange.method == "HEAD" ? [] : answer.body
                book.streams[id]?.lane = nil
                book.streams[id]?.exchange.status = 504
                book.streams[id]?.exchange.outcome = .failed
                book.streams[id]?.exchange.codes = timeoutAnswer.violations.map(ExchangeError.init)
                book.streams[id]?.exchange.responseBytes = body.count
                do {
                    try client.answerLocally(
                        streamID: id, status: 504, headers: answer.headers.map { H2Header($0.0, $0.1) }, body: body)
                } catch {
                    reset(id, .internalError)
                }
                // Logged now; the rest of the stream (the client's closing frames) is dropped as for a reset one.
                finish(id, interruption: "no response from the upstream within \(Int(book.limits.response)) s (--response-timeout)")
            }
        }
        assignLanes()
        pump()
        return out.take()
    }
}

