import ATSPolicy
import Foundation
import ProxyTrace

// Theory of operation:
//
// A session is one client connection and the upstream it leads to, as a sans-io state machine: events in, commands
// out (`handle`); it never touches a socket. It is a small router: `phase` holds the one layer the connection is in,
// with that layer's state, and each event goes to it.
//
//   front ──CONNECT──▶ sniffing ──ClientHello──▶ intercepting ──▶ done
//     │                   └──not TLS──▶ tunnel (connecting, then relayed raw) ──▶ done
//     ├──CONNECT to a --passthrough or pinned host──▶ tunnel
//     └──GET http://…──▶ plain ──101──▶ upgraded (relayed raw by the adapter) ──▶ done
//   transparent (redirected by the gateway) ──▶ sniffing, as after a CONNECT; HTTP there ──▶ plain
//
// - front (FrontLayer): reads the first proxy request; refuses what is no proxy request.
// - sniffing (ProxySession+Sniffing): after a CONNECT's 200, the first client bytes tell TLS (interception) from not.
// - tunnel (TunnelLayer): a raw tunnel, logged when it ends; its two hellos are judged where they say something.
// - plain (PlainLayer): absolute-form HTTP forwarded through an HTTP1Relay, each request judged on its own.
// - intercepting (InterceptLayer): the client's TLS leg, the upstream's TLS leg and the relay between them.
// - transparent (ProxySession+Transparent): a connection redirected to the proxy, started at its original destination.
// - done: both connections closed or handed to the adapter's raw relay with nothing left to log.
//
// A verdict becomes an action in one place (VerdictAction); the deadlines on what a relay waits for are in
// ProxySession+Deadlines; console lines, traces and JSON events are made in ProxySession+Logging.

/// One proxied client connection, as a sans-io state machine. Confined to one event-loop thread.
public final class ProxySession {
    let env: ProxyEnvironment
    let id: UInt64
    let now: () -> Double
    /// The commands of the event being handled. Appended to a few times per event from every part of the session, on
    /// its one thread and never while another access is open: the runtime's per-access exclusivity check is switched
    /// off for it (see HTTP1Relay).
    @exclusivity(unchecked) var commands: [ProxyCommand] = []

    /// The layer the connection is in, holding its state. Every payload is one reference (the value payloads are
    /// `indirect`), so that reading the phase on the hot path is a retain, not an outlined copy of the largest case.
    enum Phase {
        case front(FrontLayer)
        /// After a CONNECT's 200: the client's first bytes, until they show whether it speaks TLS
        /// (ProxySession+Sniffing).
        indirect case sniffing(host: String, port: Int, buffer: [UInt8])
        case tunnel(TunnelLayer)
        case plain(PlainLayer)
        /// A plain-HTTP connection relayed raw by the adapter after a 101 (`startTunnel`); logged when it ends.
        indirect case upgraded(UpgradedConnection)
        case intercepting(InterceptLayer)
        case done
    }

    var phase: Phase = .front(FrontLayer())
    /// Nothing is left for the session to do but log the adapter's raw relay when it ends (if it has one).
    var isDone: Bool {
        switch phase {
        case .done, .upgraded: true
        case .tunnel(let t): t.isOpen
        case .front, .sniffing, .plain, .intercepting: false
        }
    }
    var isFront: Bool { if case .front = phase { true } else { false } }
    /// The interception the connection is in, if it is.
    var interception: InterceptLayer? { if case .intercepting(let i) = phase { i } else { nil } }
    /// The client connection is gone, or the session closed it.
    var clientClosed = false
    /// When the pending `.streamDeadlines` timer fires (the session's clock), if one runs (ProxySession+Deadlines).
    var streamDeadlineTimer: Double?
    /// The adapter holds the client unread for a full upstream write buffer (`ProxyEvent.clientReadingHeld`).
    var clientReadingHeld = false
    /// The proxy is shutting down: a connection closed from now on was cut off by the shutdown's deadline.
    var stopping = false
    /// The client's address (`192.168.1.20:51234`), for the logs that must say which device it was; set by the
    /// adapter, since the session knows no sockets.
    public var clientAddress: String?
    /// The address the current upstream connection goes to (`93.184.216.34:443`), for the exchange record; set by
    /// the adapter once it resolved the name asked for with `.connectUpstream`, cleared when it asks for another.
    public var upstreamAddress: String?
    /// The client's address without its port (auto-passthrough's key), asked only when needed; set by the adapter.
    public var clientHostProvider: (() -> String?)?
    var clientHostCache: String?
    /// A transparent connection's original destination (numeric address and port), where its upstream connects
    /// unless --map names the host; nil for a proxy client (ProxySession+Transparent).
    var transparentDestination: (address: String, port: Int)?

    /// - Parameters:
    ///   - id: a number that names the session in logs and traces.
    ///   - now: Unix time in seconds (injected so tests control durations and certificate validity).
    public init(id: UInt64, environment: ProxyEnvironment, now: @escaping () -> Double) {
        self.id = id
        self.env = environment
        self.now = now
    }

    /// The session's clock as a date: certificates are judged and leaves minted at this time, not the wall clock's,
    /// so that a test's clock governs certificate validity as it governs durations.
    var clockDate: Date { Date(timeIntervalSince1970: now()) }

    /// True when no exchange is in flight, so closing now loses nothing (graceful shutdown).
    public var isIdle: Bool {
        switch phase {
        case .front, .upgraded, .done: true
        case .tunnel(let t): t.isOpen
        case .plain(let p): p.relay.isIdle
        case .intercepting(let i): i.stage == .relaying && (i.relay?.isIdle ?? true) && !i.raw
        case .sniffing: false
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
        if case .intercepting(let i) = phase, i.stage == .relaying {
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

    func takeCommands() -> [ProxyCommand] {
        let out = commands
        commands = []
        return out
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

    // MARK: - Routing events to the layer

    private func dispatch(_ event: ProxyEvent) {
        switch event {
        case .clientBytes(let bytes): clientBytes(bytes)
        case .clientEOF: clientEOF()
        case .clientClosed(let error): clientConnectionClosed(error)
        case .upstreamConnected: upstreamConnected()
        case .upstreamConnectFailed(let error, let failure): upstreamConnectFailed(error, failure)
        case .upstreamBytes(let bytes): upstreamBytes(bytes)
        case .upstreamEOF: upstreamEOF()
        case .upstreamClosed(let error): upstreamClosed(error)
        case .laneConnected, .laneConnectFailed, .laneBytes, .laneEOF, .laneClosed:
            if let i = interception { handleLaneEvent(event, i) }
            else if case .tunnel(let t) = phase { pinCheckLaneEvent(event, t) }
        case .peerQuiet(let peer): if let i = interception { releaseBuffers(of: peer, i) }
        case .stopping: stopping = true
        case .timerFired(.upstreamHandshake): upstreamHandshakeDeadlinePassed()
        case .timerFired(.requestHead) where isFront:
            refuseFront(
                status: 408, body: "ATSProxy: the request head did not arrive within \(env.timeouts.client)\n")
        case .timerFired(let timer): deadlinePassed(timer)
        case .clientReadingHeld(let held): clientReadingHeldChanged(held)
        case .tunnelClosed(let fromClient, let toClient): rawRelayClosed(fromClient: fromClient, toClient: toClient)
        case .tunnelBytes(let fromClient, let bytes):
            if case .tunnel(let t) = phase { tunnelBytes(t, fromClient: fromClient, bytes) }
        }
    }

    private func clientBytes(_ bytes: [UInt8]) {
        switch phase {
        case .front(let f): frontBytes(f, bytes)
        case .tunnel(let t): tunnelClientBytes(t, bytes)
        case .sniffing: sniffBytes(bytes)
        case .plain(let p): applyPlain(p.relay.clientBytes(bytes), p)
        case .intercepting(let i): interceptClientBytes(i, bytes)
        case .upgraded, .done: break
        }
    }

    private func clientEOF() {
        switch phase {
        case .plain(let p): applyPlain(p.relay.clientEOF(), p)
        case .intercepting(let i): interceptClientEOF(i)
        case .front, .sniffing: closeAll()
        case .tunnel(let t): if !t.isOpen { closeAll() }
        case .upgraded, .done: break
        }
    }

    private func clientConnectionClosed(_ error: String?) {
        clientClosed = true
        logRefusalIfClientRefused()
        noteClientClosedWithoutRequest()
        // Exchanges still in flight are cut off: log them as such (nothing can be sent any more).
        let reason = stopping
            ? "the proxy stopped before the exchange finished"
            : error.map { "the client connection failed: \($0)" } ?? "the client closed the connection"
        let upstreamWasOpen = upstreamIsOpen
        switch phase {
        case .plain(let p):
            for exchange in p.relay.clientGone(reason).exchanges { logExchange(exchange) }
        case .intercepting(let i):
            if let relay = i.relay { for exchange in relay.clientGone(reason).exchanges { logExchange(exchange) } }
            logUpgradeEnd(i, fallbackReason: reason)
            closeAllLanes(i)
        case .upgraded(let u):
            logUpgradeEnd(u, fallbackReason: reason)
        case .front, .sniffing, .tunnel, .done:
            break
        }
        if upstreamWasOpen { commands.append(.closeUpstream) }
        phase = .done
    }

    private func upstreamConnected() {
        switch phase {
        case .tunnel(let t): tunnelUpstreamConnected(t)
        case .plain(let p): plainUpstreamConnected(p)
        case .intercepting(let i): interceptUpstreamConnected(i)
        case .front, .sniffing, .upgraded, .done: break
        }
    }

    private func upstreamConnectFailed(_ error: String, _ failure: ConnectFailure) {
        switch phase {
        case .tunnel(let t): tunnelConnectFailed(t, error, failure)
        case .plain(let p): plainUpstreamFailed(p, error, failure)
        case .intercepting(let i): interceptUpstreamFailed(i, error, failure)
        case .front, .sniffing, .upgraded, .done: closeAll()
        }
    }

    private func upstreamBytes(_ bytes: [UInt8]) {
        switch phase {
        case .plain(let p): applyPlain(p.relay.upstreamBytes(bytes), p)
        case .intercepting(let i): interceptUpstreamBytes(i, bytes)
        case .front, .sniffing, .tunnel, .upgraded, .done: break
        }
    }

    private func upstreamEOF() {
        switch phase {
        case .plain(let p): plainUpstreamEOF(p)
        case .intercepting(let i): interceptUpstreamEOF(i)
        case .front, .sniffing, .tunnel, .upgraded, .done: break
        }
    }

    private func upstreamClosed(_ error: String?) {
        switch phase {
        case .plain(let p): plainUpstreamClosed(p, error)
        case .intercepting(let i): interceptUpstreamClosed(i, error)
        case .front, .sniffing, .tunnel, .upgraded, .done: break
        }
    }

    /// The adapter's raw relay ended (a tunnel, or an upgraded plain-HTTP connection): its record is logged.
    private func rawRelayClosed(fromClient: Int, toClient: Int) {
        switch phase {
        case .upgraded(var u):
            // A plain-HTTP upgrade, relayed raw by the adapter: its counts come with this event.
            u.fromClient += fromClient
            u.toClient += toClient
            logUpgradeEnd(u, fallbackReason: "the connection closed")
            phase = .done
        case .tunnel(let t):
            if t.pinProbe != nil {
                // Logged when the pin check on the side connection ends (TunnelLayer+PinCheck).
                t.closedCounts = (fromClient, toClient)
                return
            }
            phase = .done
            logTunnel(t.record, fromClient: fromClient, toClient: toClient)
        case .front, .sniffing, .plain, .intercepting, .done:
            break
        }
    }

    // MARK: - Ending

    /// Whether the upstream TCP connection is open (a close is owed to it), in whichever layer holds it.
    var upstreamIsOpen: Bool {
        switch phase {
        case .tunnel(let t): t.isOpen
        case .plain(let p): p.upstreamOpen
        case .upgraded: true
        case .intercepting(let i): i.upstreamOpen
        case .front, .sniffing, .done: false
        }
    }

    /// Ends the session: close_notify to the client when intercepting (`tlsClose`), then both connections. `reset`
    /// ends the client's connection with a TCP reset instead, without close_notify: a response was cut off.
    func closeAll(tlsClose: Bool = false, reset: Bool = false) {
        logRefusalIfClientRefused()
        let upstreamWasOpen = upstreamIsOpen
        switch phase {
        case .intercepting(let i):
            logUpgradeEnd(i, fallbackReason: "the proxy closed it")
            closeAllLanes(i)
            // A second close (a relay asking for one after a failed write already closed) sends nothing more.
            if tlsClose, !reset, !clientClosed, let client = i.client {
                client.close()
                let bytes = client.takeOutput()
                if !bytes.isEmpty { commands.append(.sendToClient(bytes)) }
            }
            // Code still running on the layer (a relay step that asked for the close) sends the upstream nothing more.
            i.upstreamOpen = false
        case .plain(let p):
            p.upstreamOpen = false
        case .upgraded(let u):
            logUpgradeEnd(u, fallbackReason: "the proxy closed it")
        case .front, .sniffing, .tunnel, .done:
            break
        }
        if !clientClosed { commands.append(reset ? .resetClient : .closeClient) }
        if upstreamWasOpen { commands.append(.closeUpstream) }
        clientClosed = true
        phase = .done
    }
}
