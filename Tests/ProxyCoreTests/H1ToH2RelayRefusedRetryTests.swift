import HTTP1Core
import HTTP2Core
import Testing

@testable import ProxyCore

@Suite("H1ToH2Relay: a request the upstream's GOAWAY refused is sent again on a new connection")
struct H1ToH2RelayRefusedRetryTests {
    private func relay() throws -> DecidedRelay<H1ToH2Relay> {
        DecidedRelay(try H1ToH2Relay(now: { 0 }, retryRefused: true)) { head in
            .forward(head: head, url: "https://h2.test" + head.target, upstream: nil, annotation: [], outcome: .allowed,
                     codes: [])
        }
    }

    /// The origin answers the first request, then refuses the second with GOAWAY (last stream id: the first).
    private func refuseSecond(_ relay: DecidedRelay<H1ToH2Relay>, _ origin: H2Session, second: String) throws -> RelayOutput {
        var toOrigin = relay.upstreamBytes([]).toUpstream
        toOrigin += relay.clientBytes(bytes("GET /first HTTP/1.1\r\nHost: h2.test\r\n\r\n")).toUpstream
        var first: Int32 = 0
        for event in try origin.receive(toOrigin) { if case .headers(let id, _, .request, _) = event { first = id } }
        try origin.submitResponse(streamID: first, headers: [H2Header(":status", "200")], body: .streaming)
        try origin.sendData(streamID: first, bytes("ok"), endStream: true)
        let answered = relay.upstreamBytes(origin.pendingOutput())
        #expect(String(decoding: answered.toClient, as: UTF8.self).hasSuffix("ok\r\n0\r\n\r\n"))
        _ = try origin.receive(answered.toUpstream + relay.clientBytes(bytes(second)).toUpstream)
        try origin.submitGoAway(lastStreamID: first, errorCode: .noError)
        return relay.upstreamBytes(origin.pendingOutput())
    }

    @Test("A GET refused by GOAWAY: handed back whole for a new connection, no 502")
    func refusedGetIsRetried() throws {
        let request = "GET /second HTTP/1.1\r\nHost: h2.test\r\nAccept: */*\r\n\r\n"
        let out = try refuseSecond(try relay(), try H2Session(role: .server), second: request)
        #expect(out.retry == .onNewConnection(bytes(request)))
        #expect(out.toClient.isEmpty, "nothing for the client yet: \(String(decoding: out.toClient, as: UTF8.self))")
        #expect(out.exchanges.isEmpty, "logged by the relay of the new connection")
    }

    @Test("A POST with a Content-Length body refused by GOAWAY: head and body handed back")
    func refusedPostIsRetried() throws {
        let request = "POST /second HTTP/1.1\r\nHost: h2.test\r\nContent-Length: 5\r\n\r\nhello"
        let out = try refuseSecond(try relay(), try H2Session(role: .server), second: request)
        #expect(out.retry == .onNewConnection(bytes(request)))
    }

    @Test("With a request pipelined behind the refused one (bytes the relay cannot hand over): 502, as before")
    func pipelinedRequestIsNotRetried() throws {
        let request = "GET /second HTTP/1.1\r\nHost: h2.test\r\n\r\nGET /third HTTP/1.1\r\nHost: h2.test\r\n\r\n"
        let out = try refuseSecond(try relay(), try H2Session(role: .server), second: request)
        #expect(out.retry == nil)
        #expect(String(decoding: out.toClient, as: UTF8.self).hasPrefix("HTTP/1.1 502 "))
    }
}
