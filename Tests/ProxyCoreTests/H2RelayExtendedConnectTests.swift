import HTTP2Core
import Testing

@testable import ProxyCore

/// RFC 8441 extended CONNECT through H2Relay, between two nghttp2 sessions, bytes carried by the test.
@Suite("H2Relay: extended CONNECT (WebSockets over HTTP/2)")
struct H2RelayExtendedConnectTests {
    private final class Scene {
        let client: H2Session
        let origin: H2Session
        let relay: DecidedRelay<H2Relay>
        var originEvents: [H2Event] = []
        var clientEvents: [H2Event] = []

        init(originAcceptsConnect: Bool) throws {
            client = try H2Session(role: .client)
            origin = try H2Session(role: .server, settings: H2Settings(enableConnectProtocol: originAcceptsConnect))
            relay = DecidedRelay(try H2Relay(now: { 0 })) { head in
                .forward(head: head, url: "https://chat.test" + head.target, upstream: nil, annotation: [],
                         outcome: .allowed, codes: [])
            }
            toClient(relay.upstreamBytes([]))
        }

        /// Hands the relay's output to the client and the origin, recording what each saw.
        func toClient(_ o: RelayOutput) {
            do {
                if !o.toClient.isEmpty { clientEvents += try client.receive(o.toClient) }
                if !o.toUpstream.isEmpty { originEvents += try origin.receive(o.toUpstream) }
            } catch {
                Issue.record("a session refused the relay's frames: \(error)")
            }
        }

        /// Carries pending bytes both ways until all are quiet (bounded).
        func settle(includingOrigin: Bool = true) {
            for _ in 0..<10 {
                let c = client.pendingOutput()
                let o = includingOrigin ? origin.pendingOutput() : []
                if c.isEmpty && o.isEmpty { return }
                if !c.isEmpty { toClient(relay.clientBytes(c)) }
                if !o.isEmpty { toClient(relay.upstreamBytes(o)) }
            }
        }

        func openWebSocket() throws -> Int32 {
            try client.submitRequest(
                [H2Header(":method", "CONNECT"), H2Header(":protocol", "websocket"), H2Header(":scheme", "https"),
                 H2Header(":authority", "chat.test"), H2Header(":path", "/ws"), H2Header("sec-websocket-version", "13")],
                body: .streaming)
        }
    }

    @Test("The client is told extended CONNECT works; the stream waits for the origin's SETTINGS, then goes as sent")
    func relayedToAnOriginThatAcceptsIt() throws {
        let scene = try Scene(originAcceptsConnect: true)
        // The client's SETTINGS exchange first, the origin still silent.
        scene.settle(includingOrigin: false)
        #expect(scene.client.remoteSettings.enableConnectProtocol)
        let id = try scene.openWebSocket()
        scene.settle(includingOrigin: false)
        #expect(!scene.originEvents.contains { if case .headers = $0 { true } else { false } },
                "held until the origin's SETTINGS say whether it accepts extended CONNECT")
        scene.settle()
        let request = scene.originEvents.compactMap { e -> (Int32, [H2Header])? in
            if case .headers(let s, let f, .request, false) = e { (s, f) } else { nil }
        }.first
        let (upstreamID, fields) = try #require(request)
        #expect(fields.first(named: ":protocol") == "websocket")
        #expect(fields.first(named: ":method") == "CONNECT")
        try scene.origin.submitResponse(streamID: upstreamID, headers: [H2Header(":status", "200")], body: .streaming)
        try scene.origin.sendData(streamID: upstreamID, Array("hello".utf8), endStream: false)
        scene.settle()
        try scene.client.sendData(streamID: id, Array("ping".utf8), endStream: false)
        scene.settle()
        #expect(scene.clientEvents.contains { if case .headers(id, let f, .response, false) = $0 { f.first(named: ":status") == "200" } else { false } })
        #expect(scene.clientEvents.contains { if case .data(id, let b, false) = $0 { b == Array("hello".utf8) } else { false } })
        #expect(scene.originEvents.contains { if case .data(upstreamID, let b, false) = $0 { b == Array("ping".utf8) } else { false } })
    }

    @Test("An origin that does not accept extended CONNECT: the client gets a 501 saying why, not a reset")
    func originWithoutTheSetting() throws {
        let scene = try Scene(originAcceptsConnect: false)
        scene.settle()
        let id = try scene.openWebSocket()
        scene.settle()
        #expect(scene.clientEvents.contains { if case .headers(id, let f, .response, _) = $0 { f.first(named: ":status") == "501" } else { false } })
        #expect(!scene.originEvents.contains { if case .headers = $0 { true } else { false } })
    }
}
