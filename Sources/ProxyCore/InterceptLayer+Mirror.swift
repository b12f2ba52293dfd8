import ATSPolicy
import Foundation
import ProxyTrace
import TLSCore

// Theory of operation: `--ats mirror` on an intercepted connection.
//
// 1. The upstream handshake ran as always (iOS-like; when that failed, what iOS offers with every exception, then
//    the permissive probe), so its facts (the version and suite the server chose, the leaf, the chain's trust) are
//    known before the client's ClientHello, held until then, is answered. `prepareMirror` turns them into a
//    MirrorPlan; nothing is blocked.
// 2. The client's handshake runs against the plan's server (InterceptLayer+Client): the upstream's weak version and
//    suite at OpenSSL security level 0 and a leaf with the upstream leaf's flaws, on a context of its own; a healthy
//    upstream gets the proxy's own TLS, exactly as without mirror mode.
// 3. What the device did is the connection's record: it completed the handshake and sent a request (accepted, with
//    what it negotiated), or it refused: with an alert (which one, at which step), or by closing after the handshake
//    before any request (OpenSSL clients check the host name only then). One CONNECT line says so as soon as the
//    device decided; every request's line on the connection carries the same record.
// 4. With `--plist`, the policy's verdict is the second one: agreement is quiet, a disagreement is a notice and a
//    field of every record. Both are counted for the summary at exit (MirrorTally).
// 5. A cleartext request (PlainLayer) is the device's ATS allowing the load, since ATS refuses `http://` before
//    connecting: it gets a record of its own, judged against the plist's -1022 the same way.

/// What mirror mode keeps on an intercepted connection. A class: the relaying path asks only whether there is one,
/// which for a reference is a pointer test, not a copy of the plan.
final class MirrorState {
    let plan: MirrorPlan
    /// The simulated verdict's violations (Apple's defaults without a plist), kept for the comparison and the tally.
    let simulated: [ATSViolation]
    /// What the device did, once it decided.
    var record: MirrorRecord?
    /// The device completed its handshake (what it negotiated) and has not sent a request yet. It has decided only
    /// once it sends one: OpenSSL clients (curl, Python) check the host name after the handshake and then close.
    var completedHandshake: (version: String?, suite: String?)?

    init(plan: MirrorPlan, simulated: [ATSViolation]) {
        self.plan = plan
        self.simulated = simulated
    }
}

extension InterceptLayer {
    /// The client is served a flawed leaf or a weak protocol on purpose (`--block tls`, or `--ats mirror` copying
    /// the upstream's weaknesses): its refusal says nothing about whether it trusts the proxy's CA, so
    /// auto-passthrough does not count it.
    var servesWeaknessOnPurpose: Bool {
        block.flawedLeaf != nil || mirror?.plan.isHealthy == false || fault != nil
    }

    /// Makes the plan for the client leg from the upstream handshake's facts (see the theory of operation).
    func prepareMirror(_ ctx: SessionContext, _ facts: HandshakeFacts, _ engine: TLSEngine) {
        // A retried upstream (an h2-only origin) keeps the first plan: the client leg already runs on it.
        if mirror == nil {
            let plan = MirrorPlan(facts: facts, suiteOpenSSLName: engine.negotiated?.cipherSuiteOpenSSLName)
            mirror = MirrorState(plan: plan, simulated: violations)
        }
        if !ctx.env.mirrorComparesPolicy {
            // No plist: the device alone judges; Apple's defaults only name the kind in the summary.
            violations = []
            outcome = .notEvaluated
        }
    }

    /// What the decision trace says the proxy did with a mirrored connection.
    func mirrorActionText(_ plan: MirrorPlan) -> String {
        plan.isHealthy
            ? "mirrored: a healthy upstream, served with the proxy's own TLS"
            : "mirrored: the client is shown \(plan.weaknesses.joined(separator: ", "))"
    }

    /// The client leg's context for a plan with weaknesses: one per host and plan, never shared with other hosts'
    /// or healthy connections, so every other connection keeps the default settings.
    func mirrorContext(_ ctx: SessionContext, plan: MirrorPlan) throws -> TLSContext {
        try ctx.env.contexts.context(key: .mirror(host: host, plan: plan)) { () throws(OpenSSLError) in
            let identity: TLSConfiguration.ServerIdentity
            do { identity = try ctx.env.minter.identity(for: host, options: plan.leaf, now: ctx.clockDate) } catch {
                throw OpenSSLError(context: "minting a mirrored certificate for \(host): \(error)", entries: [])
            }
            return try TLSContext(plan.serverConfiguration(identity: identity, alpn: ["h2", "http/1.1"]))
        }
    }

    /// The device completed its handshake with the mirrored server: it has accepted once it sends a request.
    func mirrorHandshakeCompleted(_ ctx: SessionContext, _ engine: TLSEngine) {
        let negotiated = engine.negotiated
        mirror?.completedHandshake = (
            negotiated.map { $0.version?.plistName ?? $0.versionName },
            negotiated.map { CipherSuite.lookup(code: $0.cipherSuiteCode)?.ianaName ?? $0.cipherSuiteName })
    }

    /// The device sent its first request after the handshake: it accepted what it was shown.
    func mirrorDeviceSpoke(_ ctx: SessionContext) {
        guard let state = mirror, state.record == nil, let done = state.completedHandshake else { return }
        finishMirror(ctx, state, accepted: true, version: done.version, suite: done.suite, refusal: nil, step: nil)
    }

    /// The connection ends: a device that completed its handshake and sent nothing refused after it.
    func mirrorConnectionEnding(_ ctx: SessionContext) {
        guard let state = mirror, state.record == nil, state.completedHandshake != nil
        else { return }
        finishMirror(ctx, state, accepted: false, version: nil, suite: nil, refusal: "closed after the handshake",
            step: "the device completed the handshake, then closed before any request (a check after the handshake "
                + "failed, such as an OpenSSL client's host-name check, or it had nothing to send)")
    }

    /// The device's handshake with the mirrored server failed: it refused what it was shown.
    func mirrorDeviceRefused(_ ctx: SessionContext, _ error: TLSError) {
        guard let state = mirror else { return }
        let (refusal, step) = Self.refusal(error)
        finishMirror(ctx, state, accepted: false, version: nil, suite: nil, refusal: refusal, step: step)
    }

    /// The alert (or close) and the step, in the record's words.
    static func refusal(_ error: TLSError) -> (String, String) {
        switch error {
        case .peerAlert(let alert):
            let certificate: Set<TLSAlert> = [
                .badCertificate, .unsupportedCertificate, .certificateExpired, .certificateUnknown, .unknownCA,
                TLSAlert(44), .decryptError, .insufficientSecurity,
            ]
            let step: String
            if certificate.contains(alert) {
                step = "the device sent the alert after the server's certificate (its trust evaluation failed)"
            } else if alert == .protocolVersion || alert == .handshakeFailure {
                step = "the device sent the alert after the server's hello (it refused the version or suite)"
            } else {
                step = "the device sent the alert during the handshake"
            }
            return (alert.name, step)
        case .localFailure(let sent, let e):
            let reasons = e.entries.map(\.reason).joined(separator: "; ")
            if sent == nil, reasons.contains("wrong version number") {
                // The device refused the server's older version: its protocol_version alert came in a record of its
                // own (newer) version, which the mirrored server could not read.
                return ("protocol_version",
                    "the device refused the version the server chose (its alert came in a newer record version)")
            }
            return (sent?.name ?? "handshake_failure",
                "the device's ClientHello offered no version or cipher suite the mirrored server accepts (\(e))")
        case .aborted(let alert):
            return (alert.name, "the proxy aborted the handshake")
        case .closedByPeer:
            return ("closed", "the device closed the connection during the handshake")
        case .notTLS:
            return ("not TLS", "the device did not speak TLS")
        }
    }

    private func finishMirror(
        _ ctx: SessionContext, _ state: MirrorState, accepted: Bool, version: String?, suite: String?,
        refusal: String?, step: String?
    ) {
        let kind = state.simulated.first?.kind.rawValue ?? "none"
        var simulatedText: String?
        var disagreement: String?
        var agreed: Bool?
        if ctx.env.mirrorComparesPolicy {
            let simulatedBlocks = !state.simulated.isEmpty
            simulatedText = Self.simulatedText(state.simulated)
            agreed = simulatedBlocks != accepted
            if agreed == false {
                let device = accepted ? "accepted \(version ?? "the connection")" : "refused (\(refusal ?? "closed"))"
                disagreement = "simulated: \(simulatedText ?? "allowed"); device: \(device); either the app's "
                    + "effective policy differs from the plist, or iOS behaves differently than modelled (reference "
                    + "\(Self.referenceSection(state.simulated.first?.kind, plan: state.plan)))"
                if accepted, !state.plan.notReproduced.isEmpty {
                    // The device could not meet what the simulation blocked for: no finding about the device.
                    disagreement = (disagreement ?? "") + "; expected for what the proxy cannot reproduce: "
                        + state.plan.notReproduced.joined(separator: "; ")
                }
            }
        }
        let record = MirrorRecord(
            version: state.plan.upstreamVersion?.plistName ?? version,
            weaknesses: state.plan.weaknesses.filter { $0 != state.plan.upstreamVersion?.plistName },
            notReproduced: state.plan.notReproduced, deviceAccepted: accepted, deviceVersion: version,
            deviceCipherSuite: suite, refusal: refusal, refusalStep: step, simulated: simulatedText,
            disagreement: disagreement, simulatedKind: state.simulated.first?.kind.rawValue)
        mirror?.record = record
        ctx.trace(.mirrorDeviceVerdict(url: url, record: record))
        ctx.env.mirrorTally.count(kind: kind, deviceAccepted: accepted, agreed: agreed)
        if let disagreement {
            ctx.notice("\(host):\(port): mirror disagreement: \(disagreement)", kind: "mirror disagreement \(kind)")
        }
        let summary = ExchangeSummary(
            method: "CONNECT", url: url, status: nil, kind: .refusedHandshake, outcome: outcome,
            errors: violations.map(ExchangeError.init), requestBytes: 0, responseBytes: 0,
            durationMilliseconds: (ctx.now() - started) * 1000,
            note: accepted ? nil : step)
        var noted = summary
        noted.mirror = record
        ctx.recordExchange(noted)
    }

    /// `allowed`, or `blocked -1200/-9836 (TLSv1.0 below the TLSv1.2 minimum)`.
    static func simulatedText(_ violations: [ATSViolation]) -> String {
        guard let first = violations.first else { return "allowed" }
        let codes = violations.map { ExchangeError($0).shortCode }.joined(separator: ",")
        return "blocked \(codes) (\(first.explanation))"
    }

    /// Where the reference discusses the rule a disagreement is about.
    static func referenceSection(_ kind: ViolationKind?, plan: MirrorPlan) -> String {
        switch kind {
        case .tlsVersionTooLow?, .tlsVersionRefusedByOS?: return "§3.1"
        case .cipherSuiteNotAllowed?, .noSharedCipherOrVersion?: return "§3.2"
        case .certificateTransparencyMissing?: return "§3.5"
        case .weakKey?, .weakSignatureHash?, .untrustedRoot?, .selfSigned?, .hostnameMismatch?, .expired?,
            .notYetValid?, .invalidChain?, .missingServerAuthEKU?, .validityTooLong?, .pinMismatch?:
            return "§3.3, §3.4"
        case .cleartextNotAllowed?: return "§3.1"
        case .notTLS?, .connectionFailed?, .timedOut?, .unreachable?:
            return "§3"
        case nil:
            // The policy allowed it and the device refused: the rule is whichever weakness was mirrored.
            if plan.protocolMirror != nil { return "§3.1, §3.2" }
            return plan.leaf.isStandard ? "§3" : "§3.3, §3.4"
        }
    }
}
