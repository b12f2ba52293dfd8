import ATSPolicy
import HTTP1Core
import HTTP2Core
import Testing

@testable import ProxyCore

/// An h2 client session (nghttp2) paired with an H2ToH1Relay, with the upstream lanes played by the test.
private final class PoolScene {
    let client: H2Session
    let relay: DecidedRelay<H2ToH1Relay>
    var toLanes: [UpstreamLane: String] = [:]
    var opened: [UpstreamLane] = []
    var closed: [UpstreamLane] = []
    var responses: [Int32: (status: String?, body: [UInt8], ended: Bool)] = [:]
    var resets: [Int32: H2ErrorCode] = [:]
    var unsolicited: [UpstreamLane] = []
    var paused: [ProxyPeer: Bool] = [:]
    /// The relay's clock (seconds), moved by the tests of deadlines.
    let clock = TestClock()
    /// Whether this client gives flow-control credit back for what it receives (a reader that keeps up).
    var reads = true
    /// Streams this client reads when `reads` is off (an app that reads one response at a time).
    var readsStreams: Set<Int32> = []
    var consumed: [Int32: Int] = [:]

    init(maxLanes: Int, clientSettings: H2Settings = H2Settings()) throws {
        client = try H2Session(role: .client, settings: clientSettings)
        let clock = clock
        relay = DecidedRelay(try H2ToH1Relay(primaryConnected: true, maxLanes: maxLanes, now: { clock.now })) { head in
            .forward(head: head, url: "https://good.test" + head.target, upstream: nil, annotation: [], outcome: .allowed, codes: [])
        }
        take(relay.upstreamBytes([]))
    }

    /// Carries the client's pending frames to the relay and the relay's answer back, until both are quiet (bounded).
    func exchange() throws {
        for _ in 0..<20 {
            let bytes = client.pendingOutput()
            guard !bytes.isEmpty else { return }
            take(relay.clientBytes(bytes))
        }
    }

    func take(_ o: RelayOutput) {
        opened += o.lanes.open
        unsolicited += o.lanes.unsolicited
        paused.merge(o.pauseReading) { _, new in new }
        closed += o.lanes.close
        if o.closeUpstream { closed.append(.primary) }
        toLanes[.primary, default: ""] += String(decoding: o.toUpstream, as: UTF8.self)
        for (lane, bytes) in o.lanes.bytes { toLanes[lane, default: ""] += String(decoding: bytes, as: UTF8.self) }
        guard !o.toClient.isEmpty else { return }
        let events: [H2Event]
        do { events = try client.receive(o.toClient) } catch {
            Issue.record("the client session refused the relay's frames: \(error)")
            return
        }
        for event in events {
            switch event {
            case .headers(let id, let fields, .response, let end):
                responses[id] = (fields.first(named: ":status"), [], end)
            case .data(let id, let bytes, let end):
                responses[id]?.body += bytes
                if end { responses[id]?.ended = true }
                if reads || readsStreams.contains(id) { client.consume(streamID: id, count: bytes.count) }
            case .rstStream(let id, let code):
                resets[id] = code
            default: break
            }
        }
    }

    func get(_ path: String) throws -> Int32 {
        try client.submitRequest(
            [H2Header(":method", "GET"), H2Header(":scheme", "https"), H2Header(":authority", "good.test"),
             H2Header(":path", path), H2Header("cookie", "a=1"), H2Header("cookie", "b=2")],
            body: .none)
    }
}

@Suite("H2ToH1Relay: an h2 client over a bounded pool of HTTP/1.1 connections")
struct H2ToH1RelayTests {
    @Test("Five concurrent streams use at most three lanes; each lane carries one translated exchange at a time")
    func boundedPool() throws {
        let scene = try PoolScene(maxLanes: 3)
        let ids = try (1...5).map { try scene.get("/r\($0)") }
        try scene.exchange()
        // The first connection serves stream 1; two more are asked for, no more than the pool allows.
        #expect(scene.opened == [UpstreamLane(1), UpstreamLane(2)])
        let primary = scene.toLanes[.primary] ?? ""
        #expect(primary.hasPrefix("GET /r1 HTTP/1.1\r\nhost: good.test\r\n"), "\(primary)")
        #expect(primary.contains("cookie: a=1; b=2\r\n"), "cookie crumbs joined: \(primary)")
        scene.take(scene.relay.laneConnected(UpstreamLane(1)))
        #expect(scene.toLanes[UpstreamLane(1)]?.hasPrefix("GET /r2 HTTP/1.1\r\n") == true)

        // The first response ends: the connection is reused for the next waiting stream.
        scene.take(scene.relay.upstreamBytes(bytes("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello")))
        #expect(scene.responses[ids[0]]?.status == "200")
        #expect(scene.responses[ids[0]]?.body == bytes("hello"))
        #expect(scene.responses[ids[0]]?.ended == true)
        #expect(scene.toLanes[.primary]?.contains("GET /r3 HTTP/1.1\r\n") == true)
        #expect(scene.opened.count == 2, "no lane beyond the pool")
    }

    @Test("A client reset of a stream in flight closes its lane (HTTP/1.1 cannot cancel); the others go on")
    func resetClosesLane() throws {
        let scene = try PoolScene(maxLanes: 2)
        let first = try scene.get("/a")
        let second = try scene.get("/b")
        try scene.exchange()
        scene.take(scene.relay.laneConnected(UpstreamLane(1)))
        try scene.client.submitRSTStream(streamID: second, errorCode: .cancel)
        try scene.exchange()
        #expect(scene.closed == [UpstreamLane(1)])
        scene.take(scene.relay.upstreamBytes(bytes("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n")))
        #expect(scene.responses[first]?.body == bytes("abc"))
        #expect(scene.responses[first]?.ended == true)
    }

    @Test("A client that stops reading: its lane stops being read once 64 KiB wait, and resumes as the client reads")
    func slowReaderPausesLane() throws {
        let scene = try PoolScene(maxLanes: 1)
        scene.reads = false
        let id = try scene.get("/big")
        try scene.exchange()
        scene.take(scene.relay.upstreamBytes(bytes("HTTP/1.1 200 OK\r\nContent-Length: 2000000\r\n\r\n")))
        let piece = [UInt8](repeating: 0x61, count: 16_384)
        for _ in 0..<32 { scene.take(scene.relay.upstreamBytes(piece)) }
        #expect(scene.paused[.upstream] == true, "paused with 512 KiB relayed and 64 KiB read")
        // The client reads what it got, and opens its window again: the lane is resumed.
        for _ in 0..<10 where scene.paused[.upstream] == true {
            let read = scene.responses[id]?.body.count ?? 0
            scene.client.consume(streamID: id, count: read - (scene.consumed[id] ?? 0))
            scene.consumed[id] = read
            try scene.exchange()
        }
        #expect(scene.paused[.upstream] == false)
    }

    @Test("A lane that closes before its response head turns into a 502 on that stream only")
    func laneFailureIs502() throws {
        let scene = try PoolScene(maxLanes: 1)
        let id = try scene.get("/gone")
        try scene.exchange()
        scene.take(scene.relay.upstreamEOF())
        #expect(scene.responses[id]?.status == "502")
        let text = String(decoding: scene.responses[id]?.body ?? [], as: UTF8.self)
        #expect(text.contains("closed the connection"), "\(text)")
    }

    @Test("An extra lane that fails to connect is not retried while the first is busy; its stream waits for that one")
    func failedLaneIsNotRetried() throws {
        let scene = try PoolScene(maxLanes: 3)
        let first = try scene.get("/slow")
        let second = try scene.get("/next")
        try scene.exchange()
        #expect(scene.opened == [UpstreamLane(1)])
        // The origin refuses the second connection. Asking for another at once would repeat for as long as the
        // first exchange lasts (each refusal answered by a new connect): a connection storm that never settles.
        scene.take(scene.relay.laneFailed(UpstreamLane(1), error: "refused"))
        #expect(scene.opened == [UpstreamLane(1)], "no new lane after the refusal")
        #expect(scene.responses[second] == nil, "the stream waits")
        // The first exchange ends: the waiting stream goes over the first connection.
        scene.take(scene.relay.upstreamBytes(bytes("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")))
        #expect(scene.responses[first]?.ended == true)
        #expect(scene.toLanes[.primary]?.contains("GET /next HTTP/1.1\r\n") == true)
        scene.take(scene.relay.upstreamBytes(bytes("HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nyes")))
        #expect(scene.responses[second]?.body == bytes("yes"))
        #expect(scene.opened == [UpstreamLane(1)])
    }

    @Test("After a refused lane, a completed exchange lets the pool try one more lane when streams wait again")
    func poolGrowsAgainAfterProgress() throws {
        let scene = try PoolScene(maxLanes: 3)
        _ = try scene.get("/slow")
        _ = try scene.get("/next")
        try scene.exchange()
        scene.take(scene.relay.laneFailed(UpstreamLane(1), error: "refused"))
        // The first exchange completes; the waiting stream takes the first connection and keeps it busy.
        scene.take(scene.relay.upstreamBytes(bytes("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")))
        #expect(scene.opened == [UpstreamLane(1)])
        // A new stream while the first connection is busy: one refusal does not cap the pool for good.
        _ = try scene.get("/third")
        try scene.exchange()
        #expect(scene.opened == [UpstreamLane(1), UpstreamLane(2)])
    }
}

/// A zero WINDOW_UPDATE increment (RFC 9113 §6.9) ends the connection with PROTOCOL_ERROR on the h2→HTTP/1.1 path
/// as on h2→h2: on stream 0 it is a connection error; on a stream, nghttp2 treats it as one too, which §5.4.1
/// allows, and the two paths must not differ in what a client can get away with.
@Suite("H2ToH1Relay: zero WINDOW_UPDATE increments")
struct H2ToH1ZeroWindowUpdateTests {
    /// One raw frame: 9-byte header, then the payload.
    static func frame(type: UInt8, flags: UInt8 = 0, stream: UInt32, payload: [UInt8]) -> [UInt8] {
        let n = payload.count
        return [UInt8(n >> 16 & 0xff), UInt8(n >> 8 & 0xff), UInt8(n & 0xff), type, flags,
                UInt8(stream >> 24 & 0x7f), UInt8(stream >> 16 & 0xff), UInt8(stream >> 8 & 0xff), UInt8(stream & 0xff)]
            + payload
    }

    /// (type, stream, error code) of each GOAWAY (7) and RST_STREAM (3) frame in `bytes`.
    static func errorFrames(_ bytes: [UInt8]) -> [(type: UInt8, stream: UInt32, code: UInt32)] {
        var out: [(UInt8, UInt32, UInt32)] = []
        var i = 0
        while i + 9 <= bytes.count {
            let length = Int(bytes[i]) << 16 | Int(bytes[i + 1]) << 8 | Int(bytes[i + 2])
            let type = bytes[i + 3]
            let stream = UInt32(bytes[i + 5] & 0x7f) << 24 | UInt32(bytes[i + 6]) << 16 | UInt32(bytes[i + 7]) << 8
                | UInt32(bytes[i + 8])
            let p = i + 9
            guard p + length <= bytes.count else { break }
            func u32(_ at: Int) -> UInt32 {
                UInt32(bytes[at]) << 24 | UInt32(bytes[at + 1]) << 16 | UInt32(bytes[at + 2]) << 8 | UInt32(bytes[at + 3])
            }
            if type == 7, length >= 8 { out.append((7, stream, u32(p + 4))) }
            if type == 3, length == 4 { out.append((3, stream, u32(p))) }
            i = p + length
        }
        return out
    }

    static let protocolError: UInt32 = 1

    func relay() throws -> (DecidedRelay<H2ToH1Relay>, H2Session) {
        let client = try H2Session(role: .client)
        let relay = DecidedRelay(try H2ToH1Relay(primaryConnected: true, maxLanes: 2, now: { 0 })) { head in
            .forward(head: head, url: "https://good.test" + head.target, upstream: nil, annotation: [], outcome: .allowed,
                     codes: [])
        }
        _ = relay.upstreamBytes([])
        _ = relay.clientBytes(client.pendingOutput())  // preface and SETTINGS
        return (relay, client)
    }

    @Test("On stream 0: GOAWAY PROTOCOL_ERROR and the connection closes")
    func onTheConnection() throws {
        let (relay, _) = try relay()
        let out = relay.clientBytes(Self.frame(type: 8, stream: 0, payload: [0, 0, 0, 0]))
        let errors = Self.errorFrames(out.toClient)
        #expect(errors.contains { $0.type == 7 && $0.code == Self.protocolError }, "\(errors)")
        #expect(out.closeClient)
    }

    @Test("On a stream: GOAWAY PROTOCOL_ERROR and the connection closes, as on h2→h2")
    func onAStream() throws {
        let (relay, client) = try relay()
        let id = try client.submitRequest(
            [H2Header(":method", "GET"), H2Header(":scheme", "https"), H2Header(":authority", "good.test"),
             H2Header(":path", "/a")], body: .none)
        _ = relay.clientBytes(client.pendingOutput())
        let out = relay.clientBytes(Self.frame(type: 8, stream: UInt32(id), payload: [0, 0, 0, 0]))
        let errors = Self.errorFrames(out.toClient)
        #expect(errors.contains { $0.type == 7 && $0.code == Self.protocolError }, "\(errors)")
        #expect(out.closeClient)
    }
}

/// A clock the tests move by hand.
final class TestClock: @unchecked Sendable {
    var now: Double = 0
}

@Suite("H2ToH1Relay: the client's windows bound what is read from the lanes; deadlines per request")
struct H2ToH1RelayBoundsTests {
    static let timeoutAnswer = ATSAnswer(
        url: "", decision: PolicyDecision(keyPath: [], reason: "test"),
        violations: [ATSViolation(kind: .timedOut, urlError: .timedOut, sslError: nil, explanation: "silent",
                                  fix: .noExceptionCanHelp(reason: "test"))])

    @Test("SETTINGS_INITIAL_WINDOW_SIZE 1 and 40 responses of 256 KiB: at most 512 KiB wait for the client, then every lane is paused")
    func windowOneBoundsWhatIsRead() throws {
        let scene = try PoolScene(maxLanes: 6, clientSettings: H2Settings(initialWindowSize: 1))
        scene.reads = false
        let ids = try (0..<40).map { try scene.get("/big\($0)") }
        try scene.exchange()
        for lane in scene.opened { scene.take(scene.relay.laneConnected(lane)) }
        let size = 256 << 10
        let head = bytes("HTTP/1.1 200 OK\r\nContent-Length: \(size)\r\n\r\n")
        let piece = [UInt8](repeating: 0x62, count: 16 << 10)
        // Each lane is fed its responses 16 KiB at a time (a read) for as long as the relay reads it.
        var fed: [UpstreamLane: Int] = [:]
        var total = 0
        for _ in 0..<10_000 {
            var moved = false
            for lane in [UpstreamLane.primary] + scene.opened {
                let peer: ProxyPeer = lane == .primary ? .upstream : .lane(lane)
                let asked = (scene.toLanes[lane] ?? "").components(separatedBy: "GET /big").count - 1
                let answered = (fed[lane] ?? 0) / (size + 1)
                guard scene.paused[peer] != true, answered < asked else { continue }
                let offset = (fed[lane] ?? 0) % (size + 1)
                let bytes = offset == 0 ? head : piece
                let step = offset == 0 ? 1 : piece.count
                let out = lane == .primary ? scene.relay.upstreamBytes(bytes) : scene.relay.laneBytes(lane, bytes)
                fed[lane, default: 0] += step
                total += bytes.count - (offset == 0 ? head.count : 0)
                scene.take(out)
                moved = true
            }
            if !moved { break }
        }
        let delivered = ids.reduce(0) { $0 + (scene.responses[$1]?.body.count ?? 0) }
        // What the relay holds: bytes read from the origin and not given to the client. Before the bound, every
        // response was read whole (10 MiB).
        let held = total - delivered
        #expect(held <= (512 << 10) + 7 * piece.count, "\(held >> 10) KiB held")
        #expect(held >= 256 << 10, "the bound, not something else, stopped the reading: \(held >> 10) KiB held")
    }

    @Test("A client that reads one large response while 40 others wait unread: the one it reads still completes")
    func drainedStreamIsReadPastTheConnectionBound() throws {
        let scene = try PoolScene(maxLanes: 6, clientSettings: H2Settings(connectionWindowSize: 16 << 20))
        scene.reads = false
        let big = try scene.get("/big")
        scene.readsStreams = [big]
        let small = try (0..<40).map { try scene.get("/small\($0)") }
        try scene.exchange()
        for lane in scene.opened { scene.take(scene.relay.laneConnected(lane)) }
        let sizes = ["/big": 4 << 20, "/small": 128 << 10]
        let piece = [UInt8](repeating: 0x62, count: 16 << 10)
        // Per lane: the paths asked for, in order, and how far its current answer has been fed.
        var answered: [UpstreamLane: Int] = [:]
        var offset: [UpstreamLane: Int] = [:]
        var total = 0
        for _ in 0..<20_000 {
            var moved = false
            for lane in [UpstreamLane.primary] + scene.opened {
                let peer: ProxyPeer = lane == .primary ? .upstream : .lane(lane)
                let asked = (scene.toLanes[lane] ?? "").components(separatedBy: "GET ").dropFirst()
                    .map { String($0.prefix { $0 != " " }) }
                let done = answered[lane] ?? 0
                guard scene.paused[peer] != true, done < asked.count else { continue }
                let size = asked[done].hasPrefix("/big") ? sizes["/big"]! : sizes["/small"]!
                let at = offset[lane] ?? 0
                let bytes = at == 0 ? bytes("HTTP/1.1 200 OK\r\nContent-Length: \(size)\r\n\r\n")
                    : Array(piece.prefix(size - (at - 1)))
                offset[lane] = at + (at == 0 ? 1 : bytes.count)
                if at > 0 { total += bytes.count }
                if offset[lane]! == size + 1 {
                    answered[lane] = done + 1
                    offset[lane] = 0
                }
                scene.take(lane == .primary ? scene.relay.upstreamBytes(bytes) : scene.relay.laneBytes(lane, bytes))
                moved = true
            }
            // The client's WINDOW_UPDATEs for what it read.
            try scene.exchange()
            if !moved || scene.responses[big]?.ended == true { break }
        }
        #expect(scene.responses[big]?.body.count == 4 << 20, "the stream the client reads stalled: \(scene.responses[big]?.body.count ?? 0) bytes")
        #expect(scene.responses[big]?.ended == true)
        // Streams nobody reads still stop at the connection's bound.
        let delivered = ([big] + small).reduce(0) { $0 + (scene.responses[$1]?.body.count ?? 0) }
        #expect(total - delivered <= (512 << 10) + 6 * ((64 << 10) + piece.count), "\((total - delivered) >> 10) KiB held")
    }

    @Test("A stalled request body on a lane: RST_STREAM CANCEL after --client-timeout, and its lane closes")
    func stalledBodyIsReset() throws {
        let scene = try PoolScene(maxLanes: 2)
        let id = try scene.client.submitRequest(
            [H2Header(":method", "POST"), H2Header(":scheme", "https"), H2Header(":authority", "good.test"),
             H2Header(":path", "/upload")], body: .streaming)
        try scene.client.sendData(streamID: id, bytes("part"), endStream: false)
        try scene.exchange()
        #expect(scene.relay.nextStreamDeadline == 30)
        scene.clock.now = 20
        try scene.client.sendData(streamID: id, bytes("more"), endStream: false)
        try scene.exchange()
        #expect(scene.relay.nextStreamDeadline == 50, "inactivity: counted from the last DATA")
        scene.clock.now = 50
        scene.take(scene.relay.streamDeadlinesPassed(timeoutAnswer: Self.timeoutAnswer))
        try scene.exchange()
        #expect(scene.resets[id] == .cancel)
        #expect(scene.closed == [.primary])
        #expect(scene.relay.nextStreamDeadline == nil)
    }

    @Test("While the client is held unread for a full lane, a stalled body is not reset; on release its full limit again")
    func heldClientSuspendsBodyDeadline() throws {
        let scene = try PoolScene(maxLanes: 2)
        let id = try scene.client.submitRequest(
            [H2Header(":method", "POST"), H2Header(":scheme", "https"), H2Header(":authority", "good.test"),
             H2Header(":path", "/upload")], body: .streaming)
        try scene.client.sendData(streamID: id, bytes("part"), endStream: false)
        try scene.exchange()
        #expect(scene.relay.nextStreamDeadline == 30)
        scene.relay.clientReadingHeld(true, at: 10)
        #expect(scene.relay.nextStreamDeadline == nil, "the body waits for the proxy, not the client")
        scene.clock.now = 45
        scene.take(scene.relay.streamDeadlinesPassed(timeoutAnswer: Self.timeoutAnswer))
        try scene.exchange()
        #expect(scene.resets[id] == nil)
        #expect(scene.closed.isEmpty)
        scene.relay.clientReadingHeld(false, at: 45)
        #expect(scene.relay.nextStreamDeadline == 75, "the body's clock restarts at the release")
        scene.clock.now = 74
        scene.take(scene.relay.streamDeadlinesPassed(timeoutAnswer: Self.timeoutAnswer))
        #expect(scene.resets[id] == nil)
        scene.clock.now = 75
        scene.take(scene.relay.streamDeadlinesPassed(timeoutAnswer: Self.timeoutAnswer))
        try scene.exchange()
        #expect(scene.resets[id] == .cancel)
        #expect(scene.closed == [.primary])
    }

    @Test("A header block left unfinished while the client is held: not ended then; on release its full limit again")
    func heldClientSuspendsHeaderBlockDeadline() throws {
        let scene = try PoolScene(maxLanes: 2)
        try scene.exchange()
        // HEADERS without END_HEADERS: :method GET, :scheme https, :path /, :authority good.test; no CONTINUATION.
        let block: [UInt8] = [0x82, 0x87, 0x84, 0x41, 0x09] + bytes("good.test")
        scene.take(scene.relay.clientBytes(H2ToH1ZeroWindowUpdateTests.frame(type: 1, flags: 0x1, stream: 1, payload: block)))
        #expect(scene.relay.nextStreamDeadline == 30)
        scene.relay.clientReadingHeld(true, at: 10)
        #expect(scene.relay.nextStreamDeadline == nil)
        scene.clock.now = 45
        #expect(!scene.relay.streamDeadlinesPassed(timeoutAnswer: Self.timeoutAnswer).closeClient)
        scene.relay.clientReadingHeld(false, at: 45)
        #expect(scene.relay.nextStreamDeadline == 75, "the block's clock restarts at the release")
        scene.clock.now = 75
        #expect(scene.relay.streamDeadlinesPassed(timeoutAnswer: Self.timeoutAnswer).closeClient)
    }

    @Test("A stream waiting for a lane keeps no body deadline (its window is held); the one in flight does")
    func waitingStreamHasNoBodyDeadline() throws {
        let scene = try PoolScene(maxLanes: 1)
        _ = try scene.get("/slow")
        let waiting = try scene.client.submitRequest(
            [H2Header(":method", "POST"), H2Header(":scheme", "https"), H2Header(":authority", "good.test"),
             H2Header(":path", "/upload")], body: .streaming)
        try scene.client.sendData(streamID: waiting, bytes("part"), endStream: false)
        try scene.exchange()
        // The GET's answer is due at 60 s; the waiting POST has no deadline until it gets the lane.
        #expect(scene.relay.nextStreamDeadline == 60)
    }

    @Test("Two responses in one write to one request: the lane closes with a notice; the extra is nobody's answer")
    func extraResponseClosesTheLane() throws {
        let scene = try PoolScene(maxLanes: 2)
        let first = try scene.get("/double")
        let second = try scene.get("/next")
        try scene.exchange()
        // The second stream waits for lane 1, still connecting, while the first connection answers twice.
        scene.take(scene.relay.upstreamBytes(bytes(
            "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nfirstHTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nextra")))
        #expect(scene.responses[first]?.body == bytes("first"))
        #expect(scene.responses[first]?.ended == true)
        #expect(scene.unsolicited == [.primary])
        #expect(scene.closed == [.primary])
        #expect(scene.responses[second] == nil, "the extra response is not the next stream's")
        scene.take(scene.relay.laneConnected(UpstreamLane(1)))
        scene.take(scene.relay.laneBytes(UpstreamLane(1), bytes("HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nnext")))
        #expect(scene.responses[second]?.body == bytes("next"))
    }

    @Test("An upstream that sends no response head within --response-timeout: 504 on that stream, its lane closed")
    func silentUpstreamIs504() throws {
        let scene = try PoolScene(maxLanes: 2)
        let id = try scene.get("/silent")
        try scene.exchange()
        scene.clock.now = 59
        scene.take(scene.relay.streamDeadlinesPassed(timeoutAnswer: Self.timeoutAnswer))
        #expect(scene.responses[id] == nil, "not yet due")
        scene.clock.now = 60
        scene.take(scene.relay.streamDeadlinesPassed(timeoutAnswer: Self.timeoutAnswer))
        #expect(scene.responses[id]?.status == "504")
        #expect(scene.responses[id]?.ended == true)
        #expect(scene.closed == [.primary])
    }
}

