import ATSPolicy
import Foundation
import TestSupport
import Testing

@testable import ProxyTrace

@Suite("The --log-json schema")
struct TraceEventJSONTests {
    static let observed = Date(timeIntervalSince1970: 1_700_000_000)

    /// A TLS 1.0-only server seen by the iOS-like handshake and then the probe, as the proxy logs it.
    static let refusedHandshake = HandshakeFacts(
        failure: .alertReceived(70), version: .tls10, cipherSuiteCode: 0xC013,
        cipherSuiteName: "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA", keyExchangeGroup: "X25519", alpn: nil,
        chain: [CertificateFacts(
            subject: "CN=old.test", issuer: "CN=Test CA", keyType: .rsa, keyBits: 2048, signatureHash: .sha256,
            isSelfSigned: false, isCA: false, notBefore: observed, notAfter: observed + 86_400, dnsNames: ["old.test"],
            ipAddresses: [], extendedKeyUsages: nil, embeddedSCTCount: 0, spkiSHA256Base64: "c3BraQ==",
            sha256Fingerprint: "ab")],
        trust: .untrusted(.selfSigned), hostnameMatches: true, observedAt: observed,
        serverCapabilities: ServerCapabilities(
            supportedVersions: [.tls10], preferredCipherCode: 0xC013,
            preferredCipherName: "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA", supportsForwardSecrecy: true))

    static let versionViolation = ATSViolation(
        kind: .tlsVersionTooLow, urlError: .secureConnectionFailed, sslError: .peerProtocolVersion,
        explanation: "the server negotiated TLSv1.0; ATS requires TLSv1.2",
        fix: .setKeys(
            domain: "old.test", keys: [FixKey(key: "NSExceptionMinimumTLSVersion", value: .string("TLSv1.0"))]),
        decidedBy: PolicyDecision(keyPath: [], reason: "no key applies"))
    static let trustViolation = ATSViolation(
        kind: .selfSigned, urlError: .serverCertificateUntrusted, sslError: .xCertChainInvalid,
        explanation: "self-signed", fix: .noExceptionCanHelp(reason: "fix the server"), certificateIndex: 0)

    static let events = [
        TraceEvent(
            kind: .tlsHandshake, time: 1_700_000_000.5, connectionID: 4, url: "https://old.test",
            handshake: refusedHandshake),
        TraceEvent(
            kind: .atsDecision, time: 1_700_000_000.5, connectionID: 4, url: "https://old.test",
            decision: PolicyDecision(keyPath: [], reason: "no key applies"),
            violations: [versionViolation, trustViolation], message: "blocked"),
        TraceEvent(
            kind: .exchange, time: 1_700_000_000.5, connectionID: 4, url: "https://old.test",
            exchange: ExchangeSummary(
                method: "CONNECT", url: "https://old.test", status: nil, kind: .refusedHandshake, outcome: .blocked,
                errors: [ExchangeError(versionViolation), ExchangeError(urlError: .requiresSecureConnection)],
                requestBytes: 0, responseBytes: 0, durationMilliseconds: 3.5)),
        TraceEvent(
            kind: .proxyAuthFailed, time: 1_700_000_000.5, connectionID: 5,
            proxyAuth: ProxyAuthFailure(
                reason: .wrong, method: "CONNECT", target: "old.test:443", client: "10.0.0.2:5123"),
            message: "proxy authentication failed"),
    ]

    private func object(_ event: TraceEvent) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(event.jsonLine().utf8)) as? [String: Any])
    }

    @Test("Cases with payloads are objects with a kind and named fields; codes are numbers with their names")
    func flatShapes() throws {
        let handshake = try #require(try object(Self.events[0])["handshake"] as? [String: Any])
        #expect(handshake["failure"] as? NSDictionary
            == ["kind": "alertReceived", "alert": 70, "alertName": "protocol_version"] as NSDictionary)
        #expect(handshake["trust"] as? NSDictionary == ["kind": "untrusted", "failure": "selfSigned"] as NSDictionary)
        #expect(handshake["version"] as? Int == 0x0301)
        #expect(handshake["versionName"] as? String == "TLSv1.0")
        #expect(handshake["observedAt"] as? Double == 1_700_000_000, "Unix seconds")
        let caps = try #require(handshake["serverCapabilities"] as? [String: Any])
        #expect(caps["supportedVersions"] as? [Int] == [0x0301])
        #expect(caps["supportedVersionNames"] as? [String] == ["TLSv1.0"])

        let violations = try #require(try object(Self.events[1])["violations"] as? [[String: Any]])
        #expect(violations[0]["fix"] as? NSDictionary == [
            "kind": "setKeys", "domain": "old.test",
            "keys": [["key": "NSExceptionMinimumTLSVersion", "value": "TLSv1.0"]],
        ] as NSDictionary)
        #expect(violations[1]["fix"] as? NSDictionary
            == ["kind": "noExceptionCanHelp", "reason": "fix the server"] as NSDictionary)
        #expect((violations[0]["sslError"] as? [String: Any])?["code"] as? Int == -9836)

        let exchange = try #require(try object(Self.events[2])["exchange"] as? [String: Any])
        let errors = try #require(exchange["errors"] as? [[String: Any]])
        #expect((errors[0]["urlError"] as? [String: Any])?["code"] as? Int == -1200)
        #expect((errors[0]["urlError"] as? [String: Any])?["name"] as? String == "NSURLErrorSecureConnectionFailed")
        #expect((errors[0]["sslError"] as? [String: Any])?["name"] as? String == "errSSLPeerProtocolVersion")
        #expect(errors[1]["sslError"] == nil, "-1022 has no SSL code")
    }

    @Test("No event has a key of Swift's enum encoding (_0, or a case name used as a key)")
    func noSwiftInternals() throws {
        let caseNames: Set = [
            "alertReceived", "localError", "closedDuringHandshake", "notTLS", "timedOut", "trustedBySystemRoot",
            "trustedByUserRoot", "untrusted", "setKeys", "noExceptionCanHelp",
        ]
        for event in Self.events {
            let keys = allKeys(try object(event))
            #expect(!keys.contains { $0.hasPrefix("_") }, "\(keys)")
            #expect(caseNames.isDisjoint(with: keys), "\(keys)")
        }
    }

    @Test("Every event decodes back to the same value")
    func roundTrip() throws {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .secondsSince1970
        for event in Self.events {
            #expect(try decoder.decode(TraceEvent.self, from: Data(event.jsonLine().utf8)) == event)
        }
        for failure in [HandshakeFailure.localError("no shared cipher"), .closedDuringHandshake, .notTLS, .timedOut] {
            var facts = Self.refusedHandshake
            facts.failure = failure
            facts.trust = .trustedBySystemRoot
            let event = TraceEvent(kind: .tlsHandshake, time: 1, connectionID: 1, handshake: facts)
            #expect(try decoder.decode(TraceEvent.self, from: Data(event.jsonLine().utf8)) == event)
        }
    }
}
