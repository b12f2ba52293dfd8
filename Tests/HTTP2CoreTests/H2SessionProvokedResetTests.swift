import HTTP2Core
import Testing

/// A WINDOW_UPDATE frame whose increment overflows any stream window that is not empty (RFC 9113 §6.9.1).
private func overflowingWindowUpdate(_ id: Int32) -> [UInt8] {
    let increment: UInt32 = 0x7fff_ffff
    return [0, 0, 4, 0x8, 0] + withUnsafeBytes(of: UInt32(id).bigEndian, Array.init)
        + withUnsafeBytes(of: increment.bigEndian, Array.init)
}

@Suite("H2Session: resets the server sends itself count with the peer's (MadeYouReset, CVE-2025-8671)")
struct H2SessionProvokedResetTests {
    /// Opens `count` streams in batches of 50 and makes the server reset each one with `reset`; returns how many
    /// were reset before the server ended the connection, and the GOAWAY code the client got.
    private func provoke(
        _ count: Int, _ reset: (SessionPair, [Int32]) throws -> Void
    ) throws -> (resets: Int, goAway: H2ErrorCode?) {
        let pair = try SessionPair()
        var resets = 0
        batches: for _ in 0..<(count / 50) {
            do {
                let ids = try (0..<50).map { _ in try pair.client.submitRequest(requestHeaders(), body: .none) }
                try pair.exchange()
                try reset(pair, ids)
                resets += ids.count
                try pair.exchange()
            } catch {
                // The server's session failed (it threw), or the client may open no more streams (GOAWAY came).
                break batches
            }
        }
        // The GOAWAY the failing server queued, delivered.
        pair.clientEvents += try pair.client.receive(pair.server.pendingOutput())
        let goAway = pair.clientEvents.compactMap { event -> H2ErrorCode? in
            if case .goAway(_, let code, _) = event { code } else { nil }
        }
        return (resets, goAway.first)
    }

    @Test("1,500 WINDOW_UPDATE overflows, each reset by nghttp2 (FLOW_CONTROL_ERROR): GOAWAY ENHANCE_YOUR_CALM")
    func windowUpdateOverflowsCount() throws {
        let (resets, goAway) = try provoke(1500) { pair, ids in
            for id in ids { _ = try pair.server.receive(overflowingWindowUpdate(id)) }
        }
        #expect(goAway == .enhanceYourCalm)
        #expect((1000...1200).contains(resets), "\(resets) resets")
    }

    @Test("Resets the application blames on the peer (a malformed request) count too")
    func resetsBlamingThePeerCount() throws {
        let (resets, goAway) = try provoke(1500) { pair, ids in
            for id in ids { try pair.server.submitRSTStream(streamID: id, errorCode: .protocolError, blamingPeer: true) }
        }
        #expect(goAway == .enhanceYourCalm)
        #expect((1000...1200).contains(resets), "\(resets) resets")
    }

    @Test("Resets for the application's own reasons (the other leg failed) do not count")
    func applicationResetsDoNotCount() throws {
        let (resets, goAway) = try provoke(1500) { pair, ids in
            for id in ids { try pair.server.submitRSTStream(streamID: id, errorCode: .internalError) }
        }
        #expect(goAway == nil)
        #expect(resets == 1500)
    }
}

@Suite("H2Session: a response head over the header list limit costs its stream only (client role)")
struct H2SessionOversizedResponseHeadTests {
    @Test("A response head over the client's limit resets its stream with INTERNAL_ERROR; the next one is served")
    func oversizedResponseHeadResetsTheStream() throws {
        // nghttp2 sends no header block over 64 KiB, so the limit here is 16 KiB and the head 24 KB.
        let pair = try SessionPair(client: H2Settings(maxHeaderListSize: 16_384))
        pair.onServerEvent = { [unowned pair] event in
            guard case .headers(let id, _, .request, true) = event else { return }
            let big = (0..<3).map { H2Header("x-big-\($0)", String(repeating: "h", count: 8000)) }
            try pair.server.submitResponse(
                streamID: id, headers: [H2Header(":status", "200")] + (id == 1 ? big : []), body: .streaming)
            try pair.server.sendData(streamID: id, Array("ok".utf8), endStream: true)
        }
        let first = try pair.client.submitRequest(requestHeaders(), body: .none)
        let second = try pair.client.submitRequest(requestHeaders(path: "/next"), body: .none)
        #expect(try pair.exchange())
        let streams = pair.clientEvents.streams()
        #expect(streams[first]?.heads.isEmpty == true)
        #expect(streams[first]?.closedWith == .internalError)
        #expect(pair.client.takeOversizedHeaderBlock(streamID: first))
        #expect(!pair.client.takeOversizedHeaderBlock(streamID: first), "told once")
        #expect(streams[second]?.body == Array("ok".utf8))
        #expect(!pair.client.takeOversizedHeaderBlock(streamID: second))
        #expect(!pair.server.goAwayReceived)
        #expect(!pair.client.goAwayReceived)
    }
}
