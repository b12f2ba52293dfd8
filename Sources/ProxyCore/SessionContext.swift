import Foundation
import ProxyTrace
import RuleStage

// Theory of operation: what the layers of one session share (see ProxySession's theory of operation for the
// layers themselves).
//
// A layer's methods take the context as their first argument rather than keeping a reference to it: the context
// holds the phase, and so the layers, and an argument costs no reference counting on the hot path. It holds only
// what more than one layer needs:
// - the environment, the connection's id and the clock, and the commands of the event being handled (every layer
//   emits into the same array, so that the session returns them in order);
// - the phase: a layer's step can end the connection (`closeAll`) or hand it to another layer at the point it
//   decides, and the rest of that step sees the change (`isDone`); ProxySession reads the phase to route the next
//   event;
// - what the adapter tells about the connection (addresses, the client's host for auto-passthrough, a transparent
//   connection's destination) and the session-wide flags a layer change must not lose (the client is closed, the
//   proxy is stopping, the client's reading is held, the stream deadline timer that runs).
// The shared logic lives on it in files named after it: logging (SessionContext+Logging), the exchange record
// (SessionContext+Record), deadlines (SessionContext+Deadlines), sniffing a CONNECT's first bytes
// (SessionContext+Sniffing) and the transparent mode's start (SessionContext+Transparent).

/// The part of a session its layers share: environment, clock, commands, the phase and the connection's facts.
/// Confined to the session's event-loop thread.
final class SessionContext {
    let env: ProxyEnvironment
    let id: UInt64
    let now: () -> Double
    /// The commands of the event being handled. Appended to a few times per event from every part of the session, on
    /// its one thread and never while another access is open: the runtime's per-access exclusivity check is switched
    /// off for it (see HTTP1Relay).
    @exclusivity(unchecked) var commands: [ProxyCommand] = []

    /// The layer the connection is in, holding its state (see ProxySession.Phase).
    var phase: ProxySession.Phase = .front(FrontLayer())
    /// The client connection is gone, or the session closed it.
    var clientClosed = false
    /// When the pending `.streamDeadlines` timer fires (the session's clock), if one runs (SessionContext+Deadlines).
    var streamDeadlineTimer: Double?
    /// The adapter holds the client unread for a full upstream write buffer (`ProxyEvent.clientReadingHeld`).
    var clientReadingHeld = false
    /// The proxy is shutting down: a connection closed from now on was cut off by the shutdown's deadline.
    var stopping = false
    /// The client's address, set by the adapter (`ProxySession.clientAddress`).
    var clientAddress: String?
    /// Whether this connection's requests may carry the replay marker (`ReplayMarker`): only a loopback client's,
    /// which is where the proxy's own replays come from; worked out once per connection.
    lazy var acceptsReplayMarker: Bool = {
        guard let address = clientAddress else { return false }
        return address.hasPrefix("127.") || address.hasPrefix("[::1]") || address == "::1"
    }()
    /// The current upstream connection's address, set by the adapter (`ProxySession.upstreamAddress`).
    var upstreamAddress: String?
    /// The client's address without its port (auto-passthrough's key), asked only when needed; set by the adapter.
    var clientHostProvider: (() -> String?)?
    var clientHostCache: String?
    /// A transparent connection's original destination (numeric address and port), where its upstream connects
    /// unless --map names the host; nil for a proxy client (SessionContext+Transparent).
    var transparentDestination: (address: String, port: Int)?
    /// The rules in force as this session last saw them (SessionContext+Rules); renewed when the book's generation
    /// moves.
    var ruleSnapshot: RuleSnapshot?
    /// The requests breakpoints hold now, by hold id (SessionContext+Breakpoints); empty without breakpoints.
    var breakpointHolds: [UInt64: BreakpointHold] = [:]
    /// The responses breakpoints hold, by hold id (SessionContext+Breakpoints).
    var responseHolds: [UInt64: ResponseHold] = [:]
    /// A failure a connection-point rule injects, from the CONNECT that matched it to the client's first bytes
    /// (SessionContext+Faults); nil without one.
    var injected: InjectedFailure?
    /// The connection point's throttle was looked for (once per connection: SessionContext+Throttle).
    var throttleDecided = false
    /// The throttle rule shaping this connection, which every exchange record of it carries; nil when none does.
    var throttleRules: [AppliedRule]?

    init(id: UInt64, environment: ProxyEnvironment, now: @escaping () -> Double) {
        self.id = id
        self.env = environment
        self.now = now
    }

    /// The session's clock as a date: certificates are judged and leaves minted at this time, not the wall clock's,
    /// so that a test's clock governs certificate validity as it governs durations.
    var clockDate: Date { Date(timeIntervalSince1970: now()) }

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
    /// The plain layer the connection is in, if it is.
    var plain: PlainLayer? { if case .plain(let p) = phase { p } else { nil } }

    func takeCommands() -> [ProxyCommand] {
        let out = commands
        commands = []
        return out
    }

    // MARK: - Ending

    /// Logs a flawed-leaf refusal the client has acted on, and what a mirrored device did, as the connection ends.
    func logRefusalIfClientRefused() {
        interception?.logRefusalIfClientRefused(self)
        if injected != nil { logInjectedBeforeHello() }
    }

    /// Whether the upstream TCP connection is open (a close is owed to it), in whichever layer holds it.
    var upstreamIsOpen: Bool {
        switch phase {
        case .tunnel(let t): t.isOpen
        case .plain(let p): p.upstreamOpen
        case .upgraded: true
        case .intercepting(let i): i.upstream.isOpen
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
            i.logUpgradeEnd(self, fallbackReason: "the proxy closed it")
            i.closeAllLanes(self)
            // A second close (a relay asking for one after a failed write already closed) sends nothing more.
            if tlsClose, !reset, !clientClosed, let client = i.client.engine {
                client.close()
                let bytes = client.takeOutput()
                if !bytes.isEmpty { commands.append(.sendToClient(bytes)) }
            }
            // Code still running on the layer (a relay step that asked for the close) sends the upstream nothing more.
            i.upstream.isOpen = false
        case .plain(let p):
            p.upstreamOpen = false
        case .upgraded(let u):
            u.logEnd(self, fallbackReason: "the proxy closed it")
        case .front, .sniffing, .tunnel, .done:
            break
        }
        if !clientClosed { commands.append(reset ? .resetClient : .closeClient) }
        if upstreamWasOpen { commands.append(.closeUpstream) }
        clientClosed = true
        phase = .done
    }
}
