import HTTP1Core
import HTTP2Core
import Testing

@testable import ProxyCore

@Suite("H1ToH2Relay: an HTTP/1.1 client to an h2 upstream")
struct H1ToH2RelayTests {
    /// The relay and an h2 server session (nghttp2) standing for the origin.
    private func pair() throws -> (DecidedRelay<H1ToH2Relay>, H2Session) {
        let relay = DecidedRelay(try H1ToH2Relay(now: { 0 })) { head in
            .forward(head: head, url: "https://h2.test" + head.target, upstream: nil, annotation: [("X-ATS-Verdict", "allowed")],
                     outcome: .allowed, codes: [])
        }
        return (relay, try H2Session(role: .server))
    }

    @Test("A request becomes a stream; a response without content-length comes back chunked, annotated, keep-alive")
    func translatesBothWays() throws {
        let (relay, origin) = try pair()
        var toOrigin = relay.upstreamBytes([]).toUpstream
        toOrigin += relay.clientBytes(bytes("GET /x HTTP/1.1\r\nHost: h2.test\r\nConnection: keep-alive\r\n\r\n")).toUpstream
        let events = try origin.receive(toOrigin)
        guard case .headers(let id, let fields, .request, true)? = events.first(where: { if case .headers = $0 { true } else { false } })
        else {
            Issue.record("no request stream: \(events)")
            return
        }
        #expect(fields.first(named: ":authority") == "h2.test")
        #expect(fields.first(named: ":path") == "/x")
        #expect(fields.first(named: "connection") == nil, "connection-specific fields never cross")
        try origin.submitResponse(streamID: id, headers: [H2Header(":status", "200")], body: .streaming)
        try origin.sendData(streamID: id, bytes("hello"), endStream: true)
        let out = relay.upstreamBytes(origin.pendingOutput())
        let text = String(decoding: out.toClient, as: UTF8.self)
        #expect(text.hasPrefix("HTTP/1.1 200 OK\r\n"), "\(text)")
        #expect(text.contains("Transfer-Encoding: chunked\r\n"))
        #expect(text.contains("X-ATS-Verdict: allowed\r\n"))
        #expect(text.hasSuffix("\r\n\r\n5\r\nhello\r\n0\r\n\r\n"), "\(text)")
        #expect(!out.closeClient)
        #expect(out.exchanges.first?.status == 200)
    }

    @Test("An upload faster than the origin's window pauses the client past 1 MiB, and resumes it as the window opens")
    func uploadBackpressure() throws {
        let (relay, origin) = try pair()
        var toOrigin = relay.upstreamBytes([]).toUpstream
        var paused: Bool?
        let head = relay.clientBytes(bytes("POST /up HTTP/1.1\r\nHost: h2.test\r\nContent-Length: 4000000\r\n\r\n"))
        toOrigin += head.toUpstream
        var id: Int32 = 0
        for event in try origin.receive(toOrigin) { if case .headers(let s, _, .request, _) = event { id = s } }
        // The origin reads nothing: only its initial 64 KiB window can go out.
        let piece = [UInt8](repeating: 0x62, count: 65_536)
        for _ in 0..<20 {
            let o = relay.clientBytes(piece)
            if let p = o.pauseReading[.client] { paused = p }
            _ = try origin.receive(o.toUpstream)
        }
        #expect(paused == true)
        // The origin takes everything it has: its WINDOW_UPDATEs let the queue drain and the client go on.
        for _ in 0..<100 where paused == true {
            origin.consume(streamID: id, count: origin.unconsumedBytes(streamID: id))
            let o = relay.upstreamBytes(origin.pendingOutput())
            if let p = o.pauseReading[.client] { paused = p }
            _ = try origin.receive(o.toUpstream)
        }
        #expect(paused == false)
    }

    @Test("With retryUpgradeOverHTTP1, a first request carrying Upgrade is handed back to replay over http/1.1")
    func upgradeRetriedOverHTTP1() throws {
        let relay = DecidedRelay(try H1ToH2Relay(now: { 0 }, retryUpgradeOverHTTP1: true)) { head in
            .forward(head: head, url: "https://h2.test" + head.target, upstream: nil, annotation: [], outcome: .allowed,
                     codes: [])
        }
        _ = relay.upstreamBytes([])
        let request = bytes("GET /ws HTTP/1.1\r\nHost: h2.test\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")
        let out = relay.clientBytes(request)
        // Nothing goes to the h2 upstream and nothing is answered: the same bytes go to a new connection.
        #expect(out.retry == .overHTTP1(request))
        #expect(out.toClient.isEmpty)
        #expect(out.exchanges.isEmpty)
    }

    @Test("An Upgrade after other requests on the connection still gets the 501")
    func laterUpgradeGets501() throws {
        let relay = DecidedRelay(try H1ToH2Relay(now: { 0 }, retryUpgradeOverHTTP1: true)) { head in
            .forward(head: head, url: "https://h2.test" + head.target, upstream: nil, annotation: [], outcome: .allowed,
                     codes: [])
        }
        let origin = try H2Session(role: .server)
        var toOrigin = relay.upstreamBytes([]).toUpstream
        toOrigin += relay.clientBytes(bytes("GET /x HTTP/1.1\r\nHost: h2.test\r\n\r\n")).toUpstream
        var id: Int32 = 0
        for event in try origin.receive(toOrigin) { if case .headers(let s, _, .request, _) = event { id = s } }
        try origin.submitResponse(streamID: id, headers: [H2Header(":status", "204")], body: .none)
        _ = relay.upstreamBytes(origin.pendingOutput())
        let out = relay.clientBytes(bytes("GET /ws HTTP/1.1\r\nHost: h2.test\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n"))
        #expect(out.retry == nil)
        #expect(String(decoding: out.toClient, as: UTF8.self).hasPrefix("HTTP/1.1 501 "))
    }
}
