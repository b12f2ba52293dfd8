import Foundation
import QRCode
import Testing

#if canImport(FoundationXML)
    import FoundationXML
#endif

@testable import Onboarding

/// The set-up site in WireGuard mode: the section beside the Wi-Fi proxy steps, the devices' downloads and QR codes,
/// and who gets them.
@Suite("The onboarding site's WireGuard section")
struct OnboardingWireGuardTests {
    /// A configuration as the run command writes it (the key is a made-up one of the right length).
    static func config(_ n: Int) -> String {
        """
        [Interface]
        PrivateKey = \(String(repeating: Character(String(n)), count: 43))=
        Address = 198.19.0.\(n + 1)/32
        DNS = 198.19.0.1

        [Peer]
        PublicKey = \(String(repeating: "P", count: 43))=
        AllowedIPs = 0.0.0.0/0, ::/0
        Endpoint = 192.0.2.7:51820

        """
    }

    static func site(devices: Int = 3) -> OnboardingSite {
        let site = OnboardingSiteTests.site()
        site.setWireGuard(OnboardingWireGuard(
            endpoint: "192.0.2.7:51820",
            devices: (1...devices).map { .init(number: $0, address: "198.19.0.\($0 + 1)", config: config($0)) }))
        return site
    }

    static func text(_ r: OnboardingResponse) -> String { String(decoding: r.body, as: UTF8.self) }

    /// The inline `<svg …>…</svg>` elements of a page.
    static func svgs(_ html: String) -> [String] {
        var found: [String] = []
        var rest = Substring(html)
        while let start = rest.range(of: "<svg "), let end = rest[start.lowerBound...].range(of: "</svg>") {
            found.append(String(rest[start.lowerBound..<end.upperBound]))
            rest = rest[end.upperBound...]
        }
        return found
    }

    @Test("Without WireGuard mode: no section, and its paths are 404")
    func absentWithoutWireGuard() {
        let site = OnboardingSiteTests.site()
        let html = Self.text(site.respond(path: "/", secure: false))
        #expect(!html.contains("WireGuard"))
        #expect(!html.contains("<svg"))
        #expect(html.contains("<h2>2. iPhone or iPad</h2>"))
        for path in ["/wireguard/device.conf", "/wireguard/device-2.conf", "/wireguard/device-1"] {
            #expect(site.respond(path: path, secure: false).status == 404, "\(path)")
        }
    }

    @Test("""
        In WireGuard mode: the section beside the Wi-Fi proxy steps, the first device's QR code and download, links \
        to the others, the simulator's note
        """)
    func sectionPresent() {
        let html = Self.text(Self.site().respond(path: "/", secure: false))
        for part in [
            "<h2>2. iPhone or iPad: Wi-Fi proxy</h2>", "Or: WireGuard", "Create from QR code",
            "Create from file or archive", "href=\"/wireguard/device.conf\"", "192.0.2.7:51820",
            "href=\"/wireguard/device-2\"", "href=\"/wireguard/device-2.conf\"", "href=\"/wireguard/device-3.conf\"",
            "The WireGuard app does not run in the simulator", "href=\"/atsproxy-ca.mobileconfig\"",
        ] {
            #expect(html.contains(part), "missing \(part)")
        }
        // The section comes after the Wi-Fi proxy steps and before the simulator's.
        let wifi = html.range(of: "Wi-Fi proxy</h2>")!.lowerBound
        let wireGuard = html.range(of: "Or: WireGuard")!.lowerBound
        let simulator = html.range(of: "3. Simulator")!.lowerBound
        #expect(wifi < wireGuard && wireGuard < simulator)
        // One QR code on the page (the first device's); the others have their own pages.
        #expect(Self.svgs(html).count == 1)
        #expect(!html.contains("<script"))
    }

    @Test("""
        Downloads: the configuration's bytes as text/plain, an attachment named for the WireGuard app; ?device=N and \
        device-N.conf
        """)
    func downloads() {
        let site = Self.site()
        let first = site.respond(path: "/wireguard/device.conf", secure: false)
        #expect(first.status == 200)
        #expect(first.body == Array(Self.config(1).utf8))
        #expect(first.contentType == "text/plain; charset=utf-8")
        #expect(first.headers.contains(.init("Content-Disposition", "attachment; filename=\"atsproxy.conf\"")))
        #expect(first.headers.contains(.init("Cache-Control", "no-store")))
        let second = site.respond(path: "/wireguard/device-2.conf", secure: false)
        #expect(second.body == Array(Self.config(2).utf8))
        #expect(second.headers.contains(.init("Content-Disposition", "attachment; filename=\"atsproxy-2.conf\"")))
        #expect(site.respond(path: "/wireguard/device.conf?device=3", secure: false).body == Array(Self.config(3).utf8))
        #expect(site.respond(path: "/wireguard/device-1.conf", secure: false).body == Array(Self.config(1).utf8))
        for path in [
            "/wireguard/device-4.conf", "/wireguard/device.conf?device=0", "/wireguard/device.conf?device=x",
            "/wireguard/device-+2.conf", "/wireguard/device-02x.conf", "/wireguard/devices", "/wireguard/",
        ] {
            #expect(site.respond(path: path, secure: false).status == 404, "\(path)")
        }
    }

    @Test("The QR code is well-formed SVG whose size is its version's, and its modules are the configuration's code")
    func qrCodeSVG() throws {
        let html = Self.text(Self.site().respond(path: "/wireguard/device-2", secure: false))
        let svg = try #require(Self.svgs(html).first)
        final class Delegate: NSObject, XMLParserDelegate {
            var viewBox: [Int] = []
            var paths: [String] = []
            func parser(
                _ parser: XMLParser, didStartElement name: String, namespaceURI: String?, qualifiedName: String?,
                attributes: [String: String] = [:]
            ) {
                if name == "svg" {
                    viewBox = (attributes["viewBox"] ?? "").split(separator: " ").compactMap { Int($0) }
                }
                if name == "path", let d = attributes["d"] { paths.append(d) }
            }
        }
        let delegate = Delegate()
        let parser = XMLParser(data: Data(svg.utf8))
        parser.delegate = delegate
        #expect(parser.parse(), "\(String(describing: parser.parserError))")
        let code = try QRCode(text: Self.config(2), errorCorrection: .low)
        // 17 + 4·version modules and a quiet zone of 4 on each side.
        #expect(delegate.viewBox == [0, 0, 17 + 4 * code.version + 8, 17 + 4 * code.version + 8])
        #expect(svg == code.svg(quietZone: 4, pixelSize: 264))
        #expect(html.contains("href=\"/wireguard/device-2.conf\""))
        #expect(html.contains("198.19.0.3"))
    }

    @Test("Without the proxy's credentials: the steps but no QR code, and the downloads and code pages are 403")
    func privateKeysNeedCredentials() {
        let site = Self.site()
        let html = Self.text(site.respond(path: "/", secure: false, credentialed: false))
        #expect(html.contains("Or: WireGuard"))
        #expect(!html.contains("<svg"))
        #expect(!html.contains("PrivateKey"))
        #expect(!html.contains("/wireguard/device.conf"))
        for path in ["/wireguard/device.conf", "/wireguard/device-2.conf", "/wireguard/device-2"] {
            let r = site.respond(path: path, secure: false, credentialed: false)
            #expect(r.status == 403, "\(path)")
            #expect(!Self.text(r).contains("PrivateKey"), "\(path)")
        }
    }

    @Test("Registering an address later keeps the WireGuard section")
    func keptAcrossAddressChanges() {
        let site = Self.site()
        site.addOwnAddress(host: "192.0.2.7", port: 8080, shown: true)
        let html = Self.text(site.respond(path: "/", secure: false))
        #expect(html.contains("Or: WireGuard") && html.contains("192.0.2.7:8080"))
        #expect(site.wireGuard?.devices.count == 3)
    }
}
