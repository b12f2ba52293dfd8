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
// - The handshake must finish within `--client-timeout` (ProxySession+Deadlines).
// - A failed handshake ends the connection with a notice that says the likely cause (the CA is not trusted, the
//   client pins), unless it refused a flawed leaf served on purpose.
// - After a retried upstream, the client side resumes where it was put on hold, with the bytes it sent meanwhile.

extension ProxySession {
    func serverContext(for i: InterceptLayer, leaf: LeafOptions) throws -> TLSContext {
        try env.contexts.context(key: .server(host: i.host, leaf: leaf)) { () throws(OpenSSLError) in
            let identity: TLSConfiguration.ServerIdentity
            do { identity = try env.minter.identity(for: i.host, options: leaf, now: clockDate) } catch {
                throw OpenSSLError(context: "minting a certificate for \(i.host): \(error)", entries: [])
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
    func proceedWithClient(_ i: InterceptLayer) {
        guard let resumed = i.resumeStage, let engine = i.client else {
            startClientHandshake(i, leaf: .standard)
            return
        }
        i.resumeStage = nil
        let held = takePendingClientBytes(i)
        if resumed == .relaying {
            i.stage = .relaying
            startRelaying(i, engine)
            if let replay = i.unansweredClientPlaintext, !replay.isEmpty, let relay = i.relay {
                applyIntercepted(relay.clientBytes(replay), i)
            }
            held.withUnsafeBytes { readClient(i, incoming: $0) }
        } else {
            i.stage = .clientHandshake
            startClientHandshakeDeadline()
            engine.feed(held)
            stepClientHandshake(i)
        }
    }

    /// The client's bytes held while the upstream was connecting, handed over once: its reading resumes if the
    /// limit had paused it.
    func takePendingClientBytes(_ i: InterceptLayer) -> [UInt8] {
        let held = i.pendingClientBytes
        i.pendingClientBytes = []
        if i.clientPausedWhileConnecting {
            i.clientPausedWhileConnecting = false
            commands.append(.resumeReading(.client))
        }
        return held
    }

    func startClientHandshake(_ i: InterceptLayer, leaf: LeafOptions) {
        do {
            // ALPN mirroring: the upstream's choice when the client offered it, else what the client can speak
            // (the relay translates). Blocked connections and the set-up site have no upstream: HTTP/1.1 unless the
            // client offered h2 alone.
            let preference = i.blockAnswer == nil && i.localSite == nil
                ? UpstreamALPN.clientAnswer(clientOffer: i.hello.alpnProtocols, upstreamChoice: i.upstreamALPN)
                : UpstreamALPN.clientAnswer(clientOffer: i.hello.alpnProtocols, upstreamChoice: "http/1.1")
            let context: TLSContext
            if let plan = i.mirror?.plan, !plan.isHealthy {
                context = try mirrorContext(for: i, plan: plan)
            } else {
                context = try serverContext(for: i, leaf: leaf)
            }
            let engine = try TLSEngine(context: context, alpn: preference)
            i.client = engine
            i.stage = .clientHandshake
            startClientHandshakeDeadline()
            engine.feed(takePendingClientBytes(i))
            stepClientHandshake(i)
        } catch {
            notice("\(i.host): cannot build the TLS server for the client: \(error)")
            closeAll()
        }
    }

    func interceptClientBytes(_ i: InterceptLayer, _ bytes: [UInt8]) {
        switch i.stage {
        case .connectingUpstream, .upstreamHandshake:
            i.pendingClientBytes += bytes
            if i.pendingClientBytes.count >= InterceptLayer.pendingClientLimit, !i.clientPausedWhileConnecting {
                i.clientPausedWhileConnecting = true
                commands.append(.pauseReading(.client))
            }
        case .clientHandshake:
            i.client?.feed(bytes)
            stepClientHandshake(i)
        case .relaying:
            bytes.withUnsafeBytes { readClient(i, incoming: $0) }
        case .failed:
            break
        }
    }

    func interceptClientEOF(_ i: InterceptLayer) {
        noteClientClosedWithoutRequest()
        i.client?.feedEndOfInput()
        switch i.stage {
        case .clientHandshake:
            stepClientHandshake(i)
        case .relaying:
            readClient(i)
            if i.raw {
                upgradeEnded(i, by: "the client closed it")
                if i.upstreamOpen { commands.append(.shutdownUpstreamWrite) }
            } else if let relay = i.relay {
                applyIntercepted(relay.clientEOF(), i)
                if !isDone { closeAll(tlsClose: true) }
            }
        default:
            closeAll()
        }
    }

    func stepClientHandshake(_ i: InterceptLayer) {
        guard let engine = i.client else { return }
        let step = engine.handshake()
        let out = engine.takeOutput()
        if !out.isEmpty { commands.append(.sendToClient(out)) }
        switch step {
        case .needsMoreInput:
            return
        case .failed(let error):
            clientHandshakeFailed(i, error)
        case .complete:
            i.clientHandshakeDone = now()
            if i.mirror != nil { mirrorHandshakeCompleted(i, engine) }
            i.stage = .relaying
            startRelaying(i, engine)
            readClient(i)
            // Bytes the upstream sent before the client was ready (rare for HTTP/1.1).
            if i.upstream != nil { readUpstream(i) }
        }
    }

    func clientHandshakeFailed(_ i: InterceptLayer, _ error: TLSError) {
        i.stage = .failed
        if Self.isCertificateRefusal(error) { noteClientRefused(i) }
        if case .aborted = error {
            closeAll()
            return
        }
        if i.mirror != nil {
            // The device refused what it was shown: its verdict, not a fault of the proxy's CA.
            mirrorDeviceRefused(i, error)
            closeAll()
            return
        }
        var hint = ""
        if case .peerAlert(let alert) = error {
            switch alert {
            case .unknownCA, .badCertificate, .certificateUnknown:
                hint = i.flawedLeaf != nil
                    ? " (expected: ATSProxy served a deliberately flawed certificate to reproduce the app's failure)"
                    : " (the client does not trust ATSProxy's CA: install it and, on iOS, enable full trust in "
                        + "Settings › General › About › Certificate Trust Settings)"
            default: break
            }
        } else if case .closedByPeer = error {
            hint = " (a client that closes during the handshake often does not trust the proxy's certificate, or pins)"
        }
        // The client refusing a flawed leaf served on purpose is the expected outcome, not news.
        if i.flawedLeaf == nil {
            // Folded by the failure, not the host: a device that does not trust the CA fails this way for every host.
            notice("\(i.host):\(i.port): the client's TLS handshake failed: \(error)\(hint)",
                kind: "client handshake failed: \(error)")
        }
        closeAll()
    }
}
