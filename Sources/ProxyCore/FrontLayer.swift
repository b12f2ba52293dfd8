import HTTP1Core
import ProxyTrace

// Theory of operation: the front is where every connection starts, reading the client's first proxy request.
//
// - A SOCKS greeting or a TLS record where a request should start (ForeignGreeting): answered with that protocol's
//   refusal, the user told what to set instead, closed.
// - An origin-form GET of the set-up site's pages (`http://PROXY:PORT/`, opened directly): the site answers
//   (SessionContext+LocalSite).
// - The head must be complete within `--client-timeout` of its first byte (408 otherwise, from the router).
// - `--auth`: a request without the credentials is answered 407 and the connection closed, except an origin-form GET
//   of the set-up site's pages (public: the certificate and the steps, without the policy's path).
// - `CONNECT host:port` with no body: one of Apple's own hosts (AppleHosts), a --passthrough host, one the app
//   pins (NSPinnedDomains: interception would break the pin), or one this client keeps refusing the proxy's
//   certificate for (auto-passthrough: it pins in code), becomes a raw tunnel (TunnelLayer), answered 200 once its
//   upstream is connected; any other is answered 200 at once and its first bytes are sniffed
//   (SessionContext+Sniffing). A CONNECT to the set-up site's name is intercepted with no upstream at all.
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

extension FrontLayer {
    /// The client's bytes, until its first request is read.
    func clientBytes(_ ctx: SessionContext, _ bytes: [UInt8]) {
        // Not HTTP at all (a SOCKS greeting, a TLS ClientHello): the client would wait for an answer in its own
        // protocol until a timeout; answer as that protocol refuses, say what to set instead, and close at once.
        if self.bytes.isEmpty, let first = bytes.first, let foreign = ForeignGreeting(firstByte: first) {
            ctx.notice(foreign.notice(client: ctx.clientAddress), kind: "foreign greeting \(foreign)")
            if !foreign.refusal.isEmpty { ctx.commands.append(.sendToClient(foreign.refusal)) }
            ctx.closeAll()
            return
        }
        if self.bytes.isEmpty {
            ctx.commands.append(.startTimer(.requestHead, after: ctx.env.timeouts.client))
            started = ctx.now()
        }
        self.bytes += bytes
        parser.receive(bytes)
        pump(ctx)
    }

    private func pump(_ ctx: SessionContext) {
        let event: HTTP1Event
        do { event = try parser.nextEvent() } catch {
            refuse(ctx, status: error.suggestedStatus, body: "ATSProxy: \(error)\n")
            return
        }
        guard case .requestHead(let head) = event else { return }
        if let reason = ctx.authFailureReason(head) {
            // The set-up site's pages opened directly need no credentials: a phone following the QR code has none
            // yet, and the pages hold the public certificate and the steps (the policy's path is left out).
            if head.target.hasPrefix("/"), ctx.answerLocalSiteDirectly(head, path: head.target, self, credentialed: false) {
                return
            }
            ctx.logAuthFailure(ProxyAuthFailure(
                reason: reason, method: head.method, target: Redaction.url(head.target), client: ctx.clientAddress))
            ctx.answerAndClose(status: 407, body: SessionContext.authRequiredBody, extra: [SessionContext.authChallenge])
            return
        }
        let target: HTTPRequestTarget
        do { target = try HTTPRequestTarget(parsing: head.target, method: head.method) } catch {
            refuse(ctx, status: 400, body: "ATSProxy: \(error)\n", head: head)
            return
        }
        switch target {
        case .authority(let host, let port):
            // The parser takes any port up to 65535, but nothing listens on 0: answered here rather than with a
            // 200 and a tunnel that can only fail.
            guard port != 0 else {
                let body = "ATSProxy: CONNECT \(head.target): port 0 is not a valid port (1 to 65535)\n"
                refuse(ctx, status: 400, body: body, head: head)
                return
            }
            // CONNECT carries no body: what follows the head belongs to the tunnel.
            let afterHead: HTTP1Event
            do { afterHead = try parser.nextEvent() } catch {
                refuse(ctx, status: error.suggestedStatus, body: "ATSProxy: \(error)\n", head: head)
                return
            }
            guard case .end = afterHead else {
                refuse(ctx, status: 400, body: "ATSProxy: CONNECT must not have a body\n", head: head)
                return
            }
            let leftover: [UInt8]
            do { leftover = try parser.switchProtocols() } catch {
                refuse(ctx, status: 400, body: "ATSProxy: \(error)\n", head: head)
                return
            }
            self.bytes = []
            connect(ctx, host: host.lowercased(), port: port, leftover: leftover)
        case .absolute(let scheme, _, _, _) where scheme == "http":
            let replay = self.bytes
            self.bytes = []
            ctx.startPlain(replaying: replay)
        case .absolute:
            refuse(ctx, 
                status: 400,
                body: "ATSProxy: send https:// requests with CONNECT (configure ATSProxy as an HTTPS proxy)\n",
                head: head)
        case .origin(let path) where ctx.answerLocalSiteDirectly(head, path: path, self):
            return
        case .origin, .asterisk:
            refuse(ctx, 
                status: 400,
                body: "ATSProxy is a proxy: configure it as the HTTP and HTTPS proxy of the device or client.\n",
                head: head)
        }
    }

    /// After a CONNECT: a raw tunnel for hosts that must not be intercepted, else the 200 and sniffing.
    private func connect(_ ctx: SessionContext, host: String, port: Int, leftover: [UInt8]) {
        let established = Array("HTTP/1.1 200 Connection established\r\n\r\n".utf8)
        // A rule that fails the connection on purpose acts before anything could contact the upstream.
        if ctx.env.rules != nil, ctx.injectAtConnect(host: host, port: port, leftover: leftover, established: established) {
            return
        }
        if ctx.tunnelWithoutInterception(host: host, port: port, pending: leftover, established: established) { return }
        ctx.commands.append(.sendToClient(established))
        ctx.startClientHelloDeadline()
        ctx.sniff(host: host, port: port, buffer: leftover)
    }

    /// Refuses the connection's first request (malformed, not a proxy request, or too slow to arrive) and logs it
    /// as an exchange, as the relays log the requests they refuse later on a connection: a client that gets a 400
    /// from the proxy then has a line saying so. `head` names the request when it was parsed; else `-`.
    func refuse(_ ctx: SessionContext, status: Int, body: String, head: HTTPRequestHead? = nil) {
        guard case .front(let f) = ctx.phase, f === self else { return }
        let answer = HTTP1LocalAnswer.closing(status: status, text: body)
        ctx.recordExchange(ExchangeSummary(
            method: head?.method ?? "-", url: head.map { Redaction.url($0.target) } ?? "-", status: status, httpVersion: "HTTP/1.1",
            outcome: .notEvaluated, errors: [], requestBytes: self.bytes.count, responseBytes: body.utf8.count,
            durationMilliseconds: started.map { max(0, (ctx.now() - $0) * 1000) } ?? 0))
        ctx.commands.append(.sendToClient(answer))
        ctx.closeAll()
    }
}
