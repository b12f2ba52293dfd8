import ProxyEventLoop
import ProxyServer

/// `run --mode transparent`: the checks and the listener of transparent mode, beside the explicit proxy's.
enum TransparentListening {
    /// The banner's "Try:" line when only transparent mode runs: a device behind the gateway needs no proxy setting.
    static func tryLine(caFile: String) -> String {
        "Try:     on a device behind this gateway, with no proxy setting: curl --cacert \(caFile) https://example.com/"
    }

    /// The banner's "Set-up:" line when only transparent mode runs: its port serves only redirected connections, so
    /// the set-up page is not there.
    static let setUpLine = "Set-up:  install the CA on the device (atsproxy ca export; or add --mode regular for the "
        + "set-up page at http://atsproxy.invalid/ through the proxy)\n"

    /// Refuses a transparent mode that cannot work here, opens its listener (unless `first` is it already) and the
    /// UDP socket on the same port that refuses QUIC, and returns the banner's line (empty without transparent mode).
    static func start(_ modes: ProxyListeners, server: ProxyServer, first: Listener) throws -> String {
        guard let (host, port) = modes.transparent else { return "" }
        var listener = first
        if modes.regular != nil {
            do { listener = try server.listen(host: host, port: port, transparent: true) } catch {
                throw failure("atsproxy run: error: --mode transparent: "
                    + RunCommand.listenFailure(error, host: host, port: port))
            }
        }
        let ipv6: Bool = if case .ipv6 = listener.address.unmapped { true } else { false }
        if let reason = OriginalDestination.unsupportedReason(ipv6: ipv6) {
            throw failure("atsproxy run: error: --mode transparent cannot read where redirected connections were "
                + "going: \(reason)")
        }
        do { _ = try server.refuseQUIC(host: host, port: listener.port) } catch {
            throw failure("atsproxy run: error: --mode transparent: the UDP socket that refuses QUIC: "
                + RunCommand.listenFailure(error, host: host, port: listener.port))
        }
        if listener.address.isLoopback {
            ProxyLogSink.writeToStandardError(
                "atsproxy: warning: --mode transparent on \(host): an nftables redirect from the devices' "
                    + "interface reaches that interface's own address, never loopback; listen on 0.0.0.0 "
                    + "(--mode transparent:0.0.0.0:\(listener.port))\n")
        }
        let shown = host.contains(":") ? "[\(host)]" : host
        return "\nTransparent: \(shown):\(listener.port) (TCP, and UDP to refuse QUIC), for connections the gateway "
            + "redirects (atsproxy run --mode transparent --print-nft prints the nftables rules)"
    }
}
