import HTTP1Core
import HTTP2Core
import ProxyTrace
import Testing

@testable import ProxyCore

/// `--breakpoint response:FILTER`: the relay holds the response whole (head and body, as a body rule does) and, at
/// its end, the session lists it in the hold registry (`.hold`, phase `response`) with its timer; a release or the
/// timer sends it on: as held, edited (Content-Length made right), reset (abort), or unchanged with a notice. On h2,
/// the connection's other streams go on meanwhile.
@Suite("Playbooks: breakpoints on responses (--breakpoint response:)")
struct ResponseBreakpointPlaybooks {
    static let rule = [(option: "--breakpoint", value: "response:text:/held")]

    static func marks(_ e: ExchangeSummary) -> [String] { e.rules.map(\.summary) }

    /// The `.hold` command for the response (`status`, `body`) to `GET path`.
    static func holds(_ id: UInt64, _ path: String, status: Int, body: String) -> Expect {
        Expect(
            kind: .one { sent in
                guard case .hold(let held) = sent.command else { return false }
                return held.id == id && held.phase == .response && held.url == "https://good.test\(path)"
                    && held.response?.status == status && held.responseBody == Array(body.utf8)
                    && held.breakpoint == "--breakpoint #1" && held.deadline - held.heldAt == 60
            }, description: "hold(\(id): response \(status) to \(path))")
    }

    static let edited = HoldRelease.execute(
        response: HTTPResponseHead(status: 503, reason: "Service Unavailable", headers: [("X-Held", "yes")]),
        responseBody: Array("later".utf8))

    /// An h1 → h1 connection whose `GET /held` went up and whose response is held (hold 1).
    static func h1Held() throws -> Playbook {
        let scene = try InterceptScene(rules: Self.rule)
        let pb = Playbook(scene.env, client: try scene.client(), origin: try scene.origin(), now: scene.now)
        pb.connects(scene)
        pb.completesHandshakes()
        pb >> .client(sends: "GET /held HTTP/1.1\r\nHost: good.test\r\n\r\n")
        pb << .sendToUpstream(.tls("GET /held HTTP/1.1\r\nHost: good.test\r\n\r\n"))
        pb << .startTimer(.response)
        pb >> .origin(sends: "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        pb << Self.holds(1, "/held", status: 200, body: "ok")
        pb << .startTimer(.hold(1))
        return pb
    }

    @Test("h1 → h1: the response waits whole; executed edited 2.5 s later, the client gets exactly the 503")
    func http1ExecuteEdited() throws {
        let pb = try Self.h1Held()
        pb.advance(2.5)
        pb >> .holdReleased(1, Self.edited)
        pb << .sendToClient(.tls("HTTP/1.1 503 Service Unavailable\r\nX-Held: yes\r\nContent-Length: 5\r\n\r\nlater"))
        pb << .log(.exchange("response held, executed edited") { e in
            e.status == 503 && Self.marks(e) == ["[--breakpoint #1] breakpoint: response held 2.5 s, executed edited"]
        })
        pb.check()
    }

    @Test("h1 → h1: executed as held: the response goes on as it came, the connection serves the next request")
    func http1Execute() throws {
        let pb = try Self.h1Held()
        pb >> .holdReleased(1, .execute())
        pb << .sendToClient(.tls("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"))
        pb << .log(.exchange("response held, executed") { e in
            Self.marks(e) == ["[--breakpoint #1] breakpoint: response held 0.0 s, executed"]
        })
        pb >> .client(sends: "GET /free HTTP/1.1\r\nHost: good.test\r\n\r\n")
        pb << .sendToUpstream(.tls("GET /free HTTP/1.1\r\nHost: good.test\r\n\r\n"))
        pb << .startTimer(.response)
        pb.check()
    }

    @Test("h1 → h1: aborted: the client's connection is reset and the record says so")
    func http1Abort() throws {
        let pb = try Self.h1Held()
        pb >> .holdReleased(1, .abort)
        pb << .log(.exchange("aborted") { e in
            e.interruption == "aborted at a breakpoint: the connection was reset"
                && Self.marks(e) == ["[--breakpoint #1] breakpoint: response held 0.0 s, aborted"]
        })
        pb << .resetClient
        pb << .closeUpstream
        pb.check()
    }

    @Test("h1 → h1: no release in time: the response goes on unchanged, with a notice")
    func http1Timeout() throws {
        let pb = try Self.h1Held()
        pb.advance(60)
        pb >> .timerFired(.hold(1))
        pb << .unhold(1)
        pb << .log(.notice(containing: "was held 60.0 s with no release: it goes on unchanged"))
        pb << .sendToClient(.tls("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"))
        pb << .log(.exchange("timed out") { e in
            Self.marks(e) == ["[--breakpoint #1] breakpoint: response held 60.0 s with no release: went on unchanged"]
        })
        pb >> .holdReleased(1, .abort)
        pb.check()
    }

    /// An h2 → h2 connection whose `/held` (client stream 1, upstream stream 1) response is held (hold 1).
    static func h2Held() throws -> (Playbook, H2Peer, H2Peer, Int32) {
        let scene = try InterceptScene(rules: Self.rule)
        let pb = Playbook(scene.env, client: try scene.client(alpn: ["h2"]), origin: try scene.origin(alpn: ["h2"]),
                          now: scene.now)
        pb.connects(scene)
        pb.completesHandshakes()
        pb << .sendToUpstream(.tls(.h2("preface, SETTINGS, WINDOW_UPDATE 0")))
        pb << .sendToClient(.tls(.h2("SETTINGS, WINDOW_UPDATE 0")))
        let client = try H2Peer(.client)
        let held = try BreakpointPlaybooks.get(client, "/held")
        pb >> .clientSends(client.output())
        pb << .sendToClient(.tls(.h2("SETTINGS ACK")))
        pb << .sendToUpstream(.tls(.h2("HEADERS 1 END_STREAM")))
        pb << .startTimer(.streamDeadlines)
        pb.check()
        let origin = try H2Peer(.server)
        try origin.receive(from: pb.origin)
        try origin.session.submitResponse(streamID: 1, headers: [H2Header(":status", "200")], body: .streaming)
        try origin.session.sendData(streamID: 1, Array("ok".utf8), endStream: true)
        pb >> .originSends(origin.output())
        pb << .sendToUpstream(.tls(.h2("SETTINGS ACK")))
        pb << Self.holds(1, "/held", status: 200, body: "ok")
        pb << .startTimer(.hold(1))
        pb.check()
        return (pb, client, origin, held)
    }

    @Test("h2 → h2: one response held, a second stream goes up and back meanwhile; executed edited: exactly the 503")
    func http2() throws {
        let (pb, client, origin, held) = try Self.h2Held()
        let other = try BreakpointPlaybooks.get(client, "/other")
        pb >> .clientSends(client.output())
        pb << .sendToUpstream(.tls(.h2("HEADERS 3 END_STREAM")))
        pb.check()
        try origin.receive(from: pb.origin)
        try origin.session.submitResponse(streamID: 3, headers: [H2Header(":status", "200")], body: .streaming)
        try origin.session.sendData(streamID: 3, Array("other".utf8), endStream: true)
        pb >> .originSends(origin.output())
        pb << .sendToClient(.tls(.h2("HEADERS 3, DATA 3 END_STREAM")))
        pb << .log(.exchange("the other stream, not held") { e in e.url.hasSuffix("/other") && e.rules.isEmpty })
        pb.check()
        try client.receive(from: pb.client)
        #expect(client.messages[other]?.bodyText == "other")
        #expect(client.messages[held]?.status == nil)
        pb >> .holdReleased(1, Self.edited)
        pb << .sendToClient(.tls(.h2("HEADERS 1, DATA 1 END_STREAM")))
        pb << .log(.exchange("response held, executed edited") { e in
            e.status == 503 && Self.marks(e) == ["[--breakpoint #1] breakpoint: response held 0.0 s, executed edited"]
        })
        pb.check()
        try client.receive(from: pb.client)
        #expect(client.messages[held]?.status == "503")
        #expect(client.messages[held]?.bodyText == "later")
        #expect(client.messages[held]?.fields.first(named: "x-held") == "yes")
        #expect(client.messages[held]?.fields.first(named: "content-length") == "5")
    }

    @Test("h2 → h2: aborted: only the held stream is reset")
    func http2Abort() throws {
        let (pb, _, _, _) = try Self.h2Held()
        pb >> .holdReleased(1, .abort)
        pb << .sendToClient(.tls(.h2("RST_STREAM 1")))
        pb << .log(.exchange("aborted") { e in e.interruption == "aborted at a breakpoint: the stream was reset" })
        pb.check()
    }

    @Test("h2 → h2: timed out: the response goes on unchanged, with a notice")
    func http2Timeout() throws {
        let (pb, client, _, held) = try Self.h2Held()
        pb.advance(60)
        pb >> .timerFired(.hold(1))
        pb << .unhold(1)
        pb << .log(.notice(containing: "with no release: it goes on unchanged"))
        pb << .sendToClient(.tls(.h2("HEADERS 1, DATA 1 END_STREAM")))
        pb << .anyLogs
        pb.check()
        try client.receive(from: pb.client)
        #expect(client.messages[held]?.status == "200")
        #expect(client.messages[held]?.bodyText == "ok")
    }

    @Test("h1 → h2: the upstream's h2 response is held; executed edited, the HTTP/1.1 client gets exactly the 503")
    func http1ToHTTP2() throws {
        let scene = try InterceptScene(upstreamALPN: .ios, rules: Self.rule)
        let pb = Playbook(scene.env, client: try scene.client(), origin: try scene.origin(alpn: ["h2"]),
                          now: scene.now)
        pb.connects(scene)
        pb.completesHandshakes()
        pb << .sendToUpstream(.tls(.h2("preface, SETTINGS")))
        pb >> .client(sends: "GET /held HTTP/1.1\r\nHost: good.test\r\n\r\n")
        pb << .sendToUpstream(.tls(.h2("HEADERS 1 END_STREAM")))
        pb.check()
        let origin = try H2Peer(.server)
        try origin.receive(from: pb.origin)
        try origin.session.submitResponse(streamID: 1, headers: [H2Header(":status", "200")], body: .streaming)
        try origin.session.sendData(streamID: 1, Array("ok".utf8), endStream: true)
        pb >> .originSends(origin.output())
        pb << .sendToUpstream(.tls(.h2("SETTINGS ACK")))
        pb << Self.holds(1, "/held", status: 200, body: "ok")
        pb << .startTimer(.hold(1))
        pb >> .holdReleased(1, Self.edited)
        pb << .sendToClient(.tls("HTTP/1.1 503 Service Unavailable\r\nX-Held: yes\r\nContent-Length: 5\r\n\r\nlater"))
        pb << .log(.exchange("response held, executed edited") { e in
            Self.marks(e) == ["[--breakpoint #1] breakpoint: response held 0.0 s, executed edited"]
        })
        pb.check()
    }

    @Test("h2 → h1 (lanes): the lane's response is held; executed edited, the h2 client gets exactly the 503")
    func http2ToHTTP1() throws {
        let scene = try InterceptScene(rules: Self.rule)
        let pb = Playbook(scene.env, client: try scene.client(alpn: ["h2"]), origin: try scene.origin(),
                          now: scene.now)
        pb.connects(scene)
        pb.completesHandshakes()
        pb << .sendToClient(.tls(.h2("SETTINGS, WINDOW_UPDATE 0")))
        let client = try H2Peer(.client)
        let held = try BreakpointPlaybooks.get(client, "/held")
        pb >> .clientSends(client.output())
        pb << .sendToClient(.tls(.h2("SETTINGS ACK")))
        pb << .sendToUpstream(.tls("GET /held HTTP/1.1\r\nhost: good.test\r\n\r\n"))
        pb << .startTimer(.streamDeadlines)
        pb >> .origin(sends: "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        pb << Self.holds(1, "/held", status: 200, body: "ok")
        pb << .startTimer(.hold(1))
        pb >> .holdReleased(1, Self.edited)
        pb << .sendToClient(.tls(.h2("HEADERS 1, DATA 1 END_STREAM")))
        pb << .log(.exchange("response held, executed edited") { e in
            e.status == 503 && Self.marks(e) == ["[--breakpoint #1] breakpoint: response held 0.0 s, executed edited"]
        })
        pb.check()
        try client.receive(from: pb.client)
        #expect(client.messages[held]?.status == "503")
        #expect(client.messages[held]?.bodyText == "later")
        #expect(client.messages[held]?.fields.first(named: "x-held") == "yes")
    }

    @Test("h1 → h1: a breakpoint with no prefix holds the request, then its response; the record has both notes")
    func http1Both() throws {
        let scene = try InterceptScene(rules: [(option: "--breakpoint", value: "text:/held")])
        let pb = Playbook(scene.env, client: try scene.client(), origin: try scene.origin(), now: scene.now)
        pb.connects(scene)
        pb.completesHandshakes()
        pb >> .client(sends: "GET /held HTTP/1.1\r\nHost: good.test\r\n\r\n")
        pb << BreakpointPlaybooks.holds(1, "GET", "/held")
        pb << .startTimer(.hold(1))
        pb >> .holdReleased(1, .execute())
        pb << .sendToUpstream(.tls("GET /held HTTP/1.1\r\nHost: good.test\r\n\r\n"))
        pb << .startTimer(.response)
        pb >> .origin(sends: "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        pb << Self.holds(2, "/held", status: 200, body: "ok")
        pb << .startTimer(.hold(2))
        pb >> .holdReleased(2, .execute())
        pb << .sendToClient(.tls("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"))
        pb << .log(.exchange("both held") { e in
            Self.marks(e) == [
                "[--breakpoint #1] breakpoint: held 0.0 s, executed; response held 0.0 s, executed"
            ]
        })
        pb.check()
    }

    @Test("h1 → h1: a close-delimited response ends with the upstream's close: held whole, then sent on release")
    func http1CloseDelimited() throws {
        let scene = try InterceptScene(rules: Self.rule)
        let pb = Playbook(scene.env, client: try scene.client(), origin: try scene.origin(), now: scene.now)
        pb.connects(scene)
        pb.completesHandshakes()
        pb >> .client(sends: "GET /held HTTP/1.1\r\nHost: good.test\r\n\r\n")
        pb << .sendToUpstream(.tls("GET /held HTTP/1.1\r\nHost: good.test\r\n\r\n"))
        pb << .startTimer(.response)
        pb >> .origin(sends: "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nall of it")
        pb >> .upstreamClosed(error: nil)
        pb << Self.holds(1, "/held", status: 200, body: "all of it")
        pb << .startTimer(.hold(1))
        pb >> .holdReleased(1, Self.edited)
        pb << .sendToClient(.tls("HTTP/1.1 503 Service Unavailable\r\nX-Held: yes\r\nContent-Length: 5\r\n\r\nlater"))
        pb << .log(.exchange("held, then sent") { e in e.status == 503 && e.interruption == nil })
        pb << .anyLogs
        pb << .sendToClient(.tlsRecords)
        pb << .closeClient
        pb.check()
    }

    @Test("h1 → h1: a body over the limit is not held: it goes on unchanged, with a note")
    func http1OverLimit() throws {
        let scene = try InterceptScene(rules: Self.rule, ruleBodyLimit: 8)
        let pb = Playbook(scene.env, client: try scene.client(), origin: try scene.origin(), now: scene.now)
        pb.connects(scene)
        pb.completesHandshakes()
        pb >> .client(sends: "GET /held HTTP/1.1\r\nHost: good.test\r\n\r\n")
        pb << .sendToUpstream(.tls("GET /held HTTP/1.1\r\nHost: good.test\r\n\r\n"))
        pb << .startTimer(.response)
        pb >> .origin(sends: "HTTP/1.1 200 OK\r\nContent-Length: 16\r\n\r\nhello")
        pb >> .origin(sends: " world")
        pb << .sendToClient(.tls("HTTP/1.1 200 OK\r\nContent-Length: 16\r\n\r\nhello world"))
        pb >> .origin(sends: "!!!!!")
        pb << .sendToClient(.tls("!!!!!"))
        pb << .log(.exchange("not held") { e in
            Self.marks(e) == [
                "[--breakpoint #1] breakpoint: the response body is over 8 bytes: not held, went on unchanged"
            ]
        })
        pb.check()
    }

    @Test("h1 → h1: a body rule and a response breakpoint: the held response is the edited one")
    func http1BodyRuleFirst() throws {
        let scene = try InterceptScene(rules: Self.rule + [(option: "--modify-body", value: "/ok/fine")])
        let pb = Playbook(scene.env, client: try scene.client(), origin: try scene.origin(), now: scene.now)
        pb.connects(scene)
        pb.completesHandshakes()
        pb >> .client(sends: "GET /held HTTP/1.1\r\nHost: good.test\r\n\r\n")
        pb << .sendToUpstream(.tls("GET /held HTTP/1.1\r\nHost: good.test\r\n\r\n"))
        pb << .startTimer(.response)
        pb >> .origin(sends: "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        pb << Self.holds(1, "/held", status: 200, body: "fine")
        pb << .startTimer(.hold(1))
        pb >> .holdReleased(1, .execute())
        pb << .sendToClient(.tls("HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nfine"))
        pb << .anyLogs
        pb.check()
    }
}
