import Dispatch
import Foundation
import ProxyEventLoop
import ProxyServer
import QRCode
import Synchronization
import WireGuardCore

/// `run --mode wireguard[:ADDR:PORT]`: the WireGuard UDP socket on one event loop, feeding `WireGuardTunnel`
/// (handshakes, and ping to the proxy's tunnel address); the keys beside the CA; the device's configuration written
/// beside them and printed with a QR code. TCP and UDP through the tunnel are not built yet: they are dropped, said
/// at the first and counted at shutdown.
enum WireGuardListening {
    /// The default UDP port (WireGuard's usual one).
    static let defaultPort: UInt16 = 51820

    /// Opens the socket and returns the banner's lines and the running port (nil without WireGuard mode).
    static func start(
        _ modes: ProxyListeners, group: EventLoopGroup, caDirectory: String, log: ProxyLogSink
    ) throws -> (lines: String, running: Running)? {
        guard let (host, port) = modes.wireguard else { return nil }
        let keys = try WireGuardKeyFiles(caDirectory: URL(fileURLWithPath: caDirectory))
        let proxyAddress = WireGuardClientConfig.defaultProxyAddress
        let responder = WireGuardResponder(keyPair: keys.proxy, peers: [keys.device.publicKey])
        let running = Running(PortState(tunnel: WireGuardTunnel(responder: responder, address: proxyAddress)))
        let deviceName = "device " + keys.device.publicKeyBase64
        let socket: DatagramSocket
        do {
            socket = try group.bindDatagrams(host: host, port: port) { datagram, sender in
                let now = DispatchTime.now().uptimeNanoseconds
                let (reply, event, announce) = running.state.withLock { state in
                    let (reply, event) = state.tunnel.receive(Array(datagram), now: now)
                    // A device rekeys every two minutes: said when it first comes, and again from a new address.
                    guard case .handshake = event else { return (reply, event, nil as String?) }
                    let from = "\(sender.unmapped)"
                    guard state.announced != from else { return (reply, event, nil) }
                    state.announced = from
                    return (reply, event, from)
                }
                switch event {
                case .handshake:
                    if let from = announce { log.notice("WireGuard: handshake with \(deviceName) from \(from)") }
                case .firstUnhandled(let protocolNumber, let destination, let port):
                    let name = protocolNumber == 6 ? "TCP" : "UDP"
                    log.notice(
                        "WireGuard: \(name) to \(destination):\(port) from \(deviceName) dropped: TCP and UDP "
                            + "through WireGuard are not built yet (only ping to \(ipv4Text(proxyAddress)) is "
                            + "answered); every such packet is dropped and counted")
                case .echo, .dropped, .none:
                    break
                }
                return reply
            }
        } catch {
            throw failure(
                "atsproxy run: error: --mode wireguard: " + RunCommand.listenFailure(error, host: host, port: port))
        }
        let endpoint = endpointText(socket.address)
        let config = WireGuardClientConfig(
            device: keys.device, proxyPublicKey: keys.proxy.publicKey, endpoint: endpoint,
            deviceAddress: ipv4Text(WireGuardClientConfig.defaultDeviceAddress) + "/32", dns: ipv4Text(proxyAddress))
        try keys.writeDeviceConfig(config.text)
        let configPath = keys.folder.appendingPathComponent(WireGuardKeyFiles.deviceConfigName).path
        var text =
            "\nWireGuard: UDP \(socket.address) (proxy key \(keys.proxy.publicKeyBase64))"
            + "\n         not built yet: TCP and UDP through the tunnel (dropped and counted); ping to "
            + "\(ipv4Text(proxyAddress)) proves the tunnel"
            + "\n         device configuration: \(configPath)\(keys.created ? " (new keys: import it again)" : "")"
            + "; scan this in the WireGuard app (it holds the device's private key):\n"
        do {
            let code = try QRCode(text: config.text, errorCorrection: .low)
            // Without its last newline: the banner's next line follows, and only a blank line ends the banner.
            text += code.terminalText(quietZone: 2, ansiColors: isatty(STDOUT_FILENO) == 1).dropLast()
        } catch {
            text += "(no QR code: \(error); import \(configPath) instead)"
        }
        return (text, running)
    }

    /// The WireGuard port while the proxy runs: what it says at shutdown.
    final class Running: Sendable {
        /// Used on the socket's loop thread (one datagram at a time: never contended) and once at shutdown.
        let state: Mutex<PortState>

        init(_ state: PortState) { self.state = Mutex(state) }

        /// How many TCP and UDP packets the tunnel dropped, for the shutdown; nil when none came.
        func summary() -> String? {
            let (tcp, udp) = state.withLock { ($0.tunnel.droppedTCP, $0.tunnel.droppedUDP) }
            guard tcp + udp > 0 else { return nil }
            return "atsproxy: WireGuard: \(tcp) TCP and \(udp) UDP packets from the device were dropped (TCP and UDP "
                + "through the tunnel are not built yet)\n"
        }
    }

    /// The endpoint a device is given: the bound address, or for a wildcard the host's first network address (as
    /// the set-up page's), else the wildcard itself for the user to replace.
    static func endpointText(_ bound: SocketAddress) -> String {
        var address = bound.unmapped
        if address.isUnspecified {
            let candidates = SocketAddress.interfaceAddresses().filter {
                !$0.isLoopback && !$0.isUnspecified && !isLinkLocal($0)
            }
            if let lan = candidates.first(where: { if case .ipv4 = $0 { true } else { false } }) ?? candidates.first {
                address = lan
            }
        }
        let host = address.host
        return host.contains(":") ? "[\(host)]:\(bound.port)" : "\(host):\(bound.port)"
    }

    /// 169.254/16 or fe80::/10: not what a phone on the network reaches (as the set-up page's choice).
    private static func isLinkLocal(_ address: SocketAddress) -> Bool {
        switch address {
        case .ipv4(let h, _): h.0 == 169 && h.1 == 254
        case .ipv6(let h, _, _): h.count == 16 && h[0] == 0xFE && h[1] & 0xC0 == 0x80
        }
    }

    /// What the socket's loop keeps: the tunnel, and the address the device's handshake was last announced from.
    struct PortState {
        var tunnel: WireGuardTunnel
        var announced: String?
    }
}
