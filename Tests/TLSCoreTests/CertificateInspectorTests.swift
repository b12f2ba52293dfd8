import ATSPolicy
import Foundation
import Testing
import TLSCore

@Suite("CertificateInspector")
struct CertificateInspectorTests {
    func facts(dns: [String] = [], ips: [String] = []) -> CertificateFacts {
        CertificateFacts(
            subject: "CN=x", issuer: "CN=y", keyType: .ec, keyBits: 256, signatureHash: .sha256, isSelfSigned: false,
            isCA: false, notBefore: Date(), notAfter: Date(), dnsNames: dns, ipAddresses: ips,
            extendedKeyUsages: nil, embeddedSCTCount: 0, spkiSHA256Base64: "", sha256Fingerprint: "")
    }

    @Test(arguments: [
        ("api.example.com", ["api.example.com"], true),
        ("API.Example.com.", ["api.example.com"], true),
        ("api.example.com", ["*.example.com"], true),
        ("a.b.example.com", ["*.example.com"], false),
        ("example.com", ["*.example.com"], false),
        ("example.com", ["*.com"], false),
        ("api.example.com", ["api*.example.com"], false),
        ("other.com", ["api.example.com"], false),
        ("127.0.0.1", ["127.0.0.1"], false),
    ])
    func dnsMatching(host: String, names: [String], expected: Bool) {
        #expect(CertificateInspector.hostnameMatches(host, leaf: facts(dns: names)) == expected)
    }

    @Test func ipHostsMatchOnlyIPAddressSANs() {
        #expect(CertificateInspector.hostnameMatches("127.0.0.1", leaf: facts(ips: ["127.0.0.1"])))
        #expect(CertificateInspector.hostnameMatches("[::1]", leaf: facts(ips: ["0:0:0:0:0:0:0:1"])))
        #expect(!CertificateInspector.hostnameMatches("10.0.0.1", leaf: facts(ips: ["127.0.0.1"])))
    }

    /// Certificates made with the openssl CLI, so the inspector is checked against an independent producer.
    @Test func readsCLIMadeCertificates() throws {
        let dir = try TempDirectory()
        try runOpenSSL([
            "req", "-x509", "-newkey", "rsa:1024", "-nodes", "-keyout", dir.path("k.pem"), "-out", dir.path("c.pem"),
            "-subj", "/CN=legacy.test", "-days", "10", "-sha1",
            "-addext", "subjectAltName=DNS:legacy.test,IP:10.1.2.3",
            "-addext", "extendedKeyUsage=serverAuth,clientAuth",
        ])
        let cert = try Certificate(pem: String(contentsOfFile: dir.path("c.pem"), encoding: .utf8))
        let f = cert.facts
        #expect(f.keyType == .rsa)
        #expect(f.keyBits == 1024)
        #expect(f.signatureHash == .sha1)
        #expect(f.isSelfSigned)
        #expect(f.dnsNames == ["legacy.test"])
        #expect(f.ipAddresses == ["10.1.2.3"])
        #expect(f.extendedKeyUsages == ["1.3.6.1.5.5.7.3.1", "1.3.6.1.5.5.7.3.2"])
        #expect(f.embeddedSCTCount == 0)
        #expect(f.subject == "CN=legacy.test")
        let days = f.notAfter.timeIntervalSince(f.notBefore) / 86400
        #expect(abs(days - 10) < 0.01)

        try runOpenSSL([
            "req", "-x509", "-newkey", "ed25519", "-nodes", "-keyout", dir.path("k2.pem"), "-out",
            dir.path("c2.pem"), "-subj", "/CN=ed.test", "-days", "1",
        ])
        let ed = try Certificate(pem: String(contentsOfFile: dir.path("c2.pem"), encoding: .utf8)).facts
        #expect(ed.keyType == .ed25519)
        #expect(ed.signatureHash == .intrinsic)
        #expect(ed.dnsNames.isEmpty)
        #expect(ed.extendedKeyUsages == nil)
    }
}
