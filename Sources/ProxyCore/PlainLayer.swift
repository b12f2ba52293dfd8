import ATSPolicy
import HTTP1Core
import ProxyTrace

// Theory of operation: plain-HTTP forwarding of absolute-form requests (`GET http://host/…`).
//
// - One HTTP1Relay carries every request of the connection, starting with the front's bytes replayed into it.
// - Each request is judged on its own (a redirect is a new request and is judged again): `--auth` credentials,
//   then the target's ATS verdict, made an action by VerdictAction. Relayed: rewritten to origin form (RFC 9112
//   §3.2.2: Host from the target, no Proxy-* fields), with the `X-ATS-*` annotation in `--ats annotate`. Blocked:
//   answered 403 with the -1022 explanation, without connecting. The set-up site's names are answered by the
//   site before any verdict (SessionContext+LocalSite); Apple's own hosts (AppleHosts) are relayed without one.
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
    /// The decision of the exchange in flight, for its record (SessionContext+Record).
    var decisionRecord = PlainDecisionRecord()
    /// `--ats mirror`: the exchange in flight's record (the device sent it, so its ATS allowed the cleartext load).
    var mirrorRecord: MirrorRecord?
    var watchedWait = RelayWait.nothing

    var exchangeRelay: (any ExchangeRelay)? { relay }
}

extension PlainLayer {
    /// The decision on one request (the relay asks it for every request head).
    func decide(_ ctx: SessionContext, _ head: HTTPRequestHead) -> RequestDecision {
        let notAbsolute = RequestDecision.answer(
            head: HTTPResponseHead(status: 400, reason: "Bad Request", headers: [("Content-Type", "text/plain")]),
            body: Array("ATSProxy: every request on a proxy connection must use an absolute http:// URL\n".utf8),
            url: Redaction.url(head.target), outcome: .notEvaluated, codes: [])
        // Basic proxy credentials belong to each request (RFC 9110 §11.7.1), not to the connection: a keep-alive
        // connection's later requests, to any host, are checked like its first.
        decisionRecord = PlainDecisionRecord()
        mirrorRecord = nil
        if let refusal = ctx.authRefusal(head) { return refusal }
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
        if let site = ctx.env.localSite, site.answers(host: name, port: port ?? 80) {
            // The proxy's own site: answered here, never connected to, and no ATS verdict (not the app's traffic).
            decisionRecord.proxySite = true
            return ctx.localSiteDecision(
                site, host: name, port: port ?? 80, head: head, path: path, url: url, secure: false)
        }
        let (address, upstreamPort) = ctx.upstreamAddress(host: name, port: port ?? 80)
        let upstream = UpstreamTarget(host: address, port: upstreamPort)
        if ctx.env.appleHosts?.entry(for: name) != nil {
            // The device's own cleartext (App Store content, certificate status) is relayed, not judged: a -1022
            // block here would be no problem of the app's. (apple.com's own names also have iOS's built-in
            // exception, which allows cleartext anyway.)
            prepareUpstream(ctx, upstream, host: host, port: port ?? 80)
            return .forward(
                head: forwarded, url: url, upstream: upstream, annotation: [], outcome: .notEvaluated, codes: [])
        }
        ctx.trace(.loaderWhatToDo(method: head.method, url: url))

        var verdict: Verdict
        var decision = PolicyDecision(keyPath: [], reason: "ATS evaluation is off (--ats off)")
        if ctx.env.mode == .off {
            verdict = Verdict(source: .notEvaluated, violations: [])
        } else {
            switch ctx.env.requirements(for: ConnectionTarget(scheme: "http", host: name, port: port ?? 80)) {
            case .proceed(let req):
                verdict = Verdict(source: .policy, violations: [])
                decision = req.decidedBy
            case .blocked(let violation):
                verdict = Verdict(source: .policy, violations: [violation])
                decision = violation.decidedBy ?? PolicyDecision(keyPath: [], reason: violation.explanation)
            }
        }
        if ctx.env.mode == .mirror {
            mirrorRecord = mirrorCleartext(ctx, url: url, simulated: verdict.violations)
            // Without a plist the device alone judges: Apple's defaults only name the kind in the summary.
            if !ctx.env.mirrorComparesPolicy { verdict = Verdict(source: .notEvaluated, violations: []) }
        }
        if ctx.env.mode != .off {
            decisionRecord = PlainDecisionRecord(decision: decision, violations: verdict.violations)
        }
        let answer = ATSAnswer(url: url, decision: decision, violations: verdict.violations)
        let codes = verdict.violations.map(ExchangeError.init)
        // Cleartext has one way to refuse: the app refuses the load before connecting, so the proxy answers.
        switch VerdictAction(for: verdict, mode: ctx.env.mode, blockStyle: .http) {
        case .relay(let outcome, let annotate):
            if ctx.env.mode != .off {
                let action = verdict.violations.isEmpty
                    ? "allowed" : "annotated: forwarded, although the app refuses this load before connecting"
                ctx.traceDecision(url: url, decision: decision, violations: verdict.violations, action: action)
            }
            // Only a request that goes out is enqueued: the app refuses a blocked one before connecting.
            prepareUpstream(ctx, upstream, host: host, port: port ?? 80)
            ctx.traceEnqueue(url: url, head: forwarded)  // what goes upstream: no Proxy-Authorization
            return .forward(
                head: forwarded, url: url, upstream: upstream, annotation: annotate ? answer.headers : [],
                outcome: outcome, codes: codes)
        case .block(let outcome, _):
            ctx.traceDecision(
                url: url, decision: decision, violations: verdict.violations,
                action: "blocked (403, no connection made)")
            if let violation = verdict.violations.first {
                ctx.trace(.responseError(url: url, error: NSErrorDescription(violation: violation, failingURL: url)))
                lastBlock = violation
            }
            return .answer(
                head: HTTPResponseHead(
                    status: 403, reason: "Forbidden",
                    headers: HTTPHeaders([("Content-Type", "text/plain; charset=utf-8")] + answer.headers)),
                body: Array(answer.blockBody.utf8), url: url, outcome: outcome, codes: codes)
        }
    }

    private func prepareUpstream(_ ctx: SessionContext, _ upstream: UpstreamTarget, host: String, port: Int) {
        guard relay.connectedUpstream != upstream else { return }
        // The connection's first upstream decides its throttle (SessionContext+Throttle).
        ctx.decideThrottle(host: host.lowercased(), port: port)
        pendingTarget = upstream
        ctx.trace(.tcpConnectionStart(
            connectionID: ctx.id, host: host, port: port, mappedTo: ctx.mappedAddress(host: host, port: port)))
    }

    func upstreamConnected(_ ctx: SessionContext) {
        upstreamOpen = true
        guard let target = pendingTarget else { return }
        pendingTarget = nil
        ctx.trace(.tcpConnectionConnected(connectionID: ctx.id))
        apply(ctx, relay.upstreamConnected(target))
    }

    func upstreamConnectFailed(_ ctx: SessionContext, _ error: String, _ failure: ConnectFailure) {
        upstreamOpen = false
        pendingTarget = nil
        ctx.trace(.tcpConnectionConnected(connectionID: ctx.id, error: error))
        apply(ctx, relay.upstreamFailed("cannot connect to the upstream: \(error)", failure: failure))
    }

    func upstreamEOF(_ ctx: SessionContext) {
        apply(ctx, relay.upstreamEOF())
        upstreamOpen = false
        ctx.commands.append(.closeUpstream)
    }

    func upstreamClosed(_ ctx: SessionContext, _ error: String?) {
        let wasOpen = upstreamOpen
        upstreamOpen = false
        guard wasOpen else { return }
        if let error {
            apply(ctx, relay.upstreamReset("the upstream connection failed: \(error)"))
        } else {
            apply(ctx, relay.upstreamEOF())
        }
    }

    /// Carries out a relay step of plain forwarding, then decides each request the step holds
    /// (`RelayOutput.toDecide`) and carries out the relay's step for each answer in turn (at once, for now).
    func apply(_ ctx: SessionContext, _ o: consuming RelayOutput) {
        if o.toDecide.isEmpty { return applyStep(ctx, o) }
        var step = consume o
        let skipped = step.onlyAsks
        var toDecide = step.takeToDecide()
        if !skipped { applyStep(ctx, consume step) }
        var answered = false
        while !ctx.isDone, case .plain(let current) = ctx.phase, current === self, let request = toDecide.popFirst() {
            guard relay.isHolding(request.id) else { continue }
            // The connection point (a fault or block rule for the URL's host), then the request head's rules.
            guard let faulted = ctx.faultedPlain(decide(ctx, ctx.absoluteForm(request.head))),
                let decision = ctx.ruled(faulted, request: request.head)
            else { break }
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

    /// A request a breakpoint held is released: resolved as decided, when the relay still holds it.
    func resumeHeld(_ ctx: SessionContext, _ held: BreakpointHold, _ decision: RequestDecision) {
        guard !ctx.isDone, relay === held.relay, relay.isHolding(held.requestID) else { return }
        apply(ctx, relay.resolve(held.requestID, decision))
    }

    /// A response a breakpoint held is released: handed to its relay, when it is still the one relaying.
    func releaseResponse(_ ctx: SessionContext, _ hold: ResponseHold, _ release: HoldRelease?) {
        guard !ctx.isDone, relay === hold.relay else { return }
        apply(ctx, relay.releaseResponse(hold.held.id, release))
    }

    /// Carries out one relay step: connects, bytes, exchange lines, a 101's hand-off, closes.
    private func applyStep(_ ctx: SessionContext, _ o: consuming RelayOutput) {
        let unsolicited = o.unsolicitedUpstream
        defer { ctx.relayStepped(self, unsolicited: unsolicited) }
        upstreamOpen = ctx.beginRelayStep(o, upstreamOpen: upstreamOpen)
        if !o.toUpstream.isEmpty { ctx.commands.append(.sendToUpstream(o.toUpstream)) }
        if !o.toClient.isEmpty { ctx.commands.append(.sendToClient(o.toClient)) }
        for exchange in o.exchanges { ctx.logExchange(exchange) }
        if !o.responseHolds.isEmpty { ctx.holdResponses(o.responseHolds, relay: relay) }
        ctx.applyPauses(o)
        if o.switchedToRaw {
            // The adapter relays both connections raw from now on; the upgraded connection is logged as it ends.
            if var upgraded = o.exchanges.last.map({ UpgradedConnection(after: $0, at: ctx.now()) }) {
                upgraded.plainDecision = decisionRecord
                ctx.phase = .upgraded(upgraded)
            } else {
                ctx.phase = .done
            }
            ctx.commands.append(.startTunnel)
            return
        }
        if o.closeUpstream, upstreamOpen, o.connect == nil {
            upstreamOpen = false
            ctx.commands.append(.closeUpstream)
        }
        if o.closeClient { ctx.closeAll(reset: o.abortClient) }
    }

    /// A cleartext request in mirror mode: the device sent it, so its ATS allowed the load (ATS refuses `http://`
    /// before connecting). Judged against the simulation like a connection, counted, and traced.
    func mirrorCleartext(_ ctx: SessionContext, url: String, simulated: [ATSViolation]) -> MirrorRecord {
        let kind = simulated.first?.kind.rawValue ?? "none"
        var simulatedText: String?
        var disagreement: String?
        var agreed: Bool?
        if ctx.env.mirrorComparesPolicy {
            simulatedText = InterceptLayer.simulatedText(simulated)
            agreed = simulated.isEmpty
            if !simulated.isEmpty {
                disagreement = "simulated: \(simulatedText ?? ""); device: sent the cleartext request; either the "
                    + "app's effective policy differs from the plist, or iOS behaves differently than modelled "
                    + "(reference §3.1)"
            }
        }
        let record = MirrorRecord(
            version: "cleartext HTTP", weaknesses: [], notReproduced: [], deviceAccepted: true,
            simulated: simulatedText, disagreement: disagreement, simulatedKind: simulated.first?.kind.rawValue)
        ctx.trace(.mirrorDeviceVerdict(url: url, record: record))
        ctx.env.mirrorTally.count(kind: kind, deviceAccepted: true, agreed: agreed)
        if let disagreement {
            ctx.notice("\(url): mirror disagreement: \(disagreement)", kind: "mirror disagreement \(kind)")
        }
        return record
    }
}
