import ATSPolicy
import Foundation
import HTTP1Core
import ProxyTrace

// Theory of operation:
//
// A session is one client connection and the upstream it leads to, as a sans-io state machine: events in, commands
// out (`handle`); it never touches a socket. ProxySession itself is the public API and a small router: the phase
// holds the one layer the connection is in, with that layer's state, and each event goes to that layer's method.
//
//   front ──CONNECT──▶ sniffing ──ClientHello──▶ intercepting ──▶ done
//     │                   └──not TLS──▶ tunnel (connecting, then relayed raw) ──▶ done
//     ├──CONNECT to a --passthrough or pinned host──▶ tunnel
//     └──GET http://…──▶ plain ──101──▶ upgraded (relayed raw by the adapter) ──▶ done
//   transparent (redirected by the gateway) ──▶ sniffing, as after a CONNECT; HTTP there ──▶ plain
//
// - front (FrontLayer): reads the first proxy request; refuses what is no proxy request.
// - sniffing (SessionContext+Sniffing): after a CONNECT's 200, the first client bytes tell TLS (interception) from not.
// - tunnel (TunnelLayer): a raw tunnel, logged when it ends; its two hellos are judged where they say something.
// - plain (PlainLayer): absolute-form HTTP forwarded through an HTTP1Relay, each request judged on its own.
// - intercepting (InterceptLayer, in parts: UpstreamLeg, ClientLeg, BlockState): the client's TLS leg, the
//   upstream's TLS leg and the relay between them.
// - transparent (SessionContext+Transparent): a connection redirected to the proxy, started at its original destination.
// - done: both connections closed or handed to the adapter's raw relay with nothing left to log.
//
// Layers own their behaviour: each event becomes a call of the current layer's method, which takes the session's
// context (SessionContext: environment, id, clock, the commands being emitted, logging, the connection's facts) as
// its first argument. Phase transitions go through the context: a layer hands the connection to another with the
// context's transitions (SessionContext+Transitions) or ends it (`closeAll`), at the point it decides, and the rest
// of its step sees the change (`ctx.isDone`); the next event is routed by the new phase. The hot path (an intercepted
// connection relaying, `handleReceived`) is a switch on the phase and a direct call: no closure or existential is
// made per event.
//
// A verdict becomes an action in one place (VerdictAction); the deadlines on what a relay waits for are in
// SessionContext+Deadlines; console lines, traces and JSON events are made in SessionContext+Logging; the set-up site
// is a LocalSite answered through the same local-answer paths as the proxy's other answers (SessionContext+LocalSite).

/// One proxied client connection, as a sans-io state machine. Confined to one event-loop thread.
public final class ProxySession {
    /// What the layers share: environment, clock, commands, the phase and the connection's facts.
    let ctx: SessionContext
    /// Set by a peer's quiet notice: `recycle` frees the array it is given instead of keeping it.
    private var releaseRecycled = false

    /// The layer the connection is in, holding its state. Every payload is one reference (the value payloads are
    /// `indirect`), so that reading the phase on the hot path is a retain, not an outlined copy of the largest case.
    enum Phase {
        case front(FrontLayer)
        /// After a CONNECT's 200: the client's first bytes, until they show whether it speaks TLS
        /// (SessionContext+Sniffing).
        indirect case sniffing(host: String, port: Int, buffer: [UInt8])
        case tunnel(TunnelLayer)
        case plain(PlainLayer)
        /// A plain-HTTP connection relayed raw by the adapter after a 101 (`startTunnel`); logged when it ends.
        indirect case upgraded(UpgradedConnection)
        case intercepting(InterceptLayer)
        case done
    }

    /// - Parameters:
    ///   - id: a number that names the session in logs and traces.
    ///   - now: Unix time in seconds (injected so tests control durations and certificate validity).
    public init(id: UInt64, environment: ProxyEnvironment, now: @escaping () -> Double) {
        ctx = SessionContext(id: id, environment: environment, now: now)
    }

    var phase: Phase { ctx.phase }
    /// Nothing is left for the session to do but log the adapter's raw relay when it ends (if it has one).
    var isDone: Bool { ctx.isDone }
    /// The interception the connection is in, if it is.
    var interception: InterceptLayer? { ctx.interception }

    /// The client's address (`192.168.1.20:51234`), for the logs that must say which device it was; set by the
    /// adapter, since the session knows no sockets.
    public var clientAddress: String? {
        get { ctx.clientAddress }
        set { ctx.clientAddress = newValue }
    }
    /// The address the current upstream connection goes to (`93.184.216.34:443`), for the exchange record; set by
    /// the adapter once it resolved the name asked for with `.connectUpstream`, cleared when it asks for another.
    public var upstreamAddress: String? {
        get { ctx.upstreamAddress }
        set { ctx.upstreamAddress = newValue }
    }
    /// The client's address without its port (auto-passthrough's key), asked only when needed; set by the adapter.
    public var clientHostProvider: (() -> String?)? {
        get { ctx.clientHostProvider }
        set { ctx.clientHostProvider = newValue }
    }

    /// True when no exchange is in flight, so closing now loses nothing (graceful shutdown).
    public var isIdle: Bool {
        switch ctx.phase {
        case .front, .upgraded, .done: true
        case .tunnel(let t): t.isOpen
        case .plain(let p): p.relay.isIdle
        case .intercepting(let i): i.stage == .relaying && (i.relay?.isIdle ?? true) && !i.raw
        case .sniffing: false
        }
    }

    /// Whether the adapter should pass on the tunnel's bytes (`.tunnelBytes`): until both hellos are read.
    public var watchesTunnel: Bool {
        guard ctx.env.mode != .off, case .tunnel(let t) = ctx.phase else { return false }
        return t.record.isWatching
    }

    /// Whether the session still has a side connection to finish after its tunnel ended (TunnelLayer+PinCheck).
    public var awaitsSideCheck: Bool {
        if case .tunnel(let t) = ctx.phase { return t.pinProbe != nil }
        return false
    }

    /// Feeds one event; returns what to do, in order.
    public func handle(_ event: ProxyEvent) -> [ProxyCommand] {
        dispatch(event)
        return ctx.takeCommands()
    }

    /// Bytes read from `peer`, straight from the event loop's read buffer (valid only during the call): the same as
    /// `handle(.clientBytes(…))`, `.upstreamBytes` or `.laneBytes`, but an intercepted connection that is relaying
    /// feeds them to its TLS engine without first copying them into an array, once per socket read.
    public func handleReceived(_ bytes: UnsafeRawBufferPointer, from peer: ProxyPeer) -> [ProxyCommand] {
        if case .intercepting(let i) = ctx.phase, i.stage == .relaying {
            switch peer {
            case .client:
                i.readClient(ctx, incoming: bytes)
                return ctx.takeCommands()
            case .upstream where i.upstream.engine != nil:
                i.readUpstream(ctx, incoming: bytes)
                return ctx.takeCommands()
            case .upstream, .lane:
                break
            }
        }
        switch peer {
        case .client: dispatch(.clientBytes(Array(bytes)))
        case .upstream: dispatch(.upstreamBytes(Array(bytes)))
        case .lane(let lane): dispatch(.laneBytes(lane, Array(bytes)))
        }
        return ctx.takeCommands()
    }

    /// Gives back the array a `handle` call returned, once its commands are carried out, so that the next event
    /// appends to its storage instead of allocating a new one (two events per proxied request). Optional: an array
    /// that is not given back is simply freed.
    public func recycle(_ used: consuming [ProxyCommand]) {
        // A quiet peer's notice returns the array that held the handshake's commands (grown to some 30 of them,
        // 1.7 KiB): an idle connection should not keep it, so it is freed and the next event starts a new one.
        if releaseRecycled {
            releaseRecycled = false
            return
        }
        // A nested event (handled while the caller was still running commands) may already have left one.
        guard ctx.commands.isEmpty, ctx.commands.capacity < used.capacity else { return }
        used.removeAll(keepingCapacity: true)
        ctx.commands = used
    }

    /// Starts a connection the gateway's firewall redirected to the proxy; `address:port` is where the client was
    /// connecting (numeric); `resolvedName` the name the device resolved to it, if known. Call once, before the
    /// client's first bytes (SessionContext+Transparent).
    public func startTransparent(destinationAddress address: String, port: Int, resolvedName: String? = nil)
        -> [ProxyCommand]
    {
        ctx.startTransparent(destinationAddress: address, port: port, resolvedName: resolvedName)
        return ctx.takeCommands()
    }

    /// A transparent connection's origin-form request in absolute form (SessionContext+Transparent).
    func absoluteForm(_ head: HTTPRequestHead) -> HTTPRequestHead { ctx.absoluteForm(head) }

    /// Whether `bytes` start an HTTP/1 request line (SessionContext+Transparent).
    static func startsHTTPRequest(_ bytes: [UInt8]) -> Bool? { SessionContext.startsHTTPRequest(bytes) }

    // MARK: - Routing events to the layer

    private func dispatch(_ event: ProxyEvent) {
        let ctx = ctx
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
            switch ctx.phase {
            case .intercepting(let i): i.handleLaneEvent(ctx, event)
            case .tunnel(let t): t.pinCheckLaneEvent(ctx, event)
            case .front, .sniffing, .plain, .upgraded, .done: break
            }
        case .peerQuiet(let peer):
            if let i = ctx.interception { i.releaseBuffers(ctx, of: peer) }
            releaseRecycled = true
        case .stopping: ctx.stopping = true
        case .timerFired(.upstreamHandshake):
            switch ctx.phase {
            case .tunnel(let t): t.pinCheckTimedOut(ctx)
            case .intercepting(let i): i.upstreamHandshakeDeadlinePassed(ctx)
            case .front, .sniffing, .plain, .upgraded, .done: break
            }
        case .timerFired(.requestHead) where ctx.isFront:
            if case .front(let f) = ctx.phase {
                f.refuse(ctx, status: 408,
                    body: "ATSProxy: the request head did not arrive within \(ctx.env.timeouts.client)\n")
            }
        case .timerFired(.hold(let id)): ctx.releaseHold(id, nil)
        case .holdReleased(let id, let release): ctx.releaseHold(id, release)
        case .timerFired(let timer): ctx.deadlinePassed(timer)
        case .clientReadingHeld(let held): ctx.clientReadingHeldChanged(held)
        case .tunnelClosed(let fromClient, let toClient): rawRelayClosed(fromClient: fromClient, toClient: toClient)
        case .tunnelBytes(let fromClient, let bytes):
            if case .tunnel(let t) = ctx.phase { t.bytesSeen(ctx, fromClient: fromClient, bytes) }
        }
    }

    private func clientBytes(_ bytes: [UInt8]) {
        switch ctx.phase {
        case .front(let f): f.clientBytes(ctx, bytes)
        case .tunnel(let t): t.clientBytes(ctx, bytes)
        case .sniffing: ctx.sniffBytes(bytes)
        case .plain(let p): p.apply(ctx, p.relay.clientBytes(bytes))
        case .intercepting(let i): i.clientBytes(ctx, bytes)
        case .upgraded, .done: break
        }
    }

    private func clientEOF() {
        switch ctx.phase {
        case .plain(let p): p.apply(ctx, p.relay.clientEOF())
        case .intercepting(let i): i.clientEOF(ctx)
        case .front, .sniffing: ctx.closeAll()
        case .tunnel(let t): if !t.isOpen { ctx.closeAll() }
        case .upgraded, .done: break
        }
    }

    private func clientConnectionClosed(_ error: String?) {
        ctx.clientClosed = true
        if !ctx.breakpointHolds.isEmpty || !ctx.responseHolds.isEmpty { ctx.dropHolds() }
        ctx.logRefusalIfClientRefused()
        ctx.noteClientClosedWithoutRequest()
        // Exchanges still in flight are cut off: log them as such (nothing can be sent any more).
        let reason = ctx.stopping
            ? "the proxy stopped before the exchange finished"
            : error.map { "the client connection failed: \($0)" } ?? "the client closed the connection"
        let upstreamWasOpen = ctx.upstreamIsOpen
        switch ctx.phase {
        case .plain(let p):
            for exchange in p.relay.clientGone(reason).exchanges { ctx.logExchange(exchange) }
        case .intercepting(let i):
            if let relay = i.relay { for exchange in relay.clientGone(reason).exchanges { ctx.logExchange(exchange) } }
            i.logUpgradeEnd(ctx, fallbackReason: reason)
            i.closeAllLanes(ctx)
        case .upgraded(let u):
            u.logEnd(ctx, fallbackReason: reason)
        case .front, .sniffing, .tunnel, .done:
            break
        }
        if upstreamWasOpen { ctx.commands.append(.closeUpstream) }
        ctx.phase = .done
    }

    private func upstreamConnected() {
        switch ctx.phase {
        case .tunnel(let t): t.upstreamConnected(ctx)
        case .plain(let p): p.upstreamConnected(ctx)
        case .intercepting(let i): i.upstreamConnected(ctx)
        case .front, .sniffing, .upgraded, .done: break
        }
    }

    private func upstreamConnectFailed(_ error: String, _ failure: ConnectFailure) {
        switch ctx.phase {
        case .tunnel(let t): t.upstreamConnectFailed(ctx, error, failure)
        case .plain(let p): p.upstreamConnectFailed(ctx, error, failure)
        case .intercepting(let i): i.upstreamConnectFailed(ctx, error, failure)
        case .front, .sniffing, .upgraded, .done: ctx.closeAll()
        }
    }

    private func upstreamBytes(_ bytes: [UInt8]) {
        switch ctx.phase {
        case .plain(let p): p.apply(ctx, p.relay.upstreamBytes(bytes))
        case .intercepting(let i): i.upstreamBytes(ctx, bytes)
        case .front, .sniffing, .tunnel, .upgraded, .done: break
        }
    }

    private func upstreamEOF() {
        switch ctx.phase {
        case .plain(let p): p.upstreamEOF(ctx)
        case .intercepting(let i): i.upstreamEOF(ctx)
        case .front, .sniffing, .tunnel, .upgraded, .done: break
        }
    }

    private func upstreamClosed(_ error: String?) {
        switch ctx.phase {
        case .plain(let p): p.upstreamClosed(ctx, error)
        case .intercepting(let i): i.upstreamClosed(ctx, error)
        case .front, .sniffing, .tunnel, .upgraded, .done: break
        }
    }

    /// The adapter's raw relay ended (a tunnel, or an upgraded plain-HTTP connection): its record is logged.
    private func rawRelayClosed(fromClient: Int, toClient: Int) {
        switch ctx.phase {
        case .upgraded(var u):
            // A plain-HTTP upgrade, relayed raw by the adapter: its counts come with this event.
            u.fromClient += fromClient
            u.toClient += toClient
            u.logEnd(ctx, fallbackReason: "the connection closed")
            ctx.phase = .done
        case .tunnel(let t):
            t.relayClosed(ctx, fromClient: fromClient, toClient: toClient)
        case .front, .sniffing, .plain, .intercepting, .done:
            break
        }
    }
}
