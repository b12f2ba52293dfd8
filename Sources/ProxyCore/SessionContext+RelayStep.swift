// What every relay step does first, whatever carries its bytes: the plaintext dumps of level 3, and a (re)connect
// the relay asked for. Plain forwarding then sends the bytes as they are (`PlainLayer.apply`); interception encrypts
// them through the legs' TLS engines (`apply`).

extension SessionContext {
    /// Dumps the step's plaintext and carries out its connect, closing the upstream it replaces; returns whether
    /// an upstream is still open. Inlined, and without an `inout` to a layer's property: as a call with one, it
    /// cost 700 instructions per keep-alive request (benchmarks/core-instructions.sh).
    @inline(__always)
    func beginRelayStep(_ o: borrowing RelayOutput, upstreamOpen: Bool) -> Bool {
        dumpPlaintext(o.toUpstream, toClient: false)
        dumpPlaintext(o.toClient, toClient: true)
        guard let target = o.connect else { return upstreamOpen }
        if upstreamOpen { commands.append(.closeUpstream) }
        commands.append(.connectUpstream(address: target.host, port: target.port))
        return false
    }

    /// Reading paused or resumed because the other side's flow control filled or drained.
    @inline(__always)
    func applyPauses(_ o: borrowing RelayOutput) {
        for (peer, paused) in o.pauseReading {
            commands.append(paused ? .pauseReading(peer) : .resumeReading(peer))
        }
    }
}
