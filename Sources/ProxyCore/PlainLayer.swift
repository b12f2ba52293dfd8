import ATSPolicy
import HTTP1Core
import Onboarding
import ProxyTrace

// Theory of operation: plain-HTTP forwarding of absolute-form requests (`GET http://host/…`).
//
// - One HTTP1Relay carries every request of the connection, starting with the front's bytes replayed into it.
// - Each request is judged on its own (a redirect is a new request and is judged again): `--auth` credentials,
//   then the target's ATS verdict, made an action by VerdictAction. Relayed: rewritten to origin form (RFC 9112
//   §3.2.2: Host from the target, no Proxy-* fields), with the `X-ATS-*` annotation in `--ats annotate`. Blocked:
//   answered 403 with the -1022 explanation, without connecting. The set-up site's names are answered by the
//   site before any verdict (ProxySession+Onboarding); Apple's own hosts (AppleHosts) are relayed without one.
// - The relay asks for an upstream per target (`RelayOutput.connect`); the upstream connection is this layer's,
//   reconnected when a request names another host.
// - A 101 hands both connections to the adapter's raw relay: the session goes to `upgraded`.

/// Plain-HTTP forwarding: the relay, the upstream connection it uses, and the last block for its trace.
final class PlainLayer: RelayingLayer {
    /// Set once, by `startPlain`.
    var relay: HTTP1Relay!
    /// The upstream TCP connection is open (a close is owed to it).
    var upstreamOpen = false
    /// The upstream being connected for the request waiting in the relay.
    var pendingTarget: UpstreamTarget?
    /// The violation of the last request answered with a block, for its trace's Did Fail record.
    var lastBlock: ATSViolation?
    /// The decision of the exchange in flight, for its record (ProxySession+Record).
    var decisionRecord = PlainDecisionRecord()
    /// `--ats mirror`: the exchange in flight's record (the device sent it, so its ATS allowed the cleartext load).
    var mirrorRecord: MirrorRecord?
    var watchedWait = RelayWait.nothing

    var exchangeRelay: (any ExchangeRelay)? { relay }
}

extension ProxySession {
    /// The plain layer the connection is in, if it is.
    var plain: PlainLayer? { if case .plain(let p) = phase { p } else { nil } }

    /// The violation of the last cleartext request answered with a block (read by `logExchange`).
    var lastPlainBlock: ATSViolation? { plain?.lastBlock }

    /// The decision of the plain-HTTP exchange in flight (or upgraded), for its record (read by `recorded`).
    var plainDecision: PlainDecisionRecord {
        switch phase {
        case .plain(let p): p.decisionRecord
        case .upgraded(let u): u.plainDecision
        case .front, .sniffing, .tunnel, .intercepting, .done: PlainDecisionRecord()
        }
    }

    func startPlain(replaying bytes: [UInt8]) {
        let p = PlainLayer()
        p.relay = HTTP1Relay(connectedTo: nil, now: now, recording: env.recording)
        phase = .plain(p)
        applyPlain(p.relay.clientBytes(bytes), p)
    }

    private func decidePlain(_ head: HTTPRequestHead, _ p: PlainLayer) -> RequestDecision {
        let notAbsolute = RequestDecision.answer(
            head: HTTPResponseHead(status: 400, reason: "Bad Request", headers: [("Content-Type", "text/plain")]),
            body: Array("ATSProxy: every request on a proxy connection must use an absolute http:// URL\n".utf8),
            url: Redaction.url(head.target), outcome: .notEvaluated, codes: [])
        // Basic proxy credentials belong to each request (RFC 9110 §11.7.1), not to the connection: a keep-alive
        // connection's later requests, to any host, are checked like its first.
        p.decisionRecord = PlainDecisionRecord()
        p.mirrorRecord = nil
        if let refusal = authRefusal(head) { return refusal }
        let parsed: HTTPRequestTarget
        do { parsed = try HTTPRequestTarget(parsing: head.target, method: head.method) } catch { return notAbsolute }
        guard case .absolute(let scheme, let host, let port, let path) = parsed, scheme == "http" else {
            return notAbsolute
        }
        let url = Redaction.url(head.target)
        var forwarded = head
        forwarded.target = path
        forwarded.headers.remove(name: "Proxy-Connection")
        forwarded.headers.remove(name: "Proxy-Authorization")
        // RFC 9112 §3.2.2: a proxy generates Host from the target URI rather than forwarding the client's.
        forwarded.headers.replaceOrAdd(name: "Host", value: port.map { "\(host):\($0)" } ?? host)
        // Host names are case-insensitive (RFC 3986 §3.2.2) and policy keys are lowercase: match the name in lower
        // case, as the CONNECT path does with the SNI. The Host field keeps the client's spelling.
        let name = host.lowercased()
        if let site = env.onboarding, let role = site.role(ofHost: name, port: port ?? 80) {
            // The proxy's own site: answered here, never connected to, and no ATS verdict (not the app's traffic).
            p.decisionRecord.proxySite = true
            return onboardingDecision(site, role: role, head: head, path: path, url: url, secure: false)
        }
        let (address, upstreamPort) = upstreamAddress(host: name, port: port ?? 80)
        let upstream = UpstreamTarget(host: address, port: upstreamPort)
        if env.appleHosts?.entry(for: name) != nil {
            // The device's own cleartext (App Store content, certificate status) is relayed, not judged: a -1022
            // block here would be no problem of the app's. (apple.com's own names also have iOS's built-in
            // exception, which allows cleartext anyway.)
            prepareUpstream(upstream, host: host, port: port ?? 80, p)
            return .forward(
                head: forwarded, url: url, upstream: upstream, annotation: [], outcome: .notEvaluated, codes: [])
        }
        trace(.loaderWhatToDo(method: head.method, url: url))

        var verdict: Verdict
        var decision = PolicyDecision(keyPath: [], reason: "ATS evaluation is off (--ats off)")
        if env.mode == .off {
            verdict = Verdict(source: .notEvaluated, violations: [])
        } else {
            switch env.requirements(for: ConnectionTarget(scheme: "http", host: name, port: port ?? 80)) {
            case .proceed(let req):
                verdict = Verdict(source: .policy, violations: [])
                decision = req.decidedBy
            case .blocked(let violation):
                verdict = Verdict(source: .policy, violations: [violation])
                decision = violation.decidedBy ?? PolicyDecision(keyPath: [], reason: violation.explanation)
            }
        }
        if env.mode == .mirror {
            p.mirrorRecord = mirrorCleartext(url: url, simulated: verdict.violations)
            // Without a plist the device alone judges: Apple's defaults only name the kind in the summary.
            if !env.mirrorComparesPolicy { verdict = Verdict(source: .notEvaluated, violations: []) }
        }
        if env.mode != .off {
            p.decisionRecord = PlainDecisionRecord(decision: decision, violations: verdict.violations)
        }
        let answer = ATSAnswer(url: url, decision: decision, violations: verdict.violations)
        let codes = verdict.violations.map(ExchangeError.init)
        // Cleartext has one way to refuse: the app refuses the load before connecting, so the proxy answers.
        switch VerdictAction(for: verdict, mode: env.mode, blockStyle: .http) {
        case .relay(let outcome, let annotate):
            if env.mode != .off {
                let action = verdict.violations.isEmpty
                    ? "allowed" : "annotated: forwarded, although the app refuses this load before connecting"
                traceDecision(url: url, decision: decision, violations: verdict.violations, action: action)
            }
            // Only a request that goes out is enqueued: the app refuses a blocked one before connecting.
            prepareUpstream(upstream, host: host, port: port ?? 80, p)
            traceEnqueue(url: url, head: forwarded)  // what goes upstream: no Proxy-Authorization
            return .forward(
                head: forwarded, url: url, upstream: upstream, annotation: annotate ? answer.headers : [],
                outcome: outcome, codes: codes)
        case .block(let outcome, _):
            traceDecision(
                url: url, decision: decision, violations: verdict.violations,
                action: "blocked (403, no connection made)")
            if let violation = verdict.violations.first {
                trace(.responseError(url: url, error: NSErrorDescription(violation: violation, failingURL: url)))
                p.lastBlock = violation
            }
            return .answer(
                head: HTTPResponseHead(
                    status: 403, reason: "Forbidden",
                    headers: HTTPHeaders([("Content-Type", "text/plain; charset=utf-8")] + answer.headers)),
                body: Array(answer.blockBody.utf8), url: url, outcome: outcome, codes: codes)
        }
    }

    private func prepareUpstream(_ upstream: UpstreamTarget, host: String, port: Int, _ p: PlainLayer) {
        guard p.relay.connectedUpstream != upstream else { return }
        p.pendingTarget = upstream
        trace(.tcpConnectionStart(
            connectionID: id, host: host, port: port, mappedTo: mappedAddress(host: host, port: port)))
    }

    func plainUpstreamConnected(_ p: PlainLayer) {
        p.upstreamOpen = true
        guard let target = p.pendingTarget else { return }
        p.pendingTarget = nil
        trace(.tcpConnectionConnected(connectionID: id))
        applyPlain(p.relay.upstreamConnected(target), p)
    }

    func plainUpstreamFailed(_ p: PlainLayer, _ error: String, _ failure: ConnectFailure) {
        p.upstreamOpen = false
        p.pendingTarget = nil
        trace(.tcpConnectionConnected(connectionID: id, error: error))
        applyPlain(p.relay.upstreamFailed("cannot connect to the upstream: \(error)", failure: failure), p)
    }

    func plainUpstreamEOF(_ p: PlainLayer) {
        applyPlain(p.relay.upstreamEOF(), p)
        p.upstreamOpen = false
        commands.append(.closeUpstream)
    }

    func plainUpstreamClosed(_ p: PlainLayer, _ error: String?) {
        let wasOpen = p.upstreamOpen
        p.upstreamOpen = false
        guard wasOpen else { return }
        if let error {
            applyPlain(p.relay.upstreamReset("the upstream connection failed: \(error)"), p)
        } else {
            applyPlain(p.relay.upstreamEOF(), p)
        }
    }

    /// Carries out a relay step of plain forwarding, then decides each request the step holds
    /// (`RelayOutput.toDecide`) and carries out the relay's step for each answer in turn (at once, for now).
    func applyPlain(_ o: consuming RelayOutput, _ p: PlainLayer) {
        var step = o
        var toDecide = step.takeToDecide()
        applyPlainStep(step, p)
        while !isDone, case .plain(let current) = phase, current === p, let request = toDecide.popFirst() {
            var next = p.relay.resolve(request.id, decidePlain(absoluteForm(request.head), p))
            toDecide.append(contentsOf: next.takeToDecide())
            applyPlainStep(next, p)
        }
    }

    /// Carries out one relay step: connects, bytes, exchange lines, a 101's hand-off, closes.
    private func applyPlainStep(_ o: consuming RelayOutput, _ p: PlainLayer) {
        let unsolicited = o.unsolicitedUpstream
        defer { relayStepped(p, unsolicited: unsolicited) }
        p.upstreamOpen = beginRelayStep(o, upstreamOpen: p.upstreamOpen)
        if !o.toUpstream.isEmpty { commands.append(.sendToUpstream(o.toUpstream)) }
        if !o.toClient.isEmpty { commands.append(.sendToClient(o.toClient)) }
        for exchange in o.exchanges { logExchange(exchange) }
        applyPauses(o)
        if o.switchedToRaw {
            // The adapter relays both connections raw from now on; the upgraded connection is logged as it ends.
            if var upgraded = o.exchanges.last.map({ UpgradedConnection(after: $0, at: now()) }) {
                upgraded.plainDecision = p.decisionRecord
                phase = .upgraded(upgraded)
            } else {
                phase = .done
            }
            commands.append(.startTunnel)
            return
        }
        if o.closeUpstream, p.upstreamOpen, o.connect == nil {
            p.upstreamOpen = false
            commands.append(.closeUpstream)
        }
        if o.closeClient { closeAll(reset: o.abortClient) }
    }

    /// Reading paused or resumed because the other side's flow control filled or drained.
    @inline(__always)
    func applyPauses(_ o: borrowing RelayOutput) {
        for (peer, paused) in o.pauseReading {
            commands.append(paused ? .pauseReading(peer) : .resumeReading(peer))
        }
    }
}
