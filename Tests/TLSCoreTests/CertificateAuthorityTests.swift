import ATSPolicy
import Foundation
import Testing
import TLSCore

@Suite("CertificateAuthority")
struct CertificateAuthorityTests {
    @Test func createdRootHasCAExtensionsAndName() throws {
        let now = Date()
        let ca = try CertificateAuthority.create(now: now)
        let facts = CertificateInspector.facts(ca.certificate)
        #expect(facts.isCA)
        #expect(facts.isSelfSigned)
        #expect(facts.keyType == .ec)
        #expect(facts.curve == "prime256v1")
        #expect(facts.signatureHash == .sha256)
        #expect(ca.certificate.commonName?.hasPrefix("ATSProxy CA (") == true)
        let years = facts.notAfter.timeIntervalSince(facts.notBefore) / (365.25 * 86400)
        #expect(years > 9.9 && years < 10.1)
        let text = try runOpenSSL(["x509", "-noout", "-text"], input: ca.pem)
        #expect(text.contains("CA:TRUE"))
        #expect(text.contains("Certificate Sign, CRL Sign"))
        #expect(text.contains("X509v3 Subject Key Identifier"))
        #expect(text.contains("X509v3 Basic Constraints: critical"))
    }

    @Test func writeLoadRoundTripAndKeyFileMode() throws {
        let dir = try TempDirectory()
        let ca = try CertificateAuthority.create()
        try ca.write(to: dir.url)
        let attributes = try FileManager.default.attributesOfItem(atPath: dir.path(CertificateAuthority.keyFileName))
        #expect((attributes[.posixPermissions] as? NSNumber)?.intValue == 0o600)
        let loaded = try CertificateAuthority.load(from: dir.url)
        #expect(loaded.certificate == ca.certificate)
        #expect(loaded.info.sha256Fingerprint == ca.info.sha256Fingerprint)
    }

    @Test func refusesToOverwriteWithoutForce() throws {
        let dir = try TempDirectory()
        try CertificateAuthority.create().write(to: dir.url)
        #expect(throws: CertificateAuthorityError.self) { try CertificateAuthority.create().write(to: dir.url) }
        let replacement = try CertificateAuthority.create()
        try replacement.write(to: dir.url, overwrite: true)
        #expect(try CertificateAuthority.load(from: dir.url).certificate == replacement.certificate)
    }

    @Test func loadOrCreateRefusesAHalfCAAndSaysWhatToDo() throws {
        let dir = try TempDirectory()
        let certs = dir.url.appendingPathComponent("certs")
        try CertificateAuthority.create().write(to: certs)
        let key = certs.appendingPathComponent(CertificateAuthority.keyFileName).path
        try FileManager.default.removeItem(atPath: key)
        let cert = certs.appendingPathComponent(CertificateAuthority.certificateFileName).path
        #expect(throws: CertificateAuthorityError.incomplete(present: cert, missing: key)) {
            _ = try CertificateAuthority.loadOrCreate(in: certs)
        }
        #expect(CertificateAuthorityError.incomplete(present: cert, missing: key).description.contains(
            "restore the missing file, or remove \(cert) to create a new CA"))
    }

    @Test func loadOrCreateCreatesOnceThenLoads() throws {
        let dir = try TempDirectory()
        let first = try CertificateAuthority.loadOrCreate(in: dir.url.appendingPathComponent("certs"))
        let second = try CertificateAuthority.loadOrCreate(in: dir.url.appendingPathComponent("certs"))
        #expect(first.created)
        #expect(!second.created)
        #expect(first.authority.certificate == second.authority.certificate)
    }

    @Test func mismatchedKeyIsRejected() throws {
        let dir = try TempDirectory()
        try CertificateAuthority.create().write(to: dir.url)
        let other = try PrivateKey.generate(.p256)
        try other.pem.write(toFile: dir.path(CertificateAuthority.keyFileName), atomically: true, encoding: .utf8)
        #expect {
            try CertificateAuthority.load(from: dir.url)
        } throws: { error in
            guard case .invalid(_, let reason) = error as? CertificateAuthorityError else { return false }
            return reason.contains("does not belong")
        }
    }

    @Test func missingCAIsNotFound() throws {
        let dir = try TempDirectory()
        #expect(throws: CertificateAuthorityError.notFound(directory: dir.url.path)) {
            try CertificateAuthority.load(from: dir.url)
        }
    }

    @Test func mobileConfigHoldsTheDERInARootPayload() throws {
        let ca = try CertificateAuthority.create()
        let text = ca.mobileConfig()
        #expect(text == ca.mobileConfig(), "stable UUIDs")
        let plist = try PropertyListSerialization.propertyList(from: Data(text.utf8), format: nil)
        let top = try #require(plist as? [String: Any])
        #expect(top["PayloadType"] as? String == "Configuration")
        #expect(top["PayloadVersion"] as? Int == 1)
        #expect((top["PayloadUUID"] as? String).flatMap(UUID.init(uuidString:)) != nil)
        let payloads = try #require(top["PayloadContent"] as? [[String: Any]])
        let root = try #require(payloads.first)
        #expect(root["PayloadType"] as? String == "com.apple.security.root")
        #expect((root["PayloadContent"] as? Data).map { [UInt8]($0) } == ca.der)
        #expect(root["PayloadIdentifier"] as? String != top["PayloadIdentifier"] as? String)
        #expect(root["PayloadDisplayName"] as? String == ca.certificate.commonName)
    }

    @Test func infoMatchesOpenSSLFingerprintAndPin() throws {
        let ca = try CertificateAuthority.create()
        let fp = try runOpenSSL(["x509", "-noout", "-fingerprint", "-sha256"], input: ca.pem)
        #expect(fp.contains(ca.info.sha256Fingerprint))
        let pubkey = try runOpenSSL(["x509", "-noout", "-pubkey"], input: ca.pem)
        let dir = try TempDirectory()
        try pubkey.write(toFile: dir.path("pub.pem"), atomically: true, encoding: .utf8)
        try runOpenSSL(["pkey", "-pubin", "-in", dir.path("pub.pem"), "-outform", "DER", "-out", dir.path("pub.der")])
        try runOpenSSL(["dgst", "-sha256", "-binary", "-out", dir.path("pin.bin"), dir.path("pub.der")])
        let pin = try Data(contentsOf: URL(fileURLWithPath: dir.path("pin.bin"))).base64EncodedString()
        #expect(ca.info.spkiSHA256Base64 == pin)
    }
}
