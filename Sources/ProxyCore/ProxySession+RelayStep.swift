// What every relay step does first, whatever carries its bytes: the plaintext dumps of level 3, and a (re)connect
// the relay asked for. Plain forwarding then sends the bytes as they are (`applyPlain`); interception encrypts
// them through the legs' TLS engines (`applyIntercepted`).

extension ProxySession {
    /// Dumps the step's plaintext and carries out its connect, closing the upstream it replaces.
    func beginRelayStep(_ o: borrowing RelayOutput, upstreamOpen: inout Bool) {
        dumpPlaintext(o.toUpstream, toClient: false)
        dumpPlaintext(o.toClient, toClient: true)
        guard let target = o.connect else { return }
        if upstreamOpen { commands.append(.closeUpstream) }
        upstreamOpen = false
        commands.append(.connectUpstream(address: target.host, port: target.port))
    }
}
