import HTTP2Core
import Testing

@Suite("H2Session stream-level errors and edge cases")
struct H2SessionStreamErrorTests {
    @Test("a malformed request resets only its stream; the connection keeps working")
    func malformedRequestResetsStream() throws {
        let pair = try SessionPair()
        // Connection-specific fields make a request malformed (RFC 9113 §8.2.2): a stream error only.
        let bad = try pair.client.submitRequest(requestHeaders(extra: [H2Header("connection", "keep-alive")]), body: .none)
        #expect(try pair.exchange())
        #expect(pair.clientEvents.streams()[bad]?.resetWith == .protocolError)
        #expect(pair.clientEvents.streams()[bad]?.closedWith == .protocolError)
        #expect(pair.serverEvents.streams()[bad]?.heads.isEmpty ?? true)
        #expect(pair.server.activeStreamCount == 0)

        pair.onServerEvent = { [unowned pair] event in
            if case .headers(let id, _, .request, true) = event {
                try pair.server.submitResponse(streamID: id, headers: [H2Header(":status", "200")], body: .none)
            }
        }
        let good = try pair.client.submitRequest(requestHeaders(), body: .none)
        #expect(try pair.exchange())
        #expect(pair.clientEvents.streams()[good]?.closedWith == .noError)
    }

    @Test("an informational 100 response precedes the final response")
    func informationalResponse() throws {
        let pair = try SessionPair()
        pair.onServerEvent = { [unowned pair] event in
            switch event {
            case .headers(let id, _, .request, false):
                try pair.server.submitInformational(streamID: id, headers: [H2Header(":status", "100")])
            case .data(let id, _, true):
                try pair.server.submitResponse(streamID: id, headers: [H2Header(":status", "201")], body: .none)
            default:
                break
            }
        }
        let id = try pair.client.submitRequest(
            requestHeaders(method: "PUT", extra: [H2Header("expect", "100-continue")]), body: .streaming)
        #expect(try pair.exchange())
        try pair.client.sendData(streamID: id, Array("payload".utf8), endStream: true)
        #expect(try pair.exchange())
        let heads = pair.clientEvents.streams()[id]?.heads ?? []
        #expect(heads.map(\.category) == [.response, .response])
        #expect(heads.map { $0.fields.first(named: ":status") } == ["100", "201"])
        #expect(heads.last?.endStream == true)
    }

    @Test("bytes left unconsumed on a closed stream are returned to the connection window")
    func closedStreamDoesNotStarveConnection() throws {
        let pair = try SessionPair()
        pair.clientConsumesImmediately = false
        let size = 60_000
        pair.onServerEvent = { [unowned pair] event in
            if case .headers(let id, _, .request, true) = event {
                try pair.server.submitResponse(streamID: id, headers: [H2Header(":status", "200")], body: .streaming)
                try pair.server.sendData(streamID: id, patternBytes(count: size, seed: UInt64(id)), endStream: true)
            }
        }
        let first = try pair.client.submitRequest(requestHeaders(), body: .none)
        #expect(try pair.exchange())
        #expect(pair.clientEvents.streams()[first]?.body.count == size)
        #expect(pair.clientEvents.streams()[first]?.closedWith == .noError)
        // The connection window (65 535) could not carry a second 60 000 bytes if the first stream kept its share.
        let second = try pair.client.submitRequest(requestHeaders(), body: .none)
        #expect(try pair.exchange())
        #expect(BodyDigest(pair.clientEvents.streams()[second]?.body) == BodyDigest(patternBytes(count: size, seed: UInt64(second))))
        // Consuming for a closed stream is harmless.
        pair.client.consume(streamID: first, count: size)
        #expect(try pair.exchange())
    }

    @Test("invalid settings are refused at creation")
    func invalidSettings() {
        #expect(throws: H2Error.self) { try H2Session(role: .server, settings: H2Settings(maxFrameSize: 1_000)) }
        #expect(throws: H2Error.self) { try H2Session(role: .client, settings: H2Settings(initialWindowSize: .max)) }
    }
}
