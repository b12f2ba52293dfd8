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

extension SessionContext {
    /// Opens an upstream connection for `i`. `reason`: why a connection after the first is made (nil for the first).
    func connectInterceptionUpstream(_ i: InterceptLayer, reason: String?) {
        let (address, upstreamPort) = upstreamAddress(host: i.host, port: i.port)
        i.stage = .connectingUpstream
        i.connectAttempts += 1
        trace(.tcpConnectionStart(
            connectionID: id, host: i.host, port: i.port, attempt: i.connectAttempts, reason: reason,
            mappedTo: mappedAddress(host: i.host, port: i.port)))
        commands.append(.connectUpstream(address: address, port: upstreamPort))
    }

    func interceptUpstreamConnected(_ i: InterceptLayer) {
        i.upstreamOpen = true
        trace(.tcpConnectionConnected(connectionID: id, attempt: i.connectAttempts))
        if env.upstreamALPN == .mirror, !i.widenedALPN, env.h2OnlyOrigins.contains(host: i.host, port: i.port) {
            i.widenedALPN = true
        }
        let offer = i.http1OnlyUpstream
            ? ["http/1.1"] : env.upstreamALPN.upstreamOffer(clientOffer: i.hello.alpnProtocols, widened: i.widenedALPN)
        i.upstreamOffer = offer
        var configuration: TLSConfiguration
        switch i.attempt {
        case .iOSLike:
            guard let req = i.requirements else { return }
            configuration = UpstreamTLS.iOSLikeConfiguration(for: req, alpn: offer)
        case .iOSWidest:
            configuration = UpstreamTLS.iOSWidestConfiguration(alpn: offer)
        case .permissive:
            configuration = UpstreamTLS.permissiveProbeConfiguration()
            configuration.alpnProtocols = offer
        }
        configuration.sessionResumption = env.upstreamSessions != nil
        let key = TLSContextKey.upstream(
            minimum: configuration.minimumVersion, maximum: configuration.maximumVersion,
            cipherList: configuration.cipherList, tls13Suites: configuration.tls13CipherSuites, alpn: offer)
        do {
            let context = try env.contexts.context(key: key) { () throws(OpenSSLError) in try TLSContext(configuration) }
            // iOS sends no SNI for IP literals.
            let sni = IPAddress(i.host) == nil ? i.host : nil
            let engine = try TLSEngine(context: context, serverName: sni)
            if let sessions = env.upstreamSessions {
                // iOS resumes a session to an origin it talked to recently; the key holds all that shapes the
                // ClientHello and the identity checked, so a session is offered only where the app's would be.
                let (address, port) = upstreamAddress(host: i.host, port: i.port)
                engine.offerSession(from: sessions, key: TLSSessionKey(
                    context: context, host: i.host, serverName: sni, address: address, port: port, alpn: offer))
            }
            i.upstream = engine
            i.upstreamContext = context
            i.upstreamSNI = sni
            i.stage = .upstreamHandshake
            commands.append(.startTimer(.upstreamHandshake, after: env.timeouts.handshake))
            stepUpstreamHandshake(i)
        } catch {
            notice("\(i.host):\(i.port): cannot set up the upstream TLS client: \(error)")
            closeAll()
        }
    }

    func interceptUpstreamFailed(_ i: InterceptLayer, _ error: String, _ failure: ConnectFailure) {
        i.upstreamOpen = false
        trace(.tcpConnectionConnected(connectionID: id, error: error, attempt: i.connectAttempts))
        let mapped = mappingNote(host: i.host, port: i.port)
        notice("\(i.host):\(i.port)\(mapped): cannot connect upstream: \(error)")
        i.violations = [ATSViolation(
            kind: .unreachable, urlError: failure.urlError, sslError: nil,
            explanation: "could not connect to \(i.host):\(i.port)\(mapped): \(error)",
            fix: .noExceptionCanHelp(reason: "the server is unreachable; this is not an ATS failure"))]
        actWithoutUpstream(i, Verdict(source: .notATS, violations: i.violations, relayable: false))
    }

    /// The upstream accepted the connection but its TLS handshake did not finish in time: the app would time out
    /// too (-1001). A stale deadline (the handshake ended, or the session moved on) does nothing.
    func upstreamHandshakeDeadlinePassed(_ i: InterceptLayer) {
        guard i.stage == .upstreamHandshake else { return }
        let limit = "\(env.timeouts.handshake)"  // "15.0 seconds"
        notice("\(i.host):\(i.port): no TLS handshake from the server within \(limit)")
        commands.append(.closeUpstream)
        i.upstreamOpen = false
        i.upstream = nil
        i.violations = [ATSViolation(
            kind: .timedOut, urlError: .timedOut, sslError: nil,
            explanation: "the server accepted the connection but sent no TLS handshake within \(limit)",
            fix: .noExceptionCanHelp(reason: "the server does not answer; this is not an ATS failure"))]
        actWithoutUpstream(i, Verdict(source: .notATS, violations: i.violations, relayable: false))
    }

    func interceptUpstreamBytes(_ i: InterceptLayer, _ bytes: [UInt8]) {
        guard let engine = i.upstream else { return }
        switch i.stage {
        case .upstreamHandshake:
            engine.feed(bytes)
            stepUpstreamHandshake(i)
        case .relaying:
            bytes.withUnsafeBytes { readUpstream(i, incoming: $0) }
        default:
            engine.feed(bytes)
        }
    }

    func interceptUpstreamEOF(_ i: InterceptLayer) {
        if retryOfferingH2IfClosedBeforeRequest(i) { return }
        i.upstream?.feedEndOfInput()
        switch i.stage {
        case .upstreamHandshake:
            stepUpstreamHandshake(i)
        case .relaying:
            readUpstream(i)
            upstreamGone(i)
        default:
            break
        }
    }

    func interceptUpstreamClosed(_ i: InterceptLayer, _ error: String?) {
        i.upstreamOpen = false
        if retryOfferingH2IfClosedBeforeRequest(i) { return }
        switch i.stage {
        case .upstreamHandshake:
            i.upstream?.feedEndOfInput()
            stepUpstreamHandshake(i)
        case .relaying:
            upstreamGone(i, failure: error)
        default:
            break
        }
    }

    /// An upstream that closes right after the handshake, before any request, having chosen no ALPN protocol from
    /// an offer without h2, is most likely an h2-only server that refuses such clients (nghttpd does). With
    /// `--upstream-alpn mirror` it is reconnected once offering both protocols, while the client's side waits (its
    /// bytes are held); the relay then translates. Returns whether the retry started.
    func retryOfferingH2IfClosedBeforeRequest(_ i: InterceptLayer) -> Bool {
        // The upstream never sent application data (`unansweredClientPlaintext` is nil once it has).
        guard i.stage == .clientHandshake || i.stage == .relaying, !i.upstreamFinished, i.upstreamALPN == nil,
            !i.upstreamOffer.contains("h2"), let unanswered = i.unansweredClientPlaintext,
            !i.clientSpoke || Self.isReplayable(unanswered)
        else { return false }
        let offered = i.hello.alpnProtocols.isEmpty ? "no ALPN" : i.hello.alpnProtocols.joined(separator: ",")
        guard env.upstreamALPN == .mirror, !i.widenedALPN else {
            notice("\(i.host):\(i.port): the upstream closed the connection right after the TLS handshake, before any "
                + "request; it may speak only HTTP/2 and refuse clients that do not offer h2 (the client offered "
                + "\(offered)). Run with --upstream-alpn ios so the proxy offers h2 and translates")
            return false
        }
        if env.h2OnlyOrigins.insert(host: i.host, port: i.port) {
            notice("\(i.host):\(i.port): the upstream closed the connection before any request without choosing a "
                + "protocol (the client offered \(offered)); it is taken for h2-only: connections to it now offer h2 "
                + "and http/1.1, and the proxy translates")
        }
        i.widenedALPN = true
        i.resumeStage = i.stage
        // The old relay's exchange never reached the origin; the retried connection gets the request again.
        i.relay = nil
        commands.append(.closeUpstream)
        i.upstreamOpen = false
        i.upstream = nil
        connectInterceptionUpstream(i, reason: "the upstream closed the previous connection before any request, "
            + "choosing no protocol from the offer \(Self.offerText(i.upstreamOffer)); offering h2 and http/1.1, as "
            + "the app does")
        return true
    }

    /// The client's first request asks to switch protocols (a WebSocket's Upgrade) and the upstream chose h2, which
    /// cannot carry it (`--upstream-alpn ios` offered h2 to an HTTP/1.1 client). The app's URLSession makes such a
    /// connection over http/1.1, and gets the 101: reconnect offering only http/1.1 and replay the request there.
    func retryUpstreamOverHTTP1(_ i: InterceptLayer, replaying request: [UInt8]) {
        i.http1OnlyUpstream = true
        reconnectUpstream(i, replaying: request, reason: "the client's first request asks to switch protocols "
            + "(Upgrade), which HTTP/2 cannot carry; offering only http/1.1, as the app's connection for it would")
    }

    /// The h2 upstream's GOAWAY refused the HTTP/1.1 client's request in flight, which it never processed: the
    /// app's URLSession sends such a request again on a new connection (nginx sends GOAWAY every 1,000 requests, so
    /// long sessions meet this), and so does the proxy, instead of a 502.
    func retryRefusedRequest(_ i: InterceptLayer, replaying request: [UInt8]) {
        i.refusedRetries += 1
        reconnectUpstream(i, replaying: request, reason: "the upstream's GOAWAY refused the request in flight "
            + "(never processed); sending it again on a new connection, as URLSession does")
    }

    /// Replaces the upstream connection and its relay: `request` goes to the new one once it is ready.
    private func reconnectUpstream(_ i: InterceptLayer, replaying request: [UInt8], reason: String) {
        i.resumeStage = .relaying
        i.relay = nil
        i.unansweredClientPlaintext = request
        commands.append(.closeUpstream)
        i.upstreamOpen = false
        i.upstream = nil
        connectInterceptionUpstream(i, reason: reason)
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

    /// The upstream connection ended: cleanly, or with `failure` (a TCP reset), which cuts off what was in flight
    /// and is passed on to the client as such.
    func upstreamGone(_ i: InterceptLayer, failure: String? = nil) {
        guard !i.upstreamFinished, i.blockAnswer == nil else { return }
        i.upstreamFinished = true
        if i.raw {
            if let failure {
                upgradeEnded(i, by: "the upstream connection failed: \(failure)")
                closeAll(reset: true)
            } else {
                upgradeEnded(i, by: "the upstream closed it")
                shutdownClientTLS(i)
            }
            return
        }
        guard let relay = i.relay else { return }
        if let failure {
            applyIntercepted(relay.upstreamReset("the upstream connection failed: \(failure)"), i)
        } else {
            applyIntercepted(relay.upstreamEOF(), i)
        }
        // The upstream TLS session is over; the client reconnects for its next request. A pool of lanes only lost
        // one of its connections and opens another when needed.
        if relay.isIdle, !(relay is LaneRelay), !isDone { closeAll(tlsClose: true) }
    }
}
