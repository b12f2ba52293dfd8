/// Relays bytes both ways between two connections on the same loop, the proxy's tunnel.
///
/// Backpressure: when one side's write buffer passes its high-water mark, reading from the other side pauses until
/// it drains below the low-water mark. A read EOF on one side becomes a half-close (FIN after the queued bytes) on the
/// other; each connection closes itself once it has both read EOF and sent FIN. An error on either side (a reset)
/// resets the other once the bytes queued for it are out, so a peer sees a cut connection as cut, never as an end.
public enum Relay {
    /// Installs relay handlers on `a` and `b` (replacing their handlers) and starts forwarding. `toB` / `toA` are
    /// bytes already received that must be forwarded first (e.g. parser leftovers after CONNECT). `watch` sees
    /// what is read from either end (`fromA` says which), read by read, before it is forwarded, until it returns
    /// false; it must not touch the connections. `onClosed` runs once both ends have closed, with the bytes read
    /// from `a` and from `b`. Loop thread only.
    public static func start(
        _ a: Connection, _ b: Connection, pendingToB toB: [UInt8] = [], pendingToA toA: [UInt8] = [],
        watch: ((_ fromA: Bool, _ bytes: UnsafeRawBufferPointer) -> Bool)? = nil,
        onClosed: ((_ fromA: Int, _ fromB: Int) -> Void)? = nil
    ) {
        precondition(a.loop === b.loop, "both ends of a relay must live on the same loop")
        a.loop.preconditionInEventLoop()
        let tally = RelayTally(onClosed: onClosed)
        tally.watch = watch
        let sideA = RelaySide(peer: b, tally: tally, isA: true)
        let sideB = RelaySide(peer: a, tally: tally, isA: false)
        a.handler = sideA
        b.handler = sideB
        b.write(toB)
        a.write(toA)
        if !b.isWritable { a.pauseReading() }
        if !a.isWritable { b.pauseReading() }
        if a.isReadingPaused && b.isWritable && !a.isClosed { a.resumeReading() }
        if b.isReadingPaused && a.isWritable && !b.isClosed { b.resumeReading() }
    }
}

/// What both ends of one relay share: the bytes each read, and who to tell when both have closed.
final class RelayTally {
    var fromA = 0
    var fromB = 0
    /// Sees both ends' bytes until it returns false.
    var watch: ((Bool, UnsafeRawBufferPointer) -> Bool)?
    private var closedEnds = 0
    private var onClosed: ((Int, Int) -> Void)?

    init(onClosed: ((Int, Int) -> Void)?) { self.onClosed = onClosed }

    func endClosed() {
        closedEnds += 1
        guard closedEnds == 2, let onClosed else { return }
        self.onClosed = nil
        onClosed(fromA, fromB)
    }
}

/// The handler for one end of a relay: forwards what it reads to `peer`.
final class RelaySide: ConnectionHandler {
    private weak var peer: Connection?
    // The peer is held strongly until this side closes, so neither end is freed while the other still relays.
    private var peerRetainer: Connection?
    private let tally: RelayTally
    private let isA: Bool

    init(peer: Connection, tally: RelayTally, isA: Bool) {
        self.peer = peer
        self.peerRetainer = peer
        self.tally = tally
        self.isA = isA
    }

    func connection(_ connection: Connection, received bytes: UnsafeRawBufferPointer) {
        if isA { tally.fromA += bytes.count } else { tally.fromB += bytes.count }
        if let watch = tally.watch, !watch(isA, bytes) { tally.watch = nil }
        guard let peer, !peer.isClosed else { return }
        peer.write(bytes)
        if !peer.isWritable { connection.pauseReading() }
    }

    func connectionReadEOF(_ connection: Connection) {
        peer?.shutdownWrite()
    }

    func connection(_ connection: Connection, writabilityChanged writable: Bool) {
        // This side drained: the peer may read (and forward to us) again.
        guard let peer, !peer.isClosed else { return }
        if writable { peer.resumeReading() } else { peer.pauseReading() }
    }

    func connectionShutdownRequested(_ connection: Connection) {
        // A tunnel has no message boundary to finish at; it is closed when the shutdown deadline passes.
    }

    func connectionClosed(_ connection: Connection, error: IOError?) {
        if let peer, !peer.isClosed {
            if error != nil { peer.reset() } else { peer.close() }
        }
        peerRetainer = nil
        tally.watch = nil
        tally.endClosed()
    }
}
