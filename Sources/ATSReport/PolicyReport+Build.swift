import ATSPolicy
import Foundation

extension PolicyReport {
    /// Judges `observations` under `policy` and suggests the narrowest policy for them.
    public init(observations: [Observation], policy: ReportPolicy, notes: [String] = []) {
        let app = policy.decoded
        let judged = observations.map { (observation: $0, judgement: app.judge($0)) }
        profile = policy.options.profile
        policySource = policy.source
        self.notes = notes
        exchangeCount = observations.reduce(0) { $0 + $1.exchanges }
        policyDiagnostics = app.diagnostics

        var order: [String] = []
        var byHost: [String: [(observation: Observation, judgement: Judgement)]] = [:]
        for item in judged {
            if byHost[item.observation.host] == nil { order.append(item.observation.host) }
            byHost[item.observation.host, default: []].append(item)
        }
        hosts = order.map { host in Self.hostReport(host, byHost[host] ?? []) }
        missingExceptions = order.compactMap { host in Self.missingException(host, byHost[host] ?? [], app) }
        findings = PolicyFindings(policy: policy, app: app, judged: judged).all()
        suggestion = SuggestedPolicy(observations: observations, options: policy.options, app: policy)
    }

    private static func hostReport(_ host: String, _ items: [(observation: Observation, judgement: Judgement)])
        -> HostReport
    {
        let loads = items.map { item in
            LoadReport(
                url: item.observation.url, exchanges: item.observation.exchanges, verdict: item.judgement.verdict,
                violations: item.judgement.violations, tls: item.observation.handshake.map(TLSSummary.init),
                note: item.judgement.note)
        }
        let verdict: LoadVerdict =
            loads.contains { $0.verdict == .fails }
            ? .fails : loads.contains { $0.verdict == .allowed } ? .allowed : .notChecked
        let decision = items.lazy.compactMap(\.judgement.decision).first
        return HostReport(
            host: host, verdict: verdict,
            decidedBy: decision.map { $0.keyPath.isEmpty ? "ATS defaults" : $0.keyPathString } ?? "not judged",
            reason: decision?.reason, exchanges: loads.reduce(0) { $0 + $1.exchanges }, loads: loads)
    }

    private static func missingException(
        _ host: String, _ items: [(observation: Observation, judgement: Judgement)], _ app: ATSPolicy
    ) -> MissingException? {
        let failing = items.filter { $0.judgement.verdict == .fails }
        guard !failing.isEmpty else { return nil }
        var violations: [ATSViolation] = []
        for item in failing {
            for v in item.judgement.violations where !violations.contains(v) { violations.append(v) }
        }
        let fix = ATSVerdict.blocked(violations).combinedFix
        let placed = fix?.placedSnippet(in: app)
        var unfixable: [String] = []
        for v in violations {
            if case .noExceptionCanHelp(let reason) = v.fix, !unfixable.contains(reason) { unfixable.append(reason) }
        }
        return MissingException(
            host: host, urls: failing.map(\.observation.url),
            exchanges: failing.reduce(0) { $0 + $1.observation.exchanges }, violations: violations, fix: fix,
            fixPlist: placed?.snippet, fixPasteInside: placed?.pasteInside, unfixable: unfixable)
    }
}

extension TLSSummary {
    /// The handshake's facts in brief.
    init(_ facts: HandshakeFacts) {
        version = facts.version?.plistName
        cipherSuite =
            facts.cipherSuiteCode.flatMap { CipherSuite.lookup(code: $0)?.ianaName } ?? facts.cipherSuiteName
        keyExchange = facts.keyExchangeGroup
        alpn = facts.alpn
        chain = facts.chain.map(Self.describe)
        trust = String(describing: facts.trust)
        hostnameMatches = facts.hostnameMatches
        failure = facts.failure.map { String(describing: $0) }
    }

    private static func describe(_ c: CertificateFacts) -> String {
        let name = c.dnsNames.first ?? c.ipAddresses.first ?? c.subject
        let key = c.keyType == .ec ? "EC \(c.curve ?? String(c.keyBits))" : "\(c.keyType.rawValue.uppercased()) \(c.keyBits)"
        let until = c.notAfter.formatted(.iso8601.year().month().day())
        return "\(name): \(key), \(c.signatureHash.rawValue.uppercased()), until \(until)"
            + (c.isSelfSigned ? ", self-signed" : "")
    }
}
