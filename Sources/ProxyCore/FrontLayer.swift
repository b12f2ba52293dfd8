import HTTP1Core
import ProxyTrace

// Theory of operation: the front is where every connection starts, reading the client's first proxy request.
//
// - A SOCKS greeting or a TLS record where a request should start (ForeignGreeting): answered with that protocol's
//   refusal, the user told what to set instead, closed.
// - An origin-form GET of the set-up site's pages (`http://PROXY:PORT/`, opened directly): the site answers
//   (ProxySession+Onboarding).
// - The head must be complete within `--client-timeout` of its first byte (408 otherwise, from the router).
// - `--auth`: a request without the credentials is answered 407 and the connection closed, except an origin-form GET
//   of the set-up site's pages (public: the certificate and the steps, without the policy's path).
// - `CONNECT host:port` with no body: one of Apple's own hosts (AppleHosts), a --passthrough host, one the app
//   pins (NSPinnedDomains: interception would break the pin), or one this client keeps refusing the proxy's
//   certificate for (auto-passthrough: it pins in code), becomes a raw tunnel (TunnelLayer), answered 200 once its
//   upstream is connected; any other is answered 200 at once and its first bytes are sniffed
//   (ProxySession+Sniffing). A CONNECT to the set-up site's name is intercepted with no upstream at all.
// - `GET http://host/…` (absolute form): plain-HTTP forwarding (PlainLayer), which replays the bytes read so far.
// - Anything else (origin form, https:// absolute form, malformed) is refused with a 400 that is logged as an
//   exchange, as the relays log the requests they refuse later on a connection.

/// The first proxy request of a connection, while it is read.
final class FrontLayer {
    /// Raw client bytes so far, replayed into the relay when the first request is plain HTTP.
    var bytes: [UInt8] = []
    /// When the first request's first byte arrived.
    var started: Double?
    var parser = HTTP1Parser(role: .requests)
}

extension ProxySession {
    func frontBytes(_ f: FrontLayer, _ bytes: [UInt8]) {
        // Not HTTP at all (a SOCKS greeting, a TLS ClientHello): the client would wait for an answer in its own
        // protocol until a timeout; answer as that protocol refuses, say what to set instead, and close at once.
        if f.bytes.isEmpty, let first = bytes.first, let foreign = ForeignGreeting(firstByte: first) {
            notice(foreign.notice(client: clientAddress), kind: "foreign greeting \(foreign)")
            if !foreign.refusal.isEmpty { commands.append(.sendToClient(foreign.refusal)) }
            closeAll()
            return
        }
        if f.bytes.isEmpty {
            commands.append(.startTimer(.requestHead, after: env.timeouts.client))
            f.started = now()
        }
        f.bytes += bytes
        f.parser.receive(bytes)
        pumpFront(f)
    }

    private func pumpFront(_ f: FrontLayer) {
        let event: HTTP1Event
        do { event = try f.parser.nextEvent() } catch {
            refuseFront(status: error.suggestedStatus, body: "ATSProxy: \(error)\n")
            return
        }
        guard case .requestHead(let head) = event else { return }
        if let reason = authFailureReason(head) {
            // The set-up site's pages opened directly need no credentials: a phone following the QR code has none
            // yet, and the pages hold the public certificate and the steps (the policy's path is left out).
            if head.target.hasPrefix("/"), answerOnboardingDirectly(head, path: head.target, f, credentialed: false) {
                return
            }
            logAuthFailure(ProxyAuthFailure(
                reason: reason, method: head.method, target: Redaction.url(head.target), client: clientAddress))
            answerFront(status: 407, body: Self.authRequiredBody, extra: [Self.authChallenge])
            return
        }
        let target: HTTPRequestTarget
        do { target = try HTTPRequestTarget(parsing: head.target, method: head.method) } catch {
            refuseFront(status: 400, body: "ATSProxy: \(error)\n", head: head)
            return
        }
        switch target {
        case .authority(let host, let port):
            // The parser takes any port up to 65535, but nothing listens on 0: answered here rather than with a
            // 200 and a tunnel that can only fail.
            guard port != 0 else {
                let body = "ATSProxy: CONNECT \(head.target): port 0 is not a valid port (1 to 65535)\n"
                refuseFront(status: 400, body: body, head: head)
                return
            }
            // CONNECT carries no body: what follows the head belongs to the tunnel.
            let afterHead: HTTP1Event
            do { afterHead = try f.parser.nextEvent() } catch {
                refuseFront(status: error.suggestedStatus, body: "ATSProxy: \(error)\n", head: head)
                return
            }
            guard case .end = afterHead else {
                refuseFront(status: 400, body: "ATSProxy: CONNECT must not have a body\n", head: head)
                return
            }
            let leftover: [UInt8]
            do { leftover = try f.parser.switchProtocols() } catch {
                refuseFront(status: 400, body: "ATSProxy: \(error)\n", head: head)
                return
            }
            f.bytes = []
            connect(host: host.lowercased(), port: port, leftover: leftover)
        case .absolute(let scheme, _, _, _) where scheme == "http":
            let replay = f.bytes
            f.bytes = []
            startPlain(replaying: replay)
        case .absolute:
            refuseFront(
                status: 400,
                body: "ATSProxy: send https:// requests with CONNECT (configure ATSProxy as an HTTPS proxy)\n",
                head: head)
        case .origin(let path) where answerOnboardingDirectly(head, path: path, f):
            return
        case .origin, .asterisk:
            refuseFront(
                status: 400,
                body: "ATSProxy is a proxy: configure it as the HTTP and HTTPS proxy of the device or client.\n",
                head: head)
        }
    }

    /// After a CONNECT: a raw tunnel for hosts that must not be intercepted, else the 200 and sniffing.
    private func connect(host: String, port: Int, leftover: [UInt8]) {
        let established = Array("HTTP/1.1 200 Connection established\r\n\r\n".utf8)
        if tunnelWithoutInterception(host: host, port: port, pending: leftover, established: established) { return }
        commands.append(.sendToClient(established))
        startClientHelloDeadline()
        sniff(host: host, port: port, buffer: leftover)
    }

    /// Starts a raw tunnel when `host` must not be intercepted (one of Apple's own hosts, a --passthrough host, one
    /// the app pins, one this client keeps refusing the proxy's certificate for) and says true; false when it may
    /// be intercepted. The host is the CONNECT's, or a transparent connection's SNI (ProxySession+Transparent).
    func tunnelWithoutInterception(host: String, port: Int, pending: [UInt8], established: [UInt8]?) -> Bool {
        if let apple = env.appleHosts?.entry(for: host) {
            let record = AppleHostsTunnel.record(host: host, port: port, entry: apple, started: now())
            notice(AppleHostsTunnel.notice(host: host, port: port, entry: apple), kind: "Apple host tunnelled")
            startTunnel(record, pending: pending, established: established)
        } else if let rule = env.passthroughRule(for: host) {
            notice("\(host):\(port): tunnelled without interception (--passthrough \(rule))")
            let record = Tunnel(
                host: host, port: port, note: "tunnel, not intercepted: --passthrough \(rule)", started: now())
            startTunnel(record, pending: pending, established: established)
        } else if env.mode != .off, let pins = env.policy.pinSet(for: host) {
            notice("\(host):\(port): tunnelled without interception: the app pins it (NSPinnedDomains › \(pins.domain)); "
                + "intercepting would break the pin")
            let why = "the app pins it (NSPinnedDomains › \(pins.domain))"
            let record = Tunnel(host: host, port: port, note: "tunnel, not intercepted: \(why)", started: now())
            startTunnel(record, pending: pending, established: established)
            checkTunnelPins(pins)
        } else if let why = autoPassthroughNote(host: host) {
            let record = Tunnel(host: host, port: port, note: "tunnel, not intercepted: \(why)", started: now())
            startTunnel(record, pending: pending, established: established)
        } else {
            return false
        }
        return true
    }

    func answerFront(status: Int, body: String, extra: [(String, String)] = []) {
        commands.append(.sendToClient(HTTP1LocalAnswer.closing(status: status, text: body, extraHeaders: extra)))
        closeAll()
    }

    /// Refuses the connection's first request (malformed, not a proxy request, or too slow to arrive) and logs it
    /// as an exchange, as the relays log the requests they refuse later on a connection: a client that gets a 400
    /// from the proxy then has a line saying so. `head` names the request when it was parsed; else `-`.
    func refuseFront(status: Int, body: String, head: HTTPRequestHead? = nil) {
        guard case .front(let f) = phase else { return }
        let answer = HTTP1LocalAnswer.closing(status: status, text: body)
        recordExchange(ExchangeSummary(
            method: head?.method ?? "-", url: head.map { Redaction.url($0.target) } ?? "-", status: status, httpVersion: "HTTP/1.1",
            outcome: .notEvaluated, errors: [], requestBytes: f.bytes.count, responseBytes: body.utf8.count,
            durationMilliseconds: f.started.map { max(0, (now() - $0) * 1000) } ?? 0))
        commands.append(.sendToClient(answer))
        closeAll()
    }
}
