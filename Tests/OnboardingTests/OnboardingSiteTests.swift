import Foundation
import Testing

@testable import Onboarding

@Suite("The onboarding site's pages")
struct OnboardingSiteTests {
    static let pem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"

    static func site(policy: String = "MyApp.ipa › Payload/MyApp.app/Info.plist") -> OnboardingSite {
        OnboardingSite(
            certificate: OnboardingCertificate(
                name: "ATSProxy CA (laptop)", pem: pem, der: [0x30, 0x82, 0x01],
                mobileConfig: "<?xml version=\"1.0\"?><plist/>", sha256Fingerprint: "AB:CD:EF"),
            settings: OnboardingSettings(policy: policy, iosProfile: "iOS 17", atsMode: "enforce (block tls)"))
    }

    static func text(_ r: OnboardingResponse) -> String { String(decoding: r.body, as: UTF8.self) }

    @Test("The page has the downloads, the iOS steps, the simulator commands, the settings and the trust check")
    func page() {
        let r = Self.site().respond(path: "/", secure: false)
        #expect(r.status == 200)
        #expect(r.contentType == "text/html; charset=utf-8")
        let html = Self.text(r)
        for part in [
            "href=\"/atsproxy-ca.mobileconfig\"", "href=\"/atsproxy-ca.cer\"", "href=\"/atsproxy-ca.pem\"",
            "Certificate Trust Settings", "xcrun simctl keychain booted add-root-cert atsproxy-ca.pem",
            "MyApp.ipa › Payload/MyApp.app/Info.plist", "iOS 17", "enforce (block tls)", "AB:CD:EF",
            "href=\"https://atsproxy.invalid/trust-check\"", "data=\"https://atsproxy.invalid/trust-check.svg\"",
            "name=\"viewport\"",
        ] {
            #expect(html.contains(part), "missing \(part)")
        }
    }

    @Test("No external resources: no script, no stylesheet link, a CSP that allows only the trust badge")
    func selfContained() {
        let r = Self.site().respond(path: "/", secure: false)
        let html = Self.text(r)
        #expect(!html.contains("<script"))
        #expect(!html.contains("<link"))
        let csp = r.headers.first { $0.name == "Content-Security-Policy" }?.value
        #expect(csp == "default-src 'none'; style-src 'unsafe-inline'; object-src https://atsproxy.invalid")
        #expect(r.headers.contains(.init("Cache-Control", "no-store")))
    }

    @Test("Text from the settings is escaped")
    func escaped() {
        let html = Self.text(Self.site(policy: "<b>&\"x\"</b>.plist").respond(path: "/", secure: false))
        #expect(html.contains("&lt;b&gt;&amp;&quot;x&quot;&lt;/b&gt;.plist"))
        #expect(!html.contains("<b>&"))
    }

    @Test("The CA downloads: the given bytes, with the types iOS acts on and a file name")
    func downloads() {
        let site = Self.site()
        let pem = site.respond(path: "/atsproxy-ca.pem", secure: false)
        #expect(pem.body == Array(Self.pem.utf8))
        #expect(pem.contentType == "application/x-pem-file")
        let cer = site.respond(path: "/atsproxy-ca.cer?x=1", secure: false)
        #expect(cer.body == [0x30, 0x82, 0x01])
        #expect(cer.contentType == "application/x-x509-ca-cert")
        let profile = site.respond(path: "/atsproxy-ca.mobileconfig", secure: false)
        #expect(profile.contentType == "application/x-apple-aspen-config")
        #expect(profile.headers.contains(.init("Content-Disposition", "attachment; filename=\"atsproxy-ca.mobileconfig\"")))
    }

    @Test("The trust check says 'trusted' only over TLS; the badge exists only over TLS")
    func trustCheck() {
        let site = Self.site()
        #expect(Self.text(site.respond(path: "/trust-check", secure: true)).contains("✓ Trusted"))
        #expect(!Self.text(site.respond(path: "/trust-check", secure: false)).contains("✓ Trusted"))
        #expect(site.respond(path: "/trust-check.svg", secure: true).status == 200)
        #expect(site.respond(path: "/trust-check.svg", secure: false).status == 404)
    }

    @Test("Unknown paths are 404, and no path serves a private key")
    func notFound() {
        let site = Self.site()
        for path in ["/atsproxy-ca-key.pem", "/../certs/atsproxy-ca-key.pem", "/key", "/favicon.ico"] {
            let r = site.respond(path: path, secure: false)
            #expect(r.status == 404)
            #expect(!Self.text(r).contains("PRIVATE KEY"))
        }
    }

    @Test("Names: the reserved name, other proxies' names, and the own addresses once registered")
    func roles() {
        let site = Self.site()
        #expect(site.role(ofHost: "atsproxy.invalid", port: 80) == .site)
        #expect(site.role(ofHost: "mitm.it", port: 80) == .otherProxy("mitmproxy"))
        #expect(site.role(ofHost: "chls.pro", port: 80) == .otherProxy("Charles"))
        #expect(site.role(ofHost: "burp", port: 80) == .otherProxy("Burp Suite"))
        #expect(site.role(ofHost: "10.0.0.5", port: 8080) == nil)
        site.addOwnAddress(host: "10.0.0.5", port: 8080, shown: true)
        #expect(site.role(ofHost: "10.0.0.5", port: 8080) == .site)
        #expect(site.role(ofHost: "10.0.0.5", port: 80) == nil)
        #expect(site.settings.proxyAddress == "10.0.0.5:8080")
        #expect(Self.text(site.respond(path: "/", secure: false)).contains("<code>10.0.0.5:8080</code>"))
        let pointer = Self.text(site.respond(role: .otherProxy("Charles"), path: "/ssl", secure: false))
        #expect(pointer.contains("not Charles") && pointer.contains("http://atsproxy.invalid/"))
    }
}
