import ProxyCore
import ProxyEventLoop

extension ProxyServer {
    /// `--mode transparent`: the UDP socket the gateway's ruleset sends the devices' UDP 443 to, on the transparent
    /// listener's address and port. Each QUIC attempt is refused at once (QUICRefusal) and counted; the first of a
    /// device's attempts is a notice.
    public func refuseQUIC(host: String, port: UInt16) throws(IOError) -> DatagramSocket {
        try group.bindDatagrams(host: host, port: port) { [self] datagram, sender in
            quicRefusal(of: datagram, from: sender.unmapped.host, mode: "transparent mode")
        }
    }

    /// The answer that refuses a QUIC attempt in `datagram` from device `client` (nil: not a client's Initial, no
    /// answer), counted; the first attempt of a burst is a notice. `mode` names who sent the app here.
    public func quicRefusal(of datagram: UnsafeRawBufferPointer, from client: String, mode: String) -> [UInt8]? {
        guard let (header, reply) = QUICLongHeader.refusal(of: datagram) else { return nil }
        if environment.quicRefusals.refused(client: client, connectionID: header.destinationID) {
            sink.write(.notice(
                "QUIC (HTTP/3, UDP 443) from \(client) refused: \(mode) sends apps to TCP, where the proxy sees them",
                kind: "QUIC refused"))
        }
        return reply
    }

    /// A device's transparent TCP connection to port 443: the notice that its refused QUIC attempts ended in this
    /// fallback, once per burst of attempts.
    func noteQUICFallback(client: String) {
        guard let attempts = environment.quicRefusals.fellBack(client: client) else { return }
        let plural = attempts == 1 ? "attempt" : "attempts"
        sink.write(.notice(
            "\(client): \(attempts) QUIC \(plural) refused; the app fell back to TCP", kind: "QUIC fallback"))
    }
}
