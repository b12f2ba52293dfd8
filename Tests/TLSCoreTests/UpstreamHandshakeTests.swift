import ATSPolicy
import Foundation
import TestSupport
import Testing
import TLSCore

/// Test PKI shared by the real-server tests: our CA, a minter, and an openssl-made chain with a SHA-1 intermediate.
final class TestPKI: Sendable {
    let dir: TempDirectory
    let ca: CertificateAuthority
    let minter: LeafMinter
    let sha1ChainRoot: Certificate
    let trust: TrustEvaluator

    static let shared: TestPKI? = try? TestPKI()

    init() throws {
        dir = try TempDirectory()
        ca = try CertificateAuthority.create()
        minter = LeafMinter(authority: ca)
        sha1ChainRoot = try TestPKI.makeSHA1IntermediateChain(in: dir)
        trust = try TrustEvaluator(useSystemRoots: true, userRoots: [ca.certificate, sha1ChainRoot])
    }

    /// Writes a minted identity as PEM files and returns (cert, key, chain) paths.
    func files(_ name: String, _ identity: TLSConfiguration.ServerIdentity) throws -> (String, String, String?) {
        let cert = dir.path("\(name).pem")
        let key = dir.path("\(name)-key.pem")
        try identity.chain[0].pem.write(toFile: cert, atomically: true, encoding: .utf8)
        try identity.key.pem.write(toFile: key, atomically: true, encoding: .utf8)
        guard identity.chain.count > 1 else { return (cert, key, nil) }
        let chain = dir.path("\(name)-chain.pem")
        try identity.chain.dropFirst().map(\.pem).joined().write(toFile: chain, atomically: true, encoding: .utf8)
        return (cert, key, chain)
    }

    /// root (SHA-256, self-signed) → intermediate signed with SHA-1 → leaf signed with SHA-256 for localhost.
    static func makeSHA1IntermediateChain(in dir: TempDirectory) throws -> Certificate {
        func p(_ n: String) -> String { dir.path(n) }
        try "basicConstraints=critical,CA:TRUE\nkeyUsage=critical,keyCertSign,cRLSign\n"
            .write(toFile: p("ca.ext"), atomically: true, encoding: .utf8)
        try "subjectAltName=DNS:localhost\nextendedKeyUsage=serverAuth\nbasicConstraints=CA:FALSE\n"
            .write(toFile: p("leaf.ext"), atomically: true, encoding: .utf8)
        let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
        try runOpenSSL(
            ["req", "-x509"] + ec + ["-keyout", p("s1root-key.pem"), "-out", p("s1root.pem"), "-subj", "/CN=SHA1 Test Root",
            "-days", "30", "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign"])
        try runOpenSSL(["req", "-new"] + ec + ["-keyout", p("s1int-key.pem"), "-out", p("s1int.csr"), "-subj", "/CN=SHA1 Intermediate"])
        try runOpenSSL([
            "x509", "-req", "-in", p("s1int.csr"), "-CA", p("s1root.pem"), "-CAkey", p("s1root-key.pem"),
            "-CAcreateserial", "-sha1", "-days", "30", "-extfile", p("ca.ext"), "-out", p("s1int.pem"),
        ])
        try runOpenSSL(["req", "-new"] + ec + ["-keyout", p("s1leaf-key.pem"), "-out", p("s1leaf.csr"), "-subj", "/CN=localhost"])
        try runOpenSSL([
            "x509", "-req", "-in", p("s1leaf.csr"), "-CA", p("s1int.pem"), "-CAkey", p("s1int-key.pem"),
            "-CAcreateserial", "-sha256", "-days", "30", "-extfile", p("leaf.ext"), "-out", p("s1leaf.pem"),
        ])
        return try Certificate(pem: String(contentsOfFile: p("s1root.pem"), encoding: .utf8))
    }
}

/// ATS defaults for `host` on a current profile, written out by hand (the policy engine is another module).
func defaultRequirements(host: String = "localhost", forwardSecrecy: Bool = true) -> ConnectionRequirements {
    let suites = forwardSecrecy
        ? CipherSuite.atsGroup(.current) : CipherSuite.compatibilityGroup(.current) + CipherSuite.atsGroup(.current)
    return ConnectionRequirements(
        target: ConnectionTarget(scheme: "https", host: host), profile: .ios17, allowsCleartext: false,
        atsEnforced: true, minimumTLSVersion: .tls12, offeredVersions: [.tls12, .tls13],
        requiresForwardSecrecy: forwardSecrecy, offeredCipherSuites: suites, certificateRules: CertificateRules(),
        pins: nil, decidedBy: PolicyDecision(keyPath: [], reason: "test defaults"))
}

/// One handshake over TCP to `port`, returning the engine and its final step.
func handshake(port: Int, configuration: TLSConfiguration, sni: String? = "localhost") throws -> (
    TLSEngine, TLSEngine.HandshakeStep
) {
    let engine = try TLSEngine(context: TLSContext(configuration), serverName: sni)
    let connection = try TCPConnection(port: port)
    let step = try engine.runHandshake(send: connection.send, receive: connection.receive)
    return (engine, step)
}

/// Runs the version probes and (when needed) the forward-secrecy probe against `port`.
func probeCapabilities(port: Int) throws -> ServerCapabilities {
    var outcomes: [TLSVersion: ProbeOutcome] = [:]
    for (version, config) in ServerProbe.versionProbes {
        let (engine, step) = try handshake(port: port, configuration: config)
        if case .failed(let e) = step { outcomes[version] = ProbeOutcome(negotiated: nil, failure: e) } else {
            outcomes[version] = ProbeOutcome(negotiated: engine.negotiated, failure: nil)
        }
    }
    var fs: ProbeOutcome?
    if ServerProbe.needsForwardSecrecyProbe(outcomes) {
        let (engine, step) = try handshake(port: port, configuration: ServerProbe.forwardSecrecyProbe)
        fs = step == .complete ? ProbeOutcome(negotiated: engine.negotiated, failure: nil) : nil
    }
    return ServerProbe.capabilities(versionOutcomes: outcomes, forwardSecrecyOutcome: fs)
}

@Suite("Upstream handshakes against openssl s_server")
struct UpstreamHandshakeTests {
    let pki: TestPKI

    init() throws { pki = try #require(TestPKI.shared) }

    func server(_ name: String, _ options: LeafOptions = .standard, host: String = "localhost", _ args: [String] = [])
        throws -> OpenSSLServer
    {
        let (cert, key, chain) = try pki.files(name, try pki.minter.identity(for: host, options: options))
        return try OpenSSLServer(certificate: cert, key: key, chain: chain, arguments: args)
    }

    func iOSFacts(_ server: OpenSSLServer, requirements: ConnectionRequirements = defaultRequirements())
        throws -> HandshakeFacts
    {
        let (engine, step) = try handshake(
            port: server.port, configuration: UpstreamTLS.iOSLikeConfiguration(for: requirements, alpn: ["h2", "http/1.1"]))
        var failure: TLSError?
        if case .failed(let e) = step { failure = e }
        return HandshakeFactsCollector(trust: pki.trust).facts(from: engine, host: "localhost", failure: failure)
    }

    @Test(arguments: [
        (TLSVersion.tls10, ["-tls1", "-cipher", "ALL:@SECLEVEL=0"]),
        (.tls11, ["-tls1_1", "-cipher", "ALL:@SECLEVEL=0"]),
    ])
    func legacyOnlyServerRefusesTheIOSHelloWithProtocolVersion(version: TLSVersion, args: [String]) throws {
        let s = try server("legacy\(version.rawValue)", .rsa, args)
        let facts = try iOSFacts(s)
        #expect(facts.failure == .alertReceived(70))
        #expect(facts.version == nil)
        // No certificate arrived: nothing was verified, which is not an invalid chain.
        #expect(facts.chain.isEmpty && facts.trust == .untrusted(.noCertificate))
        let caps = try probeCapabilities(port: s.port)
        #expect(caps.supportedVersions == [version])
        #expect(caps.supportsForwardSecrecy)
        // With an exception lowering the minimum, the iOS-like client gets through.
        var lowered = defaultRequirements()
        lowered.offeredVersions = [.tls10, .tls11, .tls12, .tls13]
        let excepted = try iOSFacts(s, requirements: lowered)
        #expect(excepted.failure == nil)
        #expect(excepted.version == version)
    }

    @Test func tls12OnlyServer() throws {
        let s = try server("tls12", .standard, ["-tls1_2"])
        let facts = try iOSFacts(s)
        #expect(facts.failure == nil)
        #expect(facts.version == .tls12)
        #expect(facts.cipherSuiteCode == 0xC02C)
        #expect(facts.cipherSuiteName == "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384")
        #expect(facts.keyExchangeGroup == "x25519")
        #expect(try probeCapabilities(port: s.port).supportedVersions == [.tls12])
    }

    @Test func tls13OnlyServerAndGoodChain() throws {
        let s = try server("tls13", .standard, ["-tls1_3"])
        let facts = try iOSFacts(s)
        #expect(facts.failure == nil)
        #expect(facts.version == .tls13)
        #expect(facts.trust == .trustedByUserRoot)
        #expect(facts.hostnameMatches)
        #expect(facts.chain.count == 2)
        #expect(facts.chain[0].extendedKeyUsages == [CertificateFacts.serverAuthOID])
        let caps = try probeCapabilities(port: s.port)
        #expect(caps.supportedVersions == [.tls13])
        #expect(caps.preferredCipherCode == 0x1302)
    }

    @Test func nonForwardSecretServer() throws {
        let s = try server("static-rsa", .rsa, ["-cipher", "AES128-SHA", "-no_tls1_3"])
        let facts = try iOSFacts(s)
        #expect(facts.failure == .alertReceived(40))
        let caps = try probeCapabilities(port: s.port)
        #expect(!caps.supportsForwardSecrecy)
        #expect(caps.preferredCipherCode == 0x002F)
        #expect(caps.preferredCipherName == "TLS_RSA_WITH_AES_128_CBC_SHA")
        let relaxed = try iOSFacts(s, requirements: defaultRequirements(forwardSecrecy: false))
        #expect(relaxed.failure == nil)
        #expect(relaxed.cipherSuiteCode == 0x002F)
        #expect(relaxed.keyExchangeGroup == nil)
    }

    @Test func weakLeavesAreObservedNotRefusedByOpenSSL() throws {
        let weak = try server("rsa1024", .weakRSA, ["-cipher", "ALL:@SECLEVEL=0"])
        let w = try iOSFacts(weak)
        #expect(w.failure == nil)
        #expect(w.chain[0].keyType == .rsa)
        #expect(w.chain[0].keyBits == 1024)

        let sha1 = try server("sha1leaf", .sha1Signed, ["-cipher", "ALL:@SECLEVEL=0"])
        let f = try iOSFacts(sha1)
        #expect(f.failure == nil)
        #expect(f.chain[0].signatureHash == .sha1)
    }

    @Test func sha1IntermediateChain() throws {
        let d = pki.dir
        let s = try OpenSSLServer(
            certificate: d.path("s1leaf.pem"), key: d.path("s1leaf-key.pem"), chain: d.path("s1int.pem"),
            arguments: ["-cipher", "ALL:@SECLEVEL=0"])
        let facts = try iOSFacts(s)
        #expect(facts.failure == nil)
        #expect(facts.chain.map(\.signatureHash) == [.sha256, .sha1])
        #expect(facts.chain[1].isCA)
        #expect(facts.trust == .trustedByUserRoot)
    }

    @Test(arguments: [
        ("expired", TrustResult.untrusted(.expired)),
        ("notyet", .untrusted(.notYetValid)),
        ("selfsigned", .untrusted(.selfSigned)),
        ("untrusted", .untrusted(.unknownRoot)),
    ])
    func certificateTrustFailures(name: String, expected: TrustResult) throws {
        let options: LeafOptions = switch name {
        case "expired": .expired()
        case "notyet": .notYetValid()
        case "selfsigned": .selfSigned
        default: .untrusted
        }
        let s = try server(name, options)
        let facts = try iOSFacts(s)
        #expect(facts.failure == nil, "the handshake completes; trust is judged afterwards")
        #expect(facts.trust == expected)
    }

    @Test func wrongHostAndNoSAN() throws {
        let wrong = try iOSFacts(try server("wronghost", .wrongHost("other.example")))
        #expect(!wrong.hostnameMatches)
        #expect(wrong.trust == .trustedByUserRoot)

        let noSAN = try iOSFacts(try server("nosan", LeafOptions(subjectAlternativeNames: [])))
        #expect(noSAN.chain[0].dnsNames.isEmpty)
        #expect(noSAN.chain[0].subject.contains("CN=localhost"))
        #expect(!noSAN.hostnameMatches, "CN is ignored")
    }

    @Test func iOSLikeConfigurationOffersExactlyTheRequiredSuites() throws {
        let config = UpstreamTLS.iOSLikeConfiguration(for: defaultRequirements(), alpn: ["h2"])
        let engine = try TLSEngine(context: TLSContext(config), serverName: "localhost")
        _ = engine.handshake()
        let hello = try #require(try ClientHelloParser.parse(engine.takeOutput()))
        let expected = CipherSuite.atsGroup(.current).map(\.code)
        #expect(hello.cipherSuites.filter { $0 != 0x00FF } == expected)
        #expect(hello.supportedVersions.sorted() == [0x0303, 0x0304])
        #expect(hello.alpnProtocols == ["h2"])
        #expect(hello.serverName == "localhost")

        var noTLS13 = defaultRequirements()
        noTLS13.offeredCipherSuites = CipherSuite.atsGroup(.doc2015)
        noTLS13.offeredVersions = [.tls12]
        let c2 = UpstreamTLS.iOSLikeConfiguration(for: noTLS13)
        #expect(c2.maximumVersion == .tls12)
        #expect(c2.tls13CipherSuites == "")
    }
}
