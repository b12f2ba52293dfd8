import ATSPolicy
import Foundation
import HTTP1Core
import Onboarding
import ProxyTrace
import TLSCore

// Theory of operation: relaying an intercepted connection once the client's handshake completed.
//
// - The relay is chosen by what each leg negotiated by ALPN: HTTP/1.1 or HTTP/2 on both, or a translation
//   (H2ToH1Relay spreads an h2 client's streams over lanes, InterceptLayer+Lanes).
// - Bytes read from either socket go into that leg's TLS engine where they lie (`handleReceived`); the plaintext goes
//   to the relay, and the relay's output is encrypted for the other leg (`applyIntercepted`).
// - Each request carries out the connection's action (set by InterceptLayer+Verdict): forwarded with the verdict's
//   annotation and outcome, or answered with the block answer.
// - After a 101 the plaintext is relayed raw both ways; the upgraded connection is logged when it ends.
// - The client's end (close_notify or EOF) ends the connection once the relay is idle; a TLS error ends it at once.

extension ProxySession {
    /// Picks the relay for the protocols both sides negotiated, translating where they differ.
    func startRelaying(_ i: InterceptLayer, _ engine: TLSEngine) {
        let clientH2 = engine.negotiated?.alpn == "h2"
        let streamLimits = StreamDeadlineLimits(env.timeouts)
        let upstreamH2 = i.upstreamALPN == "h2" && i.upstream != nil
        do {
            switch (clientH2, upstreamH2) {
            case (true, true):
                i.relay = try H2Relay(now: now, recording: env.recording, limits: streamLimits)
            case (true, false):
                i.relay = try H2ToH1Relay(
                    primaryConnected: i.upstream != nil, now: now, recording: env.recording, limits: streamLimits)
            case (false, true):
                i.relay = try H1ToH2Relay(
                    now: now, recording: env.recording,
                    retryUpgradeOverHTTP1: env.upstreamALPN == .ios && !i.http1OnlyUpstream,
                    retryRefused: i.refusedRetries < InterceptLayer.maxRefusedRetries)
            case (false, false):
                i.relay = HTTP1Relay(
                    connectedTo: UpstreamTarget(host: i.host, port: i.port), now: now, recording: env.recording)
            }
        } catch {
            notice("\(i.host): cannot start HTTP/2: \(error)")
            closeAll()
            return
        }
        // HTTP/2 sessions start with their connection preface and SETTINGS.
        if clientH2 || upstreamH2, let relay = i.relay { applyIntercepted(relay.upstreamBytes([]), i) }
    }

    /// Carries out a relay step of an intercepted connection, then decides each request the step holds
    /// (`RelayOutput.toDecide`) and carries out the relay's step for each answer in turn. Every request is decided
    /// at once for now; a rule or breakpoint that holds one answers through the same `resolve`, later.
    func applyIntercepted(_ o: consuming RelayOutput, _ i: InterceptLayer) {
        var step = o
        var toDecide = step.takeToDecide()
        let asking = i.relay
        applyInterceptedStep(step, i)
        while !isDone, let relay = i.relay, relay === asking, let request = toDecide.popFirst() {
            var next = relay.resolve(request.id, decideIntercepted(request.head, i))
            toDecide.append(contentsOf: next.takeToDecide())
            applyInterceptedStep(next, i)
        }
    }

    /// Carries out one relay step: plaintext through the legs' TLS engines, exchange lines, lanes, a 101's switch
    /// to raw relaying, the client's close.
    private func applyInterceptedStep(_ o: consuming RelayOutput, _ i: InterceptLayer) {
        switch o.retry {
        case .overHTTP1(let replay)?:
            retryUpstreamOverHTTP1(i, replaying: replay)
            return
        case .onNewConnection(let replay)?:
            retryRefusedRequest(i, replaying: replay)
            return
        case nil:
            break
        }
        if !o.exchanges.isEmpty { i.refusedRetries = 0 }
        let unsolicited = o.unsolicitedUpstream
        defer { relayStepped(i, unsolicited: unsolicited) }
        i.upstreamOpen = beginRelayStep(o, upstreamOpen: i.upstreamOpen)
        if !o.toUpstream.isEmpty { interceptSendUpstream(i, o.toUpstream) }
        if !o.toClient.isEmpty { interceptSendClient(i, o.toClient) }
        // Encrypted, the plaintext arrays are done with.
        if let relay = i.relay { relay.recycle(&o) }
        for exchange in o.exchanges { logExchange(exchange) }
        applyPauses(o)
        applyLanes(o, i)
        if o.switchedToRaw {
            if let upgrade = o.exchanges.last { i.upgraded = UpgradedConnection(after: upgrade, at: now()) }
            i.raw = true
        }
        if o.closeClient { closeAll(tlsClose: true, reset: o.abortClient) }
    }

    func decideIntercepted(_ received: HTTPRequestHead, _ i: InterceptLayer) -> RequestDecision {
        let head: HTTPRequestHead
        // Byte-wise: String.hasPrefix compares Unicode characters, and this runs for every request.
        if received.target.utf8.first != UInt8(ascii: "/"), received.target != "*", received.method != "CONNECT" {
            switch Self.originForm(of: received, forHost: i.host, port: i.port) {
            case .some(.success(let rewritten)): head = rewritten
            case .some(.failure(let refusal)): return refusal.decision
            case nil: head = received
            }
        } else {
            head = received
        }
        let url = i.url + (head.target.hasPrefix("/") ? head.target : "/" + head.target)
        // The app would speak to the server directly: the trace shows the upstream's protocol when the proxy
        // translates, and the client's when there is no upstream (block answers).
        let protocolName = i.blockAnswer == nil && i.localSite == nil ? i.upstreamALPN : i.client?.negotiated?.alpn
        let version = protocolName == "h2" ? "HTTP/2.0" : "HTTP/1.1"
        if let site = i.localSite {
            return onboardingDecision(site, role: .site, head: head, path: head.target, url: url, secure: true)
        }
        let codes = i.violations.map(ExchangeError.init)
        if var answer = i.blockAnswer {
            // A completed handshake does not tell: curl checks the host name only after it. A request does.
            if let flaw = i.flawedLeaf, i.blockFallback == nil {
                clientAcceptedFlawedLeaf(i, flaw: flaw, status: answer.blockStatus)
            }
            // The app's task fails in the TLS handshake, so nothing is enqueued; its error names this request's URL.
            answer.url = url
            if i.blockFallback != nil { answer.acceptedFlaw = i.flawedLeaf }
            trace(.loaderWhatToDo(method: head.method, url: url))
            if let first = i.violations.first {
                trace(.responseError(url: url, error: NSErrorDescription(violation: first, failingURL: url)))
            }
            var response = HTTPResponseHead(status: answer.blockStatus, reason: answer.blockStatus == 403 ? "Forbidden" : "Bad Gateway")
            response.headers.add(name: "Content-Type", value: "text/plain; charset=utf-8")
            for (n, v) in answer.headers { response.headers.add(name: n, value: v) }
            return .answer(
                head: response, body: Array(answer.blockBody.utf8), url: url,
                outcome: i.outcome == .failed ? .failed : .blocked, codes: codes)
        }
        traceRequestStart(method: head.method, url: url, head: head, httpVersion: version)
        // The proxy's credentials never go upstream, whichever leg carried them (a client may repeat them inside the
        // tunnel). Checked first so that the common head is forwarded as the same value, and its bytes as received.
        var forwarded = head
        if head.headers.contains(name: "Proxy-Authorization") { forwarded.headers.remove(name: "Proxy-Authorization") }
        return .forward(
            head: forwarded, url: url, upstream: nil, annotation: i.annotation, outcome: i.outcome, codes: codes)
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

    func readClient(_ i: InterceptLayer, incoming: UnsafeRawBufferPointer = .init(start: nil, count: 0)) {
        guard let engine = i.client else { return }
        let (plaintext, closed, error) = drain(engine, feeding: incoming)
        if let error {
            notice("\(i.host): TLS error from the client: \(error)", kind: "TLS error from the client")
            closeAll()
            return
        }
        let out = engine.takeOutput()
        if !out.isEmpty { commands.append(.sendToClient(out)) }
        if !plaintext.isEmpty {
            if !i.clientSpoke {
                if i.mirror != nil { mirrorDeviceSpoke(i) }
                i.clientSpoke = true
                noteClientAccepted(i)
            }
            if let kept = i.unansweredClientPlaintext {
                i.unansweredClientPlaintext = kept.count + plaintext.count <= InterceptLayer.replayLimit ? kept + plaintext : nil
            }
            if i.raw {
                i.upgraded?.fromClient += plaintext.count
                interceptSendUpstream(i, plaintext)
            } else if let relay = i.relay {
                applyIntercepted(relay.clientBytes(plaintext), i)
            }
        }
        if closed { noteClientClosedWithoutRequest() }
        if closed, !isDone {
            if i.raw {
                upgradeEnded(i, by: "the client closed it")
                i.upstream?.close()
                flushUpstreamTLS(i)
                if i.upstreamOpen { commands.append(.shutdownUpstreamWrite) }
            } else if let relay = i.relay {
                applyIntercepted(relay.clientEOF(), i)
                if !isDone, relay.isIdle { closeAll(tlsClose: true) }
            }
        }
    }

    func readUpstream(_ i: InterceptLayer, incoming: UnsafeRawBufferPointer = .init(start: nil, count: 0)) {
        guard let engine = i.upstream, i.stage == .relaying else { return }
        let (plaintext, closed, error) = drain(engine, feeding: incoming)
        if let error { notice("\(i.host): TLS error from the upstream: \(error)") }
        flushUpstreamTLS(i)
        if !plaintext.isEmpty {
            i.unansweredClientPlaintext = nil
            if i.raw {
                i.upgraded?.toClient += plaintext.count
                interceptSendClient(i, plaintext)
            } else if let relay = i.relay {
                applyIntercepted(relay.upstreamBytes(plaintext), i)
            }
        }
        // A close_notify can come before the TCP close: the retry check applies to it too.
        if closed, !retryOfferingH2IfClosedBeforeRequest(i) { upstreamGone(i) }
    }

    func shutdownClientTLS(_ i: InterceptLayer) {
        closeAll(tlsClose: true)
    }

    func flushUpstreamTLS(_ i: InterceptLayer) {
        guard let engine = i.upstream else { return }
        let out = engine.takeOutput()
        if !out.isEmpty, i.upstreamOpen { commands.append(.sendToUpstream(out)) }
    }

    func interceptSendUpstream(_ i: InterceptLayer, _ plaintext: [UInt8]) {
        guard let engine = i.upstream else { return }
        do { try engine.write(plaintext) } catch {
            notice("\(i.host): cannot write to the upstream TLS session: \(error)")
            closeAll()
            return
        }
        flushUpstreamTLS(i)
    }

    func interceptSendClient(_ i: InterceptLayer, _ plaintext: [UInt8]) {
        // Nothing goes to a client after its connection was closed (an upstream write just failed, say).
        guard !clientClosed, let engine = i.client else { return }
        do { try engine.write(plaintext) } catch {
            notice("\(i.host): cannot write to the client TLS session: \(error)")
            closeAll()
            return
        }
        let out = engine.takeOutput()
        if !out.isEmpty { commands.append(.sendToClient(out)) }
    }
}

/// The refusal of a request whose absolute-form target names another origin than its tunnel's.
struct MisdirectedRequest: Error {
    let decision: RequestDecision
}

extension ProxySession {
    /// A quiet connection gives its TLS record buffers back; they come back with the next record. This is what
    /// keeps a thousand idle intercepted connections small without paying for buffers on every record.
    func releaseBuffers(of peer: ProxyPeer, _ i: InterceptLayer) {
        switch peer {
        case .client:
            i.client?.releaseBuffers()
            i.relay?.releaseBuffers()
        case .upstream: i.upstream?.releaseBuffers()
        case .lane(let lane): i.lanes[lane]?.engine?.releaseBuffers()
        }
    }
}
