import ArgumentParser
import Foundation
import Onboarding
import ProxyCore
import ProxyEventLoop
import QRCode
import TLSCore

/// `run` options for devices and simulators: Apple's own hosts, and the set-up site's start-up lines.
struct DeviceOptions: ParsableArguments {
    @Flag(
        name: .customLong("intercept-apple-hosts"),
        help: ArgumentHelp(
            "Intercept Apple's own services too (Apple Account sign-in, iCloud, push, the App Store, ...), which "
                + "are tunnelled untouched by default because they fail when intercepted. `atsproxy passthrough "
                + "--list` shows them."))
    var interceptAppleHosts = false

    var appleHosts: AppleHosts? { interceptAppleHosts ? nil : .builtIn }

    /// The set-up site for the proxy's CA and settings: the same certificate bytes `atsproxy ca export` writes.
    static func onboardingSite(
        authority: CertificateAuthority, policy: String, profile: String, ats: String
    ) -> OnboardingSite {
        let info = authority.info
        return OnboardingSite(
            certificate: OnboardingCertificate(
                name: authority.certificate.commonName ?? info.subject, pem: authority.pem, der: authority.der,
                mobileConfig: authority.mobileConfig(), sha256Fingerprint: info.sha256Fingerprint),
            settings: OnboardingSettings(policy: policy, iosProfile: profile, atsMode: ats))
    }

    /// Tells the site which addresses are the proxy's own, and returns the `HOST:PORT` a device on the network would
    /// use (nil when the proxy listens on loopback only, or no network address is found for a wildcard listener).
    static func registerAddresses(site: OnboardingSite, host: String, port: Int) -> String? {
        let listening: SocketAddress
        do { listening = try SocketAddress(numericHost: host, port: 0) } catch {
            // The listener is bound, so its host parsed; should it not here, the page just names no address.
            site.addOwnAddress(host: host, port: port)
            return nil
        }
        guard !listening.isLoopback else {
            site.addOwnAddress(host: host, port: port, shown: true)
            if host == "127.0.0.1" { site.addOwnAddress(host: "localhost", port: port) }
            return nil
        }
        guard listening.isUnspecified else {
            site.addOwnAddress(host: host, port: port, shown: true)
            return authority(host, port)
        }
        // A wildcard listener is every address of the host: each is the proxy; a device is shown the first IPv4
        // address that is neither loopback nor link-local (what a phone on the same Wi-Fi reaches), else IPv6.
        let addresses = SocketAddress.interfaceAddresses()
        for address in addresses { site.addOwnAddress(host: address.host, port: port) }
        site.addOwnAddress(host: "localhost", port: port)
        let lan = addresses.filter { !$0.isLoopback && !$0.isUnspecified && !isLinkLocal($0) }
        guard let shown = lan.first(where: { if case .ipv4 = $0 { true } else { false } }) ?? lan.first else {
            return nil
        }
        site.addOwnAddress(host: shown.host, port: port, shown: true)
        return authority(shown.host, port)
    }

    private static func authority(_ host: String, _ port: Int) -> String {
        host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
    }

    /// 169.254/16 or fe80::/10: not what another device on the network reaches.
    private static func isLinkLocal(_ address: SocketAddress) -> Bool {
        switch address {
        case .ipv4(let h, _): h.0 == 169 && h.1 == 254
        case .ipv6(let h, _, _): h.count == 16 && h[0] == 0xFE && h[1] & 0xC0 == 0x80
        }
    }

    /// The banner's set-up lines: the site's addresses and, for a network address, a QR code of it for a phone's
    /// camera (drawn black on white when standard output is a terminal).
    static func setUpLines(networkAddress: String?, loopbackPort: Int) -> String {
        guard let networkAddress else {
            return "Set-up:  \(OnboardingSite.url) through the proxy, or http://127.0.0.1:\(loopbackPort)/\n"
        }
        let url = "http://\(networkAddress)/"
        var text = "Set-up:  \(url) on the device (or \(OnboardingSite.url) once it uses the proxy)\n"
        do {
            let code = try QRCode(text: url, errorCorrection: .medium)
            // A blank line after the code ends the banner.
            text += code.terminalText(quietZone: 2, ansiColors: isatty(STDOUT_FILENO) == 1) + "\n"
        } catch {
            text += "(no QR code: \(error))\n"
        }
        return text
    }
}
