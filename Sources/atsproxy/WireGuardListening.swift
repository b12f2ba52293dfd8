import Dispatch
import Foundation
import Onboarding
import ProxyEventLoop
import ProxyServer
import QRCode
import Synchronization
import WireGuardCore

/// `run --mode wireguard[:ADDR:PORT]`: the WireGuard UDP socket on one event loop, feeding `WireGuardPort`; the
/// keys beside the CA; the device's configuration written beside them and printed with a QR code.
enum WireGuardListening {
    /// The default UDP port (WireGuard's usual one).
    static let defaultPort: UInt16 = 51820

    /// Opens the socket and returns the banner's lines and the running port (nil without WireGuard mode).
    static func start(
        _ modes: ProxyListeners, server: ProxyServer, onboarding: OnboardingSite, caDirectory: String,
        log: ProxyLogSink
    ) throws -> (lines: String, running: WireGuardPort)? {
        guard let (host, port) = modes.wireguard else { return nil }
        let keys = try WireGuardKeyFiles(
            caDirectory: URL(fileURLWithPath: caDirectory), deviceCount: modes.wireguardDevices)
        let proxyAddress = WireGuardClientConfig.defaultProxyAddress
        let responder = WireGuardResponder(keyPair: keys.proxy, peers: keys.devices.map(\.keyPair.publicKey))
        let tunnel = WireGuardTunnel(
            responder: responder, address: proxyAddress, deviceAddresses: keys.devices.map(\.address))
        let running = WireGuardPort(
            tunnel: tunnel, server: server, log: log,
            deviceNames: keys.devices.map { "\($0.name) \($0.keyPair.publicKeyBase64)" })
        let socket: DatagramSocket
        do {
            socket = try server.group.bindDatagrams(host: host, port: port) { socket, datagram, sender in
                running.receive(Array(datagram), from: sender, on: socket)
                return nil
            }
        } catch {
            throw failure(
                "atsproxy run: error: --mode wireguard: " + RunCommand.listenFailure(error, host: host, port: port))
        }
        // The proxy's tunnel address is the proxy: http://198.19.0.1/ is the set-up page, as atsproxy.invalid is.
        onboarding.addOwnAddress(host: ipv4Text(proxyAddress), port: 80)
        let configs = try keys.writeConfigs(endpoint: endpointText(socket.address), dns: proxyAddress)
        onboarding.setWireGuard(keys.setUpSection(configs))
        let text =
            "\nWireGuard: UDP \(socket.address) (proxy key \(keys.proxy.publicKeyBase64)); the device's TCP is "
            + "intercepted as in transparent mode, DNS to \(ipv4Text(proxyAddress)) answered, QUIC refused"
            + WireGuardKeyFiles.bannerLines(
                devices: keys.devices, configs: configs, ansiColors: isatty(STDOUT_FILENO) == 1)
        return (text, running)
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
}
