import ATSPolicy
import Foundation
import Synchronization
import Testing
import TLSCore

/// A clock the test moves by hand.
final class TestClock: Sendable {
    private let now = Mutex(Date())
    func read() -> Date { now.withLock { $0 } }
    func advance(by seconds: TimeInterval) { now.withLock { $0 += seconds } }
}

@Suite("Client session resumption through TLSSessionCache")
struct SessionResumptionTests {
    let ca: CertificateAuthority
    let collector: HandshakeFactsCollector
    /// Issues session tickets (TLS 1.3 after the handshake, TLS 1.2 inside it).
    let server: TLSContext
    /// Made like the proxy's upstream client: resumes sessions.
    let client: TLSContext
    let client12: TLSContext

    init() throws {
        ca = try CertificateAuthority.create()
        collector = HandshakeFactsCollector(trust: try TrustEvaluator(useSystemRoots: false, userRoots: [ca.certificate]))
        let identity = try LeafMinter(authority: ca).identity(for: "localhost")
        var serverConfig = TLSConfiguration.server(identity: identity, alpn: ["h2", "http/1.1"])
        serverConfig.sessionResumption = true
        server = try TLSContext(serverConfig)
        var clientConfig = TLSConfiguration.client()
        clientConfig.sessionResumption = true
        client = try TLSContext(clientConfig)
        clientConfig.maximumVersion = .tls12
        client12 = try TLSContext(clientConfig)
    }

    /// What one connection did.
    struct Connection {
        let pair: EnginePair
        let offered: Bool
        let facts: HandshakeFacts
    }

    func key(
        _ context: TLSContext, sni: String? = "localhost", alpn: [String] = [], port: Int = 443
    ) -> TLSSessionKey {
        TLSSessionKey(context: context, host: "localhost", serverName: sni, address: "127.0.0.1", port: port, alpn: alpn)
    }

    /// One in-memory connection that offers what `cache` holds for `key`, judges the handshake as the proxy does,
    /// then reads once (which takes in TLS 1.3 tickets). The engines are dropped without close_notify, as the proxy
    /// drops its upstream connections.
    func connect(
        _ cache: TLSSessionCache, _ context: TLSContext? = nil, sni: String? = "localhost", alpn: [String] = [],
        port: Int = 443, serverEngine: TLSEngine? = nil, now: Date = Date()
    ) throws -> Connection {
        let context = context ?? client
        let engine = try TLSEngine(context: context, serverName: sni, alpn: alpn)
        let offered = engine.offerSession(from: cache, key: key(context, sni: sni, alpn: alpn, port: port))
        let pair = EnginePair(client: engine, server: try serverEngine ?? TLSEngine(context: server))
        let (step, _) = pair.handshake()
        var failure: TLSError?
        if case .failed(let error) = step { failure = error }
        let facts = collector.facts(from: engine, host: "localhost", failure: failure, now: now)
        if failure == nil { _ = engine.read() }
        return Connection(pair: pair, offered: offered, facts: facts)
    }

    @Test("A second connection resumes the TLS 1.3 session of the first, judged on the first one's certificate facts")
    func tls13Resumes() throws {
        let cache = TLSSessionCache()
        let first = try connect(cache)
        #expect(!first.offered)
        #expect(!first.pair.client.sessionReused)
        #expect(first.facts.trust == .trustedByUserRoot)
        // Python's and nginx's OpenSSL send two tickets after a full handshake; so does this server.
        #expect(cache.sessionCount(for: key(client)) == 2)

        let second = try connect(cache)
        #expect(second.offered)
        #expect(second.pair.client.sessionReused)
        #expect(second.pair.server.sessionReused)
        #expect(second.pair.client.negotiated?.version == .tls13)
        let resumed = try #require(second.pair.client.resumedPeerFacts)
        #expect(resumed.certificates == first.facts.chain)
        // The verdict's input is the same, but for this handshake's own time.
        var expected = first.facts
        expected.observedAt = second.facts.observedAt
        #expect(second.facts == expected)
        // OpenSSL 3.0 keeps the peer chain in a resumed client session: SSL_get_peer_cert_chain still answers.
        #expect(second.pair.client.peerCertificateChain.map(\.derBytes) == first.pair.client.peerCertificateChain.map(\.derBytes))
        // One ticket was used (tickets are single-use), and the resumed connection brought new ones.
        #expect(cache.sessionCount(for: key(client)) >= 2)
    }

    @Test("A TLS 1.2 session is stored in the handshake and offered again to later connections")
    func tls12Resumes() throws {
        let cache = TLSSessionCache()
        let first = try connect(cache, client12)
        #expect(first.pair.client.negotiated?.version == .tls12)
        #expect(cache.sessionCount(for: key(client12)) == 1)
        for _ in 0..<2 {
            let next = try connect(cache, client12)
            #expect(next.offered)
            #expect(next.pair.client.sessionReused)
            #expect(next.facts.chain == first.facts.chain)
            #expect(next.facts.trust == first.facts.trust)
        }
        #expect(cache.sessionCount(for: key(client12)) == 1)
    }

    @Test("A session resumes only on the server context that issued it (another host's leaf, another context)",
          arguments: [false, true])
    func sessionStaysWithItsServerContext(tls12: Bool) throws {
        let context = tls12 ? client12 : client
        let cache = TLSSessionCache()
        _ = try connect(cache, context)
        let again = try connect(cache, context)
        #expect(again.pair.server.sessionReused)
        // Another host's context, as the proxy makes one per host: the client offers the session, the server makes
        // a full handshake and shows its own leaf.
        var otherConfig = TLSConfiguration.server(
            identity: try LeafMinter(authority: ca).identity(for: "localhost"), alpn: ["h2", "http/1.1"])
        otherConfig.sessionResumption = true
        let other = try TLSContext(otherConfig)
        let elsewhere = try connect(cache, context, serverEngine: try TLSEngine(context: other))
        #expect(elsewhere.offered)
        #expect(!elsewhere.pair.server.sessionReused)
        #expect(!elsewhere.pair.client.sessionReused)
        #expect(elsewhere.facts.chain != again.facts.chain)
        #expect(elsewhere.facts.trust == .trustedByUserRoot)
    }

    @Test("Connections that differ in ALPN offer, SNI, connect port or context do not share sessions")
    func keysDoNotShare() throws {
        let cache = TLSSessionCache()
        _ = try connect(cache, alpn: ["h2"])
        #expect(try connect(cache, alpn: ["http/1.1"]).offered == false)
        #expect(try connect(cache, sni: "other.localhost", alpn: ["h2"]).offered == false)
        #expect(try connect(cache, alpn: ["h2"], port: 8443).offered == false)
        var narrower = TLSConfiguration.client()
        narrower.sessionResumption = true
        narrower.tls13CipherSuites = "TLS_AES_128_GCM_SHA256"
        #expect(try connect(cache, TLSContext(narrower), alpn: ["h2"]).offered == false)
        // The same key does get one.
        #expect(try connect(cache, alpn: ["h2"]).pair.client.sessionReused)
    }

    @Test("A handshake that fails after offering a session drops the key's sessions; the next connection is a full one")
    func failedHandshakeIsNotReused() throws {
        let cache = TLSSessionCache()
        _ = try connect(cache, client12)
        let refusing = try TLSEngine(context: server)
        refusing.abortHandshake(with: .handshakeFailure)
        let failed = try connect(cache, client12, serverEngine: refusing)
        #expect(failed.offered)
        #expect(failed.facts.failure == .alertReceived(TLSAlert.handshakeFailure.code))
        #expect(cache.sessionCount(for: key(client12)) == 0)
        let next = try connect(cache, client12)
        #expect(!next.offered)
        #expect(!next.pair.client.sessionReused)
    }

    @Test("A connection that ends with a fatal alert leaves no session for its key")
    func fatalAlertInvalidates() throws {
        let cache = TLSSessionCache()
        let first = try connect(cache)
        #expect(cache.sessionCount(for: key(client)) == 2)
        // A forged application-data record: the client cannot decrypt it and sends bad_record_mac.
        first.pair.client.feed([0x17, 0x03, 0x03, 0x00, 0x20] + [UInt8](repeating: 0x5A, count: 32))
        guard case .failed = first.pair.client.read() else {
            Issue.record("a forged record must fail the read")
            return
        }
        #expect(first.pair.client.lastAlertSent?.fatal == true)
        #expect(cache.sessionCount(for: key(client)) == 0)
        #expect(try connect(cache).offered == false)
    }

    @Test("A connection the server ends without close_notify keeps its sessions (OpenSSL's alert then reaches nobody)")
    func uncleanEndKeepsSessions() throws {
        let cache = TLSSessionCache()
        let first = try connect(cache)
        first.pair.client.feedEndOfInput()
        #expect(first.pair.client.read() == .failed(.closedByPeer))
        #expect(first.pair.client.lastAlertSent?.fatal == true)
        #expect(cache.sessionCount(for: key(client)) == 2)
        #expect(try connect(cache).pair.client.sessionReused)
    }

    @Test("The least recently used key goes first when the cache is full")
    func leastRecentlyUsedEviction() throws {
        let cache = TLSSessionCache(capacity: 2)
        _ = try connect(cache, client12, port: 1)
        _ = try connect(cache, client12, port: 2)
        #expect(try connect(cache, client12, port: 1).pair.client.sessionReused)  // port 1 is now the most recent
        _ = try connect(cache, client12, port: 3)
        #expect(cache.keyCount == 2)
        #expect(cache.sessionCount(for: key(client12, port: 2)) == 0)
        #expect(cache.sessionCount(for: key(client12, port: 1)) == 1)
        #expect(cache.sessionCount(for: key(client12, port: 3)) == 1)
    }

    @Test("A session is not offered past the cache's lifetime")
    func lifetime() throws {
        let clock = TestClock()
        let cache = TLSSessionCache(maximumLifetime: 600, clock: { clock.read() })
        _ = try connect(cache, client12)
        clock.advance(by: 599)
        #expect(try connect(cache, client12).offered)
        clock.advance(by: 2)
        #expect(try connect(cache, client12).offered == false)
    }

    @Test("A resumed session's trust is evaluated again once a certificate has expired since")
    func expiryIsNoticedOnResumption() throws {
        let cache = TLSSessionCache()
        let first = try connect(cache, client12)
        #expect(first.facts.trust == .trustedByUserRoot)
        let later = Date().addingTimeInterval(400 * 86_400)  // the minted leaf lasts 397 days
        let resumed = try connect(cache, client12, now: later)
        #expect(resumed.pair.client.sessionReused)
        #expect(resumed.facts.trust == .untrusted(.expired))
        #expect(resumed.facts.chain == first.facts.chain)
    }

    @Test("A context made without session resumption (the diagnose probes) never offers a session")
    func probesMakeFullHandshakes() throws {
        let cache = TLSSessionCache()
        let probe = try TLSContext(.client())
        for _ in 0..<2 {
            let c = try connect(cache, probe)
            #expect(!c.offered)
            #expect(!c.pair.client.sessionReused)
        }
        #expect(cache.keyCount == 0)
    }
}
