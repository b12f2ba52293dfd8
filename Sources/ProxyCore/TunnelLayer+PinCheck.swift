import ATSPolicy
import Foundation
import ProxyTrace
import TLSCore

// Theory of operation: the pins of a tunnelled NSPinnedDomains host, checked on a side connection.
//
// The tunnel relays the device's own TLS, so the server's certificate is not the proxy's to see (TLS 1.3 encrypts
// it). To judge the app's pin anyway, the session opens one extra upstream connection (a lane) to the same origin and
// runs the handshake iOS would, on the loop, without a request; the chain it receives is judged by the policy's pin
// rules (the same as `diagnose --plist`). The tunnel's bytes never wait for it: the tunnel is opened as before, and
// the result is added to the tunnel's record when it comes, or at once from the cache (PinCheckCache) when the origin
// was checked recently.
//
// - A mismatch makes the tunnel's record an ATS violation (pinMismatch, with the SPKI hashes found and expected), in
//   the console, the trace and the JSON log; a notice says it once per origin. Nothing is blocked: the device decides.
// - A tunnel that ends before the check does is logged when the check ends, or at `--handshake-timeout`.
// - A check that gets no certificate (unreachable, handshake refused) says so on the line; the pins are not judged.

/// A side connection checking a tunnelled host's pins.
final class PinProbe {
    let lane = UpstreamLane(1)
    let requirements: ConnectionRequirements
    let pins: PinSet
    var engine: TLSEngine?

    init(requirements: ConnectionRequirements, pins: PinSet) {
        self.requirements = requirements
        self.pins = pins
    }
}

extension TunnelLayer {
    /// Starts the pin check of the tunnel just started for a pinned host, or applies the cached result.
    func checkPins(_ ctx: SessionContext, _ pins: PinSet) {
        guard ctx.env.mode != .off else { return }
        let target = ConnectionTarget(scheme: "https", host: record.host, port: record.port)
        guard case .proceed(let req) = ctx.env.requirements(for: target) else { return }
        if let cached = ctx.env.pinChecks.result(host: record.host, port: record.port, now: ctx.now()) {
            applyPinCheck(ctx, cached, pins: pins, decision: req.decidedBy, fresh: false)
            return
        }
        let probe = PinProbe(requirements: req, pins: pins)
        pinProbe = probe
        let (address, port) = ctx.upstreamAddress(host: record.host, port: record.port)
        ctx.commands.append(.connectLane(probe.lane, address: address, port: port))
        ctx.commands.append(.startTimer(.upstreamHandshake, after: ctx.env.timeouts.connect + ctx.env.timeouts.handshake))
    }

    /// An event of the pin check's lane.
    func pinCheckLaneEvent(_ ctx: SessionContext, _ event: ProxyEvent) {
        guard let probe = pinProbe else { return }
        switch event {
        case .laneConnected(let lane) where lane == probe.lane:
            startPinHandshake(ctx, probe)
        case .laneConnectFailed(let lane, let error) where lane == probe.lane:
            finishPinCheck(ctx, probe, chain: [], reason: "the side connection could not connect: \(error)")
        case .laneBytes(let lane, let bytes) where lane == probe.lane:
            probe.engine?.feed(bytes)
            stepPinHandshake(ctx, probe)
        case .laneEOF(let lane) where lane == probe.lane, .laneClosed(let lane, _) where lane == probe.lane:
            probe.engine?.feedEndOfInput()
            stepPinHandshake(ctx, probe)
            if pinProbe != nil {
                finishPinCheck(ctx, probe, chain: [], reason: "the server closed the side connection during its handshake")
            }
        default:
            break
        }
    }

    /// The check took longer than a connection and a handshake may.
    func pinCheckTimedOut(_ ctx: SessionContext) {
        guard let probe = pinProbe else { return }
        finishPinCheck(ctx, probe, chain: [], reason: "the side connection's handshake did not finish in time")
    }

    private func startPinHandshake(_ ctx: SessionContext, _ probe: PinProbe) {
        let configuration = UpstreamTLS.iOSLikeConfiguration(for: probe.requirements)
        let key = TLSContextKey.upstream(
            minimum: configuration.minimumVersion, maximum: configuration.maximumVersion,
            cipherList: configuration.cipherList, tls13Suites: configuration.tls13CipherSuites, alpn: [])
        do {
            let context = try ctx.env.contexts.context(key: key) { () throws(OpenSSLError) in try TLSContext(configuration) }
            let sni = IPAddress(record.host) == nil ? record.host : nil
            probe.engine = try TLSEngine(context: context, serverName: sni)
            stepPinHandshake(ctx, probe)
        } catch {
            finishPinCheck(ctx, probe, chain: [], reason: "cannot set up the side connection's TLS client: \(error)")
        }
    }

    private func stepPinHandshake(_ ctx: SessionContext, _ probe: PinProbe) {
        guard let engine = probe.engine else { return }
        let step = engine.handshake()
        let out = engine.takeOutput()
        if !out.isEmpty { ctx.commands.append(.sendToLane(probe.lane, out)) }
        switch step {
        case .needsMoreInput:
            return
        case .complete:
            finishPinCheck(ctx, probe, chain: engine.peerCertificateChain, reason: nil)
        case .failed(let error):
            // A handshake iOS would not complete may still have shown the chain (TLS 1.2 sends it in clear).
            let chain = engine.peerCertificateChain
            finishPinCheck(ctx, probe, chain: chain, reason: chain.isEmpty ? "the side connection's handshake failed (\(error))" : nil)
        }
    }

    private func finishPinCheck(_ ctx: SessionContext, _ probe: PinProbe, chain: [Certificate], reason: String?) {
        pinProbe = nil
        ctx.commands.append(.closeLane(probe.lane))
        let host = record.host
        var facts: [CertificateFacts] = []
        var violations: [ATSViolation] = []
        if let engine = probe.engine, !chain.isEmpty {
            // Judged as the intercepted upstream is, keeping only what the pins say (the hellos judge the rest).
            let handshake = ctx.env.factsCollector.facts(from: engine, host: host, now: ctx.clockDate)
            facts = handshake.chain
            violations = ctx.env.policy.evaluate(handshake, against: probe.requirements).violations
                .filter { $0.kind == .pinMismatch }
        }
        let result = PinCheckResult(
            violations: violations, found: facts.map(\.spkiSHA256Base64),
            uncheckedReason: facts.isEmpty ? (reason ?? "the server sent no certificate") : nil, checkedAt: ctx.now())
        let fresh = ctx.env.pinChecks.store(result, host: host, port: record.port)
        applyPinCheck(ctx, result, pins: probe.pins, decision: probe.requirements.decidedBy, fresh: fresh)
        if let counts = closedCounts {
            ctx.phase = .done
            log(ctx, fromClient: counts.fromClient, toClient: counts.toClient)
        }
    }

    /// Adds a pin check's result to the tunnel's record; `fresh`: the origin's first result (its notice is due).
    private func applyPinCheck(
        _ ctx: SessionContext, _ result: PinCheckResult, pins: PinSet, decision: PolicyDecision, fresh: Bool
    ) {
        let host = record.host
        let url = InterceptLayer.httpsURL(host: host, port: record.port)
        if let reason = result.uncheckedReason {
            record.note += "; pin not checked: \(reason)"
            return
        }
        let found = "served SPKI-SHA256: leaf \(result.found[0])"
            + (result.found.count > 1 ? ", CA \(result.found.dropFirst().joined(separator: ", "))" : "")
        guard !result.violations.isEmpty else {
            record.note += "; pin matches (checked on a side connection)"
            if fresh {
                ctx.traceDecision(url: url, decision: decision, violations: [], action: "tunnelled: the served key matches the "
                    + "app's pin (side connection)")
            }
            return
        }
        let expected = (pins.leafSPKISHA256.isEmpty ? "" : "NSPinnedLeafIdentities \(pins.leafSPKISHA256.joined(separator: ", "))")
            + (pins.leafSPKISHA256.isEmpty || pins.caSPKISHA256.isEmpty ? "" : "; ")
            + (pins.caSPKISHA256.isEmpty ? "" : "NSPinnedCAIdentities \(pins.caSPKISHA256.joined(separator: ", "))")
        let violations = result.violations.map { v in
            var v = v
            v.explanation += " (\(found); expected \(expected))"
            return v
        }
        record.outcome = .violation
        record.errors += violations.map(ExchangeError.init)
        record.note += "; PIN MISMATCH (checked on a side connection): \(found); expected \(expected)"
        ctx.traceDecision(url: url, decision: decision, violations: violations,
            action: "tunnelled, not blocked: the device's pin check will fail the app's request")
        if fresh {
            ctx.notice("\(host):\(record.port): the server's key does not match the app's pin (NSPinnedDomains › "
                + "\(pins.domain)): \(found); expected \(expected). The tunnel is not blocked; the device will refuse "
                + "the connection")
        }
    }
}
