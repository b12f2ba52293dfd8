import ProxyCore
import ProxyEventLoop

extension ProxyServer {
    /// `--mode transparent`: the UDP socket the gateway's ruleset sends the devices' UDP 443 to, on the transparent
    /// listener's address and port. Each QUIC attempt is refused at once (QUICRefusal) and counted; the first of a
    /// device's attempts is a notice.
    public func refuseQUIC(host: String, port: UInt16) throws(IOError) -> DatagramSocket {
        let refusals = environment.quicRefusals
        let sink = self.sink
        return try group.bindDatagrams(host: host, port: port) { datagram, sender in
            guard let (header, reply) = QUICLongHeader.refusal(of: datagram) else { return nil }
            let client = sender.unmapped.host
            if refusals.refused(client: client, connectionID: header.destinationID) {
                sink.write(.notice(
                    "QUIC (HTTP/3, UDP 443) from \(client) refused: transparent mode sends apps to TCP, where the "
                        + "proxy sees them", kind: "QUIC refused"))
            }
            return reply
        }
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
