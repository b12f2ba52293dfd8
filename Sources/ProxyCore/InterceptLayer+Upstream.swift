import ATSPolicy
import Foundation
import HTTP1Core
import ProxyTrace
import TLSCore

// Theory of operation: the upstream leg of an interception, up to its TLS handshake and from its end.
//
// - Each connection attempt is traced with its number and why it was made: the first, the permissive probe after an
//   iOS-like handshake failed (InterceptLayer+Verdict), a retry offering h2 after an ALPN refusal or an upstream that
//   closed before any request without choosing a protocol (an h2-only origin: with `--upstream-alpn mirror` it is
//   remembered in H2OnlyOrigins).
// - An upstream that cannot be reached, or accepts the connection and sends no handshake within
//   `--handshake-timeout`, is no ATS verdict: the client is answered 502 with the app's network error.
// - An upstream that ends while relaying ends the client's connection once the relay is idle (the client
//   reconnects); a lane relay only lost one of its connections.

/// The upstream leg of an interception: its TCP connection and TLS client, what it was offered and chose by ALPN,
/// and the attempts made to reach it (the iOS-like handshake, the probes after it failed, the retries).
final class UpstreamLeg {
    /// The upstream attempts, in order: what iOS offers under the app's policy; in `--ats mirror`, what an iOS
    /// client with every exception offers (so the suite learned is the one the server chooses for iOS); then every
    /// version and suite this OpenSSL can negotiate.
    enum Attempt { case iOSLike, iOSWidest, permissive }

    let host: String
    let port: Int
    /// The TLS client (nil before the TCP connection is up, and once the upstream is done with or given up).
    var engine: TLSEngine?
    /// The TCP connection is open: a close is owed to it, even with the TLS client gone.
    var isOpen = false
    /// The upstream ended (or sent what nobody asked for) while relaying.
    var finished = false
    var attempt: Attempt
    /// Upstream TCP connections made for this CONNECT so far: the first, then a probe or a retry (traced as
    /// attempts of their own).
    var connectAttempts = 0
    /// The failure of the iOS-like attempt, kept while the probes run.
    var iOSLikeFailure: TLSError?
    /// What the upstream was last offered by ALPN.
    var offer: [String] = []
    /// What the upstream chose by ALPN; the client is answered with the same when it offered it (ALPN mirroring).
    var alpn: String?
    /// The upstream refused the mirrored offer with no_application_protocol; the retry offers both protocols.
    var widenedALPN = false
    /// The client's first request asked to switch protocols and the upstream had chosen h2: the upstream is
    /// reconnected offering only http/1.1 (`retryUpstreamOverHTTP1`).
    var http1Only = false
    /// Requests sent again on a new connection after an upstream's GOAWAY refused them, since the last exchange that
    /// ended: an upstream that refuses every request gets a 502 after `maxRefusedRetries`, not a reconnect storm.
    var refusedRetries = 0
    static let maxRefusedRetries = 3
    /// The TLS client context and SNI, kept for the extra connections of an HTTP/1.1 upstream pool.
    var context: TLSContext?
    var sni: String?

    init(host: String, port: Int, attempt: Attempt) {
        self.host = host
        self.port = port
        self.attempt = attempt
    }
}

extension InterceptLayer {
    /// Opens an upstream connection (UpstreamLeg.connect). `reason`: why a connection after the first is made (nil for the first).
    func connectUpstream(_ ctx: SessionContext, reason: String?) {
        stage = .connectingUpstream
        upstream.connect(ctx, reason: reason)
    }

    func upstreamConnected(_ ctx: SessionContext) {
        do {
            guard try upstream.connected(ctx, clientOffer: hello.alpnProtocols, requirements: requirements) else { return }
        } catch {
            ctx.notice("\(host):\(port): cannot set up the upstream TLS client: \(error)")
            ctx.closeAll()
            return
        }
        stage = .upstreamHandshake
        ctx.commands.append(.startTimer(.upstreamHandshake, after: ctx.env.timeouts.handshake))
        stepUpstreamHandshake(ctx)
    }

    func upstreamConnectFailed(_ ctx: SessionContext, _ error: String, _ failure: ConnectFailure) {
        upstream.isOpen = false
        ctx.trace(.tcpConnectionConnected(connectionID: ctx.id, error: error, attempt: upstream.connectAttempts))
        let mapped = ctx.mappingNote(host: host, port: port)
        ctx.notice("\(host):\(port)\(mapped): cannot connect upstream: \(error)")
        violations = [ATSViolation(
            kind: .unreachable, urlError: failure.urlError, sslError: nil,
            explanation: "could not connect to \(host):\(port)\(mapped): \(error)",
            fix: .noExceptionCanHelp(reason: "the server is unreachable; this is not an ATS failure"))]
        actWithoutUpstream(ctx, Verdict(source: .notATS, violations: violations, relayable: false))
    }

    /// The upstream accepted the connection but its TLS handshake did not finish in time: the app would time out
    /// too (-1001). A stale deadline (the handshake ended, or the session moved on) does nothing.
    func upstreamHandshakeDeadlinePassed(_ ctx: SessionContext) {
        guard stage == .upstreamHandshake else { return }
        let limit = "\(ctx.env.timeouts.handshake)"  // "15.0 seconds"
        ctx.notice("\(host):\(port): no TLS handshake from the server within \(limit)")
        upstream.drop(ctx)
        violations = [ATSViolation(
            kind: .timedOut, urlError: .timedOut, sslError: nil,
            explanation: "the server accepted the connection but sent no TLS handshake within \(limit)",
            fix: .noExceptionCanHelp(reason: "the server does not answer; this is not an ATS failure"))]
        actWithoutUpstream(ctx, Verdict(source: .notATS, violations: violations, relayable: false))
    }

    func upstreamBytes(_ ctx: SessionContext, _ bytes: [UInt8]) {
        guard let engine = upstream.engine else { return }
        switch stage {
        case .upstreamHandshake:
            engine.feed(bytes)
            stepUpstreamHandshake(ctx)
        case .relaying:
            bytes.withUnsafeBytes { readUpstream(ctx, incoming: $0) }
        default:
            engine.feed(bytes)
        }
    }

    func upstreamEOF(_ ctx: SessionContext) {
        if retryOfferingH2IfClosedBeforeRequest(ctx) { return }
        upstream.engine?.feedEndOfInput()
        switch stage {
        case .upstreamHandshake:
            stepUpstreamHandshake(ctx)
        case .relaying:
            readUpstream(ctx)
            upstreamGone(ctx)
        default:
            break
        }
    }

    func upstreamClosed(_ ctx: SessionContext, _ error: String?) {
        upstream.isOpen = false
        if retryOfferingH2IfClosedBeforeRequest(ctx) { return }
        switch stage {
        case .upstreamHandshake:
            upstream.engine?.feedEndOfInput()
            stepUpstreamHandshake(ctx)
        case .relaying:
            upstreamGone(ctx, failure: error)
        default:
            break
        }
    }

    /// An upstream that closes right after the handshake, before any request, having chosen no ALPN protocol from
    /// an offer without h2, is most likely an h2-only server that refuses such clients (nghttpd does). With
    /// `--upstream-alpn mirror` it is reconnected once offering both protocols, while the client's side waits (its
    /// bytes are held); the relay then translates. Returns whether the retry started.
    func retryOfferingH2IfClosedBeforeRequest(_ ctx: SessionContext) -> Bool {
        // The upstream never sent application data (`client.unansweredPlaintext` is nil once it has).
        guard stage == .clientHandshake || stage == .relaying, let unanswered = client.unansweredPlaintext,
            !client.spoke || Self.isReplayable(unanswered),
            let reason = upstream.widenAfterCloseBeforeRequest(ctx, clientOffer: hello.alpnProtocols)
        else { return false }
        client.resumeStage = stage
        // The old relay's exchange never reached the origin; the retried connection gets the request again.
        relay = nil
        upstream.drop(ctx)
        connectUpstream(ctx, reason: reason)
        return true
    }

    /// The client's first request asks to switch protocols (a WebSocket's Upgrade) and the upstream chose h2, which
    /// cannot carry it (`--upstream-alpn ios` offered h2 to an HTTP/1.1 client). The app's URLSession makes such a
    /// connection over http/1.1, and gets the 101: reconnect offering only http/1.1 and replay the request there.
    func retryUpstreamOverHTTP1(_ ctx: SessionContext, replaying request: [UInt8]) {
        upstream.http1Only = true
        reconnectUpstream(ctx, replaying: request, reason: "the client's first request asks to switch protocols "
            + "(Upgrade), which HTTP/2 cannot carry; offering only http/1.1, as the app's connection for it would")
    }

    /// The h2 upstream's GOAWAY refused the HTTP/1.1 client's request in flight, which it never processed: the
    /// app's URLSession sends such a request again on a new connection (nginx sends GOAWAY every 1,000 requests, so
    /// long sessions meet this), and so does the proxy, instead of a 502.
    func retryRefusedRequest(_ ctx: SessionContext, replaying request: [UInt8]) {
        upstream.refusedRetries += 1
        reconnectUpstream(ctx, replaying: request, reason: "the upstream's GOAWAY refused the request in flight "
            + "(never processed); sending it again on a new connection, as URLSession does")
    }

    /// Replaces the upstream connection and its relay: `request` goes to the new one once it is ready.
    private func reconnectUpstream(_ ctx: SessionContext, replaying request: [UInt8], reason: String) {
        client.resumeStage = .relaying
        relay = nil
        client.unansweredPlaintext = request
        upstream.drop(ctx)
        connectUpstream(ctx, reason: reason)
    }

    /// An ALPN offer as traces show it: `http/1.1`, `h2, http/1.1`, or `(none)`.
    static func offerText(_ offer: [String]) -> String {
        offer.isEmpty ? "(none)" : offer.joined(separator: ", ")
    }

    /// Requests that may be sent again after a connection closed before any response (RFC 9110 §9.2.2): every
    /// request kept, pipelined ones included, is a safe method without a body (a POST after a GET must not be sent
    /// twice), and a head still incomplete at the end begins with one.
    static func isReplayable(_ plaintext: [UInt8]) -> Bool {
        let safe = ["GET", "HEAD", "OPTIONS"]
        var parser = HTTP1Parser(role: .requests)
        parser.receive(plaintext)
        var heads = 0
        // Bounded: every request takes at least one byte of what was kept, and every pass returns an event.
        for _ in 0...(2 * plaintext.count + 2) {
            let event: HTTP1Event
            do { event = try parser.nextEvent() } catch { return false }
            switch event {
            case .requestHead(let head):
                guard safe.contains(head.method) else { return false }
                heads += 1
            case .body(let piece):
                if !piece.isEmpty { return false }
            case .end:
                do { try parser.startNextMessage() } catch { return parser.bufferedByteCount == 0 }
            case .needMoreData:
                let rest = plaintext.suffix(parser.bufferedByteCount)
                return rest.isEmpty ? heads > 0 : safe.contains { rest.starts(with: ($0 + " ").utf8) }
            case .paused, .connectionClosed, .switchedProtocols, .responseHead:
                return false
            }
        }
        return false
    }

    /// The upstream sent bytes with no request outstanding and the relay closed its connection: there is no other
    /// upstream to go to, so the client's connection ends as after any upstream close (SessionContext+Deadlines).
    func upstreamSentUnasked(_ ctx: SessionContext) {
        guard let relay else { return }
        upstream.engine = nil
        upstream.finished = true
        // A request the client pipelined behind went to that connection: it gets a 502.
        apply(ctx, relay.upstreamEOF())
        if !ctx.isDone { ctx.closeAll(tlsClose: true) }
    }

    /// The upstream connection ended: cleanly, or with `failure` (a TCP reset), which cuts off what was in flight
    /// and is passed on to the client as such.
    func upstreamGone(_ ctx: SessionContext, failure: String? = nil) {
        guard !upstream.finished, block.answer == nil else { return }
        upstream.finished = true
        if raw {
            if let failure {
                upgradeEnded(ctx, by: "the upstream connection failed: \(failure)")
                ctx.closeAll(reset: true)
            } else {
                upgradeEnded(ctx, by: "the upstream closed it")
                shutdownClientTLS(ctx)
            }
            return
        }
        guard let relay = self.relay else { return }
        if let failure {
            apply(ctx, relay.upstreamReset("the upstream connection failed: \(failure)"))
        } else {
            apply(ctx, relay.upstreamEOF())
        }
        // The upstream TLS session is over; the client reconnects for its next request. A pool of lanes only lost
        // one of its connections and opens another when needed.
        if relay.isIdle, !(relay is LaneRelay), !ctx.isDone { ctx.closeAll(tlsClose: true) }
    }
}

extension UpstreamLeg {
    /// Opens a TCP connection to the upstream, traced as an attempt of its own. `reason`: why a connection after
    /// the first is made (nil for the first).
    func connect(_ ctx: SessionContext, reason: String?) {
        let (address, upstreamPort) = ctx.upstreamAddress(host: host, port: port)
        connectAttempts += 1
        ctx.trace(.tcpConnectionStart(
            connectionID: ctx.id, host: host, port: port, attempt: connectAttempts, reason: reason,
            mappedTo: ctx.mappedAddress(host: host, port: port)))
        ctx.commands.append(.connectUpstream(address: address, port: upstreamPort))
    }

    /// The TCP connection is up: the TLS client for this attempt is set up, offering by ALPN what `--upstream-alpn`
    /// says for the client's offer. False when there is nothing to offer (an iOS-like attempt without
    /// requirements); throws when OpenSSL cannot build it.
    func connected(_ ctx: SessionContext, clientOffer: [String], requirements: ConnectionRequirements?) throws -> Bool {
        isOpen = true
        ctx.trace(.tcpConnectionConnected(connectionID: ctx.id, attempt: connectAttempts))
        if ctx.env.upstreamALPN == .mirror, !widenedALPN, ctx.env.h2OnlyOrigins.contains(host: host, port: port) {
            widenedALPN = true
        }
        let offer = http1Only
            ? ["http/1.1"] : ctx.env.upstreamALPN.upstreamOffer(clientOffer: clientOffer, widened: widenedALPN)
        self.offer = offer
        var configuration: TLSConfiguration
        switch attempt {
        case .iOSLike:
            guard let req = requirements else { return false }
            configuration = UpstreamTLS.iOSLikeConfiguration(for: req, alpn: offer)
        case .iOSWidest:
            configuration = UpstreamTLS.iOSWidestConfiguration(alpn: offer)
        case .permissive:
            configuration = UpstreamTLS.permissiveProbeConfiguration()
            configuration.alpnProtocols = offer
        }
        configuration.sessionResumption = ctx.env.upstreamSessions != nil
        let key = TLSContextKey.upstream(
            minimum: configuration.minimumVersion, maximum: configuration.maximumVersion,
            cipherList: configuration.cipherList, tls13Suites: configuration.tls13CipherSuites, alpn: offer)
        let context = try ctx.env.contexts.context(key: key) { () throws(OpenSSLError) in try TLSContext(configuration) }
        // iOS sends no SNI for IP literals.
        let sni = IPAddress(host) == nil ? host : nil
        let engine = try TLSEngine(context: context, serverName: sni)
        if let sessions = ctx.env.upstreamSessions {
            // iOS resumes a session to an origin it talked to recently; the key holds all that shapes the
            // ClientHello and the identity checked, so a session is offered only where the app's would be.
            let (address, addressPort) = ctx.upstreamAddress(host: host, port: port)
            engine.offerSession(from: sessions, key: TLSSessionKey(
                context: context, host: host, serverName: sni, address: address, port: addressPort, alpn: offer))
        }
        self.engine = engine
        self.context = context
        self.sni = sni
        return true
    }

    /// Closes the connection and forgets its TLS client (a retry or a verdict follows).
    func drop(_ ctx: SessionContext) {
        ctx.commands.append(.closeUpstream)
        isOpen = false
        engine = nil
    }

    /// The origin refused the mirrored ALPN offer (an h2-only origin and an HTTP/1.1 client): the next attempt
    /// offers both and the relay translates, as the app, which always offers both, would have reached it. Returns
    /// why the retry is made, or nil when this is no such refusal or the offer was already widened.
    func widenAfterALPNRefusal(_ ctx: SessionContext, _ error: TLSError, clientOffer: [String]) -> String? {
        guard case .peerAlert(.noApplicationProtocol) = error, !widenedALPN, ctx.env.upstreamALPN == .mirror
        else { return nil }
        widenedALPN = true
        ctx.notice("\(host):\(port): the upstream refused the client's ALPN offer \(clientOffer); "
            + "retrying with h2 and http/1.1 (the proxy translates)")
        return "the upstream refused the offer \(InterceptLayer.offerText(offer)) with no_application_protocol; "
            + "offering h2 and http/1.1, as the app does"
    }

    /// The upstream closed right after the handshake, before answering anything, having chosen no ALPN protocol
    /// from an offer without h2: most likely an h2-only server that refuses such clients (nghttpd does). With
    /// `--upstream-alpn mirror` the next attempt offers both protocols (and the origin is remembered as h2-only);
    /// returns why, or nil when this is no such close or the offer cannot be widened (a notice says what to do).
    func widenAfterCloseBeforeRequest(_ ctx: SessionContext, clientOffer: [String]) -> String? {
        guard !finished, alpn == nil, !offer.contains("h2") else { return nil }
        let offered = clientOffer.isEmpty ? "no ALPN" : clientOffer.joined(separator: ",")
        guard ctx.env.upstreamALPN == .mirror, !widenedALPN else {
            ctx.notice("\(host):\(port): the upstream closed the connection right after the TLS handshake, before any "
                + "request; it may speak only HTTP/2 and refuse clients that do not offer h2 (the client offered "
                + "\(offered)). Run with --upstream-alpn ios so the proxy offers h2 and translates")
            return nil
        }
        if ctx.env.h2OnlyOrigins.insert(host: host, port: port) {
            ctx.notice("\(host):\(port): the upstream closed the connection before any request without choosing a "
                + "protocol (the client offered \(offered)); it is taken for h2-only: connections to it now offer h2 "
                + "and http/1.1, and the proxy translates")
        }
        widenedALPN = true
        return "the upstream closed the previous connection before any request, choosing no protocol from the offer "
            + "\(InterceptLayer.offerText(offer)); offering h2 and http/1.1, as the app does"
    }

    /// The probe after a failed handshake: in `--ats mirror`, what iOS offers with every exception (so the suite
    /// learned is the one the server would choose for the device), then every version and suite, so the verdict
    /// can say why. Returns why the next attempt is made, or nil once the permissive one failed too.
    func nextProbe(after error: TLSError, mode: ATSMode) -> String? {
        switch attempt {
        case .iOSLike where mode == .mirror:
            iOSLikeFailure = error
            attempt = .iOSWidest
            return "ATSProxy's probe, not the app's: attempt \(connectAttempts)'s handshake failed (\(error)); offering "
                + "what iOS offers with every exception (TLS 1.0-1.3, the forward-secret and static-RSA suites) to "
                + "learn what the server would choose for the device"
        case .iOSLike, .iOSWidest:
            if iOSLikeFailure == nil { iOSLikeFailure = error }
            attempt = .permissive
            return "ATSProxy's probe, not the app's: attempt \(connectAttempts)'s handshake failed (\(error)); every "
                + "TLS version and cipher suite is offered to learn why"
        case .permissive:
            return nil
        }
    }
}
