import ATSPolicy
import ProxyTrace

// Deadlines on what a session waits for, after the first request head (which `ProxySession` times itself):
//
// - the TLS ClientHello after a CONNECT was answered 200 (`--client-timeout`);
// - the client's TLS handshake, once the proxy starts answering it (`--client-timeout`);
// - each request head after the first, from its first byte, and each request body, as an inactivity limit (no body
//   byte for `--client-timeout`): 408 while no response has started, else the connection closes;
// - the upstream's answer, from the request's end to its first response byte (`--response-timeout`): 504 with the
//   app's -1001 in the X-ATS-* style of the proxy's other local answers.
//
// The relay says what it waits for (`ExchangeRelay.wait`); after every relay step the session compares it with what
// it last saw and starts a timer when it changed. A timer that fires checks that the same wait is still on (else it
// is stale). A body's inactivity timer is not restarted per read: when it fires early it is started again for what
// is left since the last body byte. The clock and the timers stay the adapter's (`startTimer`, `timerFired`).

extension ProxySession {
    /// Starts the deadline for the TLS ClientHello the client owes after a CONNECT was answered 200.
    func startClientHelloDeadline() {
        commands.append(.startTimer(.clientHello, after: env.timeouts.client))
    }

    /// Starts the deadline for the client's TLS handshake (the proxy has begun answering it).
    func startClientHandshakeDeadline() {
        commands.append(.startTimer(.clientHandshake, after: env.timeouts.client))
    }

    /// After a relay step: says what an unsolicited upstream did, and starts a timer when the relay's wait changed.
    func relayStepped(unsolicited: UpstreamTarget?) {
        if let unsolicited { upstreamSentUnasked(unsolicited) }
        guard !isDone, let relay else { return }
        let wait = relay.wait
        guard wait != watchedWait else { return }
        watchedWait = wait
        switch wait {
        case .nothing: break
        case .requestHead: commands.append(.startTimer(.requestHead, after: env.timeouts.client))
        case .requestBody: commands.append(.startTimer(.requestBody, after: env.timeouts.client))
        case .response: commands.append(.startTimer(.response, after: env.timeouts.response))
        }
    }

    /// A timer of the deadlines above fired (the first request head's is handled by `ProxySession`).
    func deadlinePassed(_ timer: ProxyTimer) {
        switch timer {
        case .clientHello:
            guard case .sniffing(let host, let port, let buffer) = phase else { return }
            let got = buffer.isEmpty ? "nothing" : "\(buffer.count) bytes of it"
            notice("\(host):\(port): no TLS ClientHello from the client within \(env.timeouts.client) of the CONNECT "
                + "(got \(got)); closing (--client-timeout)")
            closeAll()
        case .clientHandshake:
            guard let i = interception, i.stage == .clientHandshake else { return }
            i.stage = .failed
            notice("\(i.host):\(i.port): the client's TLS handshake did not finish within \(env.timeouts.client); "
                + "closing (--client-timeout)")
            closeAll()
        case .requestHead, .requestBody, .response:
            relayDeadlinePassed(timer)
        case .upstreamHandshake:
            upstreamHandshakeDeadlinePassed()
        }
    }

    private func relayDeadlinePassed(_ timer: ProxyTimer) {
        guard !isDone, let relay else { return }
        let wait = relay.wait
        let limit: Duration
        let what: String
        switch (timer, wait) {
        case (.requestHead, .requestHead):
            limit = env.timeouts.client
            what = "a request head was not complete within \(limit) of its first byte; answered 408"
        case (.requestBody, .requestBody):
            limit = env.timeouts.client
            // Inactivity: the timer ran from the body's start or an earlier byte; what is left since the last one
            // is waited for again (one timer per limit, not one per read).
            let left = limit - .milliseconds(Int64(max(0, (now() - relay.lastRequestProgress) * 1000)))
            if left > .milliseconds(10) {
                commands.append(.startTimer(.requestBody, after: left))
                return
            }
            what = "no byte of a request body for \(limit); answered 408 (or closed, the response having started)"
        case (.response, .response):
            limit = env.timeouts.response
            what = "no response from the upstream within \(limit) of the request; answered 504 (-1001)"
        default:
            return  // stale: what it was started for is over
        }
        let place = interception.map { "\($0.host):\($0.port)" } ?? clientAddress ?? "a client"
        notice("\(place): \(what) (\(timer == .response ? "--response-timeout" : "--client-timeout"))")
        watchedWait = .nothing
        let violation = ATSViolation(
            kind: .timedOut, urlError: .timedOut, sslError: nil,
            explanation: "the server accepted the request but sent no response within \(limit)",
            fix: .noExceptionCanHelp(reason: "the server does not answer; this is not an ATS failure"))
        let decision = interception?.decision
            ?? PolicyDecision(keyPath: [], reason: "the upstream did not answer; no ATS rule is involved")
        let answer = ATSAnswer(url: "", decision: decision, violations: [violation])
        let isTLS = if case .intercepting = phase { true } else { false }
        apply(relay.deadlinePassed(wait, limit: limit, timeoutAnswer: answer), tls: isTLS)
    }

    /// The upstream sent bytes with no request outstanding; the relay closed its connection. Inside an intercepted
    /// tunnel there is no other upstream to go to: the client's connection ends as after any upstream close, and the
    /// client reconnects for its next request.
    private func upstreamSentUnasked(_ upstream: UpstreamTarget) {
        let name = interception.map { "\($0.host):\($0.port)" } ?? "\(upstream.host):\(upstream.port)"
        notice("\(name): the upstream sent bytes with no request outstanding (a response nobody asked for); "
            + "closed its connection")
        guard case .intercepting = phase, let i = interception, let relay else { return }
        i.upstream = nil
        i.upstreamFinished = true
        // A request the client pipelined behind went to that connection: it gets a 502.
        apply(relay.upstreamEOF(), tls: true)
        if !isDone { closeAll(tlsClose: true) }
    }
}
