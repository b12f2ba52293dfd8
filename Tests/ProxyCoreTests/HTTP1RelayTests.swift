import HTTP1Core
import Testing

@testable import ProxyCore

@Suite("HTTP1Relay: framing survives any split of the byte streams")
struct HTTP1RelayTests {
    static let request = bytes(
        "POST /upload?x=1 HTTP/1.1\r\nHost: a.test\r\nTransfer-Encoding: chunked\r\n\r\n"
            + "5\r\nhello\r\n1;ext=1\r\n \r\n6\r\nworld!\r\n0\r\nX-Trailer: t\r\n\r\n")
    static let response = bytes(
        "HTTP/1.1 200 OK\r\nContent-Length: 11\r\nX-Origin: 1\r\n\r\nhello world")
    static let chunkedResponse = bytes(
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n10\r\n0123456789abcdef\r\n0\r\n\r\n")

    /// One exchange through a relay already connected to its upstream: the request in `requestParts`, then the
    /// response in `responseParts`. Returns what reached each side and the exchanges logged.
    private func run(_ requestParts: [[UInt8]], _ responseParts: [[UInt8]], response: [UInt8])
        -> (upstream: [UInt8], client: [UInt8], exchanges: [ExchangeSummaryProbe], closed: Bool)
    {
        let relay = DecidedRelay(connectedTo: UpstreamTarget(host: "a.test", port: 80), now: { 0 }) { head in
            .forward(head: head, url: "http://a.test" + head.target, upstream: nil, annotation: [("X-ATS-Verdict", "allowed")],
                     outcome: .allowed, codes: [])
        }
        var upstream: [UInt8] = []
        var client: [UInt8] = []
        var exchanges: [ExchangeSummaryProbe] = []
        var closed = false
        func take(_ o: RelayOutput) {
            upstream += o.toUpstream
            client += o.toClient
            exchanges += o.exchanges.map { ExchangeSummaryProbe(status: $0.status, requestBytes: $0.requestBytes, responseBytes: $0.responseBytes) }
            closed = closed || o.closeClient
        }
        for part in requestParts { take(relay.clientBytes(part)) }
        for part in responseParts { take(relay.upstreamBytes(part)) }
        return (upstream, client, exchanges, closed)
    }

    /// One HTTP/1 message as a peer sees it: head, body bytes and trailers. Chunk boundaries are not part of it
    /// (the relay re-frames chunks as they arrive, which is valid HTTP).
    struct Decoded: Equatable {
        var head: String
        var body: [UInt8]
        var trailers: [String]
    }

    private func decode(_ bytes: [UInt8], responseTo method: String? = nil) -> Decoded? {
        var parser = HTTP1Parser(role: method == nil ? .requests : .responses)
        if let method { parser.expectResponse(toRequestMethod: method) }
        parser.receive(bytes)
        var d = Decoded(head: "", body: [], trailers: [])
        for _ in 0..<10_000 {
            guard let event = try? parser.nextEvent() else { return nil }
            switch event {
            case .requestHead(let h): d.head = "\(h.method) \(h.target) \(h.headers.fields.map { "\($0.name)=\($0.value)" })"
            case .responseHead(let h): d.head = "\(h.status) \(h.headers.fields.map { "\($0.name)=\($0.value)" })"
            case .body(let piece): d.body += piece
            case .end(let trailers):
                d.trailers = trailers.fields.map { "\($0.name)=\($0.value)" }
                return d
            default: return nil
            }
        }
        return nil
    }

    struct ExchangeSummaryProbe: Equatable {
        var status: Int?
        var requestBytes: Int
        var responseBytes: Int
    }

    @Test("Whole messages: the request goes up with its body, the response comes back annotated, one exchange")
    func whole() {
        let r = run([Self.request], [Self.response], response: Self.response)
        let up = String(decoding: r.upstream, as: UTF8.self)
        #expect(up.hasPrefix("POST /upload?x=1 HTTP/1.1\r\n"))
        #expect(up.contains("hello") && up.contains("world!") && up.contains("X-Trailer: t"))
        let down = String(decoding: r.client, as: UTF8.self)
        #expect(down.contains("X-ATS-Verdict: allowed\r\n"))
        #expect(down.hasSuffix("\r\n\r\nhello world"))
        #expect(r.exchanges == [ExchangeSummaryProbe(status: 200, requestBytes: 12, responseBytes: 11)])
        #expect(!r.closed)
    }

    @Test("Splitting the request and the response at every byte gives the same bytes and one exchange",
          arguments: [response, chunkedResponse])
    func everySplit(response: [UInt8]) {
        let reference = run([Self.request], [response], response: response)
        // The reference itself carries the original content.
        #expect(decode(reference.upstream)?.body == bytes("hello world!"))
        #expect(decode(reference.upstream)?.trailers == ["X-Trailer=t"])
        #expect(decode(reference.client, responseTo: "POST")?.body == decode(response, responseTo: "POST")?.body)
        for cut in 0...Self.request.count {
            let r = run([Array(Self.request[..<cut]), Array(Self.request[cut...])], [response], response: response)
            #expect(decode(r.upstream) == decode(reference.upstream), "request cut at \(cut)")
            #expect(decode(r.client, responseTo: "POST") == decode(reference.client, responseTo: "POST"), "request cut at \(cut)")
            #expect(r.exchanges.count == 1)
        }
        for cut in 0...response.count {
            let r = run([Self.request], [Array(response[..<cut]), Array(response[cut...])], response: response)
            #expect(decode(r.client, responseTo: "POST") == decode(reference.client, responseTo: "POST"), "response cut at \(cut)")
            #expect(r.exchanges == reference.exchanges, "response cut at \(cut)")
        }
        let oneByOne = run(Self.request.map { [$0] }, response.map { [$0] }, response: response)
        #expect(decode(oneByOne.upstream) == decode(reference.upstream))
        #expect(decode(oneByOne.client, responseTo: "POST") == decode(reference.client, responseTo: "POST"))
        #expect(oneByOne.exchanges == reference.exchanges)
    }

    @Test("The exchange names the version the upstream answered with: an HTTP/1.0 origin shows as HTTP/1.0")
    func responseVersion() {
        let relay = DecidedRelay(connectedTo: UpstreamTarget(host: "a.test", port: 80), now: { 0 }) { head in
            .forward(head: head, url: "http://a.test/", upstream: nil, annotation: [], outcome: .allowed, codes: [])
        }
        _ = relay.clientBytes(bytes("GET / HTTP/1.1\r\nHost: a.test\r\n\r\n"))
        let old = relay.upstreamBytes(bytes("HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok"))
        #expect(old.exchanges.map(\.httpVersion) == ["HTTP/1.0"])
    }

    @Test("A pipelined second request waits until the first response has ended, then goes up")
    func pipelined() {
        let get = bytes("GET /1 HTTP/1.1\r\nHost: a.test\r\n\r\nGET /2 HTTP/1.1\r\nHost: a.test\r\n\r\n")
        let relay = DecidedRelay(connectedTo: UpstreamTarget(host: "a.test", port: 80), now: { 0 }) { head in
            .forward(head: head, url: head.target, upstream: nil, annotation: [], outcome: .allowed, codes: [])
        }
        let first = relay.clientBytes(get)
        #expect(String(decoding: first.toUpstream, as: UTF8.self) == "GET /1 HTTP/1.1\r\nHost: a.test\r\n\r\n")
        let second = relay.upstreamBytes(bytes("HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\na"))
        #expect(String(decoding: second.toUpstream, as: UTF8.self) == "GET /2 HTTP/1.1\r\nHost: a.test\r\n\r\n")
        #expect(second.exchanges.count == 1)
    }

    // MARK: - Heads relayed as received

    private func relay(
        annotation: [(String, String)] = [], rewrite: @escaping (HTTPRequestHead) -> HTTPRequestHead = { $0 }
    ) -> DecidedRelay<HTTP1Relay> {
        DecidedRelay(connectedTo: UpstreamTarget(host: "a.test", port: 80), now: { 0 }) { head in
            .forward(head: rewrite(head), url: head.target, upstream: nil, annotation: annotation, outcome: .allowed, codes: [])
        }
    }

    @Test("An unchanged request goes up byte for byte, spelling and non-UTF-8 bytes included")
    func unchangedRequestIsVerbatim() {
        var request = bytes("PUT /a%20b HTTP/1.1\r\nHost: a.test\r\nx-lower:tight   \r\nX-Latin: caf")
        request.append(0xE9)
        request += bytes("\r\nContent-Length: 3\r\n\r\nabc")
        let out = relay().clientBytes(request)
        #expect(out.toUpstream == request)
    }

    @Test("An unannotated response comes back byte for byte; an annotated one gets the fields before the empty line")
    func responseSplice() {
        let response = bytes("HTTP/1.1 200 OK\r\nServer:origin\r\nContent-Length: 2\r\n\r\nok")
        let get = bytes("GET / HTTP/1.1\r\nHost: a.test\r\n\r\n")
        let plain = relay()
        _ = plain.clientBytes(get)
        #expect(plain.upstreamBytes(response).toClient == response)
        let annotated = relay(annotation: [("X-ATS-Verdict", "allowed"), ("X-ATS-Rule", "NSAllowsArbitraryLoads")])
        _ = annotated.clientBytes(get)
        let down = annotated.upstreamBytes(response).toClient
        #expect(down == bytes("HTTP/1.1 200 OK\r\nServer:origin\r\nContent-Length: 2\r\n"
            + "X-ATS-Verdict: allowed\r\nX-ATS-Rule: NSAllowsArbitraryLoads\r\n\r\nok"))
    }

    @Test("An interim 100 Continue is relayed as received before the final response")
    func interimVerbatim() {
        let r = relay(annotation: [("X-ATS-Verdict", "allowed")])
        _ = r.clientBytes(bytes("POST / HTTP/1.1\r\nHost: a.test\r\nExpect: 100-continue\r\nContent-Length: 1\r\n\r\n"))
        let interim = r.upstreamBytes(bytes("HTTP/1.1 100 Continue\r\nX-I:1\r\n\r\n"))
        #expect(interim.toClient == bytes("HTTP/1.1 100 Continue\r\nX-I:1\r\n\r\n"))
    }

    @Test("A head the owner rewrites is serialised from the new head, not relayed")
    func rewrittenHeadIsSerialised() {
        let r = relay { head in
            var h = head
            h.target = "/path"
            h.headers.remove(name: "Proxy-Connection")
            h.headers.replaceOrAdd(name: "Host", value: "b.test")
            return h
        }
        let out = r.clientBytes(bytes("GET http://b.test/path HTTP/1.1\r\nHost: a.test\r\nProxy-Connection: keep-alive\r\nAccept:*/*\r\n\r\n"))
        #expect(String(decoding: out.toUpstream, as: UTF8.self) == "GET /path HTTP/1.1\r\nAccept: */*\r\nHost: b.test\r\n\r\n")
    }

    @Test("HTTP/1.2 heads, interim and final, both ways, go on as HTTP/1.1 (RFC 9110 §2.5), never stall or fail")
    func laterMinorVersionIsSentAsOurs() {
        let r = relay()
        let up = r.clientBytes(bytes("POST / HTTP/1.2\r\nHost: a.test\r\nExpect: 100-continue\r\nContent-Length: 1\r\n\r\n"))
        #expect(String(decoding: up.toUpstream, as: UTF8.self).hasPrefix("POST / HTTP/1.1\r\n"))
        let down = r.upstreamBytes(bytes("HTTP/1.2 100 Continue\r\n\r\nHTTP/1.2 200 OK\r\nContent-Length: 2\r\n\r\nok"))
        #expect(String(decoding: down.toClient, as: UTF8.self)
            == "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        #expect(down.exchanges.map(\.status) == [200])
    }

    @Test("Bare-LF heads are serialised again with CRLF, never passed on as received")
    func bareLFIsNormalised() {
        let r = relay()
        let up = r.clientBytes(bytes("GET / HTTP/1.1\nHost: a.test\n\n")).toUpstream
        #expect(String(decoding: up, as: UTF8.self) == "GET / HTTP/1.1\r\nHost: a.test\r\n\r\n")
        let down = r.upstreamBytes(bytes("HTTP/1.1 204 No Content\nX-A: 1\n\n")).toClient
        #expect(String(decoding: down, as: UTF8.self) == "HTTP/1.1 204 No Content\r\nX-A: 1\r\n\r\n")
    }

    @Test("A client gone mid-response ends its exchange there, logged as cut off with why; an idle relay logs nothing")
    func clientGoneMidResponse() {
        let r = relay()
        _ = r.clientBytes(bytes("GET /big HTTP/1.1\r\nHost: a.test\r\n\r\n"))
        _ = r.upstreamBytes(bytes("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n0123456789"))
        let gone = r.clientGone("the client connection failed: reset")
        #expect(gone.exchanges.map(\.status) == [200])
        #expect(gone.exchanges.map(\.responseBytes) == [10])
        #expect(gone.exchanges.map(\.interruption) == ["the client connection failed: reset"])
        #expect(gone.closeClient)
        #expect(r.isIdle)

        let idle = relay()
        _ = idle.clientBytes(bytes("GET / HTTP/1.1\r\nHost: a.test\r\n\r\n"))
        _ = idle.upstreamBytes(bytes("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"))
        #expect(idle.clientGone("the client closed the connection").exchanges.isEmpty)
    }
}
