import HTTP2Core
import Testing

@Suite("H2Session concurrent streams, flow control, resets and shutdown")
struct H2SessionStreamsTests {
    /// Body sizes around frame and window boundaries, up to 1 MiB.
    static let sizes = [0, 1, 100, 16_383, 16_384, 16_385, 65_535, 65_536, 100_000, 1_048_576]

    @Test("100 concurrent streams echo byte-exact bodies of various sizes")
    func hundredConcurrentStreams() throws {
        let pair = try SessionPair(
            client: H2Settings(connectionWindowSize: 4 << 20), server: H2Settings(connectionWindowSize: 4 << 20))
        // The server echoes each request body as it arrives, so bodies are relayed while still streaming.
        pair.onServerEvent = { [unowned pair] event in
            switch event {
            case .headers(let id, _, .request, let endStream):
                try pair.server.submitResponse(streamID: id, headers: [H2Header(":status", "200")], body: .streaming)
                if endStream { try pair.server.sendData(streamID: id, [], endStream: true) }
            case .data(let id, let bytes, let endStream):
                try pair.server.sendData(streamID: id, bytes, endStream: endStream)
            default:
                break
            }
        }
        #expect(try pair.exchange())  // SETTINGS first, so the client knows the server's limits
        var sent: [Int32: [UInt8]] = [:]
        for index in 0..<100 {
            let body = patternBytes(count: Self.sizes[index % Self.sizes.count], seed: UInt64(index + 1))
            let id = try pair.client.submitRequest(requestHeaders(method: "PUT", path: "/\(index)"), body: .streaming)
            try pair.client.sendData(streamID: id, body, endStream: true)
            sent[id] = body
        }
        #expect(pair.client.activeStreamCount == 100)
        #expect(try pair.exchange())

        let received = pair.clientEvents.streams()
        #expect(received.count == 100)
        for (id, body) in sent {
            let stream = try #require(received[id])
            #expect(stream.body.count == body.count, "stream \(id)")
            #expect(checksum(stream.body) == checksum(body), "stream \(id)")
            #expect(stream.ended && stream.closedWith == .noError, "stream \(id)")
        }
        #expect(pair.client.activeStreamCount == 0 && pair.server.activeStreamCount == 0)
    }

    @Test("a reader that does not consume stops the sender at the window; consuming resumes it")
    func flowControlBackpressure() throws {
        let window: UInt32 = 65_535
        let pair = try SessionPair(client: H2Settings(initialWindowSize: window))
        pair.clientConsumesImmediately = false
        let body = patternBytes(count: 1 << 20, seed: 99)
        pair.onServerEvent = { [unowned pair] event in
            if case .headers(let id, _, .request, true) = event {
                try pair.server.submitResponse(streamID: id, headers: [H2Header(":status", "200")], body: .streaming)
                try pair.server.sendData(streamID: id, body, endStream: true)
            }
        }
        let id = try pair.client.submitRequest(requestHeaders(), body: .none)
        #expect(try pair.exchange())

        // Stalled: exactly one window delivered, the rest still queued at the sender.
        var received = pair.clientEvents.streams()[id]?.body ?? []
        #expect(received.count == Int(window))
        #expect(pair.client.unconsumedBytes(streamID: id) == Int(window))
        #expect(pair.server.outboundQueuedBytes(streamID: id) == body.count - Int(window))
        #expect(pair.server.sendWindow(streamID: id) == 0)
        // Nothing moves without consumption.
        #expect(try pair.exchange())
        #expect((pair.clientEvents.streams()[id]?.body.count ?? 0) == Int(window))

        // Consume slowly, 8 KiB at a time; the sender never gets more than one window ahead.
        var rounds = 0
        while pair.clientEvents.streams()[id]?.ended != true && rounds < 10_000 {
            rounds += 1
            pair.client.consume(streamID: id, count: 8_192)
            #expect(try pair.exchange())
            #expect(pair.client.unconsumedBytes(streamID: id) <= Int(window))
        }
        received = pair.clientEvents.streams()[id]?.body ?? []
        #expect(BodyDigest(received) == BodyDigest(body))
        #expect(pair.clientEvents.streams()[id]?.closedWith == .noError)
    }

    @Test("resetting one stream mid-body leaves the other streams intact")
    func resetOneStream() throws {
        let pair = try SessionPair()
        let size = 300_000
        pair.onServerEvent = { [unowned pair] event in
            if case .headers(let id, _, .request, true) = event {
                try pair.server.submitResponse(streamID: id, headers: [H2Header(":status", "200")], body: .streaming)
                try pair.server.sendData(streamID: id, patternBytes(count: size, seed: UInt64(id)), endStream: true)
            }
        }
        let ids = try (0..<3).map { _ in try pair.client.submitRequest(requestHeaders(), body: .none) }
        let victim = ids[1]
        var resetDone = false
        pair.onClientEvent = { [unowned pair] event in
            if case .data(let id, _, _) = event, id == victim, !resetDone {
                resetDone = true
                try pair.client.submitRSTStream(streamID: victim, errorCode: .cancel)
            }
        }
        #expect(try pair.exchange())

        let clientView = pair.clientEvents.streams()
        for id in ids where id != victim {
            let stream = try #require(clientView[id])
            #expect(BodyDigest(stream.body) == BodyDigest(patternBytes(count: size, seed: UInt64(id))))
            #expect(stream.closedWith == .noError)
        }
        let victimView = try #require(clientView[victim])
        #expect(victimView.body.count < size)
        #expect(victimView.closedWith == .cancel)
        let serverView = try #require(pair.serverEvents.streams()[victim])
        #expect(serverView.resetWith == .cancel)
        #expect(serverView.closedWith == .cancel)
        #expect(throws: H2Error.stream(id: victim, code: .streamClosed)) {
            try pair.server.sendData(streamID: victim, [1], endStream: true)
        }
        // The connection stays usable.
        let next = try pair.client.submitRequest(requestHeaders(), body: .none)
        #expect(try pair.exchange())
        #expect(pair.clientEvents.streams()[next]?.closedWith == .noError)
    }

    @Test("GOAWAY lets in-flight streams finish and refuses new ones")
    func goAwayDrains() throws {
        let pair = try SessionPair()
        #expect(try pair.exchange())
        let first = try pair.client.submitRequest(requestHeaders(method: "POST"), body: .streaming)
        let second = try pair.client.submitRequest(requestHeaders(method: "POST"), body: .streaming)
        try pair.client.sendData(streamID: first, Array("part".utf8), endStream: false)
        #expect(try pair.exchange())
        #expect(pair.serverEvents.streams().keys.sorted() == [first, second])

        // Graceful shutdown: the last stream the server processed is `second`.
        try pair.server.submitGoAway()
        // Sent by the client before it hears of the GOAWAY: refused, never processed.
        let late = try pair.client.submitRequest(requestHeaders(), body: .none)
        pair.onServerEvent = { [unowned pair] event in
            if case .data(let id, _, true) = event {
                try pair.server.submitResponse(streamID: id, headers: [H2Header(":status", "200")], body: .none)
            }
        }
        #expect(try pair.exchange())
        #expect(pair.clientEvents.contains(.goAway(lastStreamID: second, errorCode: .noError, debugData: [])))
        #expect(pair.client.goAwayReceived)
        #expect(pair.clientEvents.streams()[late]?.closedWith == .refusedStream)
        #expect(pair.serverEvents.streams()[late] == nil)
        #expect(throws: H2Error.streamsExhausted) { _ = try pair.client.submitRequest(requestHeaders(), body: .none) }
        #expect(!pair.client.canOpenStream)

        // The in-flight streams still complete.
        try pair.client.sendData(streamID: first, Array("rest".utf8), endStream: true)
        try pair.client.sendData(streamID: second, [], endStream: true)
        #expect(try pair.exchange())
        #expect(pair.serverEvents.streams()[first]?.body == Array("partrest".utf8))
        #expect(pair.clientEvents.streams()[first]?.closedWith == .noError)
        #expect(pair.clientEvents.streams()[second]?.closedWith == .noError)
        // Nothing left: both sides may close the connection.
        #expect(!pair.server.wantsRead && !pair.server.wantsWrite)
        #expect(!pair.client.wantsRead && !pair.client.wantsWrite)
    }

    @Test("the peer's SETTINGS_MAX_CONCURRENT_STREAMS limits how many streams are open at once")
    func maxConcurrentStreams() throws {
        let pair = try SessionPair(server: H2Settings(maxConcurrentStreams: 2))
        #expect(try pair.exchange())
        #expect(pair.client.remoteSettings.maxConcurrentStreams == 2)
        var open: Set<Int32> = []
        var peak = 0
        var pending: [Int32] = []
        pair.onServerEvent = { event in
            switch event {
            case .headers(let id, _, .request, _):
                open.insert(id)
                peak = max(peak, open.count)
                pending.append(id)
            case .streamClosed(let id, _):
                open.remove(id)
            default:
                break
            }
        }
        let ids = try (0..<5).map { _ in try pair.client.submitRequest(requestHeaders(), body: .none) }
        #expect(try pair.exchange())
        #expect(pending.count == 2)
        #expect(!pair.client.canOpenStream)
        // Answer whatever is open until every request was served.
        var rounds = 0
        while !pending.isEmpty && rounds < 20 {
            rounds += 1
            let batch = pending
            pending.removeAll()
            for id in batch {
                try pair.server.submitResponse(streamID: id, headers: [H2Header(":status", "200")], body: .none)
            }
            #expect(try pair.exchange())
        }
        #expect(peak == 2)
        let closed = pair.clientEvents.streams()
        #expect(ids.allSatisfy { closed[$0]?.closedWith == .noError })
        #expect(pair.client.canOpenStream)
    }
}
