import Foundation
import HTTP1Core
import HTTP2Core
import Testing

@testable import ProxyCore

/// An RFC 8441 WebSocket from an h2 client, relayed by H2ToH1Relay to an HTTP/1.1 origin played by the test.
@Suite("H2ToH1Relay: extended CONNECT becomes the HTTP/1.1 WebSocket handshake")
struct H2ToH1WebSocketTests {
    private final class Scene {
        let client: H2Session
        let relay: DecidedRelay<H2ToH1Relay>
        var toOrigin: [UInt8] = []
        var status: String?
        var fields: [H2Header] = []
        var data: [UInt8] = []
        var ended = false
        var sawConnectSetting = false

        init() throws {
            client = try H2Session(role: .client)
            relay = DecidedRelay(try H2ToH1Relay(primaryConnected: true, now: { 0 })) { head in
                .forward(head: head, url: "https://chat.test" + head.target, upstream: nil, annotation: [],
                         outcome: .allowed, codes: [])
            }
            take(relay.upstreamBytes([]))
        }

        func pumpClient() {
            for _ in 0..<20 {
                let bytes = client.pendingOutput()
                guard !bytes.isEmpty else { return }
                take(relay.clientBytes(bytes))
            }
        }

        func take(_ o: RelayOutput) {
            toOrigin += o.toUpstream
            guard !o.toClient.isEmpty else { return }
            let events: [H2Event]
            do { events = try client.receive(o.toClient) } catch {
                Issue.record("the client session refused the relay's frames: \(error)")
                return
            }
            for event in events {
                switch event {
                case .settings(false, let parameters):
                    if parameters.contains(H2Setting(identifier: 0x8, value: 1)) { sawConnectSetting = true }
                case .headers(_, let f, .response, let end):
                    status = f.first(named: ":status")
                    fields = f
                    ended = ended || end
                case .data(let id, let bytes, let end):
                    data += bytes
                    client.consume(streamID: id, count: bytes.count)
                    ended = ended || end
                default: break
                }
            }
        }

        func open() throws -> (id: Int32, key: String) {
            pumpClient()
            let id = try client.submitRequest(
                [H2Header(":method", "CONNECT"), H2Header(":protocol", "websocket"), H2Header(":scheme", "https"),
                 H2Header(":authority", "chat.test"), H2Header(":path", "/ws"), H2Header("sec-websocket-version", "13")],
                body: .streaming)
            pumpClient()
            let head = String(decoding: toOrigin, as: UTF8.self)
            toOrigin = []
            let key = head.split(separator: "\r\n").first { $0.lowercased().hasPrefix("sec-websocket-key:") }
                .map { String($0.split(separator: ":", maxSplits: 1)[1]).trimmingCharacters(in: .whitespaces) }
            #expect(head.hasPrefix("GET /ws HTTP/1.1\r\n"), "\(head)")
            #expect(head.lowercased().contains("\r\nupgrade: websocket\r\n"), "\(head)")
            #expect(head.lowercased().contains("\r\nconnection: upgrade\r\n"), "\(head)")
            return (id, try #require(key))
        }
    }

    @Test("The origin's 101 becomes the stream's 200, and bytes then flow raw both ways")
    func opensAndRelays() throws {
        let scene = try Scene()
        let (id, key) = try scene.open()
        #expect(scene.sawConnectSetting, "SETTINGS_ENABLE_CONNECT_PROTOCOL advertised")
        let accept = WebSocketKey.accept(for: key)
        scene.take(scene.relay.upstreamBytes(bytes("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
            + "Connection: Upgrade\r\nSec-WebSocket-Accept: \(accept)\r\n\r\nfirst")))
        #expect(scene.status == "200")
        #expect(scene.fields.first(named: "sec-websocket-accept") == nil)
        #expect(scene.data == bytes("first"), "bytes after the 101 in the same read")
        try scene.client.sendData(streamID: id, bytes("ping"), endStream: false)
        scene.pumpClient()
        #expect(scene.toOrigin == bytes("ping"))
        scene.take(scene.relay.upstreamBytes(bytes("pong")))
        #expect(scene.data == bytes("firstpong"))
        scene.take(scene.relay.upstreamEOF())
        #expect(scene.ended, "the origin's close ends the stream")
    }

    @Test("A 101 with the wrong Sec-WebSocket-Accept is a 502, not an open WebSocket")
    func wrongAccept() throws {
        let scene = try Scene()
        _ = try scene.open()
        scene.take(scene.relay.upstreamBytes(bytes("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
            + "Connection: Upgrade\r\nSec-WebSocket-Accept: bm90IHRoZSByaWdodCBvbmU=\r\n\r\n")))
        #expect(scene.status == "502")
    }

    @Test("The accept value is RFC 6455's example")
    func acceptValue() {
        #expect(WebSocketKey.accept(for: "dGhlIHNhbXBsZSBub25jZQ==") == "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=")
    }
}
