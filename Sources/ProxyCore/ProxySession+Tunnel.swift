import ATSPolicy
import ProxyTrace
import TLSCore

// Raw tunnels: hosts passed through (`--passthrough`), hosts the app pins (NSPinnedDomains: interception would break
// the pin) and clients that do not speak TLS after CONNECT. The proxy relays their bytes untouched, so the policy
// cannot judge them the way it judges an intercepted connection. What it can still read is the server's
// ServerHello, which every TLS version sends in clear: the version and cipher suite the server chose for this
// client. Those are judged against the host's ATS requirements and the verdict goes on the tunnel's record; the
// certificate is not judged (TLS 1.3 encrypts it). Nothing is blocked: the device, which sees the server's real
// handshake, makes its own ATS check.

/// A tunnel the proxy relays without looking inside: one console line (and JSON exchange) when it ends, so
/// that hosts the policy never sees still leave a record.
struct Tunnel {
    var host: String
    var port: Int
    var note: String
    var started: Double
    /// Client bytes the session itself sent upstream before the relay took over.
    var clientBytesBefore = 0
    /// The server's bytes so far, until its ServerHello (or refusal) has been read; nil when not watching.
    var serverFirstFlight: [UInt8]?
    var outcome: ExchangeSummary.ATSOutcome = .notEvaluated
    var codes: [String] = []

    /// `watched`: whether the server's first flight is to be judged (only a TLS client's tunnel has one).
    init(host: String, port: Int, note: String, started: Double, watched: Bool = true) {
        self.host = host
        self.port = port
        self.note = note
        self.started = started
        serverFirstFlight = watched ? [] : nil
    }
}

extension ProxySession {
    /// Whether the adapter should pass on what the server sends into the tunnel (`.tunnelServerBytes`).
    public var watchesTunnelServer: Bool { tunnel?.serverFirstFlight != nil && env.mode != .off }

    func tunnelClosed(fromClient: Int, toClient: Int) {
        guard let tunnel else { return }
        self.tunnel = nil
        recordExchange(ExchangeSummary(
            method: "CONNECT", url: Interception.httpsURL(host: tunnel.host, port: tunnel.port), status: nil,
            httpVersion: "TUNNEL", outcome: tunnel.outcome, errorCodes: tunnel.codes,
            requestBytes: tunnel.clientBytesBefore + fromClient, responseBytes: toClient,
            durationMilliseconds: (now() - tunnel.started) * 1000, note: tunnel.note))
    }

    func tunnelServerBytes(_ bytes: [UInt8]) {
        guard var t = tunnel, let flight = t.serverFirstFlight.map({ $0 + bytes }), env.mode != .off else { return }
        let answer: ServerAnswer?
        do {
            answer = try ServerHelloParser.parse(flight)
        } catch {
            t.serverFirstFlight = nil
            t.note += "; the server's first bytes are no TLS handshake (\(error.detail))"
            tunnel = t
            return
        }
        guard let answer else {
            // Bounded: the parser throws before a hello grows past its limit.
            t.serverFirstFlight = flight
            tunnel = t
            return
        }
        t.serverFirstFlight = nil
        tunnel = t
        judgeTunnel(answer)
    }

    private func judgeTunnel(_ answer: ServerAnswer) {
        guard var t = tunnel else { return }
        defer { tunnel = t }
        let hello: ServerHello
        switch answer {
        case .alert(let alert):
            t.note += "; the server refused the client's hello (\(alert))"
            return
        case .hello(let h):
            hello = h
        }
        let target = ConnectionTarget(scheme: "https", host: t.host, port: t.port)
        guard case .proceed(let req) = env.requirements(for: target) else { return }
        let violations = env.policy.evaluateNegotiation(
            version: hello.version, cipherSuiteCode: hello.cipherSuite, against: req)
        let wireVersion = hello.selectedVersion ?? hello.legacyVersion
        let version = hello.version.map(\.plistName) ?? "version 0x\(String(wireVersion, radix: 16))"
        let suite = CipherSuite.lookup(code: hello.cipherSuite)?.ianaName
            ?? "suite 0x\(String(hello.cipherSuite, radix: 16))"
        let url = Interception.httpsURL(host: t.host, port: t.port)
        if violations.isEmpty {
            t.outcome = .allowed
            t.note += "; server chose \(version), \(suite), certificate not judged"
            traceDecision(url: url, decision: req.decidedBy, violations: [], action: "tunnelled: ServerHello allowed")
        } else {
            t.outcome = .violation
            t.codes = violations.map(ExchangeSummary.shortCode)
            let why = violations.map(\.explanation).joined(separator: "; ")
            t.note += "; server chose \(version), \(suite): \(why)"
            notice("\(t.host):\(t.port): the tunnelled server chose \(version), \(suite), which the app's ATS policy "
                + "refuses (\(t.codes.joined(separator: ", "))); the device's own check fails the app's request: "
                + why)
            traceDecision(
                url: url, decision: req.decidedBy, violations: violations,
                action: "tunnelled, not blocked: the device judges the server itself")
        }
    }
}
