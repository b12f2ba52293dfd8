import ATSPolicy
import HTTP2Core
import TLSCore
import TestSupport
import Testing

@testable import ProxyCore

/// The fixed parts of an intercepted h2 connection: an environment that trusts the origin's CA and offers the origin
/// h2 and http/1.1 (`--upstream-alpn ios`), an h2 client, and an h2 origin and an HTTP/1.1 one.
private struct H2Scene {
    let env: ProxyEnvironment
    let client: TLSContext
    let h1Client: TLSContext
    let h2Origin: TLSContext
    let h1Origin: TLSContext

    init() throws {
        let authority = try CertificateAuthority.create(commonName: "InterceptedH2RobustnessTests CA")
        let minter = LeafMinter(authority: authority)
        env = ProxyEnvironment(
            policy: ATSPolicy(atsDictionary: .dictionary(PlistDictionary())), mode: .enforce, blockStyle: .tls,
            mappings: [], passthrough: [], credentials: nil, minter: minter,
            factsCollector: HandshakeFactsCollector(
                trust: try TrustEvaluator(useSystemRoots: false, userRoots: [authority.certificate])),
            diagnosticsLevel: 0, jsonEvents: false, upstreamALPN: .ios)
        client = try TLSContext(.client(alpn: ["h2"]))
        h1Client = try TLSContext(.client(alpn: ["http/1.1"]))
        h2Origin = try TLSContext(.server(identity: try minter.identity(for: "good.test"), alpn: ["h2"]))
        h1Origin = try TLSContext(.server(identity: try minter.identity(for: "good.test"), alpn: ["http/1.1"]))
    }
}

/// A frame header and payload (RFC 9113 §4.1).
private func h2Frame(_ type: UInt8, flags: UInt8 = 0, stream: UInt32, _ payload: [UInt8]) -> [UInt8] {
    let n = payload.count
    return [UInt8(n >> 16 & 0xFF), UInt8(n >> 8 & 0xFF), UInt8(n & 0xFF), type, flags]
        + [UInt8(stream >> 24), UInt8(stream >> 16 & 0xFF), UInt8(stream >> 8 & 0xFF), UInt8(stream & 0xFF)] + payload
}

/// An HPACK header block of literal fields without indexing (short names and values only).
private func literalBlock(_ fields: [(String, String)]) -> [UInt8] {
    fields.flatMap { field -> [UInt8] in
        let (name, value) = (Array(field.0.utf8), Array(field.1.utf8))
        return [0x00, UInt8(name.count)] + name + [UInt8(value.count)] + value
    }
}

/// Frames a hostile peer sends on an h2 connection: bad pseudo-headers, frames on idle or even streams, window
/// overflows, stray CONTINUATION, malformed control frames, a GOAWAY.
private let hostileFrames: [[UInt8]] = [
    h2Frame(1, flags: 5, stream: 7, literalBlock([(":method", "GET"), (":path", "/x")])),
    h2Frame(1, flags: 5, stream: 9, literalBlock([(":status", "200"), (":method", "GET"), ("Upper", "a")])),
    h2Frame(1, flags: 5, stream: 11, literalBlock([
        (":method", "GET"), (":scheme", "https"), (":authority", "good.test"), (":path", "/c"),
        ("connection", "close"), ("content-length", "99999999999999999999"),
    ])),
    h2Frame(1, flags: 4, stream: 1, literalBlock([(":status", "abc"), ("x", "y")])),
    h2Frame(1, flags: 1, stream: 2, literalBlock([(":status", "200")])),
    h2Frame(0, flags: 1, stream: 3, Array(repeating: 0x61, count: 100)),
    h2Frame(0, stream: 0, [1, 2, 3]),
    h2Frame(8, stream: 0, [0x7F, 0xFF, 0xFF, 0xFF]),
    h2Frame(8, stream: 1, [0x7F, 0xFF, 0xFF, 0xFF]),
    h2Frame(8, stream: 1, [0, 0, 0, 0]),
    h2Frame(9, flags: 4, stream: 1, literalBlock([("x", "y")])),
    h2Frame(3, stream: 0, [0, 0, 0, 8]),
    h2Frame(3, stream: 1, [0, 0, 0, 8]),
    h2Frame(4, stream: 0, [0, 4, 0x80, 0, 0, 0]),
    h2Frame(4, stream: 0, [0, 5, 0, 0, 0, 1]),
    h2Frame(4, flags: 1, stream: 0, [0, 0, 0, 0, 0, 0]),
    h2Frame(6, stream: 0, [1, 2, 3]),
    h2Frame(7, stream: 0, [0, 0, 0, 1, 0, 0, 0, 1]),
    h2Frame(5, flags: 4, stream: 1, [0, 0, 0, 2] + literalBlock([(":method", "GET")])),
    h2Frame(0xFA, flags: 0xFF, stream: 5, [1, 2, 3]),
]

/// `bytes` (whole frames after `skip` bytes of preface) with one to three frame-level mutations: a hostile frame
/// inserted, a frame dropped, duplicated or given another stream, or one byte of a payload flipped.
private func mutateFrames(_ bytes: [UInt8], skip: Int, using rng: inout SplitMix64) -> [UInt8] {
    var frames: [[UInt8]] = []
    var i = skip
    while i + 9 <= bytes.count {
        let end = i + 9 + (Int(bytes[i]) << 16 | Int(bytes[i + 1]) << 8 | Int(bytes[i + 2]))
        guard end <= bytes.count else { break }
        frames.append(Array(bytes[i..<end]))
        i = end
    }
    let tail = Array(bytes[i...])
    for _ in 0...rng.below(3) {
        let at = rng.below(frames.count)
        switch rng.below(5) {
        case 0, 1: frames.insert(rng.pick(hostileFrames), at: rng.below(frames.count + 1))
        case 2 where !frames.isEmpty: frames.remove(at: at)
        case 3 where !frames.isEmpty: frames.insert(frames[at], at: rng.below(frames.count + 1))
        case 4 where !frames.isEmpty:
            if frames[at].count > 9, rng.chance(50) {
                frames[at][9 + rng.below(frames[at].count - 9)] ^= 1 << UInt8(rng.below(8))
            } else {
                frames[at][8] = UInt8(rng.pick([0, 1, 2, 3, 5, 0xFF]))
            }
        default: break
        }
    }
    return Array(bytes[..<skip]) + frames.joined() + tail
}

/// One run: an h2 client, the session, and an origin (an nghttp2 server, or an HTTP/1.1 server answering each
/// request with a mutated response), with byte streams cut into random reads. Extra upstream connections (lanes)
/// fail to connect, so their streams must be failed on their own.
private final class H2Run {
    var rng: SplitMix64
    let session: ProxySession
    let client: TLSEngine
    let clientH2: H2Session
    let origin: TLSEngine
    let originH2: H2Session?
    var clientCipher: [UInt8] = []
    var originCipher: [UInt8] = []
    var upstreamOpen = true
    var clientClosed = false
    var clientEOF = false
    /// What the client decrypted, in order.
    var plaintext: [UInt8] = []
    var tlsFailure: TLSError?
    var clientRejection: H2Error?
    var mutatesClient: Bool
    var mutatesOrigin: Bool
    var commandsAfterClose: [ProxyCommand] = []
    /// Lanes the session asked for, whose connects fail on the next turn.
    var refusedLanes: [UpstreamLane] = []

    init(seed: UInt64, scene: H2Scene) throws {
        var rng = SplitMix64(seed: seed)
        mutatesClient = rng.chance(50)
        mutatesOrigin = rng.chance(50)
        let h2 = rng.chance(60)
        session = ProxySession(id: 1, environment: scene.env, now: { SessionHarness.fixedNow })
        client = try TLSEngine(context: scene.client, serverName: "good.test")
        origin = try TLSEngine(context: h2 ? scene.h2Origin : scene.h1Origin)
        clientH2 = try H2Session(role: .client)
        originH2 = h2 ? try H2Session(role: .server) : nil
        self.rng = rng
    }

    /// CONNECT and both handshakes; false if they did not complete.
    func connect() -> Bool {
        _ = session.handle(.clientBytes(bytes("CONNECT good.test:443 HTTP/1.1\r\nHost: good.test:443\r\n\r\n")))
        _ = client.handshake()
        apply(session.handle(.clientBytes(client.takeOutput())))
        apply(session.handle(.upstreamConnected))
        for _ in 0..<10 {
            _ = origin.handshake()
            _ = client.handshake()
            let (toSession, fromClient) = (origin.takeOutput(), client.takeOutput())
            if toSession.isEmpty && fromClient.isEmpty { break }
            if !toSession.isEmpty { apply(session.handle(.upstreamBytes(toSession))) }
            if !fromClient.isEmpty { apply(session.handle(.clientBytes(fromClient))) }
        }
        return client.isHandshakeComplete && origin.isHandshakeComplete && client.negotiated?.alpn == "h2"
    }

    /// Carries out the session's commands on the in-memory peers.
    func apply(_ commands: [ProxyCommand]) {
        for command in commands {
            if clientClosed, command != .closeUpstream {
                if case .log = command {} else { commandsAfterClose.append(command) }
            }
            switch command {
            case .sendToClient(let b): client.feed(b)
            case .sendToUpstream(let b): origin.feed(b)
            case .closeUpstream: upstreamOpen = false
            case .closeClient, .resetClient: clientClosed = true
            case .connectLane(let lane, _, _): refusedLanes.append(lane)
            default: break
            }
        }
    }

    /// The client writes `h2` (sometimes mutated when this run mutates the client).
    func clientWrites(_ h2: [UInt8], preface: Bool = false) throws {
        guard !h2.isEmpty, !clientClosed, !clientEOF else { return }
        let mutated = mutatesClient && rng.chance(preface ? 60 : 10)
        let sent = mutated ? mutateFrames(h2, skip: preface ? 24 : 0, using: &rng) : h2
        try client.write(sent)
        clientCipher += client.takeOutput()
    }

    /// The client reads what the session sent; a clean client answers as nghttp2 does.
    func clientReads() throws {
        var got: [UInt8] = []
        reading: while true {
            switch client.read() {
            case .data(let piece): got += piece
            case .needsMoreInput, .closed: break reading
            case .failed(let error):
                // After its own EOF the client may be told of the truncation; before, nothing may fail.
                if !clientEOF, tlsFailure == nil { tlsFailure = error }
                break reading
            }
        }
        guard !got.isEmpty else { return }
        plaintext += got
        guard clientRejection == nil else { return }
        do {
            for case .data(let id, let data, _) in try clientH2.receive(got) {
                clientH2.consume(streamID: id, count: data.count)
            }
        } catch {
            clientRejection = error
            return
        }
        try clientWrites(clientH2.pendingOutput())
    }

    /// The origin reads what the session sent and answers every request.
    func originReads() throws {
        var got: [UInt8] = []
        while case .data(let piece) = origin.read() { got += piece }
        guard !got.isEmpty, upstreamOpen else { return }
        var answer: [UInt8] = []
        if let originH2 {
            do {
                for case .headers(let id, _, .request, _) in try originH2.receive(got) {
                    try originH2.submitResponse(streamID: id, headers: [H2Header(":status", "200")], body: .streaming)
                    let body = [UInt8](repeating: 0x62, count: rng.below(40_000))
                    try originH2.sendData(streamID: id, body, endStream: true)
                }
            } catch {
                // The origin refuses what it got (a GOAWAY is queued): the session sees that below.
            }
            answer = originH2.pendingOutput()
            if mutatesOrigin, rng.chance(30) { answer = mutateFrames(answer, skip: 0, using: &rng) }
        } else {
            answer = rng.pick(http1ResponseSeeds)
            if mutatesOrigin { answer = ByteMutator.mutate(answer, count: 1 + rng.below(3), partners: [], using: &rng) }
        }
        if !answer.isEmpty {
            try origin.write(answer)
            originCipher += origin.takeOutput()
        }
    }

    /// Moves bytes in random reads until nothing moves; false if it did not settle.
    func pump() throws -> Bool {
        for _ in 0..<5_000 {
            var sources: [Int] = []
            if !clientCipher.isEmpty, !clientClosed, !clientEOF { sources.append(0) }
            if !originCipher.isEmpty, upstreamOpen { sources.append(1) }
            if !refusedLanes.isEmpty {
                apply(session.handle(.laneConnectFailed(refusedLanes.removeFirst(), error: "refused")))
                continue
            }
            if sources.isEmpty { return true }
            let fromClient = rng.pick(sources) == 0
            let n = 1 + rng.below(rng.pick([8, 300, 20_000]))
            if fromClient {
                let piece = Array(clientCipher.prefix(n))
                clientCipher.removeFirst(piece.count)
                apply(piece.withUnsafeBytes { session.handleReceived($0, from: .client) })
            } else {
                let piece = Array(originCipher.prefix(n))
                originCipher.removeFirst(piece.count)
                apply(session.handle(.upstreamBytes(piece)))
            }
            try clientReads()
            try originReads()
        }
        return false
    }
}

/// What a server may send an h2 client, checked frame by frame: whole frames, SETTINGS first, no server push, and
/// streams the client opened (odd) or the connection (0). Returns the first problem, if any.
private func serverFrameProblem(_ bytes: [UInt8]) -> String? {
    var i = 0
    var index = 0
    while i < bytes.count {
        guard i + 9 <= bytes.count else { return "a cut frame header at byte \(i)" }
        let length = Int(bytes[i]) << 16 | Int(bytes[i + 1]) << 8 | Int(bytes[i + 2])
        let type = bytes[i + 3]
        let stream = (UInt32(bytes[i + 5]) << 24 | UInt32(bytes[i + 6]) << 16 | UInt32(bytes[i + 7]) << 8
            | UInt32(bytes[i + 8])) & 0x7FFF_FFFF
        guard length <= 16_384 else { return "frame \(index) of \(length) bytes" }
        guard index > 0 || type == 4 && stream == 0 else { return "frame 0 is type \(type) on stream \(stream)" }
        guard type <= 9, type != 5 else { return "frame \(index) of type \(type)" }
        guard stream == 0 || stream % 2 == 1 else { return "frame \(index) (type \(type)) on stream \(stream)" }
        i += 9 + length
        index += 1
    }
    return i == bytes.count ? nil : "a cut frame payload"
}

@Suite("ProxySession: mutated HTTP/2 inside an intercepted TLS connection")
struct InterceptedH2RobustnessTests {
    @Test("Mutated h2 frames from the client or the origin end in a stream reset, a GOAWAY or a close, never a trap")
    func mutatedFrames() throws {
        let scene = try H2Scene()
        var answered = 0
        var goAways = 0
        for seed: UInt64 in 0..<150 {
            let run = try H2Run(seed: seed, scene: scene)
            guard run.connect() else {
                Issue.record("seed \(seed): the handshakes did not complete")
                return
            }
            for index in 0...run.rng.below(3) {
                let hasBody = run.rng.chance(30)
                let id = try run.clientH2.submitRequest(
                    [H2Header(":method", hasBody ? "POST" : "GET"), H2Header(":scheme", "https"),
                     H2Header(":authority", "good.test"), H2Header(":path", "/r\(index)")],
                    body: hasBody ? .streaming : .none)
                if hasBody {
                    try run.clientH2.sendData(streamID: id, [UInt8](repeating: 0x61, count: 300), endStream: true)
                }
            }
            try run.clientWrites(run.clientH2.pendingOutput(), preface: true)
            let settled = try run.pump()
            run.clientEOF = true
            run.apply(run.session.handle(.clientEOF))
            try run.clientReads()
            let closedAtEOF = run.clientClosed
            run.apply(run.session.handle(.clientClosed(error: nil)))
            let late = run.session.handle(.upstreamBytes([0, 0, 0, 4, 0, 0, 0, 0, 0]))

            #expect(settled, "seed \(seed): the byte streams did not settle")
            let failure = run.tlsFailure.map { "\($0)" } ?? ""
            #expect(run.tlsFailure == nil, "seed \(seed): the client's TLS failed: \(failure)")
            let problem = serverFrameProblem(run.plaintext)
            #expect(problem == nil, "seed \(seed): \(problem ?? "")")
            if !run.mutatesClient {
                #expect(run.clientRejection == nil, "seed \(seed): a clean client rejected the session's frames")
            }
            #expect(closedAtEOF, "seed \(seed): the client's EOF did not close its connection")
            #expect(run.commandsAfterClose.isEmpty && late.isEmpty, "seed \(seed): commands after the close")
            if hasFrame(run.plaintext, type: 1) { answered += 1 }
            if hasFrame(run.plaintext, type: 7) { goAways += 1 }
        }
        // The mutations leave many exchanges whole and make the session end many connections with GOAWAY.
        #expect(answered > 30 && goAways > 30, "\(answered) answered, \(goAways) with GOAWAY")
    }
}

/// Whether `bytes` (whole h2 frames) hold a frame of `type`.
private func hasFrame(_ bytes: [UInt8], type: UInt8) -> Bool {
    var i = 0
    while i + 9 <= bytes.count {
        if bytes[i + 3] == type { return true }
        i += 9 + (Int(bytes[i]) << 16 | Int(bytes[i + 1]) << 8 | Int(bytes[i + 2]))
    }
    return false
}

@Suite("ProxySession: an HTTP/1.1 client translated to an h2 origin that has closed")
struct TranslatedClosedOriginTests {
    @Test("A broken upload after the h2 origin closed ends the client's connection; nothing is sent after the close")
    func nothingAfterClose() throws {
        // The reproducer the fuzzer found (seed 3000146): the relay answers the bad chunk size and asks to close,
        // but writing its RST_STREAM to the closed origin fails first and closes the client; the relay's close then
        // sent a close_notify after `closeClient`.
        let scene = try H2Scene()
        let session = ProxySession(id: 1, environment: scene.env, now: { SessionHarness.fixedNow })
        let client = try TLSEngine(context: scene.h1Client, serverName: "good.test")
        let origin = try TLSEngine(context: scene.h2Origin)
        _ = session.handle(.clientBytes(bytes("CONNECT good.test:443 HTTP/1.1\r\nHost: good.test:443\r\n\r\n")))
        _ = client.handshake()
        var out = session.handle(.clientBytes(client.takeOutput())) + session.handle(.upstreamConnected)
        for _ in 0..<10 {
            origin.feed(out.toUpstream)
            client.feed(out.toClient)
            _ = origin.handshake()
            _ = client.handshake()
            let (fromOrigin, fromClient) = (origin.takeOutput(), client.takeOutput())
            if fromOrigin.isEmpty && fromClient.isEmpty { break }
            out = session.handle(.upstreamBytes(fromOrigin)) + session.handle(.clientBytes(fromClient))
        }
        #expect(client.negotiated?.alpn == "http/1.1" && origin.negotiated?.alpn == "h2")
        // A chunked upload that the origin (an nghttp2 server) answers 204 as soon as the head arrives.
        let server = try H2Session(role: .server)
        try client.write(bytes("POST /c HTTP/1.1\r\nHost: good.test\r\nTransfer-Encoding: chunked\r\n\r\n"))
        out = session.handle(.clientBytes(client.takeOutput()))
        for _ in 0..<5 {
            origin.feed(out.toUpstream)
            client.feed(out.toClient)
            var plaintext: [UInt8] = []
            while case .data(let piece) = origin.read() { plaintext += piece }
            for case .headers(let id, _, .request, _) in try server.receive(plaintext) {
                try server.submitResponse(streamID: id, headers: [H2Header(":status", "204")], body: .none)
            }
            let answer = server.pendingOutput()
            if answer.isEmpty { break }
            try origin.write(answer)
            out = session.handle(.upstreamBytes(origin.takeOutput()))
        }
        var response: [UInt8] = []
        while case .data(let piece) = client.read() { response += piece }
        #expect(String(decoding: response, as: UTF8.self).hasPrefix("HTTP/1.1 204 "))
        // The origin's connection ends (no close_notify) while the upload goes on: the client is kept for it.
        #expect(!session.handle(.upstreamEOF).closesClient)

        // The body breaks (a chunk longer than its size): the relay answers the client and asks to close, but its
        // RST_STREAM to the closed origin fails to be written first, which closes the client.
        try client.write(bytes("000000000000000000001;e=1\r\nhello\r\n0\r\n\r\n"))
        let commands = session.handle(.clientBytes(client.takeOutput()))
        guard let close = commands.firstIndex(of: .closeClient) else {
            Issue.record("the client's connection stays open: \(commands)")
            return
        }
        let after = commands[(close + 1)...].filter { if case .log = $0 { false } else { $0 != .closeUpstream } }
        #expect(after.isEmpty, "\(after) after closeClient")
        #expect(session.handle(.clientEOF).isEmpty)
    }
}
