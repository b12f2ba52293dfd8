import QRCode

/// WireGuard mode's part of the set-up site (`run --mode wireguard`): each device's configuration, served as a
/// download (`/wireguard/device.conf`, `/wireguard/device-N.conf`) and drawn as a QR code the WireGuard app scans.
/// The texts come from the run command as they were written beside the CA; this module knows nothing of WireGuard
/// itself. A configuration holds its device's private key, so it is served only to requests with the proxy's
/// credentials when the proxy requires them (the CA is served to anyone who reaches the site).
public struct OnboardingWireGuard: Sendable {
    /// One device: its number (1 for the first), its tunnel address and its wg-quick configuration.
    public struct Device: Sendable, Equatable {
        public var number: Int
        /// `198.19.0.2`: shown so that a tester can tell the devices apart in the log.
        public var address: String
        /// The configuration the WireGuard app imports (it holds the device's private key).
        public var config: String

        public init(number: Int, address: String, config: String) {
            self.number = number
            self.address = address
            self.config = config
        }

        /// The download's path: `/wireguard/device.conf` for the first, `/wireguard/device-N.conf` for the others.
        public var path: String { number == 1 ? "/wireguard/device.conf" : "/wireguard/device-\(number).conf" }
        /// The file name the browser saves it as, which the WireGuard app takes as the tunnel's name.
        public var fileName: String { number == 1 ? "atsproxy.conf" : "atsproxy-\(number).conf" }
        /// The page with this device's QR code.
        public var pagePath: String { "/wireguard/device-\(number)" }
    }

    /// `HOST:PORT` of the proxy's WireGuard UDP port, as the configurations name it.
    public var endpoint: String
    /// The devices, the first first.
    public var devices: [Device]

    public init(endpoint: String, devices: [Device]) {
        self.endpoint = endpoint
        self.devices = devices
    }

    /// The device a path asks for: `/wireguard/device.conf` (the first, or `?device=N`), `/wireguard/device-N.conf`,
    /// and the QR code pages `/wireguard/device-N`; nil for any other path or an unknown device.
    func route(path: String) -> (device: Device, download: Bool)? {
        let plain = String(path.prefix { $0 != "?" && $0 != "#" })
        let prefix = "/wireguard/device"
        guard plain.hasPrefix(prefix) else { return nil }
        var rest = plain.dropFirst(prefix.count)
        let download = rest.hasSuffix(".conf")
        if download { rest = rest.dropLast(5) }
        let number: Int?
        if rest.isEmpty && download {
            // `/wireguard/device.conf?device=N`: the query's device, else the first.
            let query = path.drop { $0 != "?" }.dropFirst().prefix { $0 != "#" }
            let asked = query.split(separator: "&").first { $0.hasPrefix("device=") }?.dropFirst(7)
            number = asked.map { Int($0) } ?? 1
        } else if rest.hasPrefix("-"), rest.count <= 4, rest.dropFirst().allSatisfy({ $0.isASCII && $0.isNumber }) {
            number = Int(rest.dropFirst())
        } else {
            number = nil
        }
        guard let number, let device = devices.first(where: { $0.number == number }) else { return nil }
        return (device, download)
    }
}

extension OnboardingPage {
    /// The QR code of a configuration as inline SVG (the page allows no image from elsewhere), or a note when it
    /// does not fit a QR code.
    static func qrCode(_ config: String) -> String {
        do {
            let code = try QRCode(text: config, errorCorrection: .low)
            return "<div class=\"qr\">\(code.svg(quietZone: 4, pixelSize: 264))</div>"
        } catch {
            return "<p class=\"small\">No QR code (\(escape("\(error)"))): download the configuration instead.</p>"
        }
    }

    /// The set-up page's WireGuard section, beside the Wi-Fi proxy steps. `showsConfig`: false for a request
    /// without the proxy's credentials (the configurations hold private keys): the steps without the code.
    static func wireGuardSection(_ wireGuard: OnboardingWireGuard, showsConfig: Bool) -> String {
        guard let first = wireGuard.devices.first else { return "" }
        var html = """
            <h2 id="wireguard">Or: WireGuard (all of the device's traffic)</h2>
            <p>Instead of the Wi-Fi proxy: the device joins the proxy with the <b>WireGuard</b> app from the App \
            Store, and all its traffic comes to the proxy on any network (<code>\(escape(wireGuard.endpoint))</code>), also \
            from apps that ignore the proxy setting. Trust the CA as in steps 1 and 2 either way.</p>
            <ol>
            <li>Install <b>WireGuard</b> from the App Store.</li>
            <li>In the app: <b>+</b> › <b>Create from QR code</b>, and scan the code below from another screen (the \
            Mac's). Or download the configuration here and import it: <b>+</b> › <b>Create from file or \
            archive</b>.</li>
            <li>Turn the tunnel on. Leave the Wi-Fi proxy off: the tunnel carries everything.</li>
            </ol>

            """
        guard showsConfig else {
            return html + """
                <p class="small">The configuration holds the device's private key: it is shown here only through the \
                proxy with its credentials. The proxy also printed its QR code at start.</p>

                """
        }
        html += qrCode(first.config)
        html += """
            <p><a class="button" href="\(first.path)">Configuration (atsproxy.conf)</a></p>
            <p class="small">Device 1, tunnel address \(escape(first.address)). The configuration holds this \
            device's private key: one configuration per device.</p>

            """
        let others = wireGuard.devices.dropFirst()
        if !others.isEmpty {
            html += "<p>Other devices:</p>\n<ul class=\"devices\">\n"
            for device in others {
                html += "<li>Device \(device.number) (\(escape(device.address))): "
                    + "<a href=\"\(device.pagePath)\">QR code</a> · <a href=\"\(device.path)\">\(device.fileName)</a>"
                    + "</li>\n"
            }
            html += "</ul>\n"
        }
        return html
    }

    /// One device's page: its QR code and its download, for scanning from the Mac's screen.
    static func wireGuardDevice(_ device: OnboardingWireGuard.Device, endpoint: String) -> String {
        document(title: "ATSProxy: WireGuard device \(device.number)", body: """
            <h1>WireGuard: device \(device.number)</h1>
            <p class="lead">Scan this in the WireGuard app (<b>+</b> › <b>Create from QR code</b>) on device \
            \(device.number). Tunnel address \(escape(device.address)), proxy \(escape(endpoint)).</p>
            \(qrCode(device.config))
            <p><a class="button" href="\(device.path)">Configuration (\(device.fileName))</a></p>
            <p><a class="button secondary" href="\(OnboardingSite.url)">Back to the set-up page</a></p>
            """)
    }

    /// Why a configuration is not given: no proxy credentials with the request.
    static func wireGuardRefused() -> String {
        document(title: "ATSProxy: credentials needed", body: """
            <h1>Credentials needed</h1>
            <p class="lead">A WireGuard configuration holds its device's private key: this proxy gives it only \
            through the proxy with its credentials. Or scan the QR code the proxy printed at start.</p>
            <p><a class="button" href="\(OnboardingSite.url)">Set-up page</a></p>
            """)
    }
}
