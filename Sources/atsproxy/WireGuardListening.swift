import Dispatch
import Foundation
import ProxyEventLoop
import ProxyServer
import QRCode
import Synchronization
import WireGuardCore

/// `run --mode wireguard[:ADDR:PORT]`: the WireGuard UDP socket on one event loop, feeding `WireGuardTunnel`
/// (handshakes, and ping to the proxy's tunnel address); the keys beside the CA; the device's configuration written
/// beside them and printed with a QR code. TCP and UDP through the tunnel are not built yet: they are counted and
/// dropped, said once.
enum WireGuardListening {
    /// The default UDP port (WireGuard's usual one).
    static let defaultPort: UInt16 = 51820

    /// Opens the socket and returns the banner's lines (empty without WireGuard mode).
    static func start(
        _ modes: ProxyListeners, group: EventLoopGroup, caDirectory: String, log: ProxyLogSink
    ) throws -> String {
        guard let (host, port) = modes.wireguard else { return "" }
        let keys = try WireGuardKeyFiles(caDirectory: URL(fileURLWithPath: caDirectory))
        let proxyAddress = WireGuardClientConfig.defaultProxyAddress
        let responder = WireGuardResponder(keyPair: keys.proxy, peers: [keys.device.publicKey])
        let tunnel = Mutex(WireGuardTunnel(responder: responder, address: proxyAddress))
        let deviceName = "device " + keys.device.publicKeyBase64
        let socket: DatagramSocket
        do {
            // The socket calls this on its loop's thread, one datagram at a time; the mutex is never contended.
            socket = try group.bindDatagrams(host: host, port: port) { datagram, sender in
                let now = DispatchTime.now().uptimeNanoseconds
                let (reply, event) = tunnel.withLock { $0.receive(Array(datagram), now: now) }
                switch event {
                case .handshake:
                    log.notice("WireGuard: handshake with \(deviceName) from \(sender.unmapped)")
                case .firstUnhandled(let protocolNumber, let destination, let port):
                    let name = protocolNumber == 6 ? "TCP" : "UDP"
                    log.notice(
                        "WireGuard: \(name) to \(destination):\(port) from \(deviceName) dropped: TCP and UDP "
                            + "through WireGuard are not built yet (only ping to \(ipv4Text(proxyAddress)) is "
                            + "answered); "
                            + "every such packet is dropped and counted")
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
            text += code.terminalText(quietZone: 2, ansiColors: isatty(STDOUT_FILENO) == 1)
        } catch {
            text += "(no QR code: \(error); import \(configPath) instead)\n"
        }
        return text
    }

    /// The endpoint a device is given: the bound address, or for a wildcard the host's first network address (as
    /// the set-up page's), else the wildcard itself for the user to replace.
    static func endpointText(_ bound: SocketAddress) -> String {
        var address = bound.unmapped
        if address.isUnspecified {
            let candidates = SocketAddress.interfaceAddresses().filter { !$0.isLoopback && !$0.isUnspecified }
            if let lan = candidates.first(where: { if case .ipv4 = $0 { true } else { false } }) ?? candidates.first {
                address = lan
            }
        }
        let host = address.host
        return host.contains(":") ? "[\(host)]:\(bound.port)" : "\(host):\(bound.port)"
    }
}
