import Dispatch
import Foundation
import Onboarding
import ProxyEventLoop
import ProxyServer
import Synchronization
import WireGuardCore

/// WireGuard mode while the proxy runs: the adapter between the UDP socket, the sans-io tunnel (`WireGuardTunnel`:
/// WireGuard, IP, the small TCP) and the proxy's sessions. Each TCP connection a device opens through the tunnel
/// becomes a local stream pair: this end (`TunnelFlowBridge`) on the socket's loop, the other served by the
/// `ProxyServer` as a transparent connection to the destination the device asked for. UDP to the proxy's address
/// port 53 is DNS, UDP 443 is QUIC (refused), other UDP is dropped and counted.
///
/// Thread-safety: everything but the counters runs on the socket's loop thread (the datagram callback, the
/// bridges' handlers, the timer); `summary()` reads only the atomics.
final class WireGuardPort: @unchecked Sendable {
    // @unchecked: the mutable state is confined to `loop`'s thread, set up before the socket's first datagram.
    private var tunnel: WireGuardTunnel
    private let server: ProxyServer
    private let log: ProxyLogSink
    /// Names for the log, by peer.
    private let deviceNames: [String]
    private var loop: EventLoop?
    private var socket: DatagramSocket?
    /// Where each device's last authenticated datagram came from (a phone changing network is followed).
    private var endpoints: [SocketAddress?]
    private var announced: [String?]
    private var bridges: [BridgeKey: TunnelFlowBridge] = [:]
    private var timer: (deadline: UInt64, id: TimerID)?
    /// When a passive keepalive may be due (a device sent data that got no answer: WireGuard's §6.5).
    private var keepaliveCheck: UInt64?
    private var warnedUDP = false
    private var identification: UInt16 = 0
    /// Per device: the names its DNS queries resolved, by IPv4 address.
    private var resolvedNames: [[UInt32: String]]
    let tcpConnections = Atomic<Int>(0)
    let droppedUDP = Atomic<Int>(0)
    let droppedPackets = Atomic<Int>(0)

    struct BridgeKey: Hashable {
        let peer: Int
        let flow: TunnelTCP.FlowID
    }

    init(tunnel: WireGuardTunnel, server: ProxyServer, log: ProxyLogSink, deviceNames: [String]) {
        self.tunnel = tunnel
        self.server = server
        self.log = log
        self.deviceNames = deviceNames
        endpoints = Array(repeating: nil, count: deviceNames.count)
        announced = Array(repeating: nil, count: deviceNames.count)
        resolvedNames = Array(repeating: [:], count: deviceNames.count)
    }

    private var now: UInt64 { DispatchTime.now().uptimeNanoseconds }

    // MARK: Datagrams

    /// One datagram from `sender` (the socket's callback, on its loop).
    func receive(_ datagram: [UInt8], from sender: SocketAddress, on socket: DatagramSocket) {
        if self.socket == nil {
            self.socket = socket
            loop = socket.eventLoop
        }
        let now = self.now
        let output = tunnel.receive(datagram, now: now)
        for reply in output.replies { socket.send(reply, to: sender) }
        if output.datagrams.isEmpty, output.replies.isEmpty, keepaliveCheck == nil {
            keepaliveCheck = now + WireGuardLimits.keepaliveTimeout
        }
        for event in output.events {
            switch event {
            case .handshake(let peer):
                endpoints[peer] = sender
                let from = "\(sender.unmapped)"
                if announced[peer] != from {
                    announced[peer] = from
                    log.notice("WireGuard: handshake with \(deviceNames[peer]) from \(from)")
                }
            case .echo(let peer), .tcp(let peer, _), .udp(let peer, _, _):
                endpoints[peer] = sender
            case .dropped:
                droppedPackets.add(1, ordering: .relaxed)
            }
        }
        handle(output)
    }

    /// Sends an output's datagrams and acts on its events.
    private func handle(_ output: WireGuardTunnel.Output) {
        for (peer, datagram) in output.datagrams {
            if let endpoint = endpoints[peer] { socket?.send(datagram, to: endpoint) }
        }
        for event in output.events {
            switch event {
            case .tcp(let peer, let tcpEvent): handle(tcpEvent, peer: peer)
            case .udp(let peer, let header, let datagram): handleUDP(peer: peer, header, datagram)
            case .handshake, .echo, .dropped: break
            }
        }
        armTimer()
    }

    // MARK: TCP

    private func handle(_ event: TunnelTCP.Event, peer: Int) {
        switch event {
        case .opened(let flow):
            open(flow, peer: peer)
        case .data(let flow, let bytes):
            guard let bridge = bridges[BridgeKey(peer: peer, flow: flow)] else { return }
            if !bridge.deliver(bytes) { withTCP(peer) { $0.setReceivePaused(true, on: flow) } }
        case .finished(let flow):
            bridges[BridgeKey(peer: peer, flow: flow)]?.deviceFinished()
        case .reset(let flow), .closed(let flow):
            bridges.removeValue(forKey: BridgeKey(peer: peer, flow: flow))?.deviceGone()
        case .writable(let flow):
            bridges[BridgeKey(peer: peer, flow: flow)]?.resumeSession()
        }
    }

    /// A device finished a TCP handshake: a stream pair, its far end served as a transparent connection.
    private func open(_ flow: TunnelTCP.FlowID, peer: Int) {
        guard let loop else { return }
        let key = BridgeKey(peer: peer, flow: flow)
        let bridge = TunnelFlowBridge(port: self, key: key)
        do {
            let fd = try loop.makeStreamPair(handler: bridge)
            bridges[key] = bridge
            tcpConnections.add(1, ordering: .relaxed)
            let client = SocketAddress.ipv4(host: ipv4Tuple(flow.deviceBytes), port: flow.devicePort)
            let destination = SocketAddress.ipv4(host: ipv4Tuple(flow.destinationBytes), port: flow.destinationPort)
            server.serveTunnelled(
                fd: fd,
                TunnelledConnection(
                    client: client, destination: destination, resolvedName: resolvedNames[peer][flow.destination]))
        } catch {
            log.notice("WireGuard: \(flow) refused: cannot make a local socket pair (\(error))")
            withTCP(peer) { $0.abort(flow) }
        }
    }

    /// Runs a call on device `peer`'s TCP and sends what it produced.
    func withTCP(_ peer: Int, _ body: (inout TunnelTCP) -> TunnelTCP.Output) {
        let now = self.now
        handle(tunnel.withTCP(of: peer, now: now) { body(&$0) })
    }

    /// The session behind a flow sent bytes; false when the flow's send buffer is full (stop reading it).
    func fromSession(_ bytes: [UInt8], _ key: BridgeKey) -> Bool {
        let now = self.now
        withTCP(key.peer) { $0.send(bytes, on: key.flow, now: now) }
        return !tunnel.tcpState(of: key.peer).isSendBufferFull(key.flow)
    }

    /// The session finished sending (its end of the pair shut down): FIN to the device.
    func sessionFinished(_ key: BridgeKey) {
        let now = self.now
        withTCP(key.peer) { $0.finish(key.flow, now: now) }
    }

    /// The session's end closed before the device's connection ended: RST to the device.
    func sessionGone(_ key: BridgeKey, orderly: Bool) {
        guard bridges.removeValue(forKey: key) != nil else { return }
        if !orderly { withTCP(key.peer) { $0.abort(key.flow) } }
    }

    /// The session can take bytes again (window update to the device).
    func sessionReady(_ key: BridgeKey) {
        withTCP(key.peer) { $0.setReceivePaused(false, on: key.flow) }
    }

    // MARK: UDP

    /// DNS (to the proxy's tunnel address, or any other), QUIC refused, other UDP dropped and counted.
    private func handleUDP(peer: Int, _ header: IPv4Header, _ segment: ArraySlice<UInt8>) {
        guard case .success(let datagram) = UDPDatagram.parse(header, segment: segment) else {
            droppedPackets.add(1, ordering: .relaxed)
            return
        }
        if datagram.destinationPort == TunnelDNS.port {
            // Any address: an app with its own resolver (8.8.8.8 written in) is answered too, from that address.
            answerDNS(peer: peer, datagram)
        } else if datagram.destinationPort == 443 {
            refuseQUIC(peer: peer, datagram)
        } else {
            droppedUDP.add(1, ordering: .relaxed)
            guard !warnedUDP else { return }
            warnedUDP = true
            log.notice(
                "WireGuard: UDP to \(ipv4Text(datagram.destination)):\(datagram.destinationPort) from "
                    + "\(deviceNames[peer]) dropped: only DNS and QUIC (refused) are handled; other UDP is dropped and "
                    + "counted")
        }
    }

    /// Sends `payload` back to the device as the answer to `datagram` (from its destination to its source).
    private func reply(peer: Int, to datagram: UDPDatagram, _ payload: [UInt8]) {
        identification &+= 1
        let packet = TunnelPacket.udpPacket(
            from: datagram.destination, fromPort: datagram.destinationPort, to: datagram.source,
            toPort: datagram.sourcePort, payload: payload, identification: identification)
        if let sealed = tunnel.sendPacket(packet, to: peer, now: now), let endpoint = endpoints[peer] {
            socket?.send(sealed, to: endpoint)
        }
    }

    /// The device's DNS: answered from the host's resolver (TunnelDNS's theory of operation); the proxy's own name
    /// is its tunnel address. Each A answer is remembered, so a connection to that address is named as the device
    /// named it (a ClientHello without SNI).
    private func answerDNS(peer: Int, _ datagram: UDPDatagram) {
        switch TunnelDNS.parseQuery(datagram.payload) {
        case .failure(let refusal):
            if let answer = TunnelDNS.response(to: refusal) { reply(peer: peer, to: datagram, answer) }
        case .success(let question):
            switch TunnelDNS.action(for: question) {
            case .answer(let answer):
                reply(peer: peer, to: datagram, TunnelDNS.response(to: question, answer: answer))
            case .lookUp(let name) where name.lowercased() == OnboardingSite.hostName:
                reply(peer: peer, to: datagram, TunnelDNS.response(
                    to: question, answer: .addresses([tunnel.ipLayer.address])))
            case .lookUp(let name):
                guard let loop else { return }
                loop.resolve(host: name, port: 0) { [weak self] result in
                    guard let self else { return }
                    let answer = self.dnsAnswer(result)
                    if case .addresses(let addresses) = answer { self.remember(addresses, as: name, peer: peer) }
                    self.reply(peer: peer, to: datagram, TunnelDNS.response(to: question, answer: answer))
                }
            }
        }
    }

    /// getaddrinfo's outcome as the device's answer: IPv4 addresses, or why there are none.
    private func dnsAnswer(_ result: Result<[SocketAddress], ResolveError>) -> DNSAnswer {
        switch result {
        case .success(let addresses):
            let ipv4: [[UInt8]] = addresses.compactMap {
                guard case .ipv4(let h, _) = $0.unmapped else { return nil }
                return [h.0, h.1, h.2, h.3]
            }
            return ipv4.isEmpty ? .noData : .addresses(ipv4)
        case .failure(let error) where error.code == EAI_NONAME:
            return .noSuchName
        // glibc's EAI_NODATA (-5) and EAI_ADDRFAMILY (-9), GNU extensions Swift does not import.
        case .failure(let error) where error.code == -5 || error.code == -9:
            return .noData
        case .failure:
            return .serverFailure
        }
    }

    /// Names the device resolved, by address (the last name wins); bounded: forgotten all at once when full.
    private func remember(_ addresses: [[UInt8]], as name: String, peer: Int) {
        if resolvedNames[peer].count >= Self.resolvedNamesLimit { resolvedNames[peer].removeAll() }
        for address in addresses where address.count == 4 {
            resolvedNames[peer][TunnelTCP.value(address)] = name.lowercased()
        }
    }

    static let resolvedNamesLimit = 4096

    /// QUIC to UDP 443 anywhere: answered with Version Negotiation at once so the app falls back to TCP, counted
    /// and said as in transparent mode (`ProxyServer.quicRefusal`).
    private func refuseQUIC(peer: Int, _ datagram: UDPDatagram) {
        let answer = datagram.payload.withUnsafeBytes {
            server.quicRefusal(of: $0, from: ipv4Text(datagram.source), mode: "WireGuard mode")
        }
        if let answer { reply(peer: peer, to: datagram, answer) }
    }

    // MARK: Time

    /// Keeps one loop timer at the tunnel's earliest deadline (TCP's, or a keepalive check).
    private func armTimer() {
        guard let loop, let deadline = [tunnel.nextDeadline, keepaliveCheck].compactMap({ $0 }).min() else { return }
        if let timer, timer.deadline <= deadline { return }
        if let timer { loop.cancelTimer(timer.id) }
        let now = self.now
        let delay = deadline > now ? deadline - now : 0
        let id = loop.scheduleTimer(after: .nanoseconds(Int64(delay) + 1_000_000)) { [weak self] in
            guard let self else { return }
            self.timer = nil
            let now = self.now
            if let check = self.keepaliveCheck, check <= now { self.keepaliveCheck = nil }
            self.handle(self.tunnel.tick(now: now))
        }
        timer = (deadline, id)
    }

    /// What the shutdown says, or nil when nothing worth saying happened.
    func summary() -> String? {
        let connections = tcpConnections.load(ordering: .relaxed)
        let udp = droppedUDP.load(ordering: .relaxed)
        guard connections + udp > 0 else { return nil }
        return "atsproxy: WireGuard: \(connections) TCP connections through the tunnel; \(udp) other UDP datagrams "
            + "dropped\n"
    }

    private func ipv4Tuple(_ bytes: [UInt8]) -> (UInt8, UInt8, UInt8, UInt8) { (bytes[0], bytes[1], bytes[2], bytes[3]) }
}

/// The tunnel's end of one TCP connection's stream pair: bytes from the device are written to the session, bytes
/// from the session are sent to the device, and each side's end (FIN, RST) reaches the other. Backpressure both
/// ways: a full pair closes the device's receive window; a full send buffer toward the device stops reading the
/// session.
final class TunnelFlowBridge: ConnectionHandler {
    private unowned let port: WireGuardPort
    private let key: WireGuardPort.BridgeKey
    private var connection: Connection?
    private var sessionEnded = false
    private var deviceEnded = false

    init(port: WireGuardPort, key: WireGuardPort.BridgeKey) {
        self.port = port
        self.key = key
    }

    func connectionOpened(_ connection: Connection) { self.connection = connection }

    func connection(_ connection: Connection, received bytes: UnsafeRawBufferPointer) {
        if !port.fromSession(Array(bytes), key) { connection.pauseReading() }
    }

    func connectionReadEOF(_ connection: Connection) {
        sessionEnded = true
        port.sessionFinished(key)
        if deviceEnded { connection.close() }
    }

    func connection(_ connection: Connection, writabilityChanged writable: Bool) {
        if writable { port.sessionReady(key) }
    }

    func connectionClosed(_ connection: Connection, error: IOError?) {
        self.connection = nil
        port.sessionGone(key, orderly: sessionEnded && error == nil)
    }

    /// Bytes from the device for the session; false when the pair is full (close the device's window).
    func deliver(_ bytes: [UInt8]) -> Bool {
        guard let connection else { return true }
        connection.write(bytes)
        return connection.isWritable
    }

    /// The device sent FIN: the session reads EOF.
    func deviceFinished() {
        deviceEnded = true
        connection?.shutdownWrite()
        if sessionEnded { connection?.close() }
    }

    /// The device reset its connection or stopped answering: the session's end fails.
    func deviceGone() {
        deviceEnded = true
        connection?.reset()
    }

    /// The device took enough of what was queued toward it: read the session again.
    func resumeSession() { connection?.resumeReading() }
}
