import ATSPolicy
import Foundation
import HTTP1Core
import ProxyTrace
import TLSCore

// Theory of operation: relaying an intercepted connection once the client's handshake completed.
//
// - The relay is chosen by what each leg negotiated by ALPN: HTTP/1.1 or HTTP/2 on both, or a translation
//   (H2ToH1Relay spreads an h2 client's streams over lanes, InterceptLayer+Lanes).
// - Bytes read from either socket go into that leg's TLS engine where they lie (`handleReceived`); the plaintext goes
//   to the relay, and the relay's output is encrypted for the other leg (`apply`).
// - Each request carries out the connection's action (set by InterceptLayer+Verdict): forwarded with the verdict's
//   annotation and outcome, or answered with the block answer.
// - After a 101 the plaintext is relayed raw both ways; the upgraded connection is logged when it ends.
// - The client's end (close_notify or EOF) ends the connection once the relay is idle; a TLS error ends it at once.

extension InterceptLayer {
    /// Prepared once: every request is asked whether it carries the proxy's credentials.
    static let proxyAuthorization = HTTPFieldName("Proxy-Authorization")

    /// Picks the relay for the protocols both sides negotiated, translating where they differ.
    func startRelaying(_ ctx: SessionContext, _ engine: TLSEngine) {
        let clientH2 = engine.negotiated?.alpn == "h2"
        let streamLimits = StreamDeadlineLimits(ctx.env.timeouts)
        let upstreamH2 = upstream.alpn == "h2" && upstream.engine != nil
        do {
            switch (clientH2, upstreamH2) {
            case (true, true):
                relay = try H2Relay(now: ctx.now, recording: ctx.env.recording, limits: streamLimits)
            case (true, false):
                relay = try H2ToH1Relay(
                    primaryConnected: upstream.engine != nil, now: ctx.now, recording: ctx.env.recording,
                    limits: streamLimits)
            case (false, true):
                relay = try H1ToH2Relay(
                    now: ctx.now, recording: ctx.env.recording,
                    retryUpgradeOverHTTP1: ctx.env.upstreamALPN == .ios && !upstream.http1Only,
                    retryRefused: upstream.refusedRetries < UpstreamLeg.maxRefusedRetries)
            case (false, false):
                relay = HTTP1Relay(
                    connectedTo: UpstreamTarget(host: host, port: port), now: ctx.now, recording: ctx.env.recording)
            }
        } catch {
            ctx.notice("\(host): cannot start HTTP/2: \(error)")
            ctx.closeAll()
            return
        }
        // HTTP/2 sessions start with their connection preface and SETTINGS.
        if clientH2 || upstreamH2, let relay = self.relay { apply(ctx, relay.upstreamBytes([])) }
    }

    /// Carries out a relay step of an intercepted connection, then decides each request the step holds
    /// (`RelayOutput.toDecide`) and carries out the relay's step for each answer in turn. Every request is decided
    /// at once for now; a rule or breakpoint that holds one answers through the same `resolve`, later.
    func apply(_ ctx: SessionContext, _ o: consuming RelayOutput) {
        // Most steps ask nothing (every response, a body's bytes): carried out as they are, with no copy.
        if o.toDecide.isEmpty { return applyStep(ctx, o) }
        var step = consume o
        let skipped = step.onlyAsks
        var toDecide = step.takeToDecide()
        let asking = relay
        if skipped { asking?.recycle(&step) } else { applyStep(ctx, consume step) }
        var answered = false
        while !ctx.isDone, let relay, relay === asking, let request = toDecide.popFirst() {
            guard relay.isHolding(request.id) else { continue }
            guard let decision = ctx.ruled(decide(ctx, request.head), request: request.head) else { break }
            // A breakpoint holds it: left undecided until released (SessionContext+Breakpoints).
            if ctx.holdsAtBreakpoint(decision, requestID: request.id, relay: relay) { continue }
            var next = relay.resolve(request.id, decision)
            if !next.toDecide.isEmpty { toDecide.append(contentsOf: next.takeToDecide()) }
            applyStep(ctx, consume next)
            answered = true
        }
        // No answer carried a step out (every request was given up): the skipped step's bookkeeping still runs.
        if skipped, !answered, !ctx.isDone { applyStep(ctx, RelayOutput()) }
    }

    /// A request a breakpoint held is released: resolved as decided, when its relay still holds it.
    func resumeHeld(_ ctx: SessionContext, _ held: BreakpointHold, _ decision: RequestDecision) {
        guard !ctx.isDone, let relay, relay === held.relay, relay.isHolding(held.requestID) else { return }
        apply(ctx, relay.resolve(held.requestID, decision))
    }

    /// A response a breakpoint held is released: handed to its relay, when it is still the one relaying.
    func releaseResponse(_ ctx: SessionContext, _ hold: ResponseHold, _ release: HoldRelease?) {
        guard !ctx.isDone, let relay, relay === hold.relay else { return }
        apply(ctx, relay.releaseResponse(hold.held.id, release))
    }

    /// Carries out one relay step: plaintext through the legs' TLS engines, exchange lines, lanes, a 101's switch
    /// to raw relaying, the client's close.
    private func applyStep(_ ctx: SessionContext, _ o: consuming RelayOutput) {
        switch o.retry {
        case .overHTTP1(let replay)?:
            retryUpstreamOverHTTP1(ctx, replaying: replay)
            return
        case .onNewConnection(let replay)?:
            retryRefusedRequest(ctx, replaying: replay)
            return
        case nil:
            break
        }
        if !o.exchanges.isEmpty { upstream.refusedRetries = 0 }
        let unsolicited = o.unsolicitedUpstream
        defer { ctx.relayStepped(self, unsolicited: unsolicited) }
        upstream.isOpen = ctx.beginRelayStep(o, upstreamOpen: upstream.isOpen)
        if !o.toUpstream.isEmpty { sendUpstream(ctx, o.toUpstream) }
        if !o.toClient.isEmpty { sendClient(ctx, o.toClient) }
        // Encrypted, the plaintext arrays are done with.
        if let relay = self.relay { relay.recycle(&o) }
        for exchange in o.exchanges { ctx.logExchange(exchange) }
        if !o.responseHolds.isEmpty { ctx.holdResponses(o.responseHolds, relay: relay) }
        ctx.applyPauses(o)
        applyLanes(ctx, o)
        if o.switchedToRaw {
            if let upgrade = o.exchanges.last { upgraded = UpgradedConnection(after: upgrade, at: ctx.now()) }
            raw = true
        }
        if o.closeClient { ctx.closeAll(tlsClose: true, reset: o.abortClient) }
    }

    func decide(_ ctx: SessionContext, _ received: HTTPRequestHead) -> RequestDecision {
        let head: HTTPRequestHead
        // Byte-wise: String.hasPrefix compares Unicode characters, and this runs for every request.
        if received.target.utf8.first != UInt8(ascii: "/"), received.target != "*", received.method != "CONNECT" {
            switch Self.originForm(of: received, forHost: host, port: port) {
            case .some(.success(let rewritten)): head = rewritten
            case .some(.failure(let refusal)): return refusal.decision
            case nil: head = received
            }
        } else {
            head = received
        }
        let url = self.url + (head.target.hasPrefix("/") ? head.target : "/" + head.target)
        // The app would speak to the server directly: the trace shows the upstream's protocol when the proxy
        // translates, and the client's when there is no upstream (block answers).
        let protocolName = block.answer == nil && localSite == nil && fault == nil
            ? upstream.alpn : client.engine?.negotiated?.alpn
        let version = protocolName == "h2" ? "HTTP/2.0" : "HTTP/1.1"
        if let site = localSite {
            return ctx.localSiteDecision(
                site, host: nil, port: port, head: head, path: head.target, url: url, secure: true)
        }
        if fault != nil, let answer = injectedAnswer(ctx, url: url) { return answer }
        let codes = violations.map(ExchangeError.init)
        if var answer = block.answer {
            // A completed handshake does not tell: curl checks the host name only after it. A request does.
            if let flaw = block.flawedLeaf, block.fallback == nil {
                clientAcceptedFlawedLeaf(ctx, flaw: flaw, status: answer.blockStatus)
            }
            // The app's task fails in the TLS handshake, so nothing is enqueued; its error names this request's URL.
            answer.url = url
            if block.fallback != nil { answer.acceptedFlaw = block.flawedLeaf }
            ctx.trace(.loaderWhatToDo(method: head.method, url: url))
            if let first = violations.first {
                ctx.trace(.responseError(url: url, error: NSErrorDescription(violation: first, failingURL: url)))
            }
            var response = HTTPResponseHead(status: answer.blockStatus, reason: answer.blockStatus == 403 ? "Forbidden" : "Bad Gateway")
            response.headers.add(name: "Content-Type", value: "text/plain; charset=utf-8")
            for (n, v) in answer.headers { response.headers.add(name: n, value: v) }
            return .answer(
                head: response, body: Array(answer.blockBody.utf8), url: url,
                outcome: outcome == .failed ? .failed : .blocked, codes: codes)
        }
        ctx.traceRequestStart(method: head.method, url: url, head: head, httpVersion: version)
        // The proxy's credentials never go upstream, whichever leg carried them (a client may repeat them inside the
        // tunnel). Checked first so that the common head is forwarded as the same value, and its bytes as received.
        var forwarded = head
        if head.headers.contains(Self.proxyAuthorization) { forwarded.headers.remove(Self.proxyAuthorization) }
        return .forward(
            head: forwarded, url: url, upstream: nil, annotation: annotation, outcome: outcome, codes: codes)
    }

    /// A request inside a tunnel that names its target in absolute form (`GET https://h.test/x`): RFC 9112 §3.2.2 says
    /// the target's host wins over `Host`, so the origin and the proxy must both read that one. The tunnel's own host
    /// and port go on in origin form with `Host` from the target; any other is refused with 421 (it cannot be sent on
    /// this connection, and forwarding it would let the origin read a host the proxy never judged). nil for a target
    /// that is not absolute-form.
    static func originForm(of head: HTTPRequestHead, forHost host: String, port: Int)
        -> Result<HTTPRequestHead, MisdirectedRequest>?
    {
        let target: HTTPRequestTarget
        do { target = try HTTPRequestTarget(parsing: head.target, method: head.method) } catch { return nil }
        guard case .absolute(let scheme, let targetHost, let targetPort, let path) = target else { return nil }
        guard scheme == "https", targetHost.lowercased() == host.lowercased(), (targetPort ?? 443) == port else {
            let answer = HTTPResponseHead(
                status: 421, reason: "Misdirected Request", headers: [("Content-Type", "text/plain; charset=utf-8")])
            let text = "ATSProxy: this connection is for https://\(host):\(port); a request for "
                + "\(Redaction.url(head.target)) cannot be sent on it\n"
            return .failure(MisdirectedRequest(decision: .answer(
                head: answer, body: Array(text.utf8), url: Redaction.url(head.target), outcome: .notEvaluated,
                codes: [])))
        }
        var rewritten = head
        rewritten.target = path
        let name = targetHost.contains(":") ? "[\(targetHost)]" : targetHost
        rewritten.headers.replaceOrAdd(name: "Host", value: targetPort.map { "\(name):\($0)" } ?? name)
        return .success(rewritten)
    }

    /// Everything `engine` has decrypted so far, with `incoming` lent to it, and whether the peer's side ended
    /// (close_notify, or a TCP close without it, which is how most peers end). A TLS error counts as the end too,
    /// with the error.
    ///
    /// OpenSSL reads `incoming` where it is (`withLentInput`), and the plaintext is read into one array sized by
    /// what is buffered and fed (decrypting never makes bytes longer): a socket read of several records costs one
    /// allocation and no copying of one record's bytes onto the next's.
    func drain(_ engine: TLSEngine, feeding incoming: UnsafeRawBufferPointer = .init(start: nil, count: 0)) -> (
        plaintext: [UInt8], ended: Bool, error: TLSError?
    ) {
        engine.withLentInput(incoming) {
            var plaintext: [UInt8] = []
            var ended = false
            var error: TLSError?
            var done = false
            // One pass unless the bound was short (then the next array is appended); every pass reads or ends.
            while !done {
                let piece = [UInt8](unsafeUninitializedCapacity: max(1, engine.readableBound)) { buffer, count in
                    let (n, stop) = engine.read(into: UnsafeMutableRawBufferPointer(buffer))
                    count = n
                    switch stop {
                    case .needsMoreInput:
                        done = true
                    case .bufferFull:
                        break
                    case .closed, .failed(.closedByPeer):
                        ended = true
                        done = true
                    case .failed(let failure):
                        ended = true
                        error = failure
                        done = true
                    }
                }
                if plaintext.isEmpty { plaintext = piece } else { plaintext += piece }
            }
            return (plaintext, ended, error)
        }
    }

    func readClient(_ ctx: SessionContext, incoming: UnsafeRawBufferPointer = .init(start: nil, count: 0)) {
        guard let engine = client.engine else { return }
        let (plaintext, closed, error) = drain(engine, feeding: incoming)
        if let error {
            ctx.notice("\(host): TLS error from the client: \(error)", kind: "TLS error from the client")
            ctx.closeAll()
            return
        }
        let out = engine.takeOutput()
        if !out.isEmpty { ctx.commands.append(.sendToClient(out)) }
        if !plaintext.isEmpty {
            if !client.spoke {
                if mirror != nil { mirrorDeviceSpoke(ctx) }
                client.spoke = true
                ctx.noteClientAccepted(self)
            }
            if let kept = client.unansweredPlaintext {
                client.unansweredPlaintext = kept.count + plaintext.count <= ClientLeg.replayLimit ? kept + plaintext : nil
            }
            if raw {
                upgraded?.fromClient += plaintext.count
                sendUpstream(ctx, plaintext)
            } else if let relay = self.relay {
                apply(ctx, relay.clientBytes(plaintext))
            }
        }
        if closed { ctx.noteClientClosedWithoutRequest() }
        if closed, !ctx.isDone {
            if raw {
                upgradeEnded(ctx, by: "the client closed it")
                upstream.engine?.close()
                flushUpstreamTLS(ctx)
                if upstream.isOpen { ctx.commands.append(.shutdownUpstreamWrite) }
            } else if let relay = self.relay {
                apply(ctx, relay.clientEOF())
                if !ctx.isDone, relay.isIdle { ctx.closeAll(tlsClose: true) }
            }
        }
    }

    func readUpstream(_ ctx: SessionContext, incoming: UnsafeRawBufferPointer = .init(start: nil, count: 0)) {
        guard let engine = upstream.engine, stage == .relaying else { return }
        let (plaintext, closed, error) = drain(engine, feeding: incoming)
        if let error { ctx.notice("\(host): TLS error from the upstream: \(error)") }
        flushUpstreamTLS(ctx)
        if !plaintext.isEmpty {
            client.unansweredPlaintext = nil
            if raw {
                upgraded?.toClient += plaintext.count
                sendClient(ctx, plaintext)
            } else if let relay = self.relay {
                apply(ctx, relay.upstreamBytes(plaintext))
            }
        }
        // A close_notify can come before the TCP close: the retry check applies to it too.
        if closed, !retryOfferingH2IfClosedBeforeRequest(ctx) { upstreamGone(ctx) }
    }

    func shutdownClientTLS(_ ctx: SessionContext) {
        ctx.closeAll(tlsClose: true)
    }

    func flushUpstreamTLS(_ ctx: SessionContext) {
        guard let engine = upstream.engine else { return }
        let out = engine.takeOutput()
        if !out.isEmpty, upstream.isOpen { ctx.commands.append(.sendToUpstream(out)) }
    }

    func sendUpstream(_ ctx: SessionContext, _ plaintext: [UInt8]) {
        guard let engine = upstream.engine else { return }
        do { try engine.write(plaintext) } catch {
            ctx.notice("\(host): cannot write to the upstream TLS session: \(error)")
            ctx.closeAll()
            return
        }
        flushUpstreamTLS(ctx)
    }

    func sendClient(_ ctx: SessionContext, _ plaintext: [UInt8]) {
        // Nothing goes to a client after its connection was closed (an upstream write just failed, say).
        guard !ctx.clientClosed, let engine = client.engine else { return }
        do { try engine.write(plaintext) } catch {
            ctx.notice("\(host): cannot write to the client TLS session: \(error)")
            ctx.closeAll()
            return
        }
        let out = engine.takeOutput()
        if !out.isEmpty { ctx.commands.append(.sendToClient(out)) }
    }
}

extension InterceptLayer {
    /// A quiet connection gives its TLS record buffers back; they come back with the next record. This is what
    /// keeps a thousand idle intercepted connections small without paying for buffers on every record.
    func releaseBuffers(_ ctx: SessionContext, of peer: ProxyPeer) {
        switch peer {
        case .client:
            client.engine?.releaseBuffers()
            relay?.releaseBuffers()
        case .upstream: upstream.engine?.releaseBuffers()
        case .lane(let lane): lanes[lane]?.engine?.releaseBuffers()
        }
    }

    /// Notes which side closed an intercepted upgraded connection first (the later teardown says less).
    func upgradeEnded(_ ctx: SessionContext, by side: String) {
        if upgraded != nil, upgraded?.endedBy == nil { upgraded?.endedBy = side }
    }

    /// Logs the end of an intercepted upgraded connection, once.
    func logUpgradeEnd(_ ctx: SessionContext, fallbackReason: String) {
        guard let u = upgraded else { return }
        upgraded = nil
        u.logEnd(ctx, fallbackReason: fallbackReason)
    }
}
