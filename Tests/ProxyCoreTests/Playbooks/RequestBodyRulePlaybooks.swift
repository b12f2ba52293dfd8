import HTTP2Core
import ProxyTrace
import Testing

@testable import ProxyCore

/// `--modify-body` on requests: the relay holds the request (head and body) until the body's end, then sends the
/// rewritten head (Content-Length set to the new length, or its own framing) and body upstream, on each of the four
/// relays. A client waiting for `100 Continue` gets it from the proxy, since the upstream sees no head until then.
@Suite("Playbooks: body rules on requests (--modify-body)")
struct RequestBodyRulePlaybooks {
    static let rule = [(option: "--modify-body", value: "/world/everyone")]

    static func marks(_ e: ExchangeSummary) -> [String] { e.rules.map(\.summary) }

    /// A POST with `body` on a new stream (client role), its DATA in the given pieces.
    static func post(_ peer: H2Peer, _ pieces: [String]) throws -> Int32 {
        let id = try peer.session.submitRequest(
            [H2Header(":method", "POST"), H2Header(":scheme", "https"), H2Header(":authority", "good.test"),
             H2Header(":path", "/a")], body: .streaming)
        for (i, piece) in pieces.enumerated() {
            try peer.session.sendData(streamID: id, Array(piece.utf8), endStream: i == pieces.count - 1)
        }
        return id
    }

    @Test("h1 → h1: the POST goes up only at its body's end, rewritten, with the new Content-Length")
    func http1() throws {
        let scene = try InterceptScene(rules: Self.rule)
        let pb = Playbook(scene.env, client: try scene.client(), origin: try scene.origin(), now: scene.now)
        pb.connects(scene)
        pb.completesHandshakes()
        // Nothing goes up while the body is held; the client's body deadline runs as usual.
        pb >> .client(sends: "POST /a HTTP/1.1\r\nHost: good.test\r\nContent-Length: 11\r\n\r\nhello")
        pb << .startTimer(.requestBody)
        pb >> .client(sends: " world")
        pb << .sendToUpstream(.tls("POST /a HTTP/1.1\r\nHost: good.test\r\nContent-Length: 14\r\n\r\nhello everyone"))
        pb << .startTimer(.response)
        pb >> .origin(sends: "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        pb << .sendToClient(.tls("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"))
        pb << .log(.exchange("request body rewritten") { e in
            Self.marks(e) == ["[--modify-body #1] modify-body: 1 replacement, 11 → 14 bytes"]
                && e.rules.first?.point == "request-body"  // the response had no match
        })
        pb.check()
    }

    @Test("h1 → h1: Expect: 100-continue is answered by the proxy, and the head goes up without it")
    func http1ExpectContinue() throws {
        let scene = try InterceptScene(rules: Self.rule)
        let pb = Playbook(scene.env, client: try scene.client(), origin: try scene.origin(), now: scene.now)
        pb.connects(scene)
        pb.completesHandshakes()
        pb >> .client(sends: "POST /a HTTP/1.1\r\nHost: good.test\r\nExpect: 100-continue\r\nContent-Length: 11\r\n\r\n")
        pb << .sendToClient(.tls("HTTP/1.1 100 Continue\r\n\r\n"))
        pb << .startTimer(.requestBody)
        pb >> .client(sends: "hello world")
        pb << .sendToUpstream(.tls("POST /a HTTP/1.1\r\nHost: good.test\r\nContent-Length: 14\r\n\r\nhello everyone"))
        pb << .startTimer(.response)
        pb.check()
    }

    @Test("h2 → h2: the upstream stream opens at the body's end, with the rewritten body")
    func http2() throws {
        let scene = try InterceptScene(rules: Self.rule)
        let pb = Playbook(scene.env, client: try scene.client(alpn: ["h2"]), origin: try scene.origin(alpn: ["h2"]),
                          now: scene.now)
        pb.connects(scene)
        pb.completesHandshakes()
        pb << .sendToUpstream(.tls(.h2("preface, SETTINGS, WINDOW_UPDATE 0")))
        pb << .sendToClient(.tls(.h2("SETTINGS, WINDOW_UPDATE 0")))
        let client = try H2Peer(.client)
        _ = try Self.post(client, ["hello", " world"])
        pb >> .clientSends(client.output())
        pb << .sendToClient(.tls(.h2("SETTINGS ACK")))
        pb << .sendToUpstream(.tls(.h2("HEADERS 1, DATA 1 END_STREAM")))
        pb << .startTimer(.streamDeadlines)
        pb.check()
        let origin = try H2Peer(.server)
        try origin.receive(from: pb.origin)
        #expect(origin.messages[1]?.bodyText == "hello everyone")
        #expect(origin.messages[1]?.ended == true)
    }

    @Test("h2 → h1 (lanes): the request goes to the lane at its body's end, with its Content-Length")
    func http2ToHTTP1() throws {
        let scene = try InterceptScene(rules: Self.rule)
        let pb = Playbook(scene.env, client: try scene.client(alpn: ["h2"]), origin: try scene.origin(),
                          now: scene.now)
        pb.connects(scene)
        pb.completesHandshakes()
        pb << .sendToClient(.tls(.h2("SETTINGS, WINDOW_UPDATE 0")))
        let client = try H2Peer(.client)
        _ = try Self.post(client, ["hello", " world"])
        pb >> .clientSends(client.output())
        pb << .sendToClient(.tls(.h2("SETTINGS ACK")))
        pb << .sendToUpstream(.tls("POST /a HTTP/1.1\r\nhost: good.test\r\nContent-Length: 14\r\n\r\nhello everyone"))
        pb << .startTimer(.streamDeadlines)
        pb.check()
    }

    @Test("h1 → h2: a chunked POST opens its upstream stream at the end, rewritten")
    func http1ToHTTP2() throws {
        let scene = try InterceptScene(upstreamALPN: .ios, rules: Self.rule)
        let pb = Playbook(scene.env, client: try scene.client(), origin: try scene.origin(alpn: ["h2"]),
                          now: scene.now)
        pb.connects(scene)
        pb.completesHandshakes()
        pb << .sendToUpstream(.tls(.h2("preface, SETTINGS")))
        pb >> .client(sends: "POST /a HTTP/1.1\r\nHost: good.test\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n")
        pb >> .client(sends: "6\r\n world\r\n0\r\n\r\n")
        pb << .sendToUpstream(.tls(.h2("HEADERS 1, DATA 1 END_STREAM")))
        pb.check()
        let origin = try H2Peer(.server)
        try origin.receive(from: pb.origin)
        #expect(origin.messages[1]?.bodyText == "hello everyone")
        #expect(origin.messages[1]?.ended == true)
    }
}
