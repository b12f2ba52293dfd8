import HTTP1Core
import TLSCore
import TestSupport
import Testing

@testable import ProxyCore

/// Valid proxy requests the robustness test mutates: allowed (`media.test`) and blocked (`plain.test`) absolute-form
/// requests with every body framing, 100-continue, Upgrade, HTTP/1.0, and the forms a proxy refuses.
private let plainRequests: [[UInt8]] = [
    "GET http://media.test/a?b=1 HTTP/1.1\r\nHost: media.test\r\nProxy-Connection: keep-alive\r\n\r\n",
    "POST http://media.test/up HTTP/1.1\r\nHost: media.test\r\nContent-Length: 5\r\n\r\nhello",
    "POST http://media.test/c HTTP/1.1\r\nHost: media.test\r\nTransfer-Encoding: chunked\r\n\r\n"
        + "5;e=1\r\nhello\r\n0\r\nT: t\r\n\r\n",
    "PUT http://media.test/e HTTP/1.1\r\nHost: media.test\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\nabc",
    "GET http://media.test/ws HTTP/1.1\r\nHost: media.test\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n",
    "HEAD http://media.test:8080/h HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
    "POST http://plain.test/x HTTP/1.1\r\nHost: plain.test\r\nContent-Length: 4\r\n\r\nbody",
    "GET /origin HTTP/1.1\r\nHost: media.test\r\n\r\n",
].map { Array($0.utf8) }

/// Upstream responses the robustness test mutates.
private let upstreamResponses = http1ResponseSeeds

/// CONNECT heads the robustness test mutates: an intercepted host, a `--passthrough` one, an IPv6 literal.
private let connectHeads: [[UInt8]] = [
    "CONNECT good.test:443 HTTP/1.1\r\nHost: good.test:443\r\n\r\n",
    "CONNECT pass.test:443 HTTP/1.1\r\nHost: pass.test:443\r\n\r\n",
    "CONNECT [::1]:8443 HTTP/1.0\r\n\r\n",
].map { Array($0.utf8) }

/// What one session is fed: the client's and the upstream's bytes, each cut into reads.
private struct MutatedSessionStreams {
    var client: [[UInt8]]
    var upstream: [[UInt8]]

    init(clientHello: [UInt8], using rng: inout SplitMix64) {
        var client: [UInt8] = []
        var upstream: [UInt8] = []
        if rng.chance(70) {
            for _ in 0...rng.below(2) { client += rng.pick(plainRequests) }
            client = ByteMutator.mutate(client, count: rng.below(5), partners: plainRequests, using: &rng)
            for _ in 0...rng.below(2) { upstream += rng.pick(upstreamResponses) }
            upstream = ByteMutator.mutate(upstream, count: rng.below(5), partners: upstreamResponses, using: &rng)
        } else {
            client = ByteMutator.mutate(
                rng.pick(connectHeads), count: rng.below(3), partners: connectHeads, using: &rng)
            switch rng.below(4) {
            case 0: client += clientHello
            case 1:
                client += ByteMutator.mutate(clientHello, count: 1 + rng.below(3), partners: [clientHello], using: &rng)
            case 2: client += (0..<rng.below(100)).map { _ in rng.byte() }
            default: break
            }
            upstream = (0..<rng.below(100)).map { _ in rng.byte() }
        }
        self.client = ByteMutator.pieces(of: client, using: &rng)
        self.upstream = ByteMutator.pieces(of: upstream, using: &rng)
    }
}

/// Drives `session` through `streams` in a random order an event loop could produce: client reads; a connect the
/// session asks for succeeds or fails; upstream reads only while that upstream is open; EOFs and timers in between.
/// Nothing more is read from a client the session closed or handed to a tunnel. Returns every command, in order.
private func drive(_ session: ProxySession, _ streams: MutatedSessionStreams, using rng: inout SplitMix64)
    -> [ProxyCommand]
{
    var client = streams.client[...]
    var upstream = streams.upstream[...]
    var upstreamState: (connecting: Bool, open: Bool) = (false, false)
    var commands: [ProxyCommand] = []
    var clientGone = false
    func record(_ out: [ProxyCommand]) {
        for command in out {
            switch command {
            case .connectUpstream: upstreamState = (true, false)
            case .closeUpstream: upstreamState = (false, false)
            case .closeClient, .resetClient, .startTunnel: clientGone = true
            default: break
            }
        }
        commands += out
    }
    func handle(_ event: ProxyEvent) { record(session.handle(event)) }
    /// Bytes the way the event loop hands them over (its read buffer), or as an event.
    func received(_ bytes: [UInt8], from peer: ProxyPeer) {
        if rng.chance(50) {
            record(bytes.withUnsafeBytes { session.handleReceived($0, from: peer) })
        } else {
            handle(peer == .client ? .clientBytes(bytes) : .upstreamBytes(bytes))
        }
    }
    while !clientGone {
        var choices: [Int] = []
        if !client.isEmpty { choices += [0, 0] }
        if upstreamState.open && !upstream.isEmpty { choices += [1, 1] }
        if upstreamState.connecting { choices += [2, 2, 3] }
        if choices.isEmpty { break }
        if rng.chance(5) { choices.append(4) }
        switch rng.pick(choices) {
        case 0: received(client.removeFirst(), from: .client)
        case 1: received(upstream.removeFirst(), from: .upstream)
        case 2:
            upstreamState = (false, true)
            handle(.upstreamConnected)
        case 3:
            upstreamState = (false, false)
            handle(.upstreamConnectFailed(error: "refused"))
        default:
            handle(rng.pick([.timerFired(.requestHead), .timerFired(.upstreamHandshake), .clientEOF]))
        }
    }
    if !clientGone, upstreamState.open { handle(.upstreamEOF) }
    if !clientGone { handle(.clientEOF) }
    if !commands.contains(.startTunnel) { handle(.clientClosed(error: nil)) }
    return commands
}

@Suite("ProxySession: mutated bytes from either peer end at most their own connection")
struct ProxySessionRobustnessTests {
    @Test("Mutated plain-HTTP and CONNECT streams are answered in HTTP/1, and a closed session sends nothing more")
    func mutatedStreams() throws {
        let environments = [
            try SessionHarness.environment(
                exceptionAllowingHTTP: "media.test", passthrough: ["pass.test"], diagnosticsLevel: 3, jsonEvents: true),
            try SessionHarness.environment(mode: .annotate),
        ]
        let engine = try TLSEngine(context: try TLSContext(.client(alpn: ["h2", "http/1.1"])), serverName: "good.test")
        _ = engine.handshake()
        let clientHello = engine.takeOutput()
        var relayed = 0
        var refused = 0
        for seed: UInt64 in 0..<1_500 {
            var rng = SplitMix64(seed: seed)
            let session = SessionHarness.session(rng.pick(environments))
            let streams = MutatedSessionStreams(clientHello: clientHello, using: &rng)
            let commands = drive(session, streams, using: &rng)
            let answer = commands.toClient
            // Every answer before a tunnel is HTTP/1: a 200 for CONNECT, a relayed response, or the proxy's own error.
            guard answer.isEmpty || answer.starts(with: Array("HTTP/1.".utf8)) else {
                Issue.record("seed \(seed): the client got \(String(decoding: answer.prefix(40), as: UTF8.self))")
                return
            }
            if let end = commands.firstIndex(where: { $0 == .closeClient || $0 == .startTunnel }) {
                let after = commands[(end + 1)...].filter {
                    if case .log = $0 { false } else { $0 != .closeUpstream }
                }
                guard after.isEmpty else {
                    Issue.record("seed \(seed): \(after) after \(commands[end])")
                    return
                }
            }
            guard session.isDone, session.handle(.upstreamBytes(Array("HTTP/1.1 200 OK\r\n\r\n".utf8))).isEmpty,
                session.handle(.timerFired(.requestHead)).isEmpty
            else {
                Issue.record("seed \(seed): the session is not over after the client closed")
                return
            }
            if !commands.toUpstream.isEmpty && !answer.isEmpty { relayed += 1 }
            if answer.starts(with: Array("HTTP/1.1 4".utf8)) { refused += 1 }
        }
        // The mutations leave many streams good enough to reach the upstream, and break many others into a 4xx.
        #expect(relayed > 100 && refused > 100, "\(relayed) relayed, \(refused) refused")
    }
}
