import HTTP2Core
import Testing

@Suite("H2Session: the peer's RST_STREAM rate (rapid reset) and resets of completed streams")
struct H2SessionResetRateTests {
    /// A pair whose server answers every request at once with a 1 KiB body.
    private func answeringPair() throws -> SessionPair {
        let pair = try SessionPair()
        pair.onServerEvent = { [unowned pair] event in
            if case .headers(let id, _, .request, true) = event {
                try pair.server.submitResponse(streamID: id, headers: [H2Header(":status", "200")], body: .streaming)
                try pair.server.sendData(streamID: id, patternBytes(count: 1024, seed: UInt64(id)), endStream: true)
            }
        }
        return pair
    }

    @Test("2000 streams each reset by the client after their response completed: the connection stays up")
    func resetsOfCompletedStreamsAreHarmless() throws {
        // Go's HTTP/2 client does this on about 2 % of streams under load (a CANCEL racing the END_STREAM it has
        // just read); nghttp2's limiter counted them and tore busy connections down with INTERNAL_ERROR.
        let pair = try answeringPair()
        var completed = 0
        for _ in 0..<40 {
            let ids = try (0..<50).map { _ in try pair.client.submitRequest(requestHeaders(), body: .none) }
            #expect(try pair.exchange())
            let streams = pair.clientEvents.streams()
            for id in ids {
                guard streams[id]?.closedWith == .noError, streams[id]?.body.count == 1024 else { continue }
                completed += 1
                try pair.client.submitRSTStream(streamID: id, errorCode: .cancel)
            }
            #expect(try pair.exchange())
        }
        #expect(completed == 2000)
        #expect(!pair.client.goAwayReceived)
        #expect(pair.server.activeStreamCount == 0)
        // And the connection still serves requests.
        let last = try pair.client.submitRequest(requestHeaders(), body: .none)
        #expect(try pair.exchange())
        #expect(pair.clientEvents.streams()[last]?.body.count == 1024)
    }

    @Test("1500 streams opened and reset at once (rapid reset): GOAWAY ENHANCE_YOUR_CALM once past the burst of 1000")
    func rapidResetOfOpenStreamsEndsTheConnection() throws {
        // The server never answers, so every reset cancels a stream that is still open.
        let pair = try SessionPair()
        var failure: H2Error?
        var resets = 0
        batches: for _ in 0..<30 {
            do {
                let ids = try (0..<50).map { _ in try pair.client.submitRequest(requestHeaders(), body: .none) }
                try pair.exchange()
                for id in ids { try pair.client.submitRSTStream(streamID: id, errorCode: .cancel) }
                resets += ids.count
                try pair.exchange()
            } catch let error as H2Error {
                failure = error
                break batches
            }
        }
        #expect(failure == .connection(.excessiveLoad, code: .enhanceYourCalm))
        // Refilling at 33 a second, the bucket of 1000 lasts a few more resets while the test runs, not 500.
        #expect((1000...1200).contains(resets), "\(resets) resets")
        // The GOAWAY is queued by the failing receive; the client learns why.
        let goAway = RawFrame.parse(pair.server.pendingOutput(), skipPreface: false).compactMap(\.goAwayCode)
        #expect(goAway == [H2ErrorCode.enhanceYourCalm.rawValue])
    }

    @Test("The bucket: a burst, then one reset per 1/rate seconds; it refills up to the burst and no further")
    func tokenBucket() {
        var limit = H2ResetRateLimit(burst: 3, ratePerSecond: 2)
        // A burst of 3; then one every half second; a long pause refills to the burst, not beyond; a clock that
        // goes backwards gives nothing back.
        let times: [Double] = [10, 10, 10, 10, 10.4, 10.5, 10.5, 100, 100, 100, 100, 50]
        let allowed = times.map { limit.allowReset(at: $0) }
        #expect(allowed == [true, true, true, false, false, true, false, true, true, true, false, false])
    }
}
