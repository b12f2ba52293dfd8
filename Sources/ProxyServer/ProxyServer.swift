import Foundation
import ProxyCore
import ProxyEventLoop
import Throttle

/// Runs `ProxySession`s on an event-loop group: the only place where proxy commands become socket operations.
public final class ProxyServer: Sendable {
    public let environment: ProxyEnvironment
    public let group: EventLoopGroup
    let sink: ProxyLogSink
    let counter = SessionCounter()
    let admission: AdmissionState

    public init(environment: ProxyEnvironment, group: EventLoopGroup, sink: ProxyLogSink) {
        self.environment = environment
        self.group = group
        self.sink = sink
        let mapped = Set(environment.mappings.values.map { "\($0.address.lowercased()):\($0.port)" })
        admission = AdmissionState(TargetAdmission(
            localAddresses: SocketAddress.interfaceAddresses(), mappedTargets: mapped))
    }

    /// Listens on `host:port` (port 0 picks a free port: read `Listener.port`). The listener's address joins the
    /// targets no client may reach through the proxy (itself). `transparent`: every connection accepted was
    /// redirected to it by the host's firewall and starts at its original destination (`--mode transparent`).
    public func listen(host: String, port: UInt16, transparent: Bool = false) throws(IOError) -> Listener {
        // Known before the first accept: a connection may only be accepted once the listener runs.
        let requested = try SocketAddress(numericHost: host, port: port)
        if port != 0 { admission.addListener(requested) }
        let sink = self.sink
        let exhausted: @Sendable () -> Void = {
            sink.write(.notice(
                "out of file descriptors: a new client was answered 503; raise the limit (ulimit -n) or reduce load"))
        }
        let listener = try group.listen(host: host, port: port, onDescriptorsExhausted: exhausted) { [self] loop in
            ClientSide(server: self, loop: loop, sessionID: counter.next(), transparent: transparent)
        }
        if port == 0 { admission.addListener(listener.address) }
        return listener
    }
}

/// The target admission rules, shared by every loop's sessions; listeners are added as they start.
final class AdmissionState: @unchecked Sendable {
    // @unchecked: `value` is only touched under `lock`.
    private let lock = NSLock()
    private var value: TargetAdmission

    init(_ value: TargetAdmission) { self.value = value }

    func addListener(_ address: SocketAddress) {
        lock.lock()
        defer { lock.unlock() }
        value.addListener(address)
    }

    /// True when some listener is on an address other clients than this host's can reach.
    var listensBeyondLoopback: Bool {
        lock.lock()
        defer { lock.unlock() }
        return value.listeners.contains { !$0.isLoopback }
    }

    func refusal(target: SocketAddress, requested: String, clientIsLoopback: Bool) -> String? {
        lock.lock()
        defer { lock.unlock() }
        return value.refusal(target: target, requested: requested, clientIsLoopback: clientIsLoopback)
    }
}

/// Numbers sessions across loops for logs.
final class SessionCounter: @unchecked Sendable {
    // @unchecked: `value` is only touched under `lock`.
    private let lock = NSLock()
    private var value: UInt64 = 0
    func next() -> UInt64 {
        lock.lock()
        defer { lock.unlock() }
        value += 1
        return value
    }
}

/// The client connection's handler: feeds its events to the session and carries out the session's commands.
final class ClientSide: ConnectionHandler {
    /// How long a connection carries nothing before its session gives back the buffers only traffic needs. Short
    /// enough that idle connections stay small, long enough that a busy one never pays for it.
    static let quietDelay: Duration = .milliseconds(250)

    private let server: ProxyServer
    private let loop: EventLoop
    private let session: ProxySession
    private let sessionID: UInt64
    private var client: Connection?
    private var upstream: Connection?
    /// Distinguishes the current upstream from closed ones whose late events must be ignored.
    private var upstreamGeneration = 0
    private var tunnelled = false
    /// Extra upstream connections of the session (an HTTP/1.1 pool behind an h2 client).
    private var lanes: [UpstreamLane: Connection] = [:]
    /// Connections whose reading the session paused (flow control), which socket backpressure must not resume.
    private var sessionPaused: Set<ProxyPeer> = []
    /// The client is not read because an upstream's or a lane's write buffer is full (apart from `sessionPaused`),
    /// and what the session was last told of it (`ProxyEvent.clientReadingHeld`, on transitions only).
    private var clientHeld = false
    private var clientHeldTold = false
    /// The session's pending deadlines.
    private var timers = SessionTimers()
    /// The exchanges this session listed in the hold registry (breakpoints), taken off when it ends.
    private var holds: Set<UInt64> = []
    /// Whether the client connected from this host's loopback (true when every listener is on loopback).
    private var clientIsLoopback = true
    /// The client's connection closed (or was reset): nothing more can reach it.
    private var clientGone = false
    /// Holds this side while its session finishes work after its tunnel ended (a pin check's side connection):
    /// nothing else does once the relay let go.
    private var finishing: ClientSide?
    /// Accepted on a transparent listener: the session starts at the connection's original destination.
    private let transparent: Bool
    /// A connection from inside a tunnel (WireGuard mode): where the device was connecting and the device's own
    /// address, given by the tunnel instead of read from the socket.
    private let fromTunnel: TunnelledConnection?
    /// The shaped legs once the session said the connection is throttled (ShapedLeg.swift); nil: writes go straight
    /// to the sockets.
    private var throttle: ThrottledConnection?

    init(
        server: ProxyServer, loop: EventLoop, sessionID: UInt64, transparent: Bool = false,
        tunnelled: TunnelledConnection? = nil
    ) {
        self.server = server
        self.loop = loop
        self.sessionID = sessionID
        self.transparent = transparent
        self.fromTunnel = tunnelled
        self.session = ProxySession(
            id: sessionID, environment: server.environment, now: { Date().timeIntervalSince1970 })
    }

    // MARK: Client events

    func connectionOpened(_ connection: Connection) {
        client = connection
        if let fromTunnel {
            // The tunnel says who the device is: there is no socket address to read.
            session.clientAddress = fromTunnel.client.description
            clientIsLoopback = false
        } else if server.environment.credentials != nil || server.admission.listensBeyondLoopback {
            // Only a 407 and the loopback rule need the client's address: without --auth and with loopback
            // listeners only, it is not worth decoding and formatting per connection (accept4 already gave it).
            let remote = connection.remoteAddress
            session.clientAddress = remote?.description
            clientIsLoopback = remote?.isLoopback ?? false
        } else if server.environment.recording != nil {
            // A capture names the device each exchange came from.
            session.clientAddress = connection.remoteAddress?.description
        }
        if server.environment.autoPassthrough != nil {
            // Asked for by the session only when it needs it (an interception starting, a CONNECT once some host is
            // auto-tunnelled); a socket's address is the one accept4 returned, so it costs no system call.
            if let host = fromTunnel?.client.host {
                session.clientHostProvider = { host }
            } else {
                session.clientHostProvider = { [weak connection] in connection?.remoteAddress?.host }
            }
        }
        connection.setIdleTimeout(server.environment.timeouts.idle)
        connection.setQuietNotice(after: ClientSide.quietDelay)
        if let fromTunnel {
            startTunnelled(fromTunnel)
        } else if transparent {
            startTransparent(connection)
        }
    }

    /// A transparent listener's connection: the session starts at its original destination, read here (the only
    /// place that touches the socket) and passed in as data; one that was not redirected is refused.
    private func startTransparent(_ connection: Connection) {
        let remote = connection.remoteAddress
        session.clientAddress = remote?.description
        clientIsLoopback = remote?.isLoopback ?? false
        let client = remote?.unmapped.host ?? "a client"
        switch connection.originalDestination {
        case .redirected(let destination):
            if destination.port == 443, let remote { server.noteQUICFallback(client: remote.unmapped.host) }
            let address = destination.unmapped
            run(session.startTransparent(destinationAddress: address.host, port: Int(address.port)))
        case .notRedirected:
            server.sink.write(.notice(
                "transparent mode: \(client) connected straight to the proxy's port, not redirected by the "
                    + "gateway's firewall: closed (devices reach it through the nftables redirect; run "
                    + "atsproxy run --mode transparent --print-nft)", kind: "transparent: not redirected"))
            connection.close()
        case .unavailable(let error):
            server.sink.write(.notice(
                "transparent mode: cannot tell where \(client)'s connection was going (\(error)): closed; only "
                    + "connections redirected by the gateway's nftables rule can be served",
                kind: "transparent: no original destination"))
            connection.close()
        }
    }

    /// A tunnel's connection: the session starts at the destination the device asked for, as a transparent one.
    private func startTunnelled(_ tunnelled: TunnelledConnection) {
        if tunnelled.destination.port == 443 { server.noteQUICFallback(client: tunnelled.client.host) }
        run(session.startTransparent(
            destinationAddress: tunnelled.destination.host, port: Int(tunnelled.destination.port),
            resolvedName: tunnelled.resolvedName))
    }

    func connection(_ connection: Connection, received bytes: UnsafeRawBufferPointer) {
        run(session.handleReceived(bytes, from: .client))
    }

    func connectionReadEOF(_ connection: Connection) {
        run(session.handle(.clientEOF))
    }

    func connection(_ connection: Connection, writabilityChanged writable: Bool) {
        if writable, throttle != nil { pump(.client) }
        clientRoomChanged(writable && !(throttle?.client.isFull ?? false))
    }

    /// Backpressure: the client cannot take more (its socket's or its shaped leg's buffer is full), so stop reading
    /// what would be sent to it; or it can again.
    private func clientRoomChanged(_ room: Bool) {
        if room {
            if !sessionPaused.contains(.upstream) { upstream?.resumeReading() }
            for (lane, connection) in lanes where !sessionPaused.contains(.lane(lane)) { connection.resumeReading() }
        } else {
            upstream?.pauseReading()
            for connection in lanes.values { connection.pauseReading() }
        }
    }

    func connectionBecameQuiet(_ connection: Connection) {
        if !tunnelled { run(session.handle(.peerQuiet(.client))) }
    }

    func connectionShutdownRequested(_ connection: Connection) {
        // Graceful shutdown: let the exchange in flight finish; the deadline in shutdownGracefully closes the rest.
        if session.isIdle { connection.close() } else if !tunnelled { run(session.handle(.stopping)) }
    }

    func connectionClosed(_ connection: Connection, error: IOError?) {
        clientGone = true
        if !tunnelled { run(session.handle(.clientClosed(error: error?.description))) }
        endUpstream()
        upstream = nil
        for connection in lanes.values {
            (connection.handler as? OutboundSide)?.detach()
            connection.abort()
        }
        lanes = [:]
        client = nil
        for timer in timers.removeAll() { loop.cancelTimer(timer) }
        if let throttle {
            // Records held for bytes that will never go out are written now.
            for leg in throttle.allLegs { retire(leg, into: nil) }
            self.throttle = nil
        }
        for id in holds { server.environment.holds.remove(id) }
        holds = []
    }

    // MARK: Upstream events (from the current generation only)

    /// An event of the upstream or of a lane, as the session sees it. Events of replaced upstreams (an older
    /// generation) are dropped; closed lanes are detached and report nothing.
    fileprivate func outbound(_ tag: OutboundTag, _ event: OutboundEvent) {
        let sessionEvent: ProxyEvent
        switch (tag, event) {
        case (.upstream(let generation), _) where generation != upstreamGeneration:
            return
        case (_, .writable(let writable)):
            if writable, throttle != nil {
                if case .lane(let lane) = tag { pump(.lane(lane)) } else { pump(.upstream) }
            }
            upstreamSideWritability(writable)
            return
        case (.upstream, .opened): sessionEvent = .upstreamConnected
        case (.upstream, .received(let bytes)):
            run(session.handleReceived(bytes, from: .upstream))
            return
        case (.upstream, .eof): sessionEvent = .upstreamEOF
        case (.upstream, .quiet): sessionEvent = .peerQuiet(.upstream)
        case (.lane(let lane), .quiet): sessionEvent = .peerQuiet(.lane(lane))
        case (.upstream, .closed(let connected, let error)):
            upstream = nil
            if clientHeld { releaseHoldIfClear() }
            sessionEvent = connected
                ? .upstreamClosed(error: error?.description)
                : .upstreamConnectFailed(
                    error: error?.description ?? "connection closed",
                    failure: error?.errnoCode == ETIMEDOUT ? .timedOut : .cannotConnect)
        case (.lane(let lane), .opened): sessionEvent = .laneConnected(lane)
        case (.lane(let lane), .received(let bytes)):
            run(session.handleReceived(bytes, from: .lane(lane)))
            return
        case (.lane(let lane), .eof): sessionEvent = .laneEOF(lane)
        case (.lane(let lane), .closed(let connected, let error)):
            lanes[lane] = nil
            if clientHeld { releaseHoldIfClear() }
            sessionEvent = connected
                ? .laneClosed(lane, error: error?.description)
                : .laneConnectFailed(lane, error: error?.description ?? "connection closed")
        }
        run(session.handle(sessionEvent))
    }

    /// An upstream (or lane) connection's write buffer filled or drained: stop or restart reading the client.
    private func upstreamSideWritability(_ writable: Bool) {
        if writable {
            releaseHoldIfClear()
        } else {
            holdClient()
        }
        tellClientHeld()
    }

    /// Stops reading the client while an upstream-side write buffer is full (told to the session by
    /// `tellClientHeld`: its deadlines must not blame the client for this wait).
    private func holdClient() {
        client?.pauseReading()
        clientHeld = true
    }

    /// Reads the client again once every upstream-side connection left can take more. Also after one closes: a
    /// lane whose full buffer held the client sends no writability event once detached, and the client would stay
    /// unread (with its request deadlines off) until the idle timeout.
    private func releaseHoldIfClear() {
        guard upstreamSideTakesMore else { return }
        if !sessionPaused.contains(.client) { client?.resumeReading() }
        clientHeld = false
    }

    /// Every upstream-side connection (and, throttled, its shaped leg) can take more.
    private var upstreamSideTakesMore: Bool {
        (upstream?.isWritable ?? true) && lanes.values.allSatisfy(\.isWritable) && !(throttle?.upstreamSideFull ?? false)
    }

    /// The client's connection (and, throttled, its shaped leg) can take more.
    private var clientTakesMore: Bool {
        (client?.isWritable ?? true) && !(throttle?.client.isFull ?? false)
    }

    /// Tells the session when holding the client started or ended since it was last told.
    private func tellClientHeld() {
        guard clientHeld != clientHeldTold, client != nil, !tunnelled else { return }
        clientHeldTold = clientHeld
        run(session.handle(.clientReadingHeld(clientHeld)))
    }

    // MARK: Commands

    /// Schedules the loop timer for a session deadline due at `due` (monotonic nanoseconds), replacing any pending one.
    private func armSessionTimer(_ timer: ProxyTimer, due: UInt64, now: UInt64) {
        let loopTimer = loop.scheduleTimer(after: .nanoseconds(Int64(clamping: due &- now))) { [weak self] in
            self?.sessionTimerFired(timer)
        }
        if let replaced = timers.armed(timer, loopTimer: loopTimer, firesAt: due) { loop.cancelTimer(replaced) }
    }

    /// A deadline's loop timer fired: early when the deadline was restarted later since (re-armed for the rest),
    /// else the session hears of it.
    private func sessionTimerFired(_ timer: ProxyTimer) {
        guard let due = timers.due(timer) else { return }
        let now = monotonicNanoseconds()
        if now < due {
            armSessionTimer(timer, due: due, now: now)
            return
        }
        timers.remove(timer)
        guard client != nil else { return }
        run(session.handle(.timerFired(timer)))
    }

    /// Carries out a session's commands, then gives their array back to the session for reuse.
    private func run(_ commands: consuming [ProxyCommand]) {
        // Iterated through a copy (one retain) so that `commands` is still the caller's to hand back below.
        for command in copy commands {
            switch command {
            case .sendToClient(let bytes):
                if throttle != nil {
                    shapedSend(bytes, to: .client)
                    break
                }
                client?.write(bytes)
                if let client, !client.isWritable { upstream?.pauseReading() }
            case .sendToUpstream(let bytes):
                if throttle != nil {
                    shapedSend(bytes, to: .upstream)
                    break
                }
                upstream?.write(bytes)
                if let upstream, !upstream.isWritable { holdClient() }
            case .connectLane(let lane, let address, let port):
                connectLane(lane, address: address, port: port)
            case .sendToLane(let lane, let bytes):
                guard let connection = lanes[lane] else { break }
                if throttle != nil {
                    shapedSend(bytes, to: .lane(lane))
                    break
                }
                connection.write(bytes)
                if !connection.isWritable { holdClient() }
            case .closeLane(let lane):
                // Detached first: the session is done with the lane and wants none of its late events.
                if let connection = lanes.removeValue(forKey: lane) {
                    if let leg = throttle?.removeLane(lane) { retire(leg, into: connection) }
                    (connection.handler as? OutboundSide)?.detach()
                    if clientGone { connection.abort() } else { connection.close() }
                    if clientHeld { releaseHoldIfClear() }
                }
            case .pauseReading(let peer):
                sessionPaused.insert(peer)
                connection(for: peer)?.pauseReading()
            case .resumeReading(let peer):
                sessionPaused.remove(peer)
                let blocked = switch peer {
                case .client: !upstreamSideTakesMore
                case .upstream, .lane: !clientTakesMore
                }
                if !blocked { connection(for: peer)?.resumeReading() }
            case .connectUpstream(let address, let port):
                connectUpstream(address: address, port: port)
            case .shutdownClientWrite:
                if let leg = throttle?.client, !leg.isEmpty { leg.endings.append(.shutdownWrite) } else { client?.shutdownWrite() }
            case .shutdownUpstreamWrite:
                if let leg = throttle?.upstream, !leg.isEmpty { leg.endings.append(.shutdownWrite) } else { upstream?.shutdownWrite() }
            case .closeClient:
                if let leg = throttle?.client, !leg.isEmpty { leg.endings.append(.close) } else { client?.close() }
            case .resetClient:
                if let leg = throttle?.client, !leg.isEmpty { leg.endings.append(.reset) } else { client?.reset() }
            case .closeUpstream:
                // What the session still had queued for the old upstream goes before its close, unshaped.
                if let old = throttle?.replaceUpstream() { retire(old, into: upstream) }
                upstreamGeneration += 1
                endUpstream()
                upstream = nil
                if clientHeld { releaseHoldIfClear() }
            case .startTunnel:
                if let throttle {
                    // A raw tunnel is not shaped (the byte relay carries it): what was queued goes first.
                    retire(throttle.client, into: client)
                    retire(throttle.replaceUpstream(), into: upstream)
                    self.throttle = nil
                }
                if let client, let upstream {
                    tunnelled = true
                    // The closure keeps this side alive until the tunnel ends, for the session to log it.
                    // The session reads the two hellos in the tunnel's first bytes, then stops watching.
                    var watch: ((Bool, UnsafeRawBufferPointer) -> Bool)?
                    if session.watchesTunnel {
                        watch = { [self] fromClient, bytes in
                            run(session.handle(.tunnelBytes(fromClient: fromClient, Array(bytes))))
                            return session.watchesTunnel
                        }
                    }
                    Relay.start(client, upstream, watch: watch) { [self] fromClient, toClient in
                        run(session.handle(.tunnelClosed(fromClient: fromClient, toClient: toClient)))
                        if session.awaitsSideCheck { finishing = self }
                    }
                }
            case .startTimer(let timer, let delay):
                let now = monotonicNanoseconds()
                let due = now &+ SessionTimers.nanoseconds(delay)
                if !timers.postpone(timer, to: due) { armSessionTimer(timer, due: due, now: now) }
            case .throttle(let order):
                if throttle == nil { throttle = ThrottledConnection(order) }
            case .log(let entry) where throttle?.client.isEmpty == false && ShapedLeg.waitsForBytes(entry):
                // The exchange ended when its last byte went out through the throttle, not when it was queued.
                throttle?.client.endings.append(.log(entry, queuedAt: monotonicNanoseconds()))
            case .hold(let held):
                hold(held)
            case .unhold(let id):
                holds.remove(id)
                server.environment.holds.remove(id)
                if holds.isEmpty { client?.setIdleTimeout(server.environment.timeouts.idle) }
            case .log(.diagnostics(var record)):
                // Filed under its connection for sinks that keep records per connection (a capture).
                record.connectionID = sessionID
                server.sink.write(.diagnostics(record))
            case .log(let entry):
                server.sink.write(entry)
            }
        }
        session.recycle(consume commands)
        if finishing != nil, !session.awaitsSideCheck { finishing = nil }
        tellClientHeld()
    }

    /// Lists a held exchange in the registry; its release comes back to the session on this loop. While anything is
    /// held, the client's idle timeout is stretched past the hold's limit: the app is waiting for a person, not idle.
    private func hold(_ held: HeldExchange) {
        guard client != nil else { return }
        holds.insert(held.id)
        let idle = server.environment.timeouts.idle
        let needed = server.environment.breakpointTimeout + .seconds(30)
        if needed > idle { client?.setIdleTimeout(needed) }
        let loop = self.loop
        let bound = LoopOwned(self)
        let id = held.id
        server.environment.holds.register(held) { release in
            loop.execute { bound.value.released(id, release) }
        }
    }

    /// A person released a held exchange (on this loop).
    private func released(_ id: UInt64, _ release: HoldRelease) {
        guard holds.remove(id) != nil, client != nil else { return }
        if let timer = timers.remove(.hold(id)) { loop.cancelTimer(timer) }
        if holds.isEmpty { client?.setIdleTimeout(server.environment.timeouts.idle) }
        run(session.handle(.holdReleased(id, release)))
    }

    /// Closes the upstream connection. Once the client is gone it ends at once: a close would linger, reading and
    /// discarding the rest of a response for up to 2 s (1.3 GB of a large download on loopback), where nginx closes.
    /// A raw tunnel's upstream still lingers: the client's last bytes may be on their way to it.
    private func endUpstream() {
        if clientGone && !tunnelled { upstream?.abort() } else { upstream?.close() }
    }

    // MARK: Throttle (ShapedLeg.swift)

    /// A send on a throttled connection: queued on its leg, then as much written as the shaper allows.
    private func shapedSend(_ bytes: [UInt8], to peer: ProxyPeer) {
        guard let throttle else { return }
        throttle.leg(peer).offer(bytes, at: monotonicNanoseconds())
        pump(peer)
    }

    /// Writes what `peer`'s leg may send now, arms its timer for the rest, carries out the endings it was holding
    /// once empty, and tells backpressure when the leg filled or drained.
    private func pump(_ peer: ProxyPeer) {
        guard let throttle, let leg = throttle.existingLeg(peer) else { return }
        if let connection = connection(for: peer), connection.isWritable {
            let now = monotonicNanoseconds()
            if let wake = leg.pump(into: connection, at: now) { arm(leg, for: peer, at: wake, now: now) }
            if leg.isEmpty, !leg.endings.isEmpty { end(leg, connection) }
        }
        let limits = loop.writeLimits
        guard leg.updateFull(highWater: limits.highWater, lowWater: limits.lowWater) else { return }
        switch peer {
        case .client:
            clientRoomChanged(!leg.isFull && (client?.isWritable ?? true))
        case .upstream, .lane:
            if leg.isFull { holdClient() } else { releaseHoldIfClear() }
        }
    }

    /// One timer per leg, at the earliest instant its shaper asked for.
    private func arm(_ leg: ShapedLeg, for peer: ProxyPeer, at wake: UInt64, now: UInt64) {
        if let pending = leg.timer {
            guard wake < leg.timerAt else { return }
            loop.cancelTimer(pending)
        }
        leg.timerAt = wake
        leg.timer = loop.scheduleTimer(after: .nanoseconds(Int64(wake &- min(wake, now)))) { [weak self, weak leg] in
            // A leg replaced (its upstream closed) or a client gone has nothing left to pump.
            guard let self, let leg, self.throttle?.existingLeg(peer) === leg else { return }
            leg.timer = nil
            self.pump(peer)
        }
    }

    /// Carries out the endings a leg held back until its bytes were written.
    private func end(_ leg: ShapedLeg, _ connection: Connection?) {
        let endings = leg.endings
        leg.endings = []
        for ending in endings {
            switch ending {
            case .shutdownWrite: connection?.shutdownWrite()
            case .close: connection?.close()
            case .reset: connection?.reset()
            case .log(let entry, let queuedAt):
                server.sink.write(ShapedLeg.delayed(entry, by: monotonicNanoseconds() &- queuedAt))
            }
        }
    }

    /// A leg no longer shaped (its connection closes, or becomes a raw tunnel): its bytes written at once, then its
    /// endings.
    private func retire(_ leg: ShapedLeg, into connection: Connection?) {
        if let timer = leg.timer { loop.cancelTimer(timer) }
        leg.timer = nil
        leg.flush(into: connection)
        end(leg, connection)
    }

    /// Runs `connect` after the throttle's DNS delay (at once without one); never at 100% loss, where the app
    /// waits for its own timeout as under the Network Link Conditioner. `stillWanted` is checked when the delay ends.
    private func afterThrottleDelay(_ stillWanted: @escaping () -> Bool, _ connect: @escaping () -> Void) {
        guard let throttle else { return connect() }
        if throttle.stalls { return }
        guard throttle.connectDelay > .zero else { return connect() }
        loop.scheduleTimer(after: throttle.connectDelay) { [weak self] in
            guard let self, self.client != nil, stillWanted() else { return }
            connect()
        }
    }

    private func connection(for peer: ProxyPeer) -> Connection? {
        switch peer {
        case .client: client
        case .upstream: upstream
        case .lane(let lane): lanes[lane]
        }
    }

    // MARK: Lanes

    private func connectLane(_ lane: UpstreamLane, address: String, port: Int) {
        guard throttle != nil else { return resolveAndConnectLane(lane, address: address, port: port) }
        afterThrottleDelay({ true }) { [self] in resolveAndConnectLane(lane, address: address, port: port) }
    }

    private func resolveAndConnectLane(_ lane: UpstreamLane, address: String, port: Int) {
        let timeout = server.environment.timeouts.connect
        loop.resolve(host: address, port: UInt16(clamping: port)) { [self] result in
            guard client != nil else { return }
            switch result {
            case .success(let addresses):
                guard let target = Self.preferredAddress(addresses) else {
                    run(session.handle(.laneConnectFailed(lane, error: "no address for \(address)")))
                    return
                }
                if let refusal = refusal(target, requested: address) {
                    run(session.handle(.laneConnectFailed(lane, error: refusal)))
                    return
                }
                let connection = loop.connect(to: target, timeout: timeout, handler: OutboundSide(owner: self, tag: .lane(lane)))
                // A connect that failed at once has already reported it.
                if !connection.isClosed {
                    lanes[lane] = connection
                    if throttle != nil { pump(.lane(lane)) }
                }
            case .failure(let error):
                run(session.handle(.laneConnectFailed(lane, error: error.description)))
            }
        }
    }

    /// Why the proxy will not connect to `target` for this client (itself, or loopback for a network client).
    private func refusal(_ target: SocketAddress, requested: String) -> String? {
        guard let reason = server.admission.refusal(
            target: target, requested: requested, clientIsLoopback: clientIsLoopback)
        else { return nil }
        return "refused by the proxy: \(reason)"
    }

    /// IPv4 first: most origins answer there, and a failed IPv6 route would cost the connect timeout.
    private static func preferredAddress(_ addresses: [SocketAddress]) -> SocketAddress? {
        addresses.first(where: { if case .ipv4 = $0 { true } else { false } }) ?? addresses.first
    }

    private func connectUpstream(address: String, port: Int) {
        upstreamGeneration += 1
        let generation = upstreamGeneration
        session.upstreamAddress = nil
        guard throttle != nil else { return resolveAndConnect(address: address, port: port, generation: generation) }
        afterThrottleDelay({ [weak self] in self?.upstreamGeneration == generation }) { [self] in
            resolveAndConnect(address: address, port: port, generation: generation)
        }
    }

    private func resolveAndConnect(address: String, port: Int, generation: Int) {
        let timeout = server.environment.timeouts.connect
        loop.resolve(host: address, port: UInt16(clamping: port)) { [self] result in
            // A newer upstream was asked for, or the client left, while the name resolved.
            guard generation == upstreamGeneration, client != nil else { return }
            switch result {
            case .success(let addresses):
                guard let target = Self.preferredAddress(addresses) else {
                    run(session.handle(
                        .upstreamConnectFailed(error: "no address for \(address)", failure: .cannotFindHost)))
                    return
                }
                if let refusal = refusal(target, requested: address) {
                    run(session.handle(.upstreamConnectFailed(error: refusal, failure: .cannotConnect)))
                    return
                }
                // Only the exchange record's sinks need it: the text is not made otherwise.
                if server.environment.recording != nil { session.upstreamAddress = target.description }
                upstream = loop.connect(to: target, timeout: timeout, handler: OutboundSide(owner: self, tag: .upstream(generation: generation)))
                if throttle != nil { pump(.upstream) }
            case .failure(let error):
                run(session.handle(.upstreamConnectFailed(error: error.description, failure: .cannotFindHost)))
            }
        }
    }
}

/// Which outbound connection of a session an event comes from.
enum OutboundTag {
    /// The session's upstream; the generation tells it from replaced ones.
    case upstream(generation: Int)
    /// An extra upstream connection (a lane of an HTTP/1.1 pool).
    case lane(UpstreamLane)
}

/// What an outbound connection reports to its client side.
enum OutboundEvent {
    case opened
    case received(UnsafeRawBufferPointer)
    case eof
    case writable(Bool)
    case quiet
    case closed(connected: Bool, IOError?)
}

/// The handler of an upstream or lane connection: hands every event to its client side, tagged.
final class OutboundSide: ConnectionHandler {
    private weak var owner: ClientSide?
    private let tag: OutboundTag
    private var opened = false

    init(owner: ClientSide, tag: OutboundTag) {
        self.owner = owner
        self.tag = tag
    }

    /// Stops reporting to the session (it closed this connection).
    func detach() { owner = nil }

    func connectionOpened(_ connection: Connection) {
        opened = true
        connection.setQuietNotice(after: ClientSide.quietDelay)
        owner?.outbound(tag, .opened)
    }

    func connection(_ connection: Connection, received bytes: UnsafeRawBufferPointer) {
        owner?.outbound(tag, .received(bytes))
    }

    func connectionReadEOF(_ connection: Connection) {
        owner?.outbound(tag, .eof)
    }

    func connection(_ connection: Connection, writabilityChanged writable: Bool) {
        owner?.outbound(tag, .writable(writable))
    }

    func connectionBecameQuiet(_ connection: Connection) {
        owner?.outbound(tag, .quiet)
    }

    func connectionShutdownRequested(_ connection: Connection) {
        // The client side decides when its session is done; its outbound connections close with it.
    }

    func connectionClosed(_ connection: Connection, error: IOError?) {
        owner?.outbound(tag, .closed(connected: opened, error))
    }
}

/// A loop's object handed to another thread only to be sent back to its loop (`EventLoop.execute`).
private struct LoopOwned<Value: AnyObject>: @unchecked Sendable {
    // @unchecked: `value` is only dereferenced on the loop thread that owns it.
    let value: Value
    init(_ value: Value) { self.value = value }
}
