import Foundation

// Theory of operation: the proxy's own small web site, for a device that is being set up. It is a local answer
// and never leaves the proxy: the sessions ask `respond(path:secure:)` for a request to one of its names and serve
// what it returns as the exchange's response, without connecting anywhere.
//
// - Names: `atsproxy.invalid` (`.invalid` is reserved by RFC 6761 §6.4 and never resolves, so it cannot collide
//   with a real host), the proxy's own listening address (`http://PROXY:PORT/`, opened directly or through the
//   proxy), and the onboarding names of other proxies (`mitm.it`, `chls.pro`, `burp`), which get a pointer to ours.
// - Plain HTTP serves everything. Over https (a CONNECT to `atsproxy.invalid`, answered with a leaf from the
//   proxy's CA) the same pages are served: `/trust-check` loading at all is the proof that the device trusts the CA.
// - Only public material is served: the CA certificate (PEM, DER, a configuration profile) and what the proxy
//   simulates. The site is built from those values and never holds the CA's private key.
// - With proxy credentials (`--auth`), a page asked for without them (`credentialed: false`: the proxy's own address
//   opened directly, as a phone that follows the QR code does before it has any) leaves out the policy's path, which
//   names a file on the operator's machine; the certificate and the steps are the same.
// - In WireGuard mode (`setWireGuard`) the page gets a WireGuard section beside the Wi-Fi proxy steps: the first
//   device's QR code (inline SVG) and download, and a page and a download for each other device. A configuration
//   holds its device's private key, unlike everything else here: it is served only with `credentialed` (the proxy's
//   credentials when it requires them, so at least as restricted as the CA, which anyone reaching the site gets);
//   without, the download is 403 and the page gives the steps without the code.

/// The onboarding site: its names and its pages, built once at start-up from the CA certificate and the settings.
public final class OnboardingSite: Sendable {
    /// The reserved name the site answers on through the proxy.
    public static let hostName = "atsproxy.invalid"
    /// Other proxies' onboarding names, which users type out of habit: answered with a pointer to this site.
    public static let otherProxiesNames: [String: String] = [
        "mitm.it": "mitmproxy", "chls.pro": "Charles", "burp": "Burp Suite",
    ]

    public let certificate: OnboardingCertificate
    /// The settings; the proxy's address is filled in once the listener is bound (`addOwnAddress`).
    public var settings: OnboardingSettings { state.read { $0.settings } }
    private let state: Locked<State>

    /// A host and port, hashed without building a string per request.
    private struct Authority: Hashable {
        var host: String
        var port: Int
    }

    private struct State {
        var settings: OnboardingSettings
        var ownAuthorities: Set<Authority> = []
        var page: [UInt8]
        /// The page without the policy's path, for a request without the proxy's credentials.
        var publicPage: [UInt8]
        var wireGuard: OnboardingWireGuard?

        init(certificate: OnboardingCertificate, settings: OnboardingSettings, wireGuard: OnboardingWireGuard? = nil) {
            self.settings = settings
            self.wireGuard = wireGuard
            page = Array(
                OnboardingPage.render(certificate: certificate, settings: settings, wireGuard: wireGuard).utf8)
            publicPage = Array(
                OnboardingPage.render(
                    certificate: certificate, settings: settings, showsPolicy: false, wireGuard: wireGuard
                ).utf8)
        }
    }

    public init(certificate: OnboardingCertificate, settings: OnboardingSettings) {
        self.certificate = certificate
        state = Locked(State(certificate: certificate, settings: settings))
    }

    /// `http://atsproxy.invalid/`: the page's address through the proxy.
    public static var url: String { "http://\(hostName)/" }
    /// The https:// address that loads only when the device trusts the proxy's CA.
    public static var trustCheckURL: String { "https://\(hostName)/trust-check" }

    /// Records an address the proxy listens on (`192.168.1.20`, port 8080), so that a request through the proxy to
    /// `http://192.168.1.20:8080/` is answered with the site instead of being refused as a loop. `shown`: the
    /// address the page tells a device to set as its proxy.
    public func addOwnAddress(host: String, port: Int, shown: Bool = false) {
        let authority = host.contains(":") ? "[\(host.lowercased())]:\(port)" : "\(host.lowercased()):\(port)"
        let certificate = certificate
        state.update { s in
            s.ownAuthorities.insert(Authority(host: host.lowercased(), port: port))
            guard shown else { return }
            var settings = s.settings
            settings.proxyAddress = authority
            let own = s.ownAuthorities
            s = State(certificate: certificate, settings: settings, wireGuard: s.wireGuard)
            s.ownAuthorities = own
        }
    }

    /// WireGuard mode's devices, once their configurations are written (the UDP port is bound): the page gets its
    /// WireGuard section and the site the configurations' downloads. Nil removes them.
    public func setWireGuard(_ wireGuard: OnboardingWireGuard?) {
        let certificate = certificate
        state.update { s in
            let own = s.ownAuthorities
            s = State(certificate: certificate, settings: s.settings, wireGuard: wireGuard)
            s.ownAuthorities = own
        }
    }

    /// WireGuard mode's devices as the site serves them (nil without WireGuard mode).
    public var wireGuard: OnboardingWireGuard? { state.read { $0.wireGuard } }

    /// What a request to `host:port` is for the site.
    public func role(ofHost host: String, port: Int) -> Role? {
        if host == Self.hostName { return .site }
        if let other = Self.otherProxiesNames[host] { return .otherProxy(other) }
        let authority = Authority(host: host, port: port)
        if state.read({ $0.ownAuthorities.contains(authority) }) { return .site }
        return nil
    }

    public enum Role: Sendable, Equatable {
        /// The onboarding site itself.
        case site
        /// Another proxy's onboarding name (its product's name): a pointer to this site.
        case otherProxy(String)
    }

    /// The answer to `GET path` (query ignored). `secure`: the request came over TLS with the proxy's leaf, which
    /// the client accepted. `credentialed`: false when the proxy requires credentials and the request came without
    /// them; the page then leaves out the policy's path.
    public func respond(role: Role = .site, path: String, secure: Bool, credentialed: Bool = true)
        -> OnboardingResponse
    {
        if case .otherProxy(let product) = role {
            return OnboardingResponse(
                status: 200, contentType: "text/html; charset=utf-8",
                body: Array(OnboardingPage.pointer(from: product).utf8), headers: OnboardingPage.securityHeaders)
        }
        let plainPath = String(path.prefix { $0 != "?" && $0 != "#" })
        if let wireGuard = state.read({ $0.wireGuard }), let (device, download) = wireGuard.route(path: path) {
            return wireGuardAnswer(device, download: download, endpoint: wireGuard.endpoint, credentialed: credentialed)
        }
        switch plainPath {
        case "/", "/index.html", "":
            return OnboardingResponse(
                status: 200, contentType: "text/html; charset=utf-8",
                body: state.read { credentialed ? $0.page : $0.publicPage },
                headers: OnboardingPage.securityHeaders)
        case "/\(Self.fileStem).pem":
            return download(Array(certificate.pem.utf8), type: "application/x-pem-file", name: "\(Self.fileStem).pem")
        case "/\(Self.fileStem).cer":
            return download(certificate.der, type: "application/x-x509-ca-cert", name: "\(Self.fileStem).cer")
        case "/\(Self.fileStem).mobileconfig":
            // This type is what makes Safari offer to install the profile rather than show it.
            return download(
                Array(certificate.mobileConfig.utf8), type: "application/x-apple-aspen-config",
                name: "\(Self.fileStem).mobileconfig")
        case "/trust-check":
            return OnboardingResponse(
                status: 200, contentType: "text/html; charset=utf-8",
                body: Array(OnboardingPage.trustCheck(secure: secure, certificate: certificate).utf8),
                headers: OnboardingPage.securityHeaders)
        case "/trust-check.svg":
            return OnboardingResponse(
                status: secure ? 200 : 404, contentType: "image/svg+xml",
                body: Array(OnboardingPage.trustBadge(secure: secure).utf8))
        default:
            return OnboardingResponse(
                status: 404, contentType: "text/html; charset=utf-8",
                body: Array(OnboardingPage.notFound(path: plainPath).utf8), headers: OnboardingPage.securityHeaders)
        }
    }

    /// A device's configuration (`download`) or its QR code page; 403 without credentials (it holds the device's
    /// private key).
    private func wireGuardAnswer(
        _ device: OnboardingWireGuard.Device, download: Bool, endpoint: String, credentialed: Bool
    ) -> OnboardingResponse {
        guard credentialed else {
            return OnboardingResponse(
                status: 403, contentType: "text/html; charset=utf-8",
                body: Array(OnboardingPage.wireGuardRefused().utf8), headers: OnboardingPage.securityHeaders)
        }
        guard download else {
            return OnboardingResponse(
                status: 200, contentType: "text/html; charset=utf-8",
                body: Array(OnboardingPage.wireGuardDevice(device, endpoint: endpoint).utf8),
                headers: OnboardingPage.securityHeaders)
        }
        // text/plain: what the configuration is (the WireGuard app takes a `.conf` file by its extension, from
        // Files or the share sheet); the file name is the tunnel's name in the app.
        return self.download(Array(device.config.utf8), type: "text/plain; charset=utf-8", name: device.fileName)
    }

    /// The downloads' file name without its extension.
    public static let fileStem = "atsproxy-ca"

    private func download(_ body: [UInt8], type: String, name: String) -> OnboardingResponse {
        OnboardingResponse(
            status: 200, contentType: type, body: body,
            headers: [.init("Content-Disposition", "attachment; filename=\"\(name)\"")])
    }
}

/// The CA's public parts, as the site serves them: the same bytes `atsproxy ca export` writes.
public struct OnboardingCertificate: Sendable {
    public var name: String
    public var pem: String
    public var der: [UInt8]
    public var mobileConfig: String
    /// SHA-256 of the DER, colon-separated hex, so the user can compare it with what the device shows.
    public var sha256Fingerprint: String

    public init(name: String, pem: String, der: [UInt8], mobileConfig: String, sha256Fingerprint: String) {
        self.name = name
        self.pem = pem
        self.der = der
        self.mobileConfig = mobileConfig
        self.sha256Fingerprint = sha256Fingerprint
    }
}

/// What the proxy simulates, shown on the page so that the device's user knows which policy judges the app.
public struct OnboardingSettings: Sendable {
    /// Where the policy came from (`MyApp.ipa`, "Apple's defaults").
    public var policy: String
    /// `iOS 26`, or the band a version falls in.
    public var iosProfile: String
    /// `enforce (block tls)`, `annotate`, `off`.
    public var atsMode: String
    /// `HOST:PORT` a device sets as its HTTP proxy, when known (the listening address, or a LAN address for a
    /// wildcard listener).
    public var proxyAddress: String?

    public init(policy: String, iosProfile: String, atsMode: String, proxyAddress: String? = nil) {
        self.policy = policy
        self.iosProfile = iosProfile
        self.atsMode = atsMode
        self.proxyAddress = proxyAddress
    }
}

/// A value behind a lock: the site's state, written once the listener is bound and read by every loop.
final class Locked<Value>: @unchecked Sendable {
    // @unchecked: every access to `value` holds `lock`.
    private let lock = NSLock()
    private var value: Value

    init(_ value: Value) { self.value = value }

    func read<T>(_ body: (Value) -> T) -> T {
        lock.lock()
        defer { lock.unlock() }
        return body(value)
    }

    func update(_ body: (inout Value) -> Void) {
        lock.lock()
        defer { lock.unlock() }
        body(&value)
    }
}
