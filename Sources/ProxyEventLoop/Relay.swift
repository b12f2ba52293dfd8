/// Relays bytes both ways between two connections on the same loop, the proxy's tunnel.
///
/// Backpressure: when one side's write buffer passes its high-water mark, reading from the other side pauses until
/// it drains below the low-water mark. A read EOF on one side becomes a half-close (FIN after the queued bytes) on the
/// other; each connection closes itself once it has both read EOF and sent FIN. An error on either side aborts both.
public enum Relay {
    /// Installs relay handlers on `a` and `b` (replacing their handlers) and starts forwarding. `toB` / `toA` are
    /// bytes already received that must be forwarded first (e.g. parser leftovers after CONNECT). Loop thread only.
    public static func start(_ a: Connection, _ b: Connection, pendingToB toB: [UInt8] = [], pendingToA toA: [UInt8] = [])
    {
        precondition(a.loop === b.loop, "both ends of a relay must live on the same loop")
        a.loop.preconditionInEventLoop()
        let sideA = RelaySide(peer: b)
        let sideB = RelaySide(peer: a)
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

/// The handler for one end of a relay: forwards what it reads to `peer`.
final class RelaySide: ConnectionHandler {
    private weak var peer: Connection?
    // The peer is held strongly until this side closes, so neither end is freed while the other still relays.
    private var peerRetainer: Connection?

    init(peer: Connection) {
        self.peer = peer
        self.peerRetainer = peer
    }

    func connection(_ connection: Connection, received bytes: UnsafeRawBufferPointer) {
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
            if error != nil { peer.abort() } else { peer.close() }
        }
        peerRetainer = nil
    }
}
