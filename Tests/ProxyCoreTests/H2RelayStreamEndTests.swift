import ATSPolicy
import HTTP2Core
import Testing

@testable import ProxyCore

/// An h2 client and an h2 origin (nghttp2 sessions) around an H2Relay, each pipe moved whole; the origin's
/// behaviour is the test's (`onOriginEvent`), and raw origin frames can be injected (`originRaw`).
private final class StreamScene {
    let client: H2Session
    let origin: H2Session
    let relay: DecidedRelay<H2Relay>
    let clock = TestClock()
    var clientEvents: [H2Event] = []
    var originEvents: [H2Event] = []
    var onOriginEvent: (StreamScene, H2Event) throws -> Void = { _, _ in }
    private var toRelayFromClient: [UInt8] = []
    private var toRelayFromOrigin: [UInt8] = []
    var clientClosed = false

    init() throws {
        client = try H2Session(role: .client)
        origin = try H2Session(role: .server)
        let clock = clock
        relay = DecidedRelay(try H2Relay(now: { clock.now })) { head in
            .forward(head: head, url: "https://h2.test" + head.target, upstream: nil, annotation: [], outcome: .allowed,
                     codes: [])
        }
        take(relay.upstreamBytes([]))
    }

    func take(_ o: RelayOutput) {
        if o.closeClient { clientClosed = true }
        if !o.toUpstream.isEmpty {
            do {
                for event in try origin.receive(o.toUpstream) {
                    originEvents.append(event)
                    try onOriginEvent(self, event)
                }
            } catch { Issue.record("the origin refused the relay's frames: \(error)") }
            toRelayFromOrigin += origin.pendingOutput()
        }
        if !o.toClient.isEmpty {
            do {
                for event in try client.receive(o.toClient) {
                    clientEvents.append(event)
                    if case .data(let id, let bytes, _) = event { client.consume(streamID: id, count: bytes.count) }
                }
            } catch { Issue.record("the client refused the relay's frames: \(error)") }
            toRelayFromClient += client.pendingOutput()
        }
    }

    /// Raw bytes from the origin, as if it had written them (frames nghttp2 would not write).
    func originRaw(_ bytes: [UInt8]) { toRelayFromOrigin += bytes }

    /// Moves the pipes until nothing moves (bounded).
    func run() {
        for _ in 0..<1000 {
            toRelayFromClient += client.pendingOutput()
            toRelayFromOrigin += origin.pendingOutput()
            if toRelayFromClient.isEmpty && toRelayFromOrigin.isEmpty { return }
            let fromClient = toRelayFromClient
            toRelayFromClient = []
            if !fromClient.isEmpty { take(relay.clientBytes(fromClient)) }
            let fromOrigin = toRelayFromOrigin
            toRelayFromOrigin = []
            if !fromOrigin.isEmpty { take(relay.upstreamBytes(fromOrigin)) }
        }
        Issue.record("still moving after 1000 turns")
    }

    func request(_ path: String, body: Bool = false) throws -> Int32 {
        try client.submitRequest(
            [H2Header(":method", body ? "POST" : "GET"), H2Header(":scheme", "https"), H2Header(":authority", "h2.test"),
             H2Header(":path", path)], body: body ? .streaming : .none)
    }

    var clientStreams: [Int32: Seen] { Seen.streams(clientEvents) }
    var originStreams: [Int32: Seen] { Seen.streams(originEvents) }
}

/// What one side saw of a stream.
private struct Seen {
    var heads: [[H2Header]] = []
    var body: [UInt8] = []
    var ended = false
    var resetWith: H2ErrorCode?

    static func streams(_ events: [H2Event]) -> [Int32: Seen] {
        var out: [Int32: Seen] = [:]
        for event in events {
            switch event {
            case .headers(let id, let fields, _, let end):
                out[id, default: Seen()].heads.append(fields)
                if end { out[id, default: Seen()].ended = true }
            case .data(let id, let bytes, let end):
                out[id, default: Seen()].body += bytes
                if end { out[id, default: Seen()].ended = true }
            case .rstStream(let id, let code):
                out[id, default: Seen()].resetWith = code
            default:
                break
            }
        }
        return out
    }
}

private func frame(type: UInt8, flags: UInt8, stream: UInt32, _ payload: [UInt8]) -> [UInt8] {
    let n = payload.count
    return [UInt8(n >> 16 & 0xff), UInt8(n >> 8 & 0xff), UInt8(n & 0xff), type, flags,
            UInt8(stream >> 24 & 0x7f), UInt8(stream >> 16 & 0xff), UInt8(stream >> 8 & 0xff), UInt8(stream & 0xff)]
        + payload
}

/// An HPACK literal field without indexing, no Huffman coding (RFC 7541 §6.2.2): it leaves the dynamic table alone.
private func literal(_ name: String, _ value: String) -> [UInt8] {
    func length(_ n: Int) -> [UInt8] {
        guard n >= 127 else { return [UInt8(n)] }
        var out: [UInt8] = [127]
        var rest = n - 127
        while rest >= 128 {
            out.append(UInt8(rest % 128 + 128))
            rest /= 128
        }
        return out + [UInt8(rest)]
    }
    return [0] + length(name.utf8.count) + Array(name.utf8) + length(value.utf8.count) + Array(value.utf8)
}

@Suite("H2Relay: streams the proxy or the origin ends early")
struct H2RelayStreamEndTests {
    @Test("An early answer then RST_STREAM(NO_ERROR) reaches the client whole; then its stream is reset NO_ERROR")
    func earlyResponseIsDelivered() throws {
        let scene = try StreamScene()
        let body = Array(repeating: UInt8(0x74), count: 20_000)
        scene.onOriginEvent = { scene, event in
            guard case .headers(let id, _, .request, false) = event else { return }
            try scene.origin.submitResponse(
                streamID: id, headers: [H2Header(":status", "413"), H2Header("content-length", "20000")],
                body: .streaming)
            try scene.origin.sendData(streamID: id, body, endStream: true)
            scene.originRaw(scene.origin.pendingOutput())  // the response goes out before the reset is queued
            try scene.origin.submitRSTStream(streamID: id, errorCode: .noError)
        }
        let id = try scene.request("/upload", body: true)
        try scene.client.sendData(streamID: id, Array(repeating: 0x78, count: 1000), endStream: false)
        scene.run()
        // The client keeps sending until it reads the reset: those bytes are dropped, never a reason to cut the
        // response.
        if scene.client.streamState(id) == .open {
            try scene.client.sendData(streamID: id, Array(repeating: 0x79, count: 1000), endStream: false)
            scene.run()
        }
        let stream = scene.clientStreams[id]
        #expect(stream?.heads.first?.first(named: ":status") == "413")
        #expect(stream?.body.count == body.count)
        #expect(stream?.body == body, "the body's bytes")
        #expect(stream?.ended == true)
        #expect(stream?.resetWith == .noError)
        #expect(!scene.clientClosed)
    }

    @Test("A stream the relay resets itself (a WINDOW_UPDATE overflow) has its upstream request reset (CANCEL)")
    func provokedResetCancelsUpstream() throws {
        let scene = try StreamScene()
        let id = try scene.request("/held")
        scene.run()
        #expect(scene.originStreams.count == 1)
        let overflow = frame(type: 8, flags: 0, stream: UInt32(id), [0x7f, 0xff, 0xff, 0xff])
        scene.take(scene.relay.clientBytes(overflow))
        scene.run()
        #expect(scene.clientStreams[id]?.resetWith == .flowControlError)
        let upstream = scene.originStreams.values.first
        #expect(upstream?.resetWith == .cancel, "the origin's stream: \(String(describing: upstream))")
    }

    @Test("A response head over 64 KiB: 502 on its stream only; the stream after it is served, no GOAWAY")
    func oversizedResponseHeadIs502() throws {
        let scene = try StreamScene()
        scene.onOriginEvent = { scene, event in
            guard case .headers(let id, let fields, .request, true) = event else { return }
            guard fields.first(named: ":path") == "/big-head" else {
                try scene.origin.submitResponse(streamID: id, headers: [H2Header(":status", "200")], body: .streaming)
                try scene.origin.sendData(streamID: id, Array("ok".utf8), endStream: true)
                return
            }
            // nghttp2 writes no block this big: HEADERS and CONTINUATIONs by hand.
            let block = literal(":status", "200") + (0..<9).flatMap { literal("x-big-\($0)", String(repeating: "h", count: 8000)) }
            let pieces = stride(from: 0, to: block.count, by: 16_384).map { Array(block[$0..<min($0 + 16_384, block.count)]) }
            var raw = frame(type: 1, flags: 0, stream: UInt32(id), pieces[0])
            for (k, piece) in pieces.dropFirst().enumerated() {
                raw += frame(type: 9, flags: k == pieces.count - 2 ? 4 : 0, stream: UInt32(id), piece)
            }
            scene.originRaw(raw + frame(type: 0, flags: 1, stream: UInt32(id), Array("big".utf8)))
        }
        let big = try scene.request("/big-head")
        scene.run()
        let next = try scene.request("/next")
        scene.run()
        let streams = scene.clientStreams
        #expect(streams[big]?.heads.first?.first(named: ":status") == "502")
        let text = String(decoding: streams[big]?.body ?? [], as: UTF8.self)
        #expect(text.contains("65536"), "\(text)")
        #expect(streams[next]?.body == Array("ok".utf8))
        #expect(!scene.client.goAwayReceived)
        #expect(!scene.clientClosed)
    }

    @Test("Deadlines: a stalled request body is reset with its upstream stream; a silent upstream gets 504")
    func deadlines() throws {
        let scene = try StreamScene()
        let upload = try scene.request("/upload", body: true)
        try scene.client.sendData(streamID: upload, Array("part".utf8), endStream: false)
        let silent = try scene.request("/silent")
        scene.run()
        #expect(scene.relay.nextStreamDeadline == 30)
        scene.clock.now = 30
        scene.take(scene.relay.streamDeadlinesPassed(timeoutAnswer: H2ToH1RelayBoundsTests.timeoutAnswer))
        scene.run()
        #expect(scene.clientStreams[upload]?.resetWith == .cancel)
        #expect(scene.originStreams.values.filter { $0.resetWith == .cancel }.count == 1)
        #expect(scene.relay.nextStreamDeadline == 60)
        scene.clock.now = 60
        scene.take(scene.relay.streamDeadlinesPassed(timeoutAnswer: H2ToH1RelayBoundsTests.timeoutAnswer))
        scene.run()
        #expect(scene.clientStreams[silent]?.heads.first?.first(named: ":status") == "504")
        #expect(scene.originStreams.values.filter { $0.resetWith == .cancel }.count == 2)
        #expect(scene.relay.nextStreamDeadline == nil)
    }

    @Test("While the client is held unread for the upstream, no body deadline runs (the response's does); on release the body gets its full limit")
    func heldClientSuspendsBodyDeadline() throws {
        let scene = try StreamScene()
        let upload = try scene.request("/upload", body: true)
        try scene.client.sendData(streamID: upload, Array("part".utf8), endStream: false)
        let silent = try scene.request("/silent")
        scene.run()
        #expect(scene.relay.nextStreamDeadline == 30)
        scene.relay.clientReadingHeld(true, at: 10)
        #expect(scene.relay.nextStreamDeadline == 60, "only the silent upstream's response deadline runs")
        scene.clock.now = 60
        scene.take(scene.relay.streamDeadlinesPassed(timeoutAnswer: H2ToH1RelayBoundsTests.timeoutAnswer))
        scene.run()
        #expect(scene.clientStreams[silent]?.heads.first?.first(named: ":status") == "504")
        #expect(scene.clientStreams[upload]?.resetWith == nil)
        scene.relay.clientReadingHeld(false, at: 60)
        #expect(scene.relay.nextStreamDeadline == 90, "the body's clock restarts at the release")
        scene.clock.now = 90
        scene.take(scene.relay.streamDeadlinesPassed(timeoutAnswer: H2ToH1RelayBoundsTests.timeoutAnswer))
        scene.run()
        #expect(scene.clientStreams[upload]?.resetWith == .cancel)
    }
}
