import ATSPolicy
import HTTP1Core
import HTTP2Core
import ProxyTrace
import TLSCore
import Testing

@testable import ProxyCore

/// A clock that moves 1 ms each time it is read, so every timing of a record is distinct and ordered. It starts at
/// the test run's time: the session judges the origin's certificate, minted at the wall clock's time, by it.
private final class Ticks {
    private var now = SessionHarness.fixedNow
    func next() -> Double {
        now += 0.001
        return now
    }
}

/// A session between an in-memory TLS client and an in-memory TLS origin, with exchange details recorded
/// (`RecordingOptions`): the records it logs are what a capture store or a live view would get.
private final class RecordScene {
    let env: ProxyEnvironment
    let session: ProxySession
    let client: TLSEngine
    let origin: TLSEngine
    /// The client's and the origin's h2 sessions, when they speak h2.
    let clientH2: H2Session?
    let originH2: H2Session?
    var exchanges: [ExchangeSummary] = []
    var clientReceived: [UInt8] = []
    var originReceived: [UInt8] = []
    var upstreamConnected = false
    var closedClient = false

    init(clientALPN: [String], originALPN: [String], policy: PlistDictionary = PlistDictionary(),
         block: BlockStyle = .tls, originLeaf: LeafOptions = .standard, upstreamALPN: UpstreamALPN = .mirror) throws {
        let authority = try CertificateAuthority.create(commonName: "ExchangeRecordTests CA")
        let minter = LeafMinter(authority: authority)
        env = ProxyEnvironment(
            policy: ATSPolicy(atsDictionary: .dictionary(policy)), mode: .enforce, blockStyle: block,
            mappings: [try HostMapping(parsing: "good.test=127.0.0.1:9443")], passthrough: [], credentials: nil,
            minter: minter,
            factsCollector: HandshakeFactsCollector(
                trust: try TrustEvaluator(useSystemRoots: false, userRoots: [authority.certificate])),
            diagnosticsLevel: 0, jsonEvents: false, upstreamALPN: upstreamALPN,
            recording: RecordingOptions(bodyLimit: 8))
        let ticks = Ticks()
        session = ProxySession(id: 7, environment: env, now: { ticks.next() })
        session.clientAddress = "192.0.2.5:50000"
        client = try TLSEngine(context: TLSContext(.client(alpn: clientALPN)), serverName: "good.test")
        origin = try TLSEngine(context: TLSContext(
            .server(identity: try minter.identity(for: "good.test", options: originLeaf), alpn: originALPN)))
        clientH2 = clientALPN == ["h2"] ? try H2Session(role: .client) : nil
        originH2 = originALPN == ["h2"] ? try H2Session(role: .server) : nil
    }

    func apply(_ commands: [ProxyCommand]) {
        for command in commands {
            switch command {
            case .sendToClient(let bytes): client.feed(bytes)
            case .sendToUpstream(let bytes): origin.feed(bytes)
            case .connectUpstream: upstreamConnected = false
            case .closeClient, .resetClient: closedClient = true
            case .log(.exchange(let exchange)): exchanges.append(exchange)
            default: break
            }
        }
    }

    /// Moves bytes between the three until nothing moves (bounded). `respond` answers the origin's plaintext.
    func run(respond: (RecordScene) -> Void) {
        for _ in 0..<60 {
            if !upstreamConnected {
                upstreamConnected = true
                apply(session.handle(.upstreamConnected))
            }
            var moved = false
            _ = client.handshake()
            while case .data(let bytes) = client.read() { clientReceived += bytes }
            let toSession = client.takeOutput()
            if !toSession.isEmpty {
                moved = true
                apply(session.handle(.clientBytes(toSession)))
            }
            _ = origin.handshake()
            while case .data(let bytes) = origin.read() { originReceived += bytes }
            respond(self)
            let fromOrigin = origin.takeOutput()
            if !fromOrigin.isEmpty {
                moved = true
                apply(session.handle(.upstreamBytes(fromOrigin)))
            }
            if !moved, client.takeOutput().isEmpty { return }
        }
    }

    func connect() {
        let established = session.handle(.clientBytes(Array("CONNECT good.test:443 HTTP/1.1\r\nHost: good.test:443\r\n\r\n".utf8)))
        // The 200 is for the client's proxy code, not its TLS engine.
        #expect(String(decoding: established.toClient, as: UTF8.self).hasPrefix("HTTP/1.1 200"))
        // The first .connectUpstream comes with the ClientHello: mark it pending.
        upstreamConnected = true
        _ = client.handshake()
        apply(session.handle(.clientBytes(client.takeOutput())))
        upstreamConnected = false
    }
}

@Suite("Every exchange becomes one record with heads, timings, TLS facts and the decision")
struct ExchangeRecordTests {
    /// An origin that answers one HTTP/1.1 request with 11 bytes of body.
    fileprivate static func h1Origin(_ scene: RecordScene) {
        guard String(decoding: scene.originReceived, as: UTF8.self).contains("\r\n\r\n") else { return }
        scene.originReceived = []
        do {
            try scene.origin.write(Array("HTTP/1.1 200 OK\r\nContent-Length: 11\r\nX-Origin: h1\r\n\r\nhello world".utf8))
        } catch { Issue.record("the origin cannot write: \(error)") }
    }

    /// An origin that answers every h2 request with 11 bytes of body.
    fileprivate static func h2Origin(_ scene: RecordScene) {
        guard let h2 = scene.originH2, !scene.originReceived.isEmpty else { return }
        do {
            let events = try h2.receive(scene.originReceived)
            scene.originReceived = []
            for case .headers(let id, _, .request, _) in events {
                try h2.submitResponse(
                    streamID: id, headers: [H2Header(":status", "200"), H2Header("x-origin", "h2")], body: .streaming)
                try h2.sendData(streamID: id, Array("hello world".utf8), endStream: true)
            }
            let out = h2.pendingOutput()
            if !out.isEmpty { try scene.origin.write(out) }
        } catch { Issue.record("the h2 origin failed: \(error)") }
    }

    /// Sends one GET for /x from the client (HTTP/1.1, or a stream on its h2 session).
    fileprivate static func get(_ scene: RecordScene) throws {
        if let h2 = scene.clientH2 {
            _ = try h2.submitRequest(
                [H2Header(":method", "GET"), H2Header(":scheme", "https"), H2Header(":authority", "good.test"),
                 H2Header(":path", "/x"), H2Header("x-app", "1")], body: .none)
            try scene.client.write(h2.pendingOutput())
        } else {
            try scene.client.write(Array("GET /x HTTP/1.1\r\nHost: good.test\r\nX-App: 1\r\n\r\n".utf8))
        }
    }

    /// Runs one GET through a scene and returns its record.
    fileprivate static func oneExchange(_ scene: RecordScene, origin: (RecordScene) -> Void) throws -> ExchangeSummary {
        scene.connect()
        scene.run(respond: origin)
        try get(scene)
        scene.run(respond: origin)
        return try #require(scene.exchanges.last, "no exchange was logged")
    }

    /// What every relayed record must hold, whatever the protocols.
    static func expectRelayed(_ record: ExchangeSummary, clientALPN: String, upstreamALPN: String) throws {
        let detail = try #require(record.detail)
        #expect(detail.request?.method == "GET")
        #expect(detail.request?.target == "/x")
        #expect(detail.request?.headers[first: "X-App"] == "1")
        #expect(detail.response?.status == 200)
        #expect(detail.response?.headers[first: "X-Origin"] != nil)
        let t = detail.timings
        let sent = try #require(t.requestSent)
        let first = try #require(t.firstResponseByte)
        #expect(t.started <= sent && sent <= first && first <= t.ended, "\(t)")
        #expect(detail.responseBody == CapturedBody(bytes: Array("hello wo".utf8), totalBytes: 11))
        #expect(detail.responseBody?.isTruncated == true)
        let connection = try #require(record.connection)
        #expect(connection.connectionID == 7)
        #expect(connection.clientAddress == "192.0.2.5:50000")
        #expect(connection.clientTLS?.alpn == clientALPN)
        #expect(connection.clientTLS?.serverName == "good.test")
        #expect(connection.clientTLS?.version == "TLSv1.3")
        #expect(connection.upstreamTLS?.alpn == upstreamALPN)
        #expect(connection.upstreamHandshake?.chain.isEmpty == false)
        #expect(connection.decision?.keyPath == [])
        #expect(connection.violations.isEmpty)
        #expect(record.action == .relayed)
    }

    @Test("Intercepted HTTP/1.1")
    func http1() throws {
        let scene = try RecordScene(clientALPN: ["http/1.1"], originALPN: ["http/1.1"])
        let record = try Self.oneExchange(scene, origin: Self.h1Origin)
        try Self.expectRelayed(record, clientALPN: "http/1.1", upstreamALPN: "http/1.1")
        #expect(record.detail?.clientResponse == nil, "relayed as received")
    }

    @Test("An HTTP/2 stream: the h2 heads in HTTP/1.1 terms, version 2.0")
    func http2() throws {
        let scene = try RecordScene(clientALPN: ["h2"], originALPN: ["h2"])
        let record = try Self.oneExchange(scene, origin: Self.h2Origin)
        try Self.expectRelayed(record, clientALPN: "h2", upstreamALPN: "h2")
        #expect(record.detail?.response?.version == HTTPVersion(major: 2, minor: 0))
    }

    @Test("h1 client, h2 origin: the origin's h2 head and the HTTP/1.1 head the client got")
    func translated() throws {
        // --upstream-alpn ios offers the origin h2 whatever the client offered, as URLSession does.
        let scene = try RecordScene(clientALPN: ["http/1.1"], originALPN: ["h2"], upstreamALPN: .ios)
        let record = try Self.oneExchange(scene, origin: Self.h2Origin)
        guard record.detail?.response != nil else {
            Issue.record("no response recorded: \(record.consoleLine(colour: false))")
            return
        }
        try Self.expectRelayed(record, clientALPN: "http/1.1", upstreamALPN: "h2")
        #expect(record.detail?.clientResponse?.version == .http1_1)
        #expect(record.detail?.response?.version == HTTPVersion(major: 2, minor: 0))
    }

    @Test("A blocked handshake: the violation, the decision, the upstream's TLS, and when")
    func blockedHandshake() throws {
        let scene = try RecordScene(
            clientALPN: ["http/1.1"], originALPN: ["http/1.1"],
            originLeaf: LeafOptions(subjectAlternativeNames: ["other.test"]))
        scene.connect()
        scene.run(respond: Self.h1Origin)
        // This client does not check certificates, so it took the flawed leaf; it leaves without a request, and the
        // blocked handshake is logged then (a client that refuses the leaf is logged as its handshake fails).
        scene.apply(scene.session.handle(.clientEOF))
        let record = try #require(scene.exchanges.last)
        #expect(record.method == "CONNECT" && record.httpVersion == "TLS" && record.kind == .refusedHandshake)
        #expect(record.action == .blockedHandshake)
        let connection = try #require(record.connection)
        #expect(connection.violations.map(\.kind).contains(.hostnameMismatch), "\(connection.violations)")
        #expect(connection.decision != nil)
        #expect(connection.upstreamTLS?.version == "TLSv1.3")
        #expect(connection.upstreamHandshake?.hostnameMatches == false)
        let t = try #require(record.detail?.timings)
        #expect(t.started < t.ended)
    }

    @Test("A tunnel: its connection, why it was not intercepted, and when")
    func tunnel() throws {
        let authority = try CertificateAuthority.create(commonName: "ExchangeRecordTests CA")
        let env = ProxyEnvironment(
            policy: ATSPolicy(atsDictionary: .dictionary(PlistDictionary())), mode: .enforce, blockStyle: .tls,
            mappings: [], passthrough: [try HostPattern(parsing: "good.test", option: "--passthrough")],
            credentials: nil, minter: LeafMinter(authority: authority),
            factsCollector: HandshakeFactsCollector(trust: try TrustEvaluator(useSystemRoots: false)),
            diagnosticsLevel: 0, jsonEvents: false, recording: RecordingOptions(bodyLimit: 0))
        let ticks = Ticks()
        let session = ProxySession(id: 9, environment: env, now: { ticks.next() })
        _ = session.handle(.clientBytes(Array("CONNECT good.test:443 HTTP/1.1\r\nHost: good.test:443\r\n\r\n".utf8)))
        _ = session.handle(.upstreamConnected)
        let out = session.handle(.tunnelClosed(fromClient: 100, toClient: 200))
        let record = try #require(out.exchanges.last)
        #expect(record.action == .tunnelled && record.kind == .tunnel)
        #expect(record.note?.contains("--passthrough") == true)
        #expect(record.connection?.connectionID == 9)
        let t = try #require(record.detail?.timings)
        #expect(t.started < t.ended)
    }
}

/// The replay marker (issue 34): a loopback client's `X-ATSProxy-Replay-Of` is taken off before the request goes
/// upstream and recorded as the exchange's `replayOf`, on an h1 and an h2 client leg; another client's is neither.
@Suite("A replay's marker is recorded and never forwarded, for loopback clients only")
struct ReplayMarkerTests {
    /// One GET carrying the marker through a scene; the record, and every byte the origin received in plaintext.
    fileprivate static func markedGet(clientALPN: String, clientAddress: String) throws -> (ExchangeSummary, String) {
        let scene = try RecordScene(clientALPN: [clientALPN], originALPN: [clientALPN])
        scene.session.clientAddress = clientAddress
        var seen: [UInt8] = []
        let origin: (RecordScene) -> Void = { scene in
            guard let h2 = scene.originH2 else {
                seen += scene.originReceived
                return ExchangeRecordTests.h1OriginForReplay(scene)
            }
            // The h2 origin: its request's fields, decoded, as "name: value" lines.
            guard !scene.originReceived.isEmpty else { return }
            do {
                let events = try h2.receive(scene.originReceived)
                scene.originReceived = []
                for case .headers(let id, let fields, .request, _) in events {
                    seen += Array(fields.map { "\($0.name): \($0.value)\r\n" }.joined().utf8)
                    try h2.submitResponse(streamID: id, headers: [H2Header(":status", "200")], body: .streaming)
                    try h2.sendData(streamID: id, Array("ok".utf8), endStream: true)
                }
                let out = h2.pendingOutput()
                if !out.isEmpty { try scene.origin.write(out) }
            } catch { Issue.record("the h2 origin failed: \(error)") }
        }
        scene.connect()
        scene.run(respond: origin)
        if let h2 = scene.clientH2 {
            _ = try h2.submitRequest(
                [H2Header(":method", "GET"), H2Header(":scheme", "https"), H2Header(":authority", "good.test"),
                 H2Header(":path", "/x"), H2Header("x-atsproxy-replay-of", "12"), H2Header("x-app", "1")],
                body: .none)
            try scene.client.write(h2.pendingOutput())
        } else {
            try scene.client.write(Array(
                "GET /x HTTP/1.1\r\nHost: good.test\r\nX-ATSProxy-Replay-Of: 12\r\nX-App: 1\r\n\r\n".utf8))
        }
        scene.run(respond: origin)
        let record = try #require(scene.exchanges.last, "no exchange was logged")
        return (record, String(decoding: seen, as: UTF8.self).lowercased())
    }

    @Test("h1 and h2 client legs, from loopback: recorded as replayOf 12, not forwarded", arguments: ["http/1.1", "h2"])
    func loopback(alpn: String) throws {
        let (record, origin) = try Self.markedGet(clientALPN: alpn, clientAddress: "127.0.0.1:50000")
        #expect(record.replayOf == 12)
        #expect(record.status == 200)
        #expect(origin.contains("x-app"), "the request reached the origin")
        #expect(!origin.contains("replay-of"), "the marker never reaches the origin")
        #expect(record.consoleLine(colour: false).hasSuffix("(replay of #12)"))
    }

    @Test("From another address the field is the client's own: forwarded, and nothing recorded")
    func otherClient() throws {
        let (record, origin) = try Self.markedGet(clientALPN: "http/1.1", clientAddress: "192.0.2.5:50000")
        #expect(record.replayOf == nil)
        #expect(origin.contains("x-atsproxy-replay-of: 12"))
    }
}

extension ExchangeRecordTests {
    fileprivate static func h1OriginForReplay(_ scene: RecordScene) { h1Origin(scene) }
}
