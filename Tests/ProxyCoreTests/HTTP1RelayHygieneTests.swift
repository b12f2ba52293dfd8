import HTTP1Core
import Testing

@testable import ProxyCore

/// Issue 30, items 7, 8, 9, 11 and 14, at the relay: what belongs to one hop stays there, an h2c upgrade never
/// switches, an HTTP/1.0 client never sees chunked, a response cut by a reset looks cut.
@Suite("HTTP1Relay: hop-by-hop fields, h2c, HTTP/1.0 framing, cut responses")
struct HTTP1RelayHygieneTests {
    private func relay() -> DecidedRelay<HTTP1Relay> {
        DecidedRelay(connectedTo: UpstreamTarget(host: "a.test", port: 80), now: { 0 }) { head in
            .forward(
                head: head, url: "http://a.test" + head.target, upstream: nil, annotation: [], outcome: .allowed,
                codes: [])
        }
    }

    private func text(_ b: [UInt8]) -> String { String(decoding: b, as: UTF8.self) }

    @Test("Fields named in Connection (and Keep-Alive) stay on their hop, both ways; close and keep-alive stay options")
    func connectionNominatedFields() {
        let r = relay()
        let up = r.clientBytes(bytes(
            "GET / HTTP/1.1\r\nHost: a.test\r\nConnection: X-Hop, keep-alive\r\nX-Hop: 1\r\nKeep-Alive: timeout=5\r\n"
                + "X-Kept: 2\r\n\r\n"))
        #expect(text(up.toUpstream) == "GET / HTTP/1.1\r\nHost: a.test\r\nX-Kept: 2\r\nConnection: keep-alive\r\n\r\n")
        let down = r.upstreamBytes(bytes(
            "HTTP/1.1 200 OK\r\nConnection: X-Resp\r\nX-Resp: s\r\nContent-Length: 2\r\n\r\nok"))
        #expect(text(down.toClient) == "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
    }

    @Test("A Connection naming a framing field is refused, not honoured: 400 for a request, 502 for a response")
    func connectionNamingFramingRefused() {
        let request = relay().clientBytes(bytes(
            "POST / HTTP/1.1\r\nHost: a.test\r\nConnection: close, Content-Length\r\nContent-Length: 3\r\n\r\nabc"))
        #expect(request.toUpstream.isEmpty)
        #expect(text(request.toClient).hasPrefix("HTTP/1.1 400 "))
        let r = relay()
        _ = r.clientBytes(bytes("GET / HTTP/1.1\r\nHost: a.test\r\n\r\n"))
        let response = r.upstreamBytes(bytes(
            "HTTP/1.1 200 OK\r\nConnection: Transfer-Encoding\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"))
        #expect(text(response.toClient).hasPrefix("HTTP/1.1 502 "))
    }

    @Test("A head without options to honour goes up as received, byte for byte")
    func plainConnectionUnchanged() {
        let wire = "GET / HTTP/1.1\r\nHost: a.test\r\nconnection:keep-alive\r\n\r\n"
        #expect(text(relay().clientBytes(bytes(wire)).toUpstream) == wire)
    }

    @Test("An h2c upgrade goes up as a plain request, and an origin's 101 to it is refused with 502")
    func h2cUpgradeStripped() {
        let r = relay()
        let up = r.clientBytes(bytes(
            "GET / HTTP/1.1\r\nHost: a.test\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\n"
                + "HTTP2-Settings: AAMAAABkAAQAAP__\r\n\r\n"))
        #expect(text(up.toUpstream) == "GET / HTTP/1.1\r\nHost: a.test\r\n\r\n")
        let down = r.upstreamBytes(bytes("HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\nConnection: Upgrade\r\n\r\n"))
        #expect(text(down.toClient).hasPrefix("HTTP/1.1 502"))
        #expect(!down.switchedToRaw)
    }

    @Test("A WebSocket upgrade that offers h2c too keeps the WebSocket and its 101")
    func webSocketKeptWithoutH2c() {
        let r = relay()
        let up = r.clientBytes(bytes(
            "GET /ws HTTP/1.1\r\nHost: a.test\r\nConnection: Upgrade\r\nUpgrade: websocket, h2c\r\n\r\n"))
        #expect(text(up.toUpstream) == "GET /ws HTTP/1.1\r\nHost: a.test\r\nUpgrade: websocket\r\nConnection: upgrade\r\n\r\n")
        let down = r.upstreamBytes(bytes("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n"))
        #expect(down.switchedToRaw)
    }

    @Test("A chunked response reaches an HTTP/1.0 client de-chunked, delimited by the close")
    func chunkedToHTTP10() {
        let r = relay()
        _ = r.clientBytes(bytes("GET / HTTP/1.0\r\nHost: a.test\r\n\r\n"))
        let down = r.upstreamBytes(bytes(
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"))
        #expect(text(down.toClient) == "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nhello world")
        #expect(down.closeClient)
    }

    @Test("A close-delimited body the upstream resets is cut off (the client's connection reset); its EOF ends it")
    func resetCutsTheResponse() {
        let r = relay()
        _ = r.clientBytes(bytes("GET / HTTP/1.1\r\nHost: a.test\r\n\r\n"))
        let head = r.upstreamBytes(bytes("HTTP/1.1 200 OK\r\n\r\npartial"))
        #expect(text(head.toClient) == "HTTP/1.1 200 OK\r\n\r\npartial")
        let cut = r.upstreamReset("the upstream connection failed: reset")
        #expect(cut.closeClient && cut.abortClient)
        #expect(cut.exchanges.first?.interruption == "the upstream connection failed: reset")

        let clean = relay()
        _ = clean.clientBytes(bytes("GET / HTTP/1.1\r\nHost: a.test\r\n\r\n"))
        _ = clean.upstreamBytes(bytes("HTTP/1.1 200 OK\r\n\r\nwhole"))
        let ended = clean.upstreamEOF()
        #expect(ended.closeClient && !ended.abortClient)
        #expect(ended.exchanges.first?.interruption == nil)
    }

    @Test("An absolute-form target in a tunnel: its own origin goes in origin form with the target's Host; another is 421")
    func absoluteFormInTunnel() {
        let own = HTTPRequestHead(method: "GET", target: "https://H1.test/x?y", headers: [("Host", "evil.test")])
        guard case .success(let rewritten)? = InterceptLayer.originForm(of: own, forHost: "h1.test", port: 443) else {
            Issue.record("the tunnel's own origin was not rewritten")
            return
        }
        #expect(rewritten.target == "/x?y")
        #expect(rewritten.headers.values(for: "Host") == ["H1.test"])
        for target in ["https://other.test/x", "https://h1.test:8443/x", "http://h1.test/x"] {
            let head = HTTPRequestHead(method: "GET", target: target, headers: [("Host", "h1.test")])
            guard case .failure(let refusal)? = InterceptLayer.originForm(of: head, forHost: "h1.test", port: 443),
                case .answer(let answer, _, _, _, _, _) = refusal.decision
            else {
                Issue.record("\(target) was not refused")
                continue
            }
            #expect(answer.status == 421)
        }
        #expect(InterceptLayer.originForm(of: HTTPRequestHead(method: "GET", target: "/x"), forHost: "h1.test", port: 443) == nil)
    }
}

/// Issue 30, item 10: what waits for an upstream is bounded, and a replay checks every request it would send again.
@Suite("Early bytes and replays while the upstream is not there yet")
struct EarlyBytesTests {
    @Test("A body held while the upstream connects pauses the client past 64 KiB, and resumes it once connected")
    func heldBytesPauseTheClient() {
        let relay = DecidedRelay(connectedTo: nil, now: { 0 }) { head in
            .forward(
                head: head, url: "http://a.test/", upstream: UpstreamTarget(host: "a.test", port: 80), annotation: [],
                outcome: .allowed, codes: [])
        }
        let head = relay.clientBytes(bytes("POST / HTTP/1.1\r\nHost: a.test\r\nContent-Length: 1000000\r\n\r\n"))
        #expect(head.connect != nil && head.pauseReading[.client] == nil)
        let body = relay.clientBytes([UInt8](repeating: 0x61, count: HTTP1Relay.heldLimit))
        #expect(body.pauseReading[.client] == true)
        let connected = relay.upstreamConnected(UpstreamTarget(host: "a.test", port: 80))
        #expect(connected.pauseReading[.client] == false)
        #expect(connected.toUpstream.count > HTTP1Relay.heldLimit)
    }

    @Test("Only safe requests without a body are replayed, every pipelined one checked, a partial last head too")
    func replayChecksEveryRequest() {
        let get = "GET /a HTTP/1.1\r\nHost: a.test\r\n\r\n"
        #expect(InterceptLayer.isReplayable(bytes(get)))
        #expect(InterceptLayer.isReplayable(bytes(get + "HEAD /b HTTP/1.1\r\nHost: a.test\r\n\r\nGET /c HT")))
        #expect(!InterceptLayer.isReplayable(bytes(get + "POST /pay HTTP/1.1\r\nHost: a.test\r\nContent-Length: 2\r\n\r\nok")))
        #expect(!InterceptLayer.isReplayable(bytes(get + "POST /pay HT")))
        #expect(!InterceptLayer.isReplayable(bytes("GET /a HTTP/1.1\r\nHost: a.test\r\nContent-Length: 2\r\n\r\nok")))
        #expect(!InterceptLayer.isReplayable([]))
    }
}
