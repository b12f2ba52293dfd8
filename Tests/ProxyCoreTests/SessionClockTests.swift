import ATSPolicy
import Foundation
import ProxyTrace
import TLSCore
import Testing

@testable import ProxyCore

/// A CONNECT to good.test whose client hello the session holds, on a session whose clock says `now`.
private func interceptingSession(_ env: ProxyEnvironment, now: Double, host: String = "good.test") throws
    -> (session: ProxySession, client: TLSEngine)
{
    let session = ProxySession(id: 1, environment: env, now: { now })
    let client = try TLSEngine(context: try TLSContext(.client()), serverName: host)
    _ = session.handle(.clientBytes(bytes("CONNECT \(host):443 HTTP/1.1\r\nHost: \(host):443\r\n\r\n")))
    _ = client.handshake()
    _ = session.handle(.clientBytes(client.takeOutput()))
    return (session, client)
}

/// The violations the session finds in `identity` served by good.test's origin, judged at `now` (session clock).
private func violations(_ env: ProxyEnvironment, origin identity: TLSConfiguration.ServerIdentity, now: Double) throws
    -> [ViolationKind]?
{
    let (session, _) = try interceptingSession(env, now: now)
    let origin = try TLSEngine(context: try TLSContext(.server(identity: identity)))
    var toOrigin = session.handle(.upstreamConnected).toUpstream
    var events: [TraceEvent] = []
    for _ in 0..<10 where !toOrigin.isEmpty {
        origin.feed(toOrigin)
        _ = origin.handshake()
        let commands = session.handle(.upstreamBytes(origin.takeOutput()))
        events += commands.events
        toOrigin = commands.toUpstream
    }
    return events.first { $0.kind == .atsDecision }.map { ($0.violations ?? []).map(\.kind) }
}

@Suite("The session's clock is the clock of certificate validity: trust evaluation and minted leaves")
struct SessionClockTests {
    @Test("A certificate is judged at the session's time: valid now, expired past notAfter, early before notBefore")
    func trustEvaluatedAtSessionTime() throws {
        let env = try SessionHarness.environment(block: .http, jsonEvents: true, trustingOwnCA: true)
        let identity = try env.minter.identity(for: "good.test")
        let leaf = CertificateInspector.facts(identity.chain[0])
        let minted = leaf.notBefore.timeIntervalSince1970 + 3600

        #expect(try violations(env, origin: identity, now: minted) == [])
        let expired = try violations(env, origin: identity, now: leaf.notAfter.timeIntervalSince1970 + 86_400)
        #expect(expired?.contains(.expired) == true, "judged after notAfter: \(String(describing: expired))")
        let early = try violations(env, origin: identity, now: leaf.notBefore.timeIntervalSince1970 - 86_400)
        #expect(early?.contains(.notYetValid) == true, "judged before notBefore: \(String(describing: early))")
    }

    @Test("The leaf the session mints for the client starts an hour before the session's time, not the wall clock's")
    func leafMintedAtSessionTime() throws {
        let env = try SessionHarness.environment(block: .http)
        // Far from the wall clock either way, so a leaf minted with Date() could not pass.
        let now = Date().timeIntervalSince1970 + 100 * 86_400
        let (session, client) = try interceptingSession(env, now: now, host: "far.test")
        // No upstream: the client's handshake completes so that its requests can be answered 502.
        var toClient = session.handle(.upstreamConnectFailed(error: "connection refused")).toClient
        for _ in 0..<10 where !toClient.isEmpty {
            client.feed(toClient)
            _ = client.handshake()
            toClient = session.handle(.clientBytes(client.takeOutput())).toClient
        }
        let served = try #require(client.peerCertificateChain.first)
        #expect(CertificateInspector.facts(served).notBefore.timeIntervalSince1970 == now.rounded(.down) - 3600)
    }
}
