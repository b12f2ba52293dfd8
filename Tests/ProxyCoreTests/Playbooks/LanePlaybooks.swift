import ATSPolicy
import HTTP2Core
import TLSCore
import Testing

@testable import ProxyCore

/// An h2 client whose origin speaks only HTTP/1.1 (H2ToH1Relay): one exchange at a time per upstream connection, so
/// a stream that finds the first connection busy gets a lane of its own, a connection with the same TLS as the first.
@Suite("Playbooks: an h2 client over HTTP/1.1 upstream connections (lanes)")
struct LanePlaybooks {
    @Test("Two concurrent streams: the first on the upstream connection, the second on a lane; each answered")
    func secondStreamOpensLane() throws {
        let scene = try InterceptScene()
        let pb = Playbook(scene.env, client: try scene.client(alpn: ["h2"]), origin: try scene.origin(),
                          now: scene.now)
        let lane = UpstreamLane(1)
        pb.connects(scene)
        pb.completesHandshakes()
        // The client offered only h2 and the origin chose http/1.1: the proxy speaks h2 to the client.
        pb << .sendToClient(.tls(.h2("SETTINGS, WINDOW_UPDATE 0")))
        let client = try H2Peer(.client)
        try client.get("/a")
        try client.get("/b")
        pb >> .clientSends(client.output())
        // The step's own output (the SETTINGS ACK) goes first; then each request is decided in turn and sent.
        pb << .sendToClient(.tls(.h2("SETTINGS ACK")))
        pb << .sendToUpstream(.tls("GET /a HTTP/1.1\r\nhost: good.test\r\n\r\n"))
        pb << .startTimer(.streamDeadlines)
        pb << .connectLane(lane, address: "127.0.0.1", port: 9443)
        pb >> .laneConnected(lane)
        pb << .sendToLane(lane, .clientHello(alpn: ["http/1.1"]))
        pb >> .laneFlight(lane)
        pb << .sendToLane(lane, .tlsRecords)
        pb << .sendToLane(lane, .tls("GET /b HTTP/1.1\r\nhost: good.test\r\n\r\n"))
        pb >> .origin(sends: "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\na")
        pb << .sendToClient(.tls(.h2("HEADERS 1, DATA 1 END_STREAM")))
        pb << .log(.exchange("GET", "https://good.test/a", status: 200, .allowed, codes: nil))
        pb >> .lane(lane, sends: "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nb")
        pb << .sendToClient(.tls(.h2("HEADERS 3, DATA 3 END_STREAM")))
        pb << .log(.exchange("GET", "https://good.test/b", status: 200, .allowed, codes: nil))
        // The lane's origin closes it; the client's connection goes on (only one of its connections was lost).
        pb >> .laneEOF(lane)
        pb << .sendToLane(lane, .tlsRecords)  // close_notify
        pb << .closeLane(lane)
        pb.check()
        try client.receive(from: pb.client)
        #expect(client.messages[1].map { [$0.status, $0.bodyText] } == ["200", "a"])
        #expect(client.messages[3].map { [$0.status, $0.bodyText] } == ["200", "b"])
    }

    @Test("A lane that cannot connect: its stream waits for the first connection and is answered there")
    func laneConnectFails() throws {
        let scene = try InterceptScene()
        let pb = Playbook(scene.env, client: try scene.client(alpn: ["h2"]), origin: try scene.origin(),
                          now: scene.now)
        let lane = UpstreamLane(1)
        pb.connects(scene)
        pb.completesHandshakes()
        pb << .sendToClient(.tls(.h2("SETTINGS, WINDOW_UPDATE 0")))
        let client = try H2Peer(.client)
        try client.get("/a")
        try client.get("/b")
        pb >> .clientSends(client.output())
        // The step's own output (the SETTINGS ACK) goes first; then each request is decided in turn and sent.
        pb << .sendToClient(.tls(.h2("SETTINGS ACK")))
        pb << .sendToUpstream(.tls("GET /a HTTP/1.1\r\nhost: good.test\r\n\r\n"))
        pb << .startTimer(.streamDeadlines)
        pb << .connectLane(lane, address: "127.0.0.1", port: 9443)
        pb >> .laneConnectFailed(lane, error: "Connection refused")
        pb << .log(.notice(containing: "extra upstream connection (lane 1) failed: Connection refused"))
        pb << .closeLane(lane)
        // No new lane: /b goes to the first connection once /a's response ended there.
        pb >> .origin(sends: "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\na")
        pb << .sendToUpstream(.tls("GET /b HTTP/1.1\r\nhost: good.test\r\n\r\n"))
        pb << .sendToClient(.tls(.h2("HEADERS 1, DATA 1 END_STREAM")))
        pb << .log(.exchange("GET", "https://good.test/a", status: 200, .allowed, codes: nil))
        pb >> .origin(sends: "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nb")
        pb << .sendToClient(.tls(.h2("HEADERS 3, DATA 3 END_STREAM")))
        pb << .log(.exchange("GET", "https://good.test/b", status: 200, .allowed, codes: nil))
        pb.check()
        try client.receive(from: pb.client)
        #expect(client.messages[1].map { [$0.status, $0.bodyText] } == ["200", "a"])
        #expect(client.messages[3].map { [$0.status, $0.bodyText] } == ["200", "b"])
    }
}
