import ATSPolicy
import Testing
import TLSCore

@testable import ProxyCore

/// The upstream leg's attempts on their own, without sockets: what the next attempt is after a failed handshake, and
/// when an ALPN refusal or a close before any request widens the offer.
@Suite("UpstreamLeg: the probe after a failed handshake and the offer widened for h2-only origins")
struct UpstreamLegTests {
    private static func context(upstreamALPN: UpstreamALPN = .mirror) throws -> SessionContext {
        SessionContext(
            id: 1, environment: try SessionHarness.environment(upstreamALPN: upstreamALPN), now: { 1_000 })
    }

    @Test("Enforce: an iOS-like handshake that fails is probed once with everything; the probe's failure ends it")
    func probeInEnforce() {
        let leg = UpstreamLeg(host: "old.test", port: 443, attempt: .iOSLike)
        let first = TLSError.peerAlert(.protocolVersion)
        #expect(leg.nextProbe(after: first, mode: .enforce)?.contains("every TLS version and cipher suite") == true)
        #expect(leg.attempt == .permissive)
        #expect(leg.iOSLikeFailure == first, "the verdict explains the app's failure, not the probe's")
        #expect(leg.nextProbe(after: .peerAlert(.handshakeFailure), mode: .enforce) == nil)
        #expect(leg.iOSLikeFailure == first)
    }

    @Test("Mirror: iOS with every exception comes before the permissive probe, keeping the first failure")
    func probeInMirror() {
        let leg = UpstreamLeg(host: "old.test", port: 443, attempt: .iOSLike)
        let first = TLSError.peerAlert(.protocolVersion)
        #expect(leg.nextProbe(after: first, mode: .mirror)?.contains("every exception") == true)
        #expect(leg.attempt == .iOSWidest)
        #expect(leg.nextProbe(after: .peerAlert(.handshakeFailure), mode: .mirror) != nil)
        #expect(leg.attempt == .permissive)
        #expect(leg.iOSLikeFailure == first)
        #expect(leg.nextProbe(after: .closedByPeer, mode: .mirror) == nil)
    }

    @Test("A no_application_protocol refusal widens the mirrored offer once, and only with --upstream-alpn mirror")
    func alpnRefusal() throws {
        let ctx = try Self.context()
        let leg = UpstreamLeg(host: "h2only.test", port: 443, attempt: .iOSLike)
        #expect(leg.widenAfterALPNRefusal(ctx, .peerAlert(.handshakeFailure), clientOffer: ["http/1.1"]) == nil)
        #expect(leg.widenAfterALPNRefusal(ctx, .peerAlert(.noApplicationProtocol), clientOffer: ["http/1.1"]) != nil)
        #expect(leg.widenedALPN)
        #expect(leg.widenAfterALPNRefusal(ctx, .peerAlert(.noApplicationProtocol), clientOffer: ["http/1.1"]) == nil,
            "a second refusal after widening is the verdict's, not another retry")
        let ios = UpstreamLeg(host: "h2only.test", port: 443, attempt: .iOSLike)
        #expect(ios.widenAfterALPNRefusal(
            try Self.context(upstreamALPN: .ios), .peerAlert(.noApplicationProtocol), clientOffer: ["http/1.1"]) == nil)
    }

    @Test("A close before any request with no protocol chosen from an offer without h2 widens it, and the origin is remembered")
    func closeBeforeRequest() throws {
        let ctx = try Self.context()
        let leg = UpstreamLeg(host: "h2only.test", port: 443, attempt: .iOSLike)
        leg.offer = ["http/1.1"]
        #expect(leg.widenAfterCloseBeforeRequest(ctx, clientOffer: ["http/1.1"]) != nil)
        #expect(leg.widenedALPN)
        #expect(ctx.env.h2OnlyOrigins.contains(host: "h2only.test", port: 443))
        let chose = UpstreamLeg(host: "h1.test", port: 443, attempt: .iOSLike)
        chose.offer = ["http/1.1"]
        chose.alpn = "http/1.1"
        #expect(chose.widenAfterCloseBeforeRequest(ctx, clientOffer: ["http/1.1"]) == nil, "it chose a protocol")
        let offeredH2 = UpstreamLeg(host: "h2.test", port: 443, attempt: .iOSLike)
        offeredH2.offer = ["h2", "http/1.1"]
        #expect(offeredH2.widenAfterCloseBeforeRequest(ctx, clientOffer: ["h2", "http/1.1"]) == nil)
    }
}
