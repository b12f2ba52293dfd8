import HTTP2Core
import Testing

@Suite("H2Session request/response exchange")
struct H2SessionExchangeTests {
    @Test("one request with a body gets a response with a body")
    func requestResponseWithBody() throws {
        let pair = try SessionPair()
        pair.onServerEvent = { [unowned pair] event in
            if case .data(let id, _, true) = event {
                try pair.server.submitResponse(
                    streamID: id, headers: [H2Header(":status", "200"), H2Header("content-type", "text/plain")],
                    body: .streaming)
                try pair.server.sendData(streamID: id, Array("pong".utf8), endStream: true)
            }
        }
        let id = try pair.client.submitRequest(
            requestHeaders(method: "POST", path: "/echo", extra: [H2Header("x-test", "1")]), body: .streaming)
        try pair.client.sendData(streamID: id, Array("ping".utf8), endStream: true)
        #expect(try pair.exchange())

        let request = try #require(pair.serverEvents.streams()[id])
        #expect(request.heads.count == 1)
        #expect(request.heads.first?.category == .request)
        #expect(request.heads.first?.fields == requestHeaders(method: "POST", path: "/echo", extra: [H2Header("x-test", "1")]))
        #expect(request.body == Array("ping".utf8))
        #expect(request.ended)
        #expect(request.closedWith == .noError)

        let response = try #require(pair.clientEvents.streams()[id])
        #expect(response.heads.first?.category == .response)
        #expect(response.heads.first?.fields.first(named: ":status") == "200")
        #expect(response.body == Array("pong".utf8))
        #expect(response.ended)
        #expect(response.closedWith == .noError)
        #expect(pair.client.activeStreamCount == 0)
        #expect(pair.server.activeStreamCount == 0)
    }

    @Test("a request without body ends the stream on HEADERS")
    func requestWithoutBody() throws {
        let pair = try SessionPair()
        pair.onServerEvent = { [unowned pair] event in
            if case .headers(let id, _, .request, true) = event {
                try pair.server.submitResponse(streamID: id, headers: [H2Header(":status", "204")], body: .none)
            }
        }
        let id = try pair.client.submitRequest(requestHeaders(), body: .none)
        #expect(throws: H2Error.stream(id: id, code: .streamClosed)) {
            try pair.client.sendData(streamID: id, [1], endStream: true)
        }
        #expect(try pair.exchange())
        let response = try #require(pair.clientEvents.streams()[id])
        #expect(response.heads.first?.endStream == true)
        #expect(response.heads.first?.fields == [H2Header(":status", "204")])
        #expect(response.closedWith == .noError)
    }

    @Test("SETTINGS are exchanged and acknowledged; remote settings are visible")
    func settingsExchange() throws {
        let pair = try SessionPair(server: H2Settings(maxConcurrentStreams: 7, maxFrameSize: 32_768))
        #expect(try pair.exchange())
        #expect(pair.client.remoteSettings.maxConcurrentStreams == 7)
        #expect(pair.client.remoteSettings.maxFrameSize == 32_768)
        #expect(pair.client.remoteSettings.enablePush == false)
        #expect(pair.server.remoteSettings.enablePush == false)
        #expect(pair.clientEvents.contains(.settings(ack: true, parameters: [])))
        #expect(pair.serverEvents.contains(.settings(ack: true, parameters: [])))
        #expect(
            pair.clientEvents.contains {
                if case .settings(false, let parameters) = $0 {
                    return parameters.contains(H2Setting(identifier: H2Setting.maxConcurrentStreams, value: 7))
                }
                return false
            })
        #expect(pair.client.wantsRead && pair.server.wantsRead)
        #expect(!pair.client.wantsWrite && !pair.server.wantsWrite)
    }

    @Test("PING is answered with an ACK carrying the same payload")
    func ping() throws {
        let pair = try SessionPair()
        try pair.client.submitPing(payload: [1, 2, 3, 4, 5, 6, 7, 8])
        #expect(try pair.exchange())
        #expect(pair.serverEvents.contains(.ping(ack: false, payload: [1, 2, 3, 4, 5, 6, 7, 8])))
        #expect(pair.clientEvents.contains(.ping(ack: true, payload: [1, 2, 3, 4, 5, 6, 7, 8])))
        #expect(throws: H2Error.self) { try pair.client.submitPing(payload: [1]) }
    }

    @Test("stream states follow the exchange")
    func streamStates() throws {
        let pair = try SessionPair()
        var stateWhileOpen: H2StreamState?
        pair.onServerEvent = { [unowned pair] event in
            if case .data(let id, _, true) = event { stateWhileOpen = pair.server.streamState(id) }
        }
        let id = try pair.client.submitRequest(requestHeaders(method: "POST"), body: .streaming)
        try pair.client.sendData(streamID: id, [1, 2, 3], endStream: true)
        #expect(try pair.exchange())
        #expect(stateWhileOpen == .halfClosedRemote)
        #expect(pair.client.streamState(id) == .halfClosedLocal)
        try pair.server.submitResponse(streamID: id, headers: [H2Header(":status", "200")], body: .none)
        #expect(try pair.exchange())
        #expect(pair.client.streamState(id) == nil)
    }

    @Test("a role submits only what it may")
    func roleChecks() throws {
        let pair = try SessionPair()
        #expect(throws: H2Error.self) { _ = try pair.server.submitRequest(requestHeaders(), body: .none) }
        #expect(throws: H2Error.self) {
            try pair.client.submitResponse(streamID: 1, headers: [H2Header(":status", "200")], body: .none)
        }
        #expect(throws: H2Error.stream(id: 1, code: .streamClosed)) {
            try pair.server.submitResponse(streamID: 1, headers: [H2Header(":status", "200")], body: .none)
        }
    }

    @Test("trailers follow the body in both directions")
    func trailers() throws {
        let pair = try SessionPair()
        pair.onServerEvent = { [unowned pair] event in
            if case .headers(let id, _, .trailers, true) = event {
                try pair.server.submitResponse(streamID: id, headers: [H2Header(":status", "200")], body: .streaming)
                try pair.server.sendData(streamID: id, Array("result".utf8), endStream: false)
                try pair.server.submitTrailers(streamID: id, [H2Header("grpc-status", "0"), H2Header("grpc-message", "ok")])
            }
        }
        let id = try pair.client.submitRequest(requestHeaders(method: "POST", extra: [H2Header("te", "trailers")]), body: .streaming)
        try pair.client.sendData(streamID: id, Array("body".utf8), endStream: false)
        try pair.client.submitTrailers(streamID: id, [H2Header("x-checksum", "abc")])
        #expect(throws: H2Error.self) { try pair.client.sendData(streamID: id, [1], endStream: true) }
        #expect(try pair.exchange())

        let request = try #require(pair.serverEvents.streams()[id])
        #expect(request.body == Array("body".utf8))
        #expect(request.heads.count == 2)
        #expect(request.heads.last?.category == .trailers)
        #expect(request.heads.last?.fields == [H2Header("x-checksum", "abc")])
        let response = try #require(pair.clientEvents.streams()[id])
        #expect(response.body == Array("result".utf8))
        #expect(response.heads.map(\.category) == [.response, .trailers])
        #expect(response.heads.last?.fields == [H2Header("grpc-status", "0"), H2Header("grpc-message", "ok")])
        #expect(response.heads.last?.endStream == true)
        #expect(response.closedWith == .noError)
    }

    @Test("a header block above 16 KiB arrives intact through CONTINUATION frames")
    func largeHeaderBlock() throws {
        let pair = try SessionPair()
        // Random-looking printable bytes so HPACK cannot shrink the block below one frame.
        let big = String(decoding: patternBytes(count: 40_000, seed: 7).map { 0x21 + $0 % 94 }, as: UTF8.self)
        let headers = requestHeaders(extra: [H2Header("x-big", big), H2Header("x-after", "tail")])
        let id = try pair.client.submitRequest(headers, body: .none)
        let wire = pair.client.pendingOutput()
        #expect(RawFrame.parse(wire, skipPreface: true).contains { $0.type == 9 }, "expected a CONTINUATION frame")
        pair.serverEvents += try pair.server.receive(wire)
        #expect(try pair.exchange())
        let request = try #require(pair.serverEvents.streams()[id])
        #expect(request.heads.first?.fields == headers)
    }
}
