import Foundation
import ProxyCore
import ProxyEventLoop

/// Runs `ProxySession`s on an event-loop group: the only place where proxy commands become socket operations.
public final class ProxyServer: Sendable {
    public let environment: ProxyEnvironment
    public let group: EventLoopGroup
    let sink: ProxyLogSink
    let counter = SessionCounter()

    public init(environment: ProxyEnvironment, group: EventLoopGroup, sink: ProxyLogSink) {
        self.environment = environment
        self.group = group
        self.sink = sink
    }

    /// Listens on `host:port` (port 0 picks a free port: read `Listener.port`).
    public func listen(host: String, port: UInt16) throws(IOError) -> Listener {
        try group.listen(host: host, port: port) { [self] loop in
            ClientSide(server: self, loop: loop, sessionID: counter.next())
        }
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
    private let server: ProxyServer
    private let loop: EventLoop
    private let session: ProxySession
    private var client: Connection?
    private var upstream: Connection?
    /// Distinguishes the current upstream from closed ones whose late events must be ignored.
    private var upstreamGeneration = 0
    private var tunnelled = false
    private var idleTimer: TimerID?
    private var lastActivity = ContinuousClock.now

    init(server: ProxyServer, loop: EventLoop, sessionID: UInt64) {
        self.server = server
        self.loop = loop
        self.session = ProxySession(
            id: sessionID, environment: server.environment, now: { Date().timeIntervalSince1970 })
    }

    // MARK: Client events

    func connectionOpened(_ connection: Connection) {
        client = connection
        idleTimer = connection.startTimer(after: server.environment.timeouts.idle)
    }

    func connection(_ connection: Connection, received bytes: UnsafeRawBufferPointer) {
        lastActivity = .now
        run(session.handle(.clientBytes(Array(bytes))))
    }

    func connectionReadEOF(_ connection: Connection) {
        run(session.handle(.clientEOF))
    }

    func connection(_ connection: Connection, writabilityChanged writable: Bool) {
        // Backpressure: the client cannot take more, so stop reading what would be sent to it.
        if writable { upstream?.resumeReading() } else { upstream?.pauseReading() }
    }

    func connection(_ connection: Connection, timerFired timer: TimerID) {
        guard timer == idleTimer else { return }
        let idle = server.environment.timeouts.idle
        let quiet = ContinuousClock.now - lastActivity
        if quiet >= idle {
            server.sink.write(.notice("closing a connection idle for \(idle)"))
            connection.close()
            upstream?.close()
        } else {
            idleTimer = connection.startTimer(after: idle - quiet)
        }
    }

    func connectionShutdownRequested(_ connection: Connection) {
        // Graceful shutdown: let the exchange in flight finish; the deadline in shutdownGracefully closes the rest.
        if session.isIdle { connection.close() }
    }

    func connectionClosed(_ connection: Connection, error: IOError?) {
        if let idleTimer { connection.cancelTimer(idleTimer) }
        if !tunnelled { run(session.handle(.clientClosed(error: error?.description))) }
        upstream?.close()
        upstream = nil
        client = nil
    }

    // MARK: Upstream events (from the current generation only)

    fileprivate func upstreamOpened(_ generation: Int) {
        guard generation == upstreamGeneration else { return }
        run(session.handle(.upstreamConnected))
    }

    fileprivate func upstreamReceived(_ generation: Int, _ bytes: UnsafeRawBufferPointer) {
        guard generation == upstreamGeneration else { return }
        lastActivity = .now
        run(session.handle(.upstreamBytes(Array(bytes))))
    }

    fileprivate func upstreamEOF(_ generation: Int) {
        guard generation == upstreamGeneration else { return }
        run(session.handle(.upstreamEOF))
    }

    fileprivate func upstreamWritability(_ generation: Int, _ writable: Bool) {
        guard generation == upstreamGeneration else { return }
        if writable { client?.resumeReading() } else { client?.pauseReading() }
    }

    fileprivate func upstreamClosed(_ generation: Int, connected: Bool, _ error: IOError?) {
        guard generation == upstreamGeneration else { return }
        upstream = nil
        if connected {
            run(session.handle(.upstreamClosed(error: error?.description)))
        } else {
            run(session.handle(.upstreamConnectFailed(error: error?.description ?? "connection closed")))
        }
    }

    // MARK: Commands

    private func run(_ commands: [ProxyCommand]) {
        for command in commands {
            switch command {
            case .sendToClient(let bytes):
                client?.write(bytes)
                if let client, !client.isWritable { upstream?.pauseReading() }
            case .sendToUpstream(let bytes):
                upstream?.write(bytes)
                if let upstream, !upstream.isWritable { client?.pauseReading() }
            case .connectUpstream(let address, let port):
                connectUpstream(address: address, port: port)
            case .shutdownClientWrite:
                client?.shutdownWrite()
            case .shutdownUpstreamWrite:
                upstream?.shutdownWrite()
            case .closeClient:
                client?.close()
            case .closeUpstream:
                upstreamGeneration += 1
                upstream?.close()
                upstream = nil
            case .startTunnel:
                if let client, let upstream {
                    tunnelled = true
                    if let idleTimer { client.cancelTimer(idleTimer) }
                    Relay.start(client, upstream)
                }
            case .log(let entry):
                server.sink.write(entry)
            }
        }
    }

    private func connectUpstream(address: String, port: Int) {
        upstreamGeneration += 1
        let generation = upstreamGeneration
        let timeout = server.environment.timeouts.connect
        let box = LoopBound(self)
        HostResolver.resolve(address, port: port, on: loop) { result in
            let me = box.value
            guard generation == me.upstreamGeneration, me.client != nil else { return }
            switch result {
            case .success(let resolved):
                let handler = UpstreamSide(owner: me, generation: generation)
                me.upstream = me.loop.connect(to: resolved, timeout: timeout, handler: handler)
            case .failure(let error):
                me.run(me.session.handle(.upstreamConnectFailed(error: error.description)))
            }
        }
    }
}

/// The upstream connection's handler: hands every event to its client side, tagged with its generation.
final class UpstreamSide: ConnectionHandler {
    private weak var owner: ClientSide?
    private let generation: Int
    private var opened = false

    init(owner: ClientSide, generation: Int) {
        self.owner = owner
        self.generation = generation
    }

    func connectionOpened(_ connection: Connection) {
        opened = true
        owner?.upstreamOpened(generation)
    }

    func connection(_ connection: Connection, received bytes: UnsafeRawBufferPointer) {
        owner?.upstreamReceived(generation, bytes)
    }

    func connectionReadEOF(_ connection: Connection) {
        owner?.upstreamEOF(generation)
    }

    func connection(_ connection: Connection, writabilityChanged writable: Bool) {
        owner?.upstreamWritability(generation, writable)
    }

    func connectionShutdownRequested(_ connection: Connection) {
        // The client side decides when its session is done; the upstream closes with it.
    }

    func connectionClosed(_ connection: Connection, error: IOError?) {
        owner?.upstreamClosed(generation, connected: opened, error)
    }
}

/// Carries a loop-confined object through a `@Sendable` hop that ends on the same loop (the resolver's callback).
struct LoopBound<Value: AnyObject>: @unchecked Sendable {
    // @unchecked: the value is created on a loop thread and only read back on that loop (HostResolver calls back
    // through `loop.execute`).
    let value: Value
    init(_ value: Value) { self.value = value }
}
