import ATSPolicy
import HTTP1Core
import ProxyTrace
import TLSCore

// Theory of operation:
//
// A session is one client connection and the upstream it leads to. It starts in `front`, reading the client's first
// proxy request:
//   - `CONNECT host:port`: answered 200, then the first bytes decide. A TLS ClientHello starts interception
//     (ProxySession+Interception); anything else, a `--passthrough` host, or a host the app pins with
//     NSPinnedDomains (interception would break the pin) becomes a raw tunnel (`startTunnel`).
//   - `GET http://host/…` (absolute form): plain-HTTP forwarding through an HTTP1Relay, each request evaluated on
//     its own (a redirect is a new request and is evaluated again); -1022 blocks are answered 403.
// The session never touches a socket: events in, commands out (`handle`).

/// One proxied client connection, as a sans-io state machine. Confined to one event-loop thread.
public final class ProxySession {
    let env: ProxyEnvironment
    let id: UInt64
    let now: () -> Double
    /// The commands of the event being handled. Appended to a few times per event from every part of the session, on
    /// its one thread and never while another access is open: the runtime's per-access exclusivity check is switched
    /// off for it (see HTTP1Relay).
    @exclusivity(unchecked) var commands: [ProxyCommand] = []

    enum Phase {
        case front
        /// A raw tunnel waits for its upstream; `pending` client bytes go first.
        case tunnelConnecting(pending: [UInt8])
        /// After CONNECT: collecting the first client bytes to see whether they are a TLS ClientHello.
        case sniffing(host: String, port: Int, buffer: [UInt8])
        case plain
        case intercepting
        case done
    }

    var phase: Phase = .front
    var isDone: Bool { if case .done = phase { true } else { false } }
    var isFront: Bool { if case .front = phase { true } else { false } }
    /// Raw client bytes of the front phase, replayed into the relay when the first request is plain HTTP.
    private var frontBytes: [UInt8] = []
    /// When the first request's first byte arrived.
    private var frontStarted: Double?
    private var front = HTTP1Parser(role: .requests)
    var relay: (any ExchangeRelay)?
    /// The relay of plain-HTTP forwarding (the only one that reconnects upstreams).
    var plainRelay: HTTP1Relay? { relay as? HTTP1Relay }
    var interception: Interception?
    var upstreamOpen = false
    var clientClosed = false
    /// The proxy is shutting down: a connection closed from now on was cut off by the shutdown's deadline.
    var stopping = false
    /// The exchange that switched protocols, while its connection is relayed raw.
    var upgraded: UpgradedConnection?
    /// What the relay waited for after its last step, with a deadline started for it (ProxySession+Deadlines).
    var watchedWait = RelayWait.nothing
    /// The client's address (`192.168.1.20:51234`), for the logs that must say which device it was; set by the
    /// adapter, since the session knows no sockets.
    public var clientAddress: String?

    /// - Parameters:
    ///   - id: a number that names the session in logs and traces.
    ///   - now: Unix time in seconds (injected so tests control durations).
    public init(id: UInt64, environment: ProxyEnvironment, now: @escaping () -> Double) {
        self.id = id
        self.env = environment
        self.now = now
    }

    /// True when no exchange is in flight, so closing now loses nothing (graceful shutdown).
    public var isIdle: Bool {
        switch phase {
        case .front, .done: true
        case .plain: relay?.isIdle ?? true
        case .intercepting: interception?.stage == .relaying && (relay?.isIdle ?? true) && interception?.raw == false
        case .tunnelConnecting, .sniffing: false
        }
    }

    /// Feeds one event; returns what to do, in order.
    public func handle(_ event: ProxyEvent) -> [ProxyCommand] {
        dispatch(event)
        return takeCommands()
    }

    /// Bytes read from `peer`, straight from the event loop's read buffer (valid only during the call): the same as
    /// `handle(.clientBytes(…))`, `.upstreamBytes` or `.laneBytes`, but an intercepted connection that is relaying
    /// feeds them to its TLS engine without first copying them into an array, once per socket read.
    public func handleReceived(_ bytes: UnsafeRawBufferPointer, from peer: ProxyPeer) -> [ProxyCommand] {
        if case .intercepting = phase, let i = interception, i.stage == .relaying {
            switch peer {
            case .client:
                readClient(i, incoming: bytes)
                return takeCommands()
            case .upstream where i.upstream != nil:
                readUpstream(i, incoming: bytes)
                return takeCommands()
            case .upstream, .lane:
                break
            }
        }
        switch peer {
        case .client: dispatch(.clientBytes(Array(bytes)))
        case .upstream: dispatch(.upstreamBytes(Array(bytes)))
        case .lane(let lane): dispatch(.laneBytes(lane, Array(bytes)))
        }
        return takeCommands()
    }

    private func takeCommands() -> [ProxyCommand] {
        let out = commands
        commands = []
        return out
    }

    private func dispatch(_ event: ProxyEvent) {
        switch event {
        case .clientBytes(let bytes): clientBytes(bytes)
        case .clientEOF: clientEOF()
        case .clientClosed(let error):
            clientClosed = true
            logRefusalIfClientRefused()
            // Exchanges still in flight are cut off: log them as such (nothing can be sent any more).
            let reason = stopping
                ? "the proxy stopped before the exchange finished"
                : error.map { "the client connection failed: \($0)" } ?? "the client closed the connection"
            if !isDone, let relay { for exchange in relay.clientGone(reason).exchanges { logExchange(exchange) } }
            logUpgradeEnd(fallbackReason: reason)
            closeAllLanes()
            if upstreamOpen { commands.append(.closeUpstream) }
            phase = .done
        case .upstreamConnected: upstreamConnected()
        case .upstreamConnectFailed(let error, let failure): upstreamConnectFailed(error, failure)
        case .upstreamBytes(let bytes): upstreamBytes(bytes)
        case .upstreamEOF: upstreamEOF()
        case .upstreamClosed(let error): upstreamClosed(error)
        case .laneConnected, .laneConnectFailed, .laneBytes, .laneEOF, .laneClosed: handleLaneEvent(event)
        case .peerQuiet(let peer): releaseBuffers(of: peer)
        case .stopping: stopping = true
        case .timerFired(.upstreamHandshake): upstreamHandshakeDeadlinePassed()
        case .timerFired(.requestHead) where isFront:
            refuseFront(
                status: 408, body: "ATSProxy: the request head did not arrive within \(env.timeouts.client)\n")
        case .timerFired(let timer): deadlinePassed(timer)
        case .tunnelClosed(let fromClient, let toClient): tunnelClosed(fromClient: fromClient, toClient: toClient)
        case .tunnelBytes(let fromClient, let bytes): tunnelBytes(fromClient: fromClient, bytes)
        }
    }

    /// Gives back the array a `handle` call returned, once its commands are carried out, so that the next event
    /// appends to its storage instead of allocating a new one (two events per proxied request). Optional: an array
    /// that is not given back is simply freed.
    public func recycle(_ used: consuming [ProxyCommand]) {
        // A nested event (handled while the caller was still running commands) may already have left one.
        guard commands.isEmpty, commands.capacity < used.capacity else { return }
        used.removeAll(keepingCapacity: true)
        commands = used
    }

    // MARK: - Dispatch by phase

    private func clientBytes(_ bytes: [UInt8]) {
        switch phase {
        case .front:
            // A TLS record where a request should start: the client treats the proxy as an https:// proxy. It
            // would wait for a TLS answer until a timeout; say what is wrong and close at once.
            if frontBytes.isEmpty, bytes.first == 0x16 {
                notice("a client opened TLS to the proxy itself: configure it as an http:// proxy "
                    + "(http://HOST:PORT; the proxy intercepts https:// traffic through CONNECT)")
                closeAll()
                return
            }
            if frontBytes.isEmpty {
                commands.append(.startTimer(.requestHead, after: env.timeouts.client))
                frontStarted = now()
            }
            frontBytes += bytes
            front.receive(bytes)
            pumpFront()
        case .tunnelConnecting(var pending):
            phase = .done  // out of `phase`, so the append below is in place
            pending += bytes
            // Held until the upstream answers (up to the connect timeout): past the limit the client waits.
            if pending.count >= Self.tunnelPendingLimit, pending.count - bytes.count < Self.tunnelPendingLimit {
                commands.append(.pauseReading(.client))
            }
            phase = .tunnelConnecting(pending: pending)
        case .sniffing(let host, let port, var buffer):
            // Out of `phase` first, so the bytes are appended in place: a hello trickling in a byte at a time would
            // otherwise copy everything so far on every read.
            phase = .done
            buffer += bytes
            sniff(host: host, port: port, buffer: buffer)
        case .plain:
            if let relay { apply(relay.clientBytes(bytes), tls: false) }
        case .intercepting:
            interceptClientBytes(bytes)
        case .done:
            break
        }
    }

    private func clientEOF() {
        switch phase {
        case .plain:
            if let relay { apply(relay.clientEOF(), tls: false) }
        case .intercepting:
            interceptClientEOF()
        case .front, .sniffing, .tunnelConnecting:
            closeAll()
        case .done:
            break
        }
    }

    private func upstreamConnected() {
        upstreamOpen = true
        switch phase {
        case .tunnelConnecting(let pending):
            if let established = tunnel?.established {
                commands.append(.sendToClient(established))
                tunnel?.established = nil
            }
            if !pending.isEmpty {
                commands.append(.sendToUpstream(pending))
                // The relay counts and shows the session only what it moves; these bytes (the start of a
                // ClientHello, say) went before it.
                tunnel?.clientBytesBefore = pending.count
                tunnelBytes(fromClient: true, pending)
            }
            if pending.count >= Self.tunnelPendingLimit { commands.append(.resumeReading(.client)) }
            commands.append(.startTunnel)
            phase = .done
        case .plain:
            if let relay = plainRelay, let target = pendingPlainTarget {
                pendingPlainTarget = nil
                trace(.tcpConnectionConnected(connectionID: id))
                apply(relay.upstreamConnected(target), tls: false)
            }
        case .intercepting:
            interceptUpstreamConnected()
        default:
            break
        }
    }

    private func upstreamConnectFailed(_ error: String, _ failure: ConnectFailure) {
        upstreamOpen = false
        switch phase {
        case .tunnelConnecting:
            tunnelConnectFailed(error, failure)
        case .plain:
            pendingPlainTarget = nil
            trace(.tcpConnectionConnected(connectionID: id, error: error))
            if let relay = plainRelay { apply(relay.upstreamFailed("cannot connect to the upstream: \(error)"), tls: false) }
        case .intercepting:
            interceptUpstreamFailed(error, failure)
        default:
            closeAll()
        }
    }

    private func upstreamBytes(_ bytes: [UInt8]) {
        switch phase {
        case .plain:
            if let relay { apply(relay.upstreamBytes(bytes), tls: false) }
        case .intercepting:
            interceptUpstreamBytes(bytes)
        default:
            break
        }
    }

    private func upstreamEOF() {
        switch phase {
        case .plain:
            if let relay { apply(relay.upstreamEOF(), tls: false) }
            upstreamOpen = false
            commands.append(.closeUpstream)
        case .intercepting:
            interceptUpstreamEOF()
        default:
            break
        }
    }

    private func upstreamClosed(_ error: String?) {
        let wasOpen = upstreamOpen
        upstreamOpen = false
        switch phase {
        case .plain:
            if wasOpen, let relay { apply(relay.upstreamEOF(), tls: false) }
        case .intercepting:
            interceptUpstreamClosed(error)
        default:
            break
        }
    }

    // MARK: - Front: the first proxy request

    private func pumpFront() {
        let event: HTTP1Event
        do { event = try front.nextEvent() } catch {
            refuseFront(status: error.suggestedStatus, body: "ATSProxy: \(error)\n")
            return
        }
        guard case .requestHead(let head) = event else { return }
        if let reason = authFailureReason(head) {
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
            do { afterHead = try front.nextEvent() } catch {
                refuseFront(status: error.suggestedStatus, body: "ATSProxy: \(error)\n", head: head)
                return
            }
            guard case .end = afterHead else {
                refuseFront(status: 400, body: "ATSProxy: CONNECT must not have a body\n", head: head)
                return
            }
            let leftover: [UInt8]
            do { leftover = try front.switchProtocols() } catch {
                refuseFront(status: 400, body: "ATSProxy: \(error)\n", head: head)
                return
            }
            frontBytes = []
            connect(host: host.lowercased(), port: port, leftover: leftover)
        case .absolute(let scheme, _, _, _) where scheme == "http":
            startPlain()
        case .absolute:
            refuseFront(
                status: 400,
                body: "ATSProxy: send https:// requests with CONNECT (configure ATSProxy as an HTTPS proxy)\n",
                head: head)
        case .origin, .asterisk:
            refuseFront(
                status: 400,
                body: "ATSProxy is a proxy: configure it as the HTTP and HTTPS proxy of the device or client.\n",
                head: head)
        }
    }

    private func connect(host: String, port: Int, leftover: [UInt8]) {
        let established = Array("HTTP/1.1 200 Connection established\r\n\r\n".utf8)
        if let rule = env.passthroughRule(for: host) {
            notice("\(host):\(port): tunnelled without interception (--passthrough \(rule))")
            tunnel = Tunnel(
                host: host, port: port, note: "tunnel, not intercepted: --passthrough \(rule)", started: now())
            startRawTunnel(host: host, port: port, leftover: leftover, established: established)
        } else if env.mode != .off, let pins = env.policy.pinSet(for: host) {
            notice("\(host):\(port): tunnelled without interception: the app pins it (NSPinnedDomains › \(pins.domain)); "
                + "intercepting would break the pin")
            let why = "the app pins it (NSPinnedDomains › \(pins.domain))"
            tunnel = Tunnel(host: host, port: port, note: "tunnel, not intercepted: \(why)", started: now())
            startRawTunnel(host: host, port: port, leftover: leftover, established: established)
        } else {
            commands.append(.sendToClient(established))
            startClientHelloDeadline()
            sniff(host: host, port: port, buffer: leftover)
        }
    }

    private func startRawTunnel(host: String, port: Int, leftover: [UInt8], established: [UInt8]) {
        // The 200 waits for the upstream: a server that cannot be reached is answered 502, saying why.
        tunnel?.established = established
        let (address, upstreamPort) = env.upstreamAddress(host: host, port: port)
        phase = .tunnelConnecting(pending: leftover)
        commands.append(.connectUpstream(address: address, port: upstreamPort))
    }

    private func sniff(host: String, port: Int, buffer: [UInt8]) {
        guard !buffer.isEmpty, let isTLS = ClientHelloParser.looksLikeTLS(buffer) else {
            phase = .sniffing(host: host, port: port, buffer: buffer)
            return
        }
        guard isTLS else {
            notice("\(host):\(port): the client does not speak TLS inside CONNECT; relaying the bytes as a plain tunnel")
            tunnel = Tunnel(
                host: host, port: port, note: "tunnel: the client does not speak TLS", started: now(),
                clientSpeaksTLS: false)
            let (address, upstreamPort) = env.upstreamAddress(host: host, port: port)
            phase = .tunnelConnecting(pending: buffer)
            commands.append(.connectUpstream(address: address, port: upstreamPort))
            return
        }
        do {
            guard let hello = try ClientHelloParser.parse(buffer) else {
                phase = .sniffing(host: host, port: port, buffer: buffer)
                return
            }
            startInterception(connectHost: host, port: port, hello: hello, helloBytes: buffer)
        } catch {
            notice("\(host):\(port): unreadable TLS ClientHello from the client (\(error)); closing",
                kind: "unreadable ClientHello")
            closeAll()
        }
    }

    func answerFront(status: Int, body: String, extra: [(String, String)] = []) {
        commands.append(.sendToClient(HTTP1LocalAnswer.closing(status: status, text: body, extraHeaders: extra)))
        closeAll()
    }

    /// Refuses the connection's first request (malformed, not a proxy request, or too slow to arrive) and logs it
    /// as an exchange, as the relays log the requests they refuse later on a connection: a client that gets a 400
    /// from the proxy then has a line saying so. `head` names the request when it was parsed; else `-`.
    func refuseFront(status: Int, body: String, head: HTTPRequestHead? = nil) {
        let answer = HTTP1LocalAnswer.closing(status: status, text: body)
        recordExchange(ExchangeSummary(
            method: head?.method ?? "-", url: head.map { Redaction.url($0.target) } ?? "-", status: status, httpVersion: "HTTP/1.1",
            outcome: .notEvaluated, errors: [], requestBytes: frontBytes.count, responseBytes: body.utf8.count,
            durationMilliseconds: frontStarted.map { max(0, (now() - $0) * 1000) } ?? 0))
        commands.append(.sendToClient(answer))
        closeAll()
    }

    // MARK: - Plain HTTP (absolute-form requests)

    private var pendingPlainTarget: UpstreamTarget?
    /// The raw tunnel this session set up, logged when the adapter reports it closed.
    var tunnel: Tunnel?
    /// Client bytes held for a tunnel whose upstream is still connecting, past which the client is no longer read.
    static let tunnelPendingLimit = 64 * 1024
    /// The violation of the last cleartext request answered with a block, for its trace's Did Fail record.
    private var lastPlainBlock: ATSViolation?

    private func startPlain() {
        phase = .plain
        let relay = HTTP1Relay(connectedTo: nil, now: now) { [unowned self] head in self.decidePlain(head) }
        self.relay = relay
        let replay = frontBytes
        frontBytes = []
        apply(relay.clientBytes(replay), tls: false)
    }

    private func decidePlain(_ head: HTTPRequestHead) -> RequestDecision {
        let notAbsolute = RequestDecision.answer(
            head: HTTPResponseHead(status: 400, reason: "Bad Request", headers: [("Content-Type", "text/plain")]),
            body: Array("ATSProxy: every request on a proxy connection must use an absolute http:// URL\n".utf8),
            url: Redaction.url(head.target), outcome: .notEvaluated, codes: [])
        // Basic proxy credentials belong to each request (RFC 9110 §11.7.1), not to the connection: a keep-alive
        // connection's later requests, to any host, are checked like its first.
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
        let (address, upstreamPort) = env.upstreamAddress(host: name, port: port ?? 80)
        let upstream = UpstreamTarget(host: address, port: upstreamPort)
        trace(.loaderWhatToDo(method: head.method, url: url))
        // Only a request that goes out is enqueued: the app refuses a blocked one before connecting.
        func forward(annotation: [(String, String)], outcome: ExchangeSummary.ATSOutcome, codes: [ExchangeError])
            -> RequestDecision
        {
            prepareUpstream(upstream, host: host, port: port ?? 80)
            traceEnqueue(url: url, head: forwarded)  // what goes upstream: no Proxy-Authorization
            return .forward(
                head: forwarded, url: url, upstream: upstream, annotation: annotation, outcome: outcome, codes: codes)
        }

        guard env.mode != .off else { return forward(annotation: [], outcome: .notEvaluated, codes: []) }
        let target = ConnectionTarget(scheme: "http", host: name, port: port ?? 80)
        switch env.requirements(for: target) {
        case .proceed(let req):
            let answer = ATSAnswer(url: url, decision: req.decidedBy, violations: [])
            traceDecision(url: url, decision: req.decidedBy, violations: [], action: "allowed")
            return forward(annotation: env.mode == .annotate ? answer.headers : [], outcome: .allowed, codes: [])
        case .blocked(let violation):
            let decision = violation.decidedBy ?? PolicyDecision(keyPath: [], reason: violation.explanation)
            let answer = ATSAnswer(url: url, decision: decision, violations: [violation])
            let codes = [ExchangeError(violation)]
            if env.mode == .annotate {
                traceDecision(
                    url: url, decision: decision, violations: [violation],
                    action: "annotated: forwarded, although the app refuses this load before connecting")
                return forward(annotation: answer.headers, outcome: .violation, codes: codes)
            }
            traceDecision(url: url, decision: decision, violations: [violation], action: "blocked (403, no connection made)")
            trace(.responseError(url: url, error: NSErrorDescription(violation: violation, failingURL: url)))
            lastPlainBlock = violation
            return .answer(
                head: HTTPResponseHead(
                    status: 403, reason: "Forbidden",
                    headers: HTTPHeaders([("Content-Type", "text/plain; charset=utf-8")] + answer.headers)),
                body: Array(answer.blockBody.utf8), url: url, outcome: .blocked, codes: codes)
        }
    }

    static let authChallenge = ("Proxy-Authenticate", "Basic realm=\"atsproxy\"")
    static let authRequiredBody = "ATSProxy: proxy credentials required\n"

    /// Why `head` lacks the `--auth` credentials, or nil when it has them (or none are required).
    private func authFailureReason(_ head: HTTPRequestHead) -> ProxyAuthFailure.Reason? {
        env.credentials?.refusal(ofProxyAuthorization: head.headers[first: "Proxy-Authorization"])
    }

    /// A 407 for a later request on a plain-HTTP connection that lacks the credentials; the connection stays open,
    /// so the client can send the request again with them.
    private func authRefusal(_ head: HTTPRequestHead) -> RequestDecision? {
        guard let reason = authFailureReason(head) else { return nil }
        let url = Redaction.url(head.target)
        logAuthFailure(ProxyAuthFailure(reason: reason, method: head.method, target: url, client: clientAddress))
        return .answer(
            head: HTTPResponseHead(
                status: 407, reason: "Proxy Authentication Required",
                headers: [("Content-Type", "text/plain"), Self.authChallenge]),
            body: Array(Self.authRequiredBody.utf8), url: url, outcome: .notEvaluated, codes: [])
    }

    private func prepareUpstream(_ upstream: UpstreamTarget, host: String, port: Int) {
        guard plainRelay?.connectedUpstream != upstream else { return }
        pendingPlainTarget = upstream
        trace(.tcpConnectionStart(
            connectionID: id, host: host, port: port, mappedTo: mappedAddress(host: host, port: port)))
    }

    // MARK: - Applying relay output

    /// Level 3 diagnostics: the plaintext each side sent, as CFNetwork's `SSL-READ`/`SSL-WRITE` dumps.
    func dumpPlaintext(_ bytes: [UInt8], toClient: Bool) {
        guard env.diagnosticsLevel >= 3, !bytes.isEmpty else { return }
        // From the app's point of view, bytes to the client were read from the server, and vice versa.
        trace(.hexDump(connectionID: id, read: toClient, bytes: bytes))
    }

    /// Carries out a relay step. With `tls`, plaintext goes through the interception's TLS engines.
    func apply(_ o: consuming RelayOutput, tls: Bool) {
        let unsolicited = o.unsolicitedUpstream
        defer { relayStepped(unsolicited: unsolicited) }
        dumpPlaintext(o.toUpstream, toClient: false)
        dumpPlaintext(o.toClient, toClient: true)
        if let target = o.connect {
            if upstreamOpen { commands.append(.closeUpstream) }
            upstreamOpen = false
            commands.append(.connectUpstream(address: target.host, port: target.port))
        }
        if !o.toUpstream.isEmpty {
            if tls { interceptSendUpstream(o.toUpstream) } else { commands.append(.sendToUpstream(o.toUpstream)) }
        }
        if !o.toClient.isEmpty {
            if tls { interceptSendClient(o.toClient) } else { commands.append(.sendToClient(o.toClient)) }
        }
        // Encrypted, the plaintext arrays are done with (commands own them otherwise).
        if tls, let relay { relay.recycle(&o) }
        for exchange in o.exchanges { logExchange(exchange) }
        applyLanes(o)
        if o.switchedToRaw, let upgrade = o.exchanges.last { beginUpgrade(after: upgrade) }
        if o.switchedToRaw, tls { interception?.raw = true }
        if o.switchedToRaw, !tls {
            commands.append(.startTunnel)
            phase = .done
            return
        }
        if o.closeUpstream, !tls, upstreamOpen, o.connect == nil {
            upstreamOpen = false
            commands.append(.closeUpstream)
        }
        if o.closeClient { closeAll(tlsClose: tls) }
    }

    /// Ends the session: close_notify to the client when intercepting, then both connections.
    func closeAll(tlsClose: Bool = false) {
        logRefusalIfClientRefused()
        logUpgradeEnd(fallbackReason: "the proxy closed it")
        closeAllLanes()
        // A second close (a relay asking for one after a failed write already closed) sends nothing more.
        if tlsClose, !clientClosed, let client = interception?.client {
            client.close()
            let bytes = client.takeOutput()
            if !bytes.isEmpty { commands.append(.sendToClient(bytes)) }
        }
        if !clientClosed { commands.append(.closeClient) }
        if upstreamOpen { commands.append(.closeUpstream) }
        upstreamOpen = false
        clientClosed = true
        phase = .done
    }

    // MARK: - Logging

    /// ` (mapped to ADDR:PORT)` when --map sends the host elsewhere, so that a mapping mistake shows at once; empty
    /// otherwise.
    func mappingNote(host: String, port: Int) -> String {
        mappedAddress(host: host, port: port).map { " (mapped to \($0))" } ?? ""
    }

    /// `ADDR:PORT` where --map sends the host, nil when it is not mapped.
    func mappedAddress(host: String, port: Int) -> String? {
        let (address, mappedPort) = env.upstreamAddress(host: host, port: port)
        return address == host && mappedPort == port ? nil : "\(address):\(mappedPort)"
    }

    /// A notice on stderr. `kind` folds repeats whose text varies (host, error detail) as one kind.
    func notice(_ text: String, kind: String? = nil) {
        commands.append(.log(.notice(text, kind: kind)))
    }

    func trace(_ record: @autoclosure () -> DiagnosticsRecord) {
        guard env.diagnosticsLevel > 0 else { return }
        commands.append(.log(.diagnostics(record())))
    }

    func traceRequestStart(method: String, url: String, head: HTTPRequestHead, httpVersion: String = "HTTP/1.1") {
        trace(.loaderWhatToDo(method: method, url: url))
        traceEnqueue(url: url, head: head, httpVersion: httpVersion)
    }

    func traceEnqueue(url: String, head: HTTPRequestHead, httpVersion: String = "HTTP/1.1") {
        trace(.protocolEnqueue(
            method: head.method, url: url, httpVersion: httpVersion,
            headers: head.headers.fields.map { ($0.name, $0.value) }))
    }

    func traceDecision(url: String, decision: PolicyDecision, violations: [ATSViolation], action: String) {
        trace(.atsDecision(url: url, decision: decision, violations: violations, action: action))
        if env.jsonEvents {
            commands.append(.log(.event(TraceEvent(
                kind: .atsDecision, time: now(), connectionID: id, url: url, decision: decision,
                violations: violations, message: action))))
        }
    }

    func logExchange(_ exchange: ExchangeSummary) {
        if exchange.note == nil, let fallback = interception?.blockFallback {
            // Copied only here: a copy of every exchange cost about 1% of a keep-alive request's instructions.
            var noted = exchange
            noted.note = fallback
            logExchange(noted)
            return
        }
        if exchange.outcome == .blocked || exchange.outcome == .failed,
            let violation = interception?.violations.first ?? lastPlainBlock
        {
            // The app got an error, not the block answer the proxy sent in its place (traced as Response Error).
            trace(.didFail(
                totalMilliseconds: exchange.durationMilliseconds,
                error: NSErrorDescription(violation: violation, failingURL: exchange.url)))
        } else {
            if let status = exchange.status {
                trace(.protocolReceived(
                    method: exchange.method, url: exchange.url, httpVersion: exchange.httpVersion, status: status))
            }
            trace(.didFinish(totalMilliseconds: exchange.durationMilliseconds, totalBytes: exchange.responseBytes))
        }
        recordExchange(exchange)
    }

    /// A 407 in the console and, with `--log-json`, in the JSON log: a device set up with a wrong or no proxy
    /// password otherwise fails with nothing to show why.
    func logAuthFailure(_ failure: ProxyAuthFailure) {
        let text = failure.consoleText
        notice(text)
        if env.jsonEvents {
            commands.append(.log(.event(TraceEvent(
                kind: .proxyAuthFailed, time: now(), connectionID: id, proxyAuth: failure, message: text))))
        }
    }

    /// One exchange in the console and, with `--log-json`, in the JSON log.
    func recordExchange(_ exchange: ExchangeSummary) {
        commands.append(.log(.exchange(exchange)))
        if env.jsonEvents {
            commands.append(.log(.event(TraceEvent(
                kind: .exchange, time: now(), connectionID: id, url: exchange.url, exchange: exchange))))
        }
    }
}
