import HTTP1Core
import HTTP2Core
import ProxyTrace
import Testing

@testable import ProxyCore

/// `--breakpoint request:FILTER`: the request head waits undecided (nothing goes upstream) while the session lists
/// it in the hold registry (`.hold`) and starts the hold's timer; a release (`.holdReleased`, as the registry's
/// `deliver` posts it) or the timer decides it: executed (edited or not), answered, aborted, or (timed out) sent on
/// unchanged. On h2, the other streams of the connection go on meanwhile.
@Suite("Playbooks: breakpoints on requests (--breakpoint)")
struct BreakpointPlaybooks {
    static let rule = [(option: "--breakpoint", value: "request:text:/held")]

    static func marks(_ e: ExchangeSummary) -> [String] { e.rules.map(\.summary) }

    /// The `.hold` command for hold `id` of the request `method path`.
    static func holds(_ id: UInt64, _ method: String = "GET", _ path: String) -> Expect {
        Expect(
            kind: .one { sent in
                guard case .hold(let held) = sent.command else { return false }
                return held.id == id && held.phase == .request && held.request.method == method
                    && held.url == "https://good.test\(path)" && held.breakpoint == "--breakpoint #1"
                    && held.deadline - held.heldAt == 60
            }, description: "hold(\(id): \(method) \(path))")
    }

    static func h1Scene() throws -> (InterceptScene, Playbook) {
        let scene = try InterceptScene(rules: Self.rule)
        let pb = Playbook(scene.env, client: try scene.client(), origin: try scene.origin(), now: scene.now)
        pb.connects(scene)
        pb.completesHandshakes()
        return (scene, pb)
    }

    /// Sends a GET for `path` on a new h2 stream (client role).
    static func get(_ peer: H2Peer, _ path: String) throws -> Int32 {
        try peer.session.submitRequest(
            [H2Header(":method", "GET"), H2Header(":scheme", "https"), H2Header(":authority", "good.test"),
             H2Header(":path", path)], body: .none)
    }

    @Test("h1 → h1: held, nothing goes up; executed with an edited head 4.2 s later, recorded with both heads")
    func http1ExecuteEdited() throws {
        let (_, pb) = try Self.h1Scene()
        pb >> .client(sends: "GET /held HTTP/1.1\r\nHost: good.test\r\n\r\n")
        pb << Self.holds(1, "GET", "/held")
        pb << .startTimer(.hold(1))
        pb.advance(4.2)
        let edited = HTTPRequestHead(method: "GET", target: "/held?edited=1", headers: [("Host", "good.test"), ("X-Edited", "yes")])
        pb >> .holdReleased(1, .execute(request: edited))
        pb << .sendToUpstream(.tls("GET /held?edited=1 HTTP/1.1\r\nHost: good.test\r\nX-Edited: yes\r\n\r\n"))
        pb << .startTimer(.response)
        pb >> .origin(sends: "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        pb << .sendToClient(.tls("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"))
        pb << .log(.exchange("held, executed edited") { e in
            Self.marks(e) == ["[--breakpoint #1] breakpoint: held 4.2 s, executed edited"]
        })
        pb.check()
    }

    @Test("h1 → h1: a request the filter does not match goes up at once")
    func http1Unmatched() throws {
        let (_, pb) = try Self.h1Scene()
        pb >> .client(sends: "GET /free HTTP/1.1\r\nHost: good.test\r\n\r\n")
        pb << .sendToUpstream(.tls("GET /free HTTP/1.1\r\nHost: good.test\r\n\r\n"))
        pb << .startTimer(.response)
        pb.check()
    }

    @Test("h1 → h1: answered by the person, Content-Length made right, the upstream never asked")
    func http1Answer() throws {
        let (_, pb) = try Self.h1Scene()
        pb >> .client(sends: "GET /held HTTP/1.1\r\nHost: good.test\r\n\r\n")
        pb << Self.holds(1, "GET", "/held")
        pb << .startTimer(.hold(1))
        let answer = HTTPResponseHead(status: 418, reason: "I'm a teapot", headers: [("Content-Length", "99")])
        pb >> .holdReleased(1, .answer(answer, Array("short and stout".utf8)))
        pb << .sendToClient(.tls("HTTP/1.1 418 I'm a teapot\r\nContent-Length: 15\r\n\r\nshort and stout"))
        pb << .log(.exchange("answered at a breakpoint") { e in
            e.status == 418 && Self.marks(e) == ["[--breakpoint #1] breakpoint: held 0.0 s, answered 418"]
        })
        pb.check()
    }

    @Test("h1 → h1: aborted: the client's connection is reset and the record says so")
    func http1Abort() throws {
        let (_, pb) = try Self.h1Scene()
        pb >> .client(sends: "GET /held HTTP/1.1\r\nHost: good.test\r\n\r\n")
        pb << Self.holds(1, "GET", "/held")
        pb << .startTimer(.hold(1))
        pb >> .holdReleased(1, .abort)
        pb << .log(.exchange("aborted") { e in
            e.interruption == "aborted at a breakpoint: the connection was reset"
                && Self.marks(e) == ["[--breakpoint #1] breakpoint: held 0.0 s, aborted"]
        })
        pb << .resetClient
        pb << .closeUpstream
        pb.check()
    }

    @Test("h1 → h1: no release in time: the request goes on unchanged, with a notice; a late release is dropped")
    func http1Timeout() throws {
        let (_, pb) = try Self.h1Scene()
        pb >> .client(sends: "GET /held HTTP/1.1\r\nHost: good.test\r\n\r\n")
        pb << Self.holds(1, "GET", "/held")
        pb << .startTimer(.hold(1))
        pb.advance(60)
        pb >> .timerFired(.hold(1))
        pb << .unhold(1)
        pb << .log(.notice(containing: "was held 60.0 s with no release: it goes on unchanged"))
        pb << .sendToUpstream(.tls("GET /held HTTP/1.1\r\nHost: good.test\r\n\r\n"))
        pb << .startTimer(.response)
        pb >> .holdReleased(1, .abort)
        pb >> .origin(sends: "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        pb << .sendToClient(.tls("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"))
        pb << .log(.exchange("timed out") { e in
            Self.marks(e) == ["[--breakpoint #1] breakpoint: timed out after 60.0 s, went on unchanged"]
        })
        pb.check()
    }

    @Test("h1 → h1: the client leaving while held takes the hold off the registry")
    func http1ClientGone() throws {
        let (_, pb) = try Self.h1Scene()
        pb >> .client(sends: "GET /held HTTP/1.1\r\nHost: good.test\r\n\r\n")
        pb << Self.holds(1, "GET", "/held")
        pb << .startTimer(.hold(1))
        pb >> .clientClosed(error: nil)
        pb << .unhold(1)
        pb << .anyLogs
        pb << .closeUpstream
        pb.check()
    }

    @Test("h2 → h2: one stream held, a second stream on the connection goes up and back meanwhile")
    func http2() throws {
        let scene = try InterceptScene(rules: Self.rule)
        let pb = Playbook(scene.env, client: try scene.client(alpn: ["h2"]), origin: try scene.origin(alpn: ["h2"]),
                          now: scene.now)
        pb.connects(scene)
        pb.completesHandshakes()
        pb << .sendToUpstream(.tls(.h2("preface, SETTINGS, WINDOW_UPDATE 0")))
        pb << .sendToClient(.tls(.h2("SETTINGS, WINDOW_UPDATE 0")))
        let client = try H2Peer(.client)
        let held = try Self.get(client, "/held")
        pb >> .clientSends(client.output())
        pb << .sendToClient(.tls(.h2("SETTINGS ACK")))
        pb << Self.holds(1, "GET", "/held")
        pb << .startTimer(.hold(1))
        let other = try Self.get(client, "/other")
        pb >> .clientSends(client.output())
        // The upstream numbers its streams in the order they open: the second stream goes up first, as stream 1.
        pb << .sendToUpstream(.tls(.h2("HEADERS 1 END_STREAM")))
        pb << .startTimer(.streamDeadlines)
        pb.check()
        let origin = try H2Peer(.server)
        try origin.receive(from: pb.origin)
        #expect(origin.messages.count == 1)
        #expect(origin.messages[1]?.path == "/other")
        try origin.session.submitResponse(streamID: 1, headers: [H2Header(":status", "200")], body: .streaming)
        try origin.session.sendData(streamID: 1, Array("other".utf8), endStream: true)
        pb >> .originSends(origin.output())
        pb << .sendToUpstream(.tls(.h2("SETTINGS ACK")))
        pb << .sendToClient(.tls(.h2("HEADERS 3, DATA 3 END_STREAM")))
        pb << .log(.exchange("the other stream, not held") { e in e.url.hasSuffix("/other") && e.rules.isEmpty })
        pb.check()
        try client.receive(from: pb.client)
        #expect(client.messages[other]?.bodyText == "other")
        #expect(client.messages[held] == nil)
        pb >> .holdReleased(1, .execute())
        // The stream deadlines' timer armed for the other stream is still pending: none is started.
        pb << .sendToUpstream(.tls(.h2("HEADERS 3 END_STREAM")))
        pb.check()
        try origin.receive(from: pb.origin)
        #expect(origin.messages[3]?.path == "/held")
    }

    @Test("h2 → h1 (lanes): the held stream's request goes to the upstream once executed")
    func http2ToHTTP1() throws {
        let scene = try InterceptScene(rules: Self.rule)
        let pb = Playbook(scene.env, client: try scene.client(alpn: ["h2"]), origin: try scene.origin(),
                          now: scene.now)
        pb.connects(scene)
        pb.completesHandshakes()
        pb << .sendToClient(.tls(.h2("SETTINGS, WINDOW_UPDATE 0")))
        let client = try H2Peer(.client)
        _ = try Self.get(client, "/held")
        pb >> .clientSends(client.output())
        pb << .sendToClient(.tls(.h2("SETTINGS ACK")))
        pb << Self.holds(1, "GET", "/held")
        pb << .startTimer(.hold(1))
        let edited = HTTPRequestHead(method: "GET", target: "/held", headers: [("host", "good.test"), ("x-edited", "1")])
        pb >> .holdReleased(1, .execute(request: edited))
        pb << .sendToUpstream(.tls("GET /held HTTP/1.1\r\nhost: good.test\r\nx-edited: 1\r\n\r\n"))
        pb << .startTimer(.streamDeadlines)
        pb.check()
    }

    @Test("h1 → h2: the held request opens its upstream stream once executed")
    func http1ToHTTP2() throws {
        let scene = try InterceptScene(upstreamALPN: .ios, rules: Self.rule)
        let pb = Playbook(scene.env, client: try scene.client(), origin: try scene.origin(alpn: ["h2"]),
                          now: scene.now)
        pb.connects(scene)
        pb.completesHandshakes()
        pb << .sendToUpstream(.tls(.h2("preface, SETTINGS")))
        pb >> .client(sends: "GET /held HTTP/1.1\r\nHost: good.test\r\n\r\n")
        pb << Self.holds(1, "GET", "/held")
        pb << .startTimer(.hold(1))
        pb >> .holdReleased(1, .execute())
        pb << .sendToUpstream(.tls(.h2("HEADERS 1 END_STREAM")))
        pb.check()
    }

    /// An h2 → h2 connection with `/held` held on stream 1 (upstream not asked yet).
    static func h2Held() throws -> (Playbook, H2Peer, Int32) {
        let scene = try InterceptScene(rules: Self.rule)
        let pb = Playbook(scene.env, client: try scene.client(alpn: ["h2"]), origin: try scene.origin(alpn: ["h2"]),
                          now: scene.now)
        pb.connects(scene)
        pb.completesHandshakes()
        pb << .sendToUpstream(.tls(.h2("preface, SETTINGS, WINDOW_UPDATE 0")))
        pb << .sendToClient(.tls(.h2("SETTINGS, WINDOW_UPDATE 0")))
        let client = try H2Peer(.client)
        let held = try Self.get(client, "/held")
        pb >> .clientSends(client.output())
        pb << .sendToClient(.tls(.h2("SETTINGS ACK")))
        pb << Self.holds(1, "GET", "/held")
        pb << .startTimer(.hold(1))
        return (pb, client, held)
    }

    @Test("h2 → h2: answered: the stream gets the person's response, the upstream no stream")
    func http2Answer() throws {
        let (pb, client, held) = try Self.h2Held()
        pb >> .holdReleased(1, .answer(HTTPResponseHead(status: 503), Array("later".utf8)))
        pb << .sendToClient(.tls(.h2("HEADERS 1, DATA 1 END_STREAM")))
        pb << .log(.exchange("answered") { e in
            e.status == 503 && Self.marks(e) == ["[--breakpoint #1] breakpoint: held 0.0 s, answered 503"]
        })
        pb.check()
        try client.receive(from: pb.client)
        #expect(client.messages[held]?.status == "503")
        #expect(client.messages[held]?.bodyText == "later")
        #expect(client.messages[held]?.fields.first(named: "content-length") == "5")
    }

    @Test("h2 → h2: aborted: the client's connection is reset, recorded")
    func http2Abort() throws {
        let (pb, _, _) = try Self.h2Held()
        pb >> .holdReleased(1, .abort)
        pb << .log(.exchange("aborted") { e in e.interruption == "aborted at a breakpoint: the connection was reset" })
        pb << .anyLogs
        pb << .resetClient
        pb << .closeUpstream
        pb.check()
    }

    @Test("h2 → h2: timed out: the stream goes up unchanged, with a notice")
    func http2Timeout() throws {
        let (pb, _, _) = try Self.h2Held()
        pb.advance(60)
        pb >> .timerFired(.hold(1))
        pb << .unhold(1)
        pb << .log(.notice(containing: "with no release: it goes on unchanged"))
        pb << .sendToUpstream(.tls(.h2("HEADERS 1 END_STREAM")))
        pb << .startTimer(.streamDeadlines)
        pb.check()
    }
}
