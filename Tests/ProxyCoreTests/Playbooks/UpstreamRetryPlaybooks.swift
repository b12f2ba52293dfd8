import ATSPolicy
import HTTP2Core
import TLSCore
import Testing

@testable import ProxyCore

/// The upstream connection is replaced while the client's connection waits (its request held, then replayed): an
/// h2-only origin met with an HTTP/1.1-only offer, an ALPN refusal, an Upgrade that HTTP/2 cannot carry, and a request
/// the upstream's GOAWAY refused. The client never sees the first connection fail.
@Suite("Playbooks: the upstream connection retried offering h2, or over HTTP/1.1, while the client waits")
struct UpstreamRetryPlaybooks {
    static let get = "GET /a HTTP/1.1\r\nHost: good.test\r\n\r\n"

    @Test("An origin that closes before any request, choosing no protocol: retried offering h2, the GET replayed")
    func h2OnlyOriginClosesBeforeRequest() throws {
        let scene = try InterceptScene()
        // The first connection acknowledges no protocol (nghttpd offered only http/1.1); the second speaks h2.
        let pb = Playbook(scene.env, client: try scene.client(), origin: InterceptScene.sequence([
            try scene.origin(alpn: []), try scene.origin(alpn: ["h2"]),
        ]), now: scene.now)
        pb.connects(scene)
        pb.completesHandshakes()
        pb >> .client(sends: Self.get)
        pb << .sendToUpstream(.tls(.init(stringLiteral: Self.get)))
        pb << .startTimer(.response)
        // It closes without a byte of answer: taken for h2-only, and connected to again offering h2 as well.
        pb >> .upstreamEOF
        pb << .log(.notice(containing: "it is taken for h2-only: connections to it now offer h2 and http/1.1"))
        pb << .closeUpstream
        pb << .connectUpstream(address: "127.0.0.1", port: 9443)
        pb >> .upstreamConnected
        pb << .startTimer(.upstreamHandshake)
        pb << .sendToUpstream(.clientHello(alpn: ["http/1.1", "h2"]))
        pb >> .originFlight
        pb << .sendToUpstream(.tlsRecords)
        // The GET the client still waits for goes to the new connection, translated to HTTP/2.
        pb << .sendToUpstream(.tls(.h2("preface, SETTINGS")))
        pb << .sendToUpstream(.tls(.h2("HEADERS 1 END_STREAM")))
        let origin = try H2Peer(.server)
        try origin.receive(from: pb.origin)
        #expect(origin.messages[1]?.path == "/a")
        try origin.respond(1, body: "ok")
        pb >> .originSends(origin.output())
        pb << .sendToUpstream(.tls(.h2("SETTINGS ACK")))
        pb << .sendToClient(.tls("HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok"))
        pb << .log(.exchange("GET", "https://good.test/a", status: 200, .allowed, codes: nil))
        pb.check()
        #expect(pb.origins.count == 2)
    }

    @Test("An origin refusing the mirrored offer with no_application_protocol: retried offering both protocols")
    func noApplicationProtocol() throws {
        let scene = try InterceptScene()
        let pb = Playbook(scene.env, client: try scene.client(), origin: try scene.origin(), now: scene.now)
        pb.connects(scene)
        // A fatal no_application_protocol (120) alert, as nginx or a strict h2-only server sends it.
        pb >> .upstreamBytes([0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 120])
        pb << .closeUpstream
        pb << .log(.notice(containing: "the upstream refused the client's ALPN offer [\"http/1.1\"]; retrying with h2 "
            + "and http/1.1"))
        pb << .connectUpstream(address: "127.0.0.1", port: 9443)
        pb >> .upstreamConnected
        pb << .startTimer(.upstreamHandshake)
        pb << .sendToUpstream(.clientHello(alpn: ["http/1.1", "h2"]))
        // The client's handshake, held meanwhile, completes against the second connection's verdict.
        pb.completesHandshakes()
        pb >> .client(sends: Self.get)
        pb << .sendToUpstream(.tls(.init(stringLiteral: Self.get)))
        pb << .startTimer(.response)
        pb >> .origin(sends: "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        pb << .sendToClient(.tls("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"))
        pb << .log(.exchange("GET", "https://good.test/a", status: 200, .allowed, codes: nil))
        pb.check()
    }

    @Test("--upstream-alpn ios: a WebSocket upgrade meets an h2 upstream, so it is retried offering only http/1.1")
    func upgradeRetriedOverHTTP1() throws {
        let scene = try InterceptScene(upstreamALPN: .ios)
        let pb = Playbook(scene.env, client: try scene.client(), origin: try scene.origin(alpn: ["h2", "http/1.1"]),
                          now: scene.now)
        let upgrade = "GET /chat HTTP/1.1\r\nHost: good.test\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
        let switched = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            + "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n"
        pb.connects(scene)
        pb.completesHandshakes()
        // Offered h2 as URLSession would, the origin chose it: the relay opens the h2 connection at once.
        pb << .sendToUpstream(.tls(.h2("preface, SETTINGS")))
        pb >> .client(sends: upgrade)
        pb << .closeUpstream
        pb << .connectUpstream(address: "127.0.0.1", port: 9443)
        pb >> .upstreamConnected
        pb << .startTimer(.upstreamHandshake)
        pb << .sendToUpstream(.clientHello(alpn: ["http/1.1"]))
        pb >> .originFlight
        pb << .sendToUpstream(.tlsRecords)
        pb << .sendToUpstream(.tls(.init(stringLiteral: upgrade)))
        pb << .startTimer(.response)
        pb >> .origin(sends: switched)
        pb << .sendToClient(.tls(.init(stringLiteral: switched)))
        pb << .log(.exchange("GET", "https://good.test/chat", status: 101, .allowed, codes: nil))
        pb.check()
    }

    @Test("--upstream-alpn ios: a GET the h2 upstream's GOAWAY refused is sent again on a new connection, no 502")
    func refusedRequestRetried() throws {
        let scene = try InterceptScene(upstreamALPN: .ios)
        let pb = Playbook(scene.env, client: try scene.client(), origin: try scene.origin(alpn: ["h2"]),
                          now: scene.now)
        pb.connects(scene)
        pb.completesHandshakes()
        pb << .sendToUpstream(.tls(.h2("preface, SETTINGS")))
        pb >> .client(sends: Self.get)
        pb << .sendToUpstream(.tls(.h2("HEADERS 1 END_STREAM")))
        // The origin shuts down before processing stream 1 (GOAWAY, last stream 0).
        let first = try H2Peer(.server)
        try first.receive(from: pb.origin)
        try first.session.submitGoAway(lastStreamID: 0)
        pb >> .originSends(first.output())
        pb << .closeUpstream
        pb << .connectUpstream(address: "127.0.0.1", port: 9443)
        pb >> .upstreamConnected
        pb << .startTimer(.upstreamHandshake)
        pb << .sendToUpstream(.clientHello(alpn: ["h2", "http/1.1"]))
        pb >> .originFlight
        pb << .sendToUpstream(.tlsRecords)
        pb << .sendToUpstream(.tls(.h2("preface, SETTINGS")))
        pb << .sendToUpstream(.tls(.h2("HEADERS 1 END_STREAM")))
        let second = try H2Peer(.server)
        try second.receive(from: pb.origin)
        #expect(second.messages[1]?.path == "/a", "the same request, sent again")
        try second.respond(1, body: "ok")
        pb >> .originSends(second.output())
        pb << .sendToUpstream(.tls(.h2("SETTINGS ACK")))
        pb << .sendToClient(.tls("HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok"))
        pb << .log(.exchange("GET", "https://good.test/a", status: 200, .allowed, codes: nil))
        pb.check()
    }
}
