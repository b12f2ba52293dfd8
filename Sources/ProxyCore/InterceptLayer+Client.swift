import ATSPolicy
import Foundation
import HTTP1Core
import ProxyTrace
import TLSCore

// Theory of operation: the client's TLS leg of an interception.
//
// - The client's hello is held until the upstream's verdict; the client is then answered with a leaf minted for the
//   host at the session's clock (or the flawed leaf of a `--block tls` plan), choosing by ALPN what the upstream
//   chose when the client offered it, else what the client speaks (the relay translates).
// - The handshake must finish within `--client-timeout` (SessionContext+Deadlines).
// - A failed handshake ends the connection with a notice that says the likely cause (the CA is not trusted, the
//   client pins), unless it refused a flawed leaf served on purpose.
// - After a retried upstream, the client side resumes where it was put on hold, with the bytes it sent meanwhile.

/// The client leg of an interception: its TLS server and what the client sent before it could be read.
final class ClientLeg {
    /// The TLS server answering the client (nil until the client's handshake is answered).
    var engine: TLSEngine?
    /// What the client sent while the upstream connects or handshakes, fed to the client's TLS once it may start.
    /// Past `pendingLimit` the client is no longer read until then (`takePendingBytes`).
    var pendingBytes: [UInt8]
    var pausedWhileConnecting = false
    /// As a tunnel holds a client's early bytes (`TunnelLayer`): a slow upstream cannot make the proxy buffer more.
    static let pendingLimit = 64 * 1024
    /// The client sent plaintext (a request) since its handshake.
    var spoke = false
    /// When the client's handshake completed (the session's clock), for auto-passthrough's refusal window.
    var handshakeDone: Double?
    /// Auto-passthrough has counted this connection as an acceptance or a refusal (once per connection).
    var trustJudged = false
    /// What the client sent before the upstream said anything (at most `replayLimit` bytes; nil once the upstream
    /// answered or the client sent more): a retried upstream gets it again.
    var unansweredPlaintext: [UInt8]? = []
    static let replayLimit = 64 << 10
    /// Where the client side was when a retry of the upstream put it on hold (see
    /// `retryOfferingH2IfClosedBeforeRequest`).
    var resumeStage: InterceptLayer.Stage?

    init(pendingBytes: [UInt8]) {
        self.pendingBytes = pendingBytes
    }

    /// The client's bytes held while the upstream was connecting, handed over once: its reading resumes if the
    /// limit had paused it.
    func takePendingBytes(_ ctx: SessionContext) -> [UInt8] {
        let held = pendingBytes
        pendingBytes = []
        if pausedWhileConnecting {
            pausedWhileConnecting = false
            ctx.commands.append(.resumeReading(.client))
        }
        return held
    }
}

extension InterceptLayer {
    func serverContext(_ ctx: SessionContext, leaf: LeafOptions) throws -> TLSContext {
        try ctx.env.contexts.context(key: .server(host: host, leaf: leaf)) { () throws(OpenSSLError) in
            let identity: TLSConfiguration.ServerIdentity
            do { identity = try ctx.env.minter.identity(for: host, options: leaf, now: ctx.clockDate) } catch {
                throw OpenSSLError(context: "minting a certificate for \(host): \(error)", entries: [])
            }
            var configuration = TLSConfiguration.server(identity: identity, alpn: ["h2", "http/1.1"])
            // OpenSSL's default security level refuses to load the deliberately weak leaves (SHA-1 signed,
            // RSA-1024) that --block tls serves; the client must get them and fail its own trust check.
            if leaf != .standard { configuration.securityLevel = 0 }
            // A device reconnecting resumes (tickets, session IDs), bound to this host's leaf (TLSContext).
            configuration.sessionResumption = leaf == .standard
            return try TLSContext(configuration)
        }
    }

    /// After an upstream handshake: start the client's, or resume the client side a retry had put on hold (with
    /// the client's TLS bytes that arrived meanwhile).
    func proceedWithClient(_ ctx: SessionContext) {
        guard let resumed = client.resumeStage, let engine = client.engine else {
            startClientHandshake(ctx, leaf: .standard)
            return
        }
        client.resumeStage = nil
        let held = client.takePendingBytes(ctx)
        if resumed == .relaying {
            stage = .relaying
            startRelaying(ctx, engine)
            if let replay = client.unansweredPlaintext, !replay.isEmpty, let relay = self.relay {
                apply(ctx, relay.clientBytes(replay))
            }
            held.withUnsafeBytes { readClient(ctx, incoming: $0) }
        } else {
            stage = .clientHandshake
            ctx.startClientHandshakeDeadline()
            engine.feed(held)
            stepClientHandshake(ctx)
        }
    }

    func startClientHandshake(_ ctx: SessionContext, leaf: LeafOptions) {
        do {
            // ALPN mirroring: the upstream's choice when the client offered it, else what the client can speak
            // (the relay translates). Blocked connections and the set-up site have no upstream: HTTP/1.1 unless the
            // client offered h2 alone.
            let preference = block.answer == nil && localSite == nil && fault == nil
                ? UpstreamALPN.clientAnswer(clientOffer: hello.alpnProtocols, upstreamChoice: upstream.alpn)
                : UpstreamALPN.clientAnswer(clientOffer: hello.alpnProtocols, upstreamChoice: "http/1.1")
            let context: TLSContext
            if let plan = mirror?.plan ?? fault?.failure.serverPlan, !plan.isHealthy {
                context = try mirrorContext(ctx, plan: plan)
            } else {
                context = try serverContext(ctx, leaf: leaf)
            }
            let engine = try TLSEngine(context: context, alpn: preference)
            client.engine = engine
            stage = .clientHandshake
            ctx.startClientHandshakeDeadline()
            engine.feed(client.takePendingBytes(ctx))
            stepClientHandshake(ctx)
        } catch {
            ctx.notice("\(host): cannot build the TLS server for the client: \(error)")
            ctx.closeAll()
        }
    }

    func clientBytes(_ ctx: SessionContext, _ bytes: [UInt8]) {
        switch stage {
        case .connectingUpstream, .upstreamHandshake:
            client.pendingBytes += bytes
            if client.pendingBytes.count >= ClientLeg.pendingLimit, !client.pausedWhileConnecting {
                client.pausedWhileConnecting = true
                ctx.commands.append(.pauseReading(.client))
            }
        case .clientHandshake:
            client.engine?.feed(bytes)
            stepClientHandshake(ctx)
        case .relaying:
            bytes.withUnsafeBytes { readClient(ctx, incoming: $0) }
        case .failed:
            break
        }
    }

    func clientEOF(_ ctx: SessionContext) {
        ctx.noteClientClosedWithoutRequest()
        client.engine?.feedEndOfInput()
        switch stage {
        case .clientHandshake:
            // A ClientHello held unanswered on purpose (an injected timeout) has no engine to tell the end.
            if client.engine == nil { ctx.closeAll() } else { stepClientHandshake(ctx) }
        case .relaying:
            readClient(ctx)
            if raw {
                upgradeEnded(ctx, by: "the client closed it")
                if upstream.isOpen { ctx.commands.append(.shutdownUpstreamWrite) }
            } else if let relay = self.relay {
                apply(ctx, relay.clientEOF())
                if !ctx.isDone { ctx.closeAll(tlsClose: true) }
            }
        default:
            ctx.closeAll()
        }
    }

    func stepClientHandshake(_ ctx: SessionContext) {
        guard let engine = client.engine else { return }
        let step = engine.handshake()
        let out = engine.takeOutput()
        if !out.isEmpty { ctx.commands.append(.sendToClient(out)) }
        switch step {
        case .needsMoreInput:
            return
        case .failed(let error):
            clientHandshakeFailed(ctx, error)
        case .complete:
            client.handshakeDone = ctx.now()
            if mirror != nil { mirrorHandshakeCompleted(ctx, engine) }
            stage = .relaying
            startRelaying(ctx, engine)
            readClient(ctx)
            // Bytes the upstream sent before the client was ready (rare for HTTP/1.1).
            if upstream.engine != nil { readUpstream(ctx) }
        }
    }

    func clientHandshakeFailed(_ ctx: SessionContext, _ error: TLSError) {
        stage = .failed
        if SessionContext.isCertificateRefusal(error) { ctx.noteClientRefused(self) }
        if case .aborted = error {
            ctx.closeAll()
            return
        }
        if fault != nil {
            // The client refused the flawed server a rule showed it: the expected outcome, recorded as it ends.
            fault?.refusal = Self.refusal(error).0
            ctx.closeAll()
            return
        }
        if mirror != nil {
            // The device refused what it was shown: its verdict, not a fault of the proxy's CA.
            mirrorDeviceRefused(ctx, error)
            ctx.closeAll()
            return
        }
        var hint = ""
        if case .peerAlert(let alert) = error {
            switch alert {
            case .unknownCA, .badCertificate, .certificateUnknown:
                hint = block.flawedLeaf != nil
                    ? " (expected: ATSProxy served a deliberately flawed certificate to reproduce the app's failure)"
                    : " (the client does not trust ATSProxy's CA: install it and, on iOS, enable full trust in "
                        + "Settings › General › About › Certificate Trust Settings)"
            default: break
            }
        } else if case .closedByPeer = error {
            hint = " (a client that closes during the handshake often does not trust the proxy's certificate, or pins)"
        }
        // The client refusing a flawed leaf served on purpose is the expected outcome, not news.
        if block.flawedLeaf == nil {
            // Folded by the failure, not the host: a device that does not trust the CA fails this way for every host.
            ctx.notice("\(host):\(port): the client's TLS handshake failed: \(error)\(hint)",
                kind: "client handshake failed: \(error)")
        }
        ctx.closeAll()
    }

    /// The client's handshake did not finish within `--client-timeout` (SessionContext+Deadlines); a stale deadline
    /// does nothing.
    func clientHandshakeDeadlinePassed(_ ctx: SessionContext) {
        guard stage == .clientHandshake else { return }
        stage = .failed
        if fault != nil {
            // An injected timeout running its course: the record says so.
            fault?.timedOut = true
            ctx.closeAll()
            return
        }
        ctx.notice("\(host):\(port): the client's TLS handshake did not finish within \(ctx.env.timeouts.client); "
            + "closing (--client-timeout)")
        ctx.closeAll()
    }
}
