import HTTP2Core
import Testing

@testable import ProxyCore

/// An h2 client and an h2 origin (both nghttp2 sessions) on either side of an H2Relay, with the four byte streams
/// carried by the test in a fixed order and fixed piece sizes: no sockets, and the same run every time.
private final class RelayScene {
    let client: H2Session
    let origin: H2Session
    let relay: H2Relay
    /// Response body sizes by path (`/s0`, `/s1`, …).
    let sizes: [Int]
    private var clientToRelay: [UInt8] = []
    private var relayToClient: [UInt8] = []
    private var relayToOrigin: [UInt8] = []
    private var originToRelay: [UInt8] = []
    private var pathByStream: [Int32: Int] = [:]
    private(set) var received: [Int]
    private(set) var ended: [Bool]

    /// The client advertises windows as curl 7.88 does (32 MiB for each stream and for the connection), so only the
    /// relay's own windows towards the origin limit the transfer.
    init(sizes: [Int]) throws {
        self.sizes = sizes
        received = Array(repeating: 0, count: sizes.count)
        ended = Array(repeating: false, count: sizes.count)
        client = try H2Session(
            role: .client, settings: H2Settings(initialWindowSize: 32 << 20, connectionWindowSize: 32 << 20))
        origin = try H2Session(role: .server)
        relay = try H2Relay(now: { 0 }) { head in
            .forward(head: head, url: "https://h2.test" + head.target, upstream: nil, annotation: [], outcome: .allowed,
                     codes: [])
        }
        take(relay.upstreamBytes([]))
        for index in sizes.indices {
            let id = try client.submitRequest(
                [H2Header(":method", "GET"), H2Header(":scheme", "https"), H2Header(":authority", "h2.test"),
                 H2Header(":path", "/s\(index)")], body: .none)
            pathByStream[id] = index
        }
        clientToRelay += client.pendingOutput()
    }

    private func take(_ output: RelayOutput) {
        relayToClient += output.toClient
        relayToOrigin += output.toUpstream
    }

    /// Moves bytes round the four pipes, at most `piece` bytes from each per turn, until nothing moves (a transfer
    /// that finished, or one that stalled). Bounded by `turns`.
    func run(piece: Int, turns: Int = 100_000) throws {
        for _ in 0..<turns {
            var moved = false
            if let bytes = Self.cut(&clientToRelay, piece) {
                take(relay.clientBytes(bytes))
                moved = true
            }
            if let bytes = Self.cut(&relayToOrigin, piece) {
                for event in try origin.receive(bytes) { try answer(event) }
                originToRelay += origin.pendingOutput()
                moved = true
            }
            if let bytes = Self.cut(&originToRelay, piece) {
                take(relay.upstreamBytes(bytes))
                moved = true
            }
            if let bytes = Self.cut(&relayToClient, piece) {
                for event in try client.receive(bytes) { read(event) }
                clientToRelay += client.pendingOutput()
                moved = true
            }
            if !moved { return }
        }
        Issue.record("still moving after \(turns) turns")
    }

    private static func cut(_ pipe: inout [UInt8], _ piece: Int) -> [UInt8]? {
        guard !pipe.isEmpty else { return nil }
        let n = min(piece, pipe.count)
        defer { pipe.removeFirst(n) }
        return Array(pipe[..<n])
    }

    /// The origin answers each request with its path's body.
    private func answer(_ event: H2Event) throws {
        guard case .headers(let id, let fields, .request, _) = event,
            let path = fields.first(named: ":path"), let index = Int(path.dropFirst(2))
        else { return }
        let size = sizes[index]
        try origin.submitResponse(
            streamID: id, headers: [H2Header(":status", "200")], body: size == 0 ? .none : .streaming)
        if size > 0 {
            let body = [UInt8](repeating: UInt8(truncatingIfNeeded: index), count: size)
            try origin.sendData(streamID: id, body, endStream: true)
        }
    }

    /// The client reads what arrives and gives the credit back at once, as curl does.
    private func read(_ event: H2Event) {
        switch event {
        case .data(let id, let bytes, let end):
            guard let index = pathByStream[id] else { return }
            received[index] += bytes.count
            client.consume(streamID: id, count: bytes.count)
            if end { ended[index] = true }
        case .headers(let id, _, .response, let end):
            if end, let index = pathByStream[id] { ended[index] = true }
        default:
            break
        }
    }

    var unfinished: [Int] { sizes.indices.filter { received[$0] != sizes[$0] || !ended[$0] } }
}

@Suite("H2Relay: h2 on both sides, in memory")
struct H2RelayTests {
    @Test("A 1 MiB response gets through the relay's 64 KiB stream window: credit is sent on as the client reads",
          arguments: [1_000, 16_384, 1 << 20])
    func largeResponseCompletes(piece: Int) throws {
        let scene = try RelayScene(sizes: [1 << 20])
        try scene.run(piece: piece)
        #expect(scene.received == [1 << 20])
        #expect(scene.ended == [true])
    }

    @Test("100 concurrent streams of 0 to 1 MiB (50 MiB in all) all complete on one connection")
    func hundredStreamsComplete() throws {
        // The end-to-end test's sizes: more data than the relay's connection windows hold at once.
        let sizes = (0..<100).map { $0 == 99 ? 1 << 20 : ($0 * 10_613) % (1 << 20) }
        let scene = try RelayScene(sizes: sizes)
        try scene.run(piece: 70_000)
        #expect(scene.unfinished.isEmpty, "unfinished: \(scene.unfinished.map { "s\($0) \(scene.received[$0])" })")
    }
}
