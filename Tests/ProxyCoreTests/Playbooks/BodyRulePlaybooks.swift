import HTTP2Core
import Inflate
import ProxyTrace
import Testing

@testable import ProxyCore
@testable import TrafficActions

/// `--modify-body` on responses: the relay holds the response (head and body) until the body's end, rewrites the
/// decoded text, and sends the head with its Content-Length set to the new length (or its own framing), on each of
/// the four relays. A rule that does not hold for a response, or a body over the limit, leaves it streaming.
@Suite("Playbooks: body rules on responses (--modify-body)")
struct BodyRulePlaybooks {
    static let get = "GET /a HTTP/1.1\r\nHost: good.test\r\n\r\n"
    static let rule = [(option: "--modify-body", value: "/world/everyone")]

    /// The rules the exchange's record lists, in the console's form.
    static func marks(_ e: ExchangeSummary) -> [String] { e.rules.map(\.summary) }

    static func gzip(_ text: String) -> [UInt8] { Deflate.deflate(Array(text.utf8), format: .gzip)! }

    static func gunzip(_ bytes: [UInt8]) throws -> String {
        String(decoding: try Inflate.inflate(bytes, format: .gzip, limit: 1 << 20), as: UTF8.self)
    }

    /// An HTTP/1.1 response's head and body as a client read it (Content-Length framing).
    static func split(_ received: [UInt8]) -> (head: String, body: [UInt8]) {
        let text = received
        guard let end = text.indices.first(where: { text[$0...].starts(with: Array("\r\n\r\n".utf8)) }) else {
            return (String(decoding: text, as: UTF8.self), [])
        }
        return (String(decoding: text[..<end], as: UTF8.self), Array(text[(end + 4)...]))
    }

    @Test("h1 → h1: nothing reaches the client until the body's end; then the new body with its Content-Length")
    func http1ContentLength() throws {
        let scene = try InterceptScene(rules: Self.rule)
        let pb = Playbook(scene.env, client: try scene.client(), origin: try scene.origin(), now: scene.now)
        pb.connects(scene)
        pb.completesHandshakes()
        pb >> .client(sends: Self.get)
        pb << .sendToUpstream(.tls(.prefix("GET /a HTTP/1.1\r\n")))
        pb << .startTimer(.response)
        // The head and the first piece are held: no command at all.
        pb >> .origin(sends: "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 11\r\n\r\nhello wo")
        pb >> .origin(sends: "rld")
        pb << .sendToClient(.tls("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 14\r\n\r\nhello everyone"))
        pb << .log(.exchange("modify-body marked") { e in
            e.status == 200
                && Self.marks(e) == ["[--modify-body #1] modify-body: 1 replacement, 11 → 14 bytes"]
        })
        pb.check()
    }

    @Test("h1 → h1: a chunked body goes chunked again, rewritten, with its trailers")
    func http1Chunked() throws {
        let scene = try InterceptScene(rules: Self.rule)
        let pb = Playbook(scene.env, client: try scene.client(), origin: try scene.origin(), now: scene.now)
        pb.connects(scene)
        pb.completesHandshakes()
        pb >> .client(sends: Self.get)
        pb << .sendToUpstream(.tls(.prefix("GET /a HTTP/1.1\r\n")))
        pb << .startTimer(.response)
        pb >> .origin(sends: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n")
        pb >> .origin(sends: "6\r\n world\r\n0\r\nX-Sum: 1\r\n\r\n")
        pb << .sendToClient(
            .tls("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\ne\r\nhello everyone\r\n0\r\nX-Sum: 1\r\n\r\n"))
        pb << .log(.exchange("GET", "https://good.test/a", status: 200, .allowed, codes: nil))
        pb.check()
    }

    @Test("h1 → h1: a gzip body is decoded, rewritten and compressed again; curl --compressed would read the new text")
    func http1Gzip() throws {
        let scene = try InterceptScene(rules: Self.rule)
        let pb = Playbook(scene.env, client: try scene.client(), origin: try scene.origin(), now: scene.now)
        pb.connects(scene)
        pb.completesHandshakes()
        pb >> .client(sends: Self.get)
        pb << .sendToUpstream(.tls(.prefix("GET /a HTTP/1.1\r\n")))
        pb << .startTimer(.response)
        let body = Self.gzip("hello world, hello world")
        let head = "HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Type: text/plain; charset=utf-8\r\n"
            + "Content-Length: \(body.count)\r\n\r\n"
        pb >> .originSends(Array(head.utf8) + body.prefix(10))
        pb >> .originSends(Array(body.dropFirst(10)))
        pb << .sendToClient(.tls(.prefix("HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\n")))
        pb << .log(.exchange("two replacements") { e in
            Self.marks(e).first?.hasPrefix("[--modify-body #1] modify-body: 2 replacements") == true
        })
        pb.check()
        let (received, sent) = Self.split(pb.client!.received)
        #expect(try Self.gunzip(sent) == "hello everyone, hello everyone")
        #expect(received.contains("Content-Length: \(sent.count)"))
    }

    @Test("h1 → h1: a rule whose filter does not hold for the response leaves it streaming as it came")
    func http1FilterDoesNotHold() throws {
        let scene = try InterceptScene(rules: [(option: "--modify-body", value: "/status:404/world/everyone")])
        let pb = Playbook(scene.env, client: try scene.client(), origin: try scene.origin(), now: scene.now)
        pb.connects(scene)
        pb.completesHandshakes()
        pb >> .client(sends: Self.get)
        pb << .sendToUpstream(.tls(.prefix("GET /a HTTP/1.1\r\n")))
        pb << .startTimer(.response)
        pb >> .origin(sends: "HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\nhello wo")
        pb << .sendToClient(.tls("HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\nhello wo"))
        pb >> .origin(sends: "rld")
        pb << .sendToClient(.tls("rld"))
        pb << .log(.exchange("no rule mark") { e in e.status == 200 && Self.marks(e).isEmpty })
        pb.check()
    }

    @Test("h1 → h1: past the limit, what was held goes on unchanged, the rest streams, and the mark says why")
    func http1OverLimit() throws {
        let scene = try InterceptScene(rules: Self.rule, ruleBodyLimit: 8)
        let pb = Playbook(scene.env, client: try scene.client(), origin: try scene.origin(), now: scene.now)
        pb.connects(scene)
        pb.completesHandshakes()
        pb >> .client(sends: Self.get)
        pb << .sendToUpstream(.tls(.prefix("GET /a HTTP/1.1\r\n")))
        pb << .startTimer(.response)
        pb >> .origin(sends: "HTTP/1.1 200 OK\r\nContent-Length: 16\r\n\r\nhello")
        pb >> .origin(sends: " world")
        pb << .sendToClient(.tls("HTTP/1.1 200 OK\r\nContent-Length: 16\r\n\r\nhello world"))
        pb >> .origin(sends: "!!!!!")
        pb << .sendToClient(.tls("!!!!!"))
        pb << .log(.exchange("left alone") { e in
            Self.marks(e) == ["[--modify-body #1] modify-body: modify body: the body is over 8 bytes; left unchanged"]
        })
        pb.check()
    }

    @Test("h1 → h1: the upstream closes while the body is held: the client gets a 502, not a cut-off body")
    func http1FailsWhileHeld() throws {
        let scene = try InterceptScene(rules: Self.rule)
        let pb = Playbook(scene.env, client: try scene.client(), origin: try scene.origin(), now: scene.now)
        pb.connects(scene)
        pb.completesHandshakes()
        pb >> .client(sends: Self.get)
        pb << .sendToUpstream(.tls(.prefix("GET /a HTTP/1.1\r\n")))
        pb << .startTimer(.response)
        pb >> .origin(sends: "HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\nhello")
        pb >> .upstreamClosed(error: "Connection reset by peer")
        pb << .sendToClient(.tls(.prefix("HTTP/1.1 502 Bad Gateway\r\n")))
        pb << .log(.exchange("GET", "https://good.test/a", status: 502, .allowed, codes: nil))
        pb << .sendToClient(.tlsRecords)  // close_notify
        pb << .closeClient
        pb.check()
    }

    @Test("h2 → h2: a gzip body in two DATA frames reaches the client rewritten, content-length set to its new size")
    func http2Gzip() throws {
        let scene = try InterceptScene(rules: Self.rule)
        let pb = Playbook(scene.env, client: try scene.client(alpn: ["h2"]), origin: try scene.origin(alpn: ["h2"]),
                          now: scene.now)
        pb.connects(scene)
        pb.completesHandshakes()
        pb << .sendToUpstream(.tls(.h2("preface, SETTINGS, WINDOW_UPDATE 0")))
        pb << .sendToClient(.tls(.h2("SETTINGS, WINDOW_UPDATE 0")))
        let client = try H2Peer(.client)
        try client.get("/a")
        pb >> .clientSends(client.output())
        pb << .sendToClient(.tls(.h2("SETTINGS ACK")))
        pb << .sendToUpstream(.tls(.h2("HEADERS 1 END_STREAM")))
        pb << .startTimer(.streamDeadlines)
        let origin = try H2Peer(.server)
        try origin.receive(from: pb.origin)
        let body = Self.gzip("hello world")
        try origin.session.submitResponse(
            streamID: 1,
            headers: [H2Header(":status", "200"), H2Header("content-type", "text/plain"),
                      H2Header("content-encoding", "gzip"), H2Header("content-length", "\(body.count)")],
            body: .streaming)
        try origin.session.sendData(streamID: 1, Array(body.prefix(10)), endStream: false)
        // The head and the first DATA are held: nothing for the client yet.
        pb >> .originSends(origin.output())
        pb << .sendToUpstream(.tls(.h2("SETTINGS ACK")))
        try origin.session.sendData(streamID: 1, Array(body.dropFirst(10)), endStream: true)
        pb >> .originSends(origin.output())
        pb << .sendToClient(.tls(.h2("HEADERS 1, DATA 1 END_STREAM")))
        pb << .log(.exchange("one replacement") { e in
            Self.marks(e).first?.hasPrefix("[--modify-body #1] modify-body: 1 replacement") == true
        })
        pb.check()
        try client.receive(from: pb.client)
        let response = try #require(client.messages[1])
        #expect(response.status == "200")
        #expect(try Self.gunzip(response.body) == "hello everyone")
        #expect(response.fields.first(named: "content-length") == "\(response.body.count)")
    }

    @Test("h1 → h2: a body without content-length goes to the HTTP/1.1 client with its length, rewritten")
    func http1ToHTTP2() throws {
        let scene = try InterceptScene(upstreamALPN: .ios, rules: Self.rule)
        let pb = Playbook(scene.env, client: try scene.client(), origin: try scene.origin(alpn: ["h2"]),
                          now: scene.now)
        pb.connects(scene)
        pb.completesHandshakes()
        pb << .sendToUpstream(.tls(.h2("preface, SETTINGS")))
        pb >> .client(sends: Self.get)
        pb << .sendToUpstream(.tls(.h2("HEADERS 1 END_STREAM")))
        let origin = try H2Peer(.server)
        try origin.receive(from: pb.origin)
        try origin.session.submitResponse(
            streamID: 1, headers: [H2Header(":status", "200"), H2Header("content-type", "text/plain")], body: .streaming)
        try origin.session.sendData(streamID: 1, Array("hello ".utf8), endStream: false)
        pb >> .originSends(origin.output())
        pb << .sendToUpstream(.tls(.h2("SETTINGS ACK")))
        try origin.session.sendData(streamID: 1, Array("world".utf8), endStream: true)
        pb >> .originSends(origin.output())
        pb << .sendToClient(
            .tls("HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\nContent-Length: 14\r\n\r\nhello everyone"))
        pb << .log(.exchange("GET", "https://good.test/a", status: 200, .allowed, codes: nil))
        pb.check()
    }

    @Test("h2 → h1 (lanes): a chunked body reaches the h2 client rewritten in DATA frames")
    func http2ToHTTP1() throws {
        let scene = try InterceptScene(rules: Self.rule)
        let pb = Playbook(scene.env, client: try scene.client(alpn: ["h2"]), origin: try scene.origin(),
                          now: scene.now)
        pb.connects(scene)
        pb.completesHandshakes()
        pb << .sendToClient(.tls(.h2("SETTINGS, WINDOW_UPDATE 0")))
        let client = try H2Peer(.client)
        try client.get("/a")
        pb >> .clientSends(client.output())
        pb << .sendToClient(.tls(.h2("SETTINGS ACK")))
        pb << .sendToUpstream(.tls("GET /a HTTP/1.1\r\nhost: good.test\r\n\r\n"))
        pb << .startTimer(.streamDeadlines)
        pb >> .origin(sends: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n")
        pb >> .origin(sends: "6\r\n world\r\n0\r\n\r\n")
        pb << .sendToClient(.tls(.h2("HEADERS 1, DATA 1 END_STREAM")))
        pb << .log(.exchange("GET", "https://good.test/a", status: 200, .allowed, codes: nil))
        pb.check()
        try client.receive(from: pb.client)
        let response = try #require(client.messages[1])
        #expect(response.status == "200")
        #expect(response.bodyText == "hello everyone")
        #expect(response.ended)
    }

    @Test("h1 → h1 keep-alive: after a held response the connection serves the next request; a HEAD holds nothing")
    func http1KeepAlive() throws {
        let scene = try InterceptScene(rules: Self.rule)
        let pb = Playbook(scene.env, client: try scene.client(), origin: try scene.origin(), now: scene.now)
        pb.connects(scene)
        pb.completesHandshakes()
        pb >> .client(sends: Self.get)
        pb << .sendToUpstream(.tls(.prefix("GET /a HTTP/1.1\r\n")))
        pb << .startTimer(.response)
        pb >> .origin(sends: "HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\nhello world")
        pb << .sendToClient(.tls("HTTP/1.1 200 OK\r\nContent-Length: 14\r\n\r\nhello everyone"))
        pb << .log(.exchange("GET", "https://good.test/a", status: 200, .allowed, codes: nil))
        pb >> .client(sends: "HEAD /b HTTP/1.1\r\nHost: good.test\r\n\r\n")
        pb << .sendToUpstream(.tls(.prefix("HEAD /b HTTP/1.1\r\n")))
        pb << .startTimer(.response)
        pb >> .origin(sends: "HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\n")
        pb << .sendToClient(.tls("HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\n"))
        pb << .log(.exchange("HEAD: no body rule mark") { e in e.method == "HEAD" && Self.marks(e).isEmpty })
        pb.check()
    }

    @Test("A local answer (--answer) meets the body rules too, as mitmproxy's response hook runs for a mapped one")
    func localAnswer() throws {
        let scene = try InterceptScene(rules: [(option: "--answer", value: "/200/hello world")] + Self.rule)
        let pb = Playbook(scene.env, client: try scene.client(), origin: try scene.origin(), now: scene.now)
        pb.connects(scene)
        pb.completesHandshakes()
        pb >> .client(sends: Self.get)
        pb << .sendToClient(.tls(.containing(["Content-Length: 14\r\n", "\r\n\r\nhello everyone"])))
        pb << .log(.exchange("answered and rewritten") { e in
            Self.marks(e).contains("[--modify-body #1] modify-body: 1 replacement, 11 → 14 bytes")
        })
        pb.check()
    }
}
