import HTTP1Core
import HTTP2Core
import Testing

@testable import ProxyCore

/// The owner answers a relay's `toDecide` one or more events after it asked (as a rule or a breakpoint that holds an
/// exchange will): what came meanwhile waits, and goes on in order once answered.
@Suite("Relays: a request's decision that comes later")
struct RelayHeldDecisionTests {
    static func forward(_ head: HTTPRequestHead, host: String = "a.test") -> RequestDecision {
        .forward(head: head, url: "https://\(host)" + head.target, upstream: nil, annotation: [], outcome: .allowed,
                 codes: [])
    }

    /// Takes the one request `output` asks about.
    static func asked(_ output: inout RelayOutput) -> DecisionRequest? {
        var requests = output.takeToDecide()
        let first = requests.popFirst()
        #expect(requests.popFirst() == nil, "one request asked about")
        return first
    }

    /// Takes every request `output` asks about, in order.
    static func allAsked(_ output: inout RelayOutput) -> [DecisionRequest] {
        var requests = output.takeToDecide()
        var all: [DecisionRequest] = []
        while let request = requests.popFirst() { all.append(request) }
        return all
    }

    // MARK: - HTTP/1.1 both sides

    @Test("HTTP/1: the body that comes while the owner decides waits, then goes up behind the head")
    func http1HoldsTheBody() throws {
        let relay = HTTP1Relay(connectedTo: UpstreamTarget(host: "a.test", port: 80), now: { 0 })
        var first = relay.clientBytes(bytes("POST /up HTTP/1.1\r\nHost: a.test\r\nContent-Length: 10\r\n\r\nhello"))
        let request = try #require(Self.asked(&first))
        #expect(request.head.target == "/up")
        #expect(first.toUpstream.isEmpty, "nothing goes up before the decision")
        let meanwhile = relay.clientBytes(bytes("world"))
        #expect(meanwhile.toUpstream.isEmpty && meanwhile.toDecide.isEmpty)
        #expect(!relay.isIdle, "a held request is in flight")
        #expect(relay.wait == .nothing, "no client deadline while the proxy decides")

        let answered = relay.resolve(request.id, Self.forward(request.head))
        #expect(String(decoding: answered.toUpstream, as: UTF8.self)
            == "POST /up HTTP/1.1\r\nHost: a.test\r\nContent-Length: 10\r\n\r\nhelloworld")
        let response = relay.upstreamBytes(bytes("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"))
        #expect(String(decoding: response.toClient, as: UTF8.self).hasSuffix("\r\n\r\nok"))
        #expect(response.exchanges.map(\.status) == [200])
    }

    @Test("HTTP/1: a request pipelined behind a held one is asked about only once the first's response ended")
    func http1PipelinedWaits() throws {
        let relay = HTTP1Relay(connectedTo: UpstreamTarget(host: "a.test", port: 80), now: { 0 })
        var first = relay.clientBytes(bytes("GET /1 HTTP/1.1\r\nHost: a.test\r\n\r\nGET /2 HTTP/1.1\r\nHost: a.test\r\n\r\n"))
        let one = try #require(Self.asked(&first))
        #expect(one.head.target == "/1")
        var answered = relay.resolve(one.id, Self.forward(one.head))
        #expect(answered.toDecide.isEmpty)
        #expect(String(decoding: answered.toUpstream, as: UTF8.self) == "GET /1 HTTP/1.1\r\nHost: a.test\r\n\r\n")
        var response = relay.upstreamBytes(bytes("HTTP/1.1 204 No Content\r\n\r\n"))
        let two = try #require(Self.asked(&response))
        #expect(two.head.target == "/2")
        #expect(response.toUpstream.isEmpty)
        #expect(relay.resolve(one.id, Self.forward(one.head)).toUpstream.isEmpty, "an old answer is ignored")
        answered = relay.resolve(two.id, Self.forward(two.head))
        #expect(String(decoding: answered.toUpstream, as: UTF8.self) == "GET /2 HTTP/1.1\r\nHost: a.test\r\n\r\n")
    }

    @Test("HTTP/1: a client that goes while its request is held: the late answer sends nothing and logs nothing")
    func http1ClientGoneMeanwhile() throws {
        let relay = HTTP1Relay(connectedTo: UpstreamTarget(host: "a.test", port: 80), now: { 0 })
        var first = relay.clientBytes(bytes("GET / HTTP/1.1\r\nHost: a.test\r\n\r\n"))
        let request = try #require(Self.asked(&first))
        let gone = relay.clientGone("reset by the client")
        #expect(gone.closeClient)
        #expect(gone.exchanges.isEmpty)
        let late = relay.resolve(request.id, Self.forward(request.head))
        #expect(late.toUpstream.isEmpty && late.toClient.isEmpty && late.exchanges.isEmpty)
    }

    @Test("HTTP/1: a held request's body past 64 KiB pauses the client; the answer resumes it and sends it all")
    func http1HeldBytesPause() throws {
        let relay = HTTP1Relay(connectedTo: UpstreamTarget(host: "a.test", port: 80), now: { 0 })
        var first = relay.clientBytes(bytes("POST / HTTP/1.1\r\nHost: a.test\r\nContent-Length: 100000\r\n\r\n"))
        let request = try #require(Self.asked(&first))
        #expect(first.pauseReading[.client] == nil)
        let body = relay.clientBytes([UInt8](repeating: 0x61, count: HTTP1Relay.heldLimit))
        #expect(body.pauseReading[.client] == true)
        let answered = relay.resolve(request.id, Self.forward(request.head))
        #expect(answered.pauseReading[.client] == false)
        #expect(answered.toUpstream.count > HTTP1Relay.heldLimit)
    }

    @Test("HTTP/1: a held body past 64 KiB keeps the client paused when the answer sends it to an upstream to connect")
    func http1HeldThenConnecting() throws {
        let relay = HTTP1Relay(connectedTo: nil, now: { 0 })
        var first = relay.clientBytes(
            bytes("POST http://a.test/ HTTP/1.1\r\nHost: a.test\r\nContent-Length: 100000\r\n\r\n")
                + [UInt8](repeating: 0x61, count: HTTP1Relay.heldLimit))
        let request = try #require(Self.asked(&first))
        #expect(first.pauseReading[.client] == true)
        let target = UpstreamTarget(host: "a.test", port: 80)
        let answered = relay.resolve(request.id, .forward(
            head: request.head, url: "http://a.test/", upstream: target, annotation: [], outcome: .allowed, codes: []))
        #expect(answered.connect == target)
        #expect(answered.pauseReading[.client] == nil, "still paused: the bytes now wait for the upstream")
        let connected = relay.upstreamConnected(target)
        #expect(connected.pauseReading[.client] == false)
        #expect(connected.toUpstream.count > HTTP1Relay.heldLimit)
    }

    @Test("HTTP/1: a local answer that comes later drops the body held meanwhile and answers")
    func http1LateLocalAnswer() throws {
        let relay = HTTP1Relay(connectedTo: UpstreamTarget(host: "a.test", port: 80), now: { 0 })
        var first = relay.clientBytes(bytes("POST / HTTP/1.1\r\nHost: a.test\r\nContent-Length: 3\r\n\r\nab"))
        let request = try #require(Self.asked(&first))
        _ = relay.clientBytes(bytes("c"))
        let answered = relay.resolve(request.id, .answer(
            head: HTTPResponseHead(status: 403, reason: "Forbidden", headers: [("Content-Length", "0")]), body: [],
            url: "https://a.test/", outcome: .blocked, codes: []))
        #expect(answered.toUpstream.isEmpty)
        #expect(String(decoding: answered.toClient, as: UTF8.self).hasPrefix("HTTP/1.1 403 Forbidden\r\n"))
        #expect(answered.exchanges.map(\.status) == [403])
    }

    // MARK: - HTTP/1.1 client, h2 upstream

    @Test("HTTP/1 → h2: the body held meanwhile reaches the origin's stream once the request is forwarded")
    func h1ToH2HoldsTheBody() throws {
        let relay = try H1ToH2Relay(now: { 0 })
        let origin = try H2Session(role: .server)
        var toOrigin = relay.upstreamBytes([]).toUpstream
        var first = relay.clientBytes(bytes("POST /up HTTP/1.1\r\nHost: h2.test\r\nContent-Length: 10\r\n\r\nhello"))
        let request = try #require(Self.asked(&first))
        toOrigin += first.toUpstream
        let meanwhile = relay.clientBytes(bytes("world"))
        #expect(meanwhile.toDecide.isEmpty)
        toOrigin += meanwhile.toUpstream
        #expect(try origin.receive(toOrigin).allSatisfy { if case .headers = $0 { false } else { true } },
                "no stream before the decision")
        let events = try origin.receive(relay.resolve(request.id, Self.forward(request.head, host: "h2.test")).toUpstream)
        var body: [UInt8] = []
        var ended = false
        for event in events {
            if case .data(_, let bytes, let end) = event {
                body += bytes
                ended = ended || end
            }
        }
        #expect(events.contains { if case .headers(_, _, .request, false) = $0 { true } else { false } })
        #expect(String(decoding: body, as: UTF8.self) == "helloworld" && ended)
    }

    @Test("HTTP/1 → h2: a client gone while its request is held opens no stream")
    func h1ToH2ClientGoneMeanwhile() throws {
        let relay = try H1ToH2Relay(now: { 0 })
        _ = relay.upstreamBytes([])
        var first = relay.clientBytes(bytes("GET / HTTP/1.1\r\nHost: h2.test\r\n\r\n"))
        let request = try #require(Self.asked(&first))
        #expect(relay.clientGone("the client closed the connection").exchanges.isEmpty)
        let late = relay.resolve(request.id, Self.forward(request.head, host: "h2.test"))
        #expect(late.toUpstream.isEmpty && late.exchanges.isEmpty)
    }

    // MARK: - h2 both sides

    private static func requestFields(_ path: String, method: String = "GET") -> [H2Header] {
        [H2Header(":method", method), H2Header(":scheme", "https"), H2Header(":authority", "h2.test"),
         H2Header(":path", path)]
    }

    @Test("h2: one stream held while another is decided, answered and done; the held one's DATA follows its head")
    func h2OtherStreamsGoOn() throws {
        let relay = try H2Relay(now: { 0 })
        let client = try H2Session(role: .client)
        let origin = try H2Session(role: .server)
        let start = relay.upstreamBytes([])
        var toOrigin = start.toUpstream
        _ = try client.receive(start.toClient)
        let upload = try client.submitRequest(Self.requestFields("/up", method: "POST"), body: .streaming)
        try client.sendData(streamID: upload, bytes("hello"), endStream: false)
        let get = try client.submitRequest(Self.requestFields("/get"), body: .none)
        var first = relay.clientBytes(client.pendingOutput())
        let asked = Self.allAsked(&first)
        try #require(asked.count == 2)
        let (held, quick) = (asked[0], asked[1])
        #expect(held.id == Int(upload) && quick.id == Int(get))
        _ = try client.receive(first.toClient)

        // The GET is decided at once; the upload stays held.
        toOrigin += relay.resolve(quick.id, Self.forward(quick.head, host: "h2.test")).toUpstream
        var originStreams: [Int32: String] = [:]
        var originBodies: [Int32: String] = [:]
        func originReads(_ bytes: [UInt8]) throws {
            for event in try origin.receive(bytes) {
                if case .headers(let id, let fields, .request, _) = event { originStreams[id] = fields.first(named: ":path") }
                if case .data(let id, let data, _) = event {
                    originBodies[id, default: ""] += String(decoding: data, as: UTF8.self)
                    origin.consume(streamID: id, count: data.count)
                }
            }
        }
        try originReads(toOrigin)
        #expect(originStreams.values.sorted() == ["/get"])
        let getUp = try #require(originStreams.first?.key)
        try origin.submitResponse(streamID: getUp, headers: [H2Header(":status", "204")], body: .none)
        let answered = relay.upstreamBytes(origin.pendingOutput())
        #expect(answered.exchanges.map(\.status) == [204], "the other stream finished while one is held")
        var statuses: [Int32: String] = [:]
        for event in try client.receive(answered.toClient) {
            if case .headers(let id, let fields, .response, _) = event { statuses[id] = fields.first(named: ":status") }
        }
        #expect(statuses == [get: "204"])

        // More of the upload arrives meanwhile: held, not sent.
        try client.sendData(streamID: upload, bytes("world"), endStream: true)
        let meanwhile = relay.clientBytes(client.pendingOutput())
        try originReads(meanwhile.toUpstream)
        #expect(originStreams.count == 1 && originBodies.isEmpty)

        let resolved = relay.resolve(held.id, Self.forward(held.head, host: "h2.test"))
        try originReads(resolved.toUpstream)
        #expect(originStreams.values.sorted() == ["/get", "/up"])
        #expect(originBodies.values.sorted() == ["helloworld"])
        #expect(relay.resolve(held.id, Self.forward(held.head, host: "h2.test")).toUpstream.isEmpty,
                "a second answer is ignored")
    }

    @Test("h2: a stream the client resets while it is held is forgotten; its late answer sends nothing")
    func h2ResetMeanwhile() throws {
        let relay = try H2Relay(now: { 0 })
        let client = try H2Session(role: .client)
        _ = relay.upstreamBytes([])
        let id = try client.submitRequest(Self.requestFields("/up", method: "POST"), body: .streaming)
        try client.sendData(streamID: id, [UInt8](repeating: 0x61, count: 1000), endStream: false)
        var first = relay.clientBytes(client.pendingOutput())
        let request = try #require(Self.asked(&first))
        try client.submitRSTStream(streamID: id, errorCode: .cancel)
        let reset = relay.clientBytes(client.pendingOutput())
        #expect(reset.exchanges.isEmpty)
        #expect(relay.isIdle)
        let late = relay.resolve(request.id, Self.forward(request.head, host: "h2.test"))
        #expect(late.toUpstream.isEmpty && late.exchanges.isEmpty)
    }

    @Test("h2: a stream reset in the same read as its head is asked about but no longer held: it is not decided")
    func h2ResetInTheSameRead() throws {
        let relay = try H2Relay(now: { 0 })
        let client = try H2Session(role: .client)
        _ = relay.upstreamBytes([])
        let id = try client.submitRequest(Self.requestFields("/gone"), body: .none)
        let head = client.pendingOutput()
        try client.submitRSTStream(streamID: id, errorCode: .cancel)
        var output = relay.clientBytes(head + client.pendingOutput())
        let request = try #require(Self.asked(&output))
        // The owner's loop asks `isHolding` before deciding: no rule, trace or notice acts on a cancelled request.
        #expect(!relay.isHolding(request.id))
        #expect(relay.isIdle)
    }

    // MARK: - h2 client, HTTP/1.1 lanes

    @Test("h2 → HTTP/1: one stream held while another takes the lane and finishes; the held one follows, whole")
    func h2ToH1OtherStreamsGoOn() throws {
        let relay = try H2ToH1Relay(primaryConnected: true, maxLanes: 1, now: { 0 })
        let client = try H2Session(role: .client)
        _ = try client.receive(relay.upstreamBytes([]).toClient)
        let upload = try client.submitRequest(Self.requestFields("/up", method: "POST"), body: .streaming)
        try client.sendData(streamID: upload, bytes("hello"), endStream: false)
        let get = try client.submitRequest(Self.requestFields("/get"), body: .none)
        var first = relay.clientBytes(client.pendingOutput())
        let asked = Self.allAsked(&first)
        try #require(asked.count == 2)
        let (held, quick) = (asked[0], asked[1])
        #expect(held.id == Int(upload) && quick.id == Int(get))
        _ = try client.receive(first.toClient)
        #expect(first.toUpstream.isEmpty)

        let sent = relay.resolve(quick.id, Self.forward(quick.head, host: "h2.test"))
        #expect(String(decoding: sent.toUpstream, as: UTF8.self).hasPrefix("GET /get HTTP/1.1\r\n"))
        let answered = relay.upstreamBytes(bytes("HTTP/1.1 204 No Content\r\n\r\n"))
        #expect(answered.exchanges.map(\.status) == [204])
        _ = try client.receive(answered.toClient)

        try client.sendData(streamID: upload, bytes("world"), endStream: true)
        let meanwhile = relay.clientBytes(client.pendingOutput())
        #expect(meanwhile.toUpstream.isEmpty && meanwhile.lanes.open.isEmpty)

        let resolved = relay.resolve(held.id, Self.forward(held.head, host: "h2.test"))
        let text = String(decoding: resolved.toUpstream, as: UTF8.self)
        #expect(text.hasPrefix("POST /up HTTP/1.1\r\n"), "\(text)")
        #expect(text.contains("hello") && text.contains("world"), "\(text)")
    }

    @Test("h2 → HTTP/1: a stream the client resets while it is held is forgotten; its late answer takes no lane")
    func h2ToH1ResetMeanwhile() throws {
        let relay = try H2ToH1Relay(primaryConnected: true, maxLanes: 1, now: { 0 })
        let client = try H2Session(role: .client)
        _ = try client.receive(relay.upstreamBytes([]).toClient)
        let id = try client.submitRequest(Self.requestFields("/get"), body: .none)
        var first = relay.clientBytes(client.pendingOutput())
        let request = try #require(Self.asked(&first))
        try client.submitRSTStream(streamID: id, errorCode: .cancel)
        #expect(relay.clientBytes(client.pendingOutput()).exchanges.isEmpty)
        let late = relay.resolve(request.id, Self.forward(request.head, host: "h2.test"))
        #expect(late.toUpstream.isEmpty && late.lanes.open.isEmpty && late.exchanges.isEmpty)
    }
}
