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
//
// An h2 client's requests run side by side, each with its own deadlines (StreamDeadlines): the relay says when
// the earliest falls (`nextStreamDeadline`), and one timer (`.streamDeadlines`) is started whenever that is
// earlier than the one running. When it fires the relay ends what is due; the next is timed after that step.
//
// When an upstream's (or a lane's) write buffer is full the adapter stops reading the whole client connection and
// says so (`ProxyEvent.clientReadingHeld`). The client's bytes then wait for the proxy, not the other way round: a
// body's inactivity timer that fires meanwhile is started again for the full limit, the relay suspends its streams'
// body and header-block deadlines, and on release every body clock restarts then (response deadlines run on).

/// A layer that relays HTTP exchanges (plain forwarding, interception): its relay, and what the deadlines last saw
/// it wait for.
protocol RelayingLayer: AnyObject {
    var exchangeRelay: (any ExchangeRelay)? { get }
    var watchedWait: RelayWait { get set }
}

extension SessionContext {
    /// Starts the deadline for the TLS ClientHello the client owes after a CONNECT was answered 200.
    func startClientHelloDeadline() {
        commands.append(.startTimer(.clientHello, after: env.timeouts.client))
    }

    /// Starts the deadline for the client's TLS handshake (the proxy has begun answering it).
    func startClientHandshakeDeadline() {
        commands.append(.startTimer(.clientHandshake, after: env.timeouts.client))
    }

    /// After a relay step: says what an unsolicited upstream did, and starts a timer when the relay's wait changed.
    func relayStepped(_ layer: some RelayingLayer, unsolicited: UpstreamTarget?) {
        if let unsolicited { upstreamSentUnasked(unsolicited) }
        guard isRelaying, let relay = layer.exchangeRelay else { return }
        if let due = relay.nextStreamDeadline, due < streamDeadlineTimer ?? .infinity {
            streamDeadlineTimer = due
            commands.append(.startTimer(.streamDeadlines, after: .milliseconds(Int64(max(0, (due - now()) * 1000)) + 1)))
        }
        let wait = relay.wait
        guard wait != layer.watchedWait else { return }
        layer.watchedWait = wait
        switch wait {
        case .nothing: break
        case .requestHead: commands.append(.startTimer(.requestHead, after: env.timeouts.client))
        case .requestBody: commands.append(.startTimer(.requestBody, after: env.timeouts.client))
        case .response: commands.append(.startTimer(.response, after: env.timeouts.response))
        }
    }

    /// The adapter stopped or resumed reading the client for a full upstream write buffer: the relay suspends or
    /// restarts its client deadlines, and on release the next stream deadline is timed again.
    func clientReadingHeldChanged(_ held: Bool) {
        clientReadingHeld = held
        let layer: any RelayingLayer
        switch phase {
        case .plain(let p): layer = p
        case .intercepting(let i): layer = i
        case .front, .sniffing, .tunnel, .upgraded, .done: return
        }
        guard let relay = layer.exchangeRelay else { return }
        relay.clientReadingHeld(held, at: now())
        if !held { relayStepped(layer, unsolicited: nil) }
    }

    /// A timer of the deadlines above fired (the first request head's is handled by `ProxySession`).
    func deadlinePassed(_ timer: ProxyTimer) {
        switch timer {
        case .clientHello:
            clientHelloDeadlinePassed()
        case .clientHandshake:
            interception?.clientHandshakeDeadlinePassed(self)
        case .requestHead, .requestBody, .response:
            relayDeadlinePassed(timer)
        case .upstreamHandshake, .hold:
            break  // routed by ProxySession
        case .streamDeadlines:
            streamDeadlineTimer = nil
            streamDeadlinesPassed()
        }
    }

    /// The earliest deadline of an h2 client's streams came: the relay ends what is due (a stalled request reset
    /// with its upstream request, a 504 for a silent upstream); stepping it times the next one.
    private func streamDeadlinesPassed() {
        guard let i = interception, let relay = i.relay else { return }
        let output = relay.streamDeadlinesPassed(timeoutAnswer: timeoutAnswer(limit: env.timeouts.response))
        let ended = output.exchanges.compactMap(\.interruption).filter { $0.contains("--") }
        if let first = ended.first {
            notice("\(i.host):\(i.port): \(ended.count) HTTP/2 request(s) passed a deadline: \(first)",
                kind: "h2-stream-deadline")
        }
        i.apply(self, output)
    }

    /// The answer to a request whose upstream did not answer within `limit`: a 504 with the app's -1001, in the
    /// X-ATS-* style of the proxy's other local answers.
    private func timeoutAnswer(limit: Duration) -> ATSAnswer {
        let violation = ATSViolation(
            kind: .timedOut, urlError: .timedOut, sslError: nil,
            explanation: "the server accepted the request but sent no response within \(limit)",
            fix: .noExceptionCanHelp(reason: "the server does not answer; this is not an ATS failure"))
        let decision = interception?.decision
            ?? PolicyDecision(keyPath: [], reason: "the upstream did not answer; no ATS rule is involved")
        return ATSAnswer(url: "", decision: decision, violations: [violation])
    }

    /// Whether the connection is in a layer that relays HTTP exchanges.
    var isRelaying: Bool {
        switch phase {
        case .plain, .intercepting: true
        case .front, .sniffing, .tunnel, .upgraded, .done: false
        }
    }

    private func relayDeadlinePassed(_ timer: ProxyTimer) {
        let relay: any ExchangeRelay
        let layer: any RelayingLayer
        switch phase {
        case .plain(let p):
            relay = p.relay
            layer = p
        case .intercepting(let i):
            guard let r = i.relay else { return }
            relay = r
            layer = i
        case .front, .sniffing, .tunnel, .upgraded, .done:
            return
        }
        let wait = relay.wait
        let limit: Duration
        let what: String
        switch (timer, wait) {
        case (.requestHead, .requestHead):
            limit = env.timeouts.client
            what = "a request head was not complete within \(limit) of its first byte; answered 408"
        case (.requestBody, .requestBody):
            limit = env.timeouts.client
            if clientReadingHeld {
                // The body waits unread for the proxy: its clock restarts when the adapter reads the client again.
                commands.append(.startTimer(.requestBody, after: limit))
                return
            }
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
        layer.watchedWait = .nothing
        let output = relay.deadlinePassed(wait, limit: limit, timeoutAnswer: timeoutAnswer(limit: limit))
        switch phase {
        case .plain(let p): p.apply(self, output)
        case .intercepting(let i): i.apply(self, output)
        case .front, .sniffing, .tunnel, .upgraded, .done: break
        }
    }

    /// The upstream sent bytes with no request outstanding; the relay closed its connection. Inside an intercepted
    /// tunnel there is no other upstream to go to: the client's connection ends as after any upstream close, and the
    /// client reconnects for its next request.
    private func upstreamSentUnasked(_ upstream: UpstreamTarget) {
        let name = interception.map { "\($0.host):\($0.port)" } ?? "\(upstream.host):\(upstream.port)"
        notice("\(name): the upstream sent bytes with no request outstanding (a response nobody asked for); "
            + "closed its connection")
        interception?.upstreamSentUnasked(self)
    }
}
