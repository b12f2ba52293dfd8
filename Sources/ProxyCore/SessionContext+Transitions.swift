import ATSPolicy
import HTTP1Core
import ProxyTrace
import TLSCore

// How a connection enters a layer: the front and the sniffer decide (FrontLayer, SessionContext+Sniffing); these
// set the phase to the new layer and make its first commands. A layer leaves its phase only by ending the
// connection (`closeAll`) or, after a 101 or a tunnel's end, by handing what is left to the adapter (`upgraded`,
// `done`).

extension SessionContext {
    /// Starts a raw tunnel when `host` must not be intercepted (one of Apple's own hosts, a --passthrough host, one
    /// the app pins, one this client keeps refusing the proxy's certificate for) and says true; false when it may
    /// be intercepted. The host is the CONNECT's, or a transparent connection's SNI (SessionContext+Transparent).
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
            startTunnel(record, pending: pending, established: established).checkPins(self, pins)
        } else if let why = autoPassthroughNote(host: host) {
            let record = Tunnel(host: host, port: port, note: "tunnel, not intercepted: \(why)", started: now())
            startTunnel(record, pending: pending, established: established)
        } else {
            return false
        }
        return true
    }

    /// Answers the client with a closing HTTP/1.1 answer of the proxy's own and ends the session (a 407 at the front,
    /// a 502 for a tunnel whose server cannot be reached).
    func answerAndClose(status: Int, body: String, extra: [(String, String)] = []) {
        commands.append(.sendToClient(HTTP1LocalAnswer.closing(status: status, text: body, extraHeaders: extra)))
        closeAll()
    }

    /// Connects the tunnel's upstream; `established`: the 200 to send once it is connected (nil when the client
    /// already had it).
    @discardableResult
    func startTunnel(_ record: Tunnel, pending: [UInt8], established: [UInt8]?) -> TunnelLayer {
        var record = record
        // The 200 waits for the upstream: a server that cannot be reached is answered 502, saying why.
        record.established = established
        let t = TunnelLayer(record: record, pending: pending)
        phase = .tunnel(t)
        let (address, upstreamPort) = upstreamAddress(host: record.host, port: record.port)
        commands.append(.connectUpstream(address: address, port: upstreamPort))
        return t
    }

    /// Plain-HTTP forwarding, starting with the bytes the front read so far.
    func startPlain(replaying bytes: [UInt8]) {
        let p = PlainLayer()
        p.relay = HTTP1Relay(connectedTo: nil, now: now, recording: env.recording)
        phase = .plain(p)
        p.apply(self, p.relay.clientBytes(bytes))
    }

    /// Interception of a CONNECT whose client sent a TLS ClientHello (InterceptLayer).
    func startInterception(connectHost: String, port: Int, hello: ClientHello, helloBytes: [UInt8]) {
        // The name the app asked for is the SNI; IP hosts send none, so the CONNECT host stands in. An SNI that is
        // no DNS name (some clients send `host:port`) is not trusted either.
        let sni = hello.serverName.map { $0.lowercased() }
        let host = sni.flatMap { Self.isPlausibleDNSName($0) ? $0 : nil } ?? connectHost.lowercased()
        if let sni, sni != host {
            notice("\(connectHost):\(port): the client sent the SNI '\(sni)', which is no host name; using \(host)")
        }
        // Auto-passthrough's key, fetched while the connection is surely open (SessionContext+AutoPassthrough).
        if env.autoPassthrough != nil { _ = clientHost() }
        if startLocalSiteTLS(host: host, port: port, hello: hello, helloBytes: helloBytes) { return }
        var requirements: ConnectionRequirements?
        var decision = PolicyDecision(keyPath: [], reason: "ATS evaluation is off (--ats off)")
        if env.mode != .off {
            switch env.requirements(for: ConnectionTarget(scheme: "https", host: host, port: port)) {
            case .proceed(let r):
                requirements = r
                decision = r.decidedBy
            case .blocked(let v):
                // https is never refused before connecting; keep the engine's word if it ever is.
                decision = v.decidedBy ?? PolicyDecision(keyPath: [], reason: v.explanation)
            }
        }
        let i = InterceptLayer(
            host: host, port: port, hello: hello, helloBytes: helloBytes, requirements: requirements,
            decision: decision, started: now())
        phase = .intercepting(i)
        decideThrottle(host: host, port: port)
        i.connectUpstream(self, reason: nil)
    }

    /// Letters, digits, hyphens, underscores and dots: what a TLS server_name may hold (RFC 6066 §3).
    static func isPlausibleDNSName(_ name: String) -> Bool {
        !name.isEmpty && name.utf8.count <= 253
            && name.utf8.allSatisfy { c in
                (c >= 0x61 && c <= 0x7A) || (c >= 0x30 && c <= 0x39) || c == 0x2D || c == 0x2E || c == 0x5F
            }
    }
}
