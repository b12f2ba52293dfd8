import HTTP1Core
import TLSCore

// Extra upstream connections ("lanes") of an intercepted session whose client speaks h2 and whose upstream speaks
// HTTP/1.1 (H2ToH1Relay). Each lane is a TCP connection with its own TLS client built from the context of the
// session's first upstream connection, whose handshake was judged: same version range, suites, ALPN and SNI. The
// lanes reach the same host with the same ClientHello, so their handshakes are not judged again.

/// The TLS client of one lane, and the plaintext held for it until its handshake completes.
final class LaneTLS {
    var engine: TLSEngine?
    var ready = false
    var pending: [UInt8] = []
}

extension InterceptLayer {
    /// Carries out what a lane relay asked for: lanes to open, bytes for them, lanes to close, reads to pause.
    func applyLanes(_ ctx: SessionContext, _ o: borrowing RelayOutput) {
        for lane in o.lanes.unsolicited {
            ctx.notice("\(host):\(port): the upstream sent bytes with no request outstanding on \(lane) (a response "
                + "nobody asked for); closed that connection")
        }
        for lane in o.lanes.open { openLane(ctx, lane) }
        for (lane, bytes) in o.lanes.bytes { sendToLane(ctx, lane, bytes) }
        for lane in o.lanes.close { closeLane(ctx, lane) }
        if o.closeUpstream, self.relay is LaneRelay, upstream.isOpen {
            // The relay is done with its first connection (lane `.primary`): close_notify, then close.
            upstream.engine?.close()
            if let bytes = upstream.engine?.takeOutput(), !bytes.isEmpty { ctx.commands.append(.sendToUpstream(bytes)) }
            ctx.commands.append(.closeUpstream)
            upstream.isOpen = false
            upstream.engine = nil
        }
    }

    func handleLaneEvent(_ ctx: SessionContext, _ event: ProxyEvent) {
        guard let relay = self.relay as? LaneRelay else { return }
        switch event {
        case .laneConnected(let lane):
            guard let tls = lanes[lane], let context = upstream.context else { return }
            do {
                // The lane speaks what the first connection negotiated (HTTP/1.1).
                tls.engine = try TLSEngine(
                    context: context, serverName: upstream.sni, alpn: upstream.alpn.map { [$0] })
            } catch {
                laneFailed(ctx, lane, "cannot set up TLS: \(error)", relay)
                return
            }
            stepLaneHandshake(ctx, lane, tls, relay)
        case .laneConnectFailed(let lane, let error):
            laneFailed(ctx, lane, error, relay)
        case .laneBytes(let lane, let bytes):
            guard let tls = lanes[lane], let engine = tls.engine else { return }
            if !tls.ready {
                engine.feed(bytes)
                stepLaneHandshake(ctx, lane, tls, relay)
                return
            }
            let (plaintext, ended, error) = bytes.withUnsafeBytes { drain(engine, feeding: $0) }
            flushLane(ctx, lane, engine)
            if !plaintext.isEmpty { applyLaneOutput(ctx, relay.laneBytes(lane, plaintext)) }
            if ended || error != nil { laneEnded(ctx, lane, relay) }
        case .laneClosed(let lane, let error?):
            // A reset: what the lane had in flight is cut off, not ended.
            guard let tls = lanes[lane] else { return }
            if tls.ready {
                applyLaneOutput(ctx, relay.laneReset(lane, reason: "the upstream connection failed: \(error)"))
                closeLane(ctx, lane)
            } else {
                laneFailed(ctx, lane, "the connection failed during the TLS handshake: \(error)", relay)
            }
        case .laneEOF(let lane), .laneClosed(let lane, nil):
            guard let tls = lanes[lane] else { return }
            if tls.ready, let engine = tls.engine {
                engine.feedEndOfInput()
                let (plaintext, _, _) = drain(engine)
                if !plaintext.isEmpty { applyLaneOutput(ctx, relay.laneBytes(lane, plaintext)) }
                laneEnded(ctx, lane, relay)
            } else {
                laneFailed(ctx, lane, "the connection closed during the TLS handshake", relay)
            }
        default:
            break
        }
    }

    private func applyLaneOutput(_ ctx: SessionContext, _ o: RelayOutput) { apply(ctx, o) }

    private func openLane(_ ctx: SessionContext, _ lane: UpstreamLane) {
        lanes[lane] = LaneTLS()
        let (address, port) = ctx.upstreamAddress(host: host, port: self.port)
        ctx.commands.append(.connectLane(lane, address: address, port: port))
    }

    private func sendToLane(_ ctx: SessionContext, _ lane: UpstreamLane, _ bytes: [UInt8]) {
        guard let tls = lanes[lane] else { return }
        guard tls.ready, let engine = tls.engine else {
            tls.pending += bytes
            return
        }
        do { try engine.write(bytes) } catch {
            ctx.notice("\(host): cannot write to upstream \(lane): \(error)")
            closeLane(ctx, lane)
            return
        }
        flushLane(ctx, lane, engine)
    }

    private func flushLane(_ ctx: SessionContext, _ lane: UpstreamLane, _ engine: TLSEngine) {
        let out = engine.takeOutput()
        if !out.isEmpty { ctx.commands.append(.sendToLane(lane, out)) }
    }

    func closeLane(_ ctx: SessionContext, _ lane: UpstreamLane) {
        guard let tls = lanes.removeValue(forKey: lane) else { return }
        if tls.ready, let engine = tls.engine {
            engine.close()
            flushLane(ctx, lane, engine)
        }
        ctx.commands.append(.closeLane(lane))
    }

    private func stepLaneHandshake(_ ctx: SessionContext, _ lane: UpstreamLane, _ tls: LaneTLS, _ relay: any LaneRelay) {
        guard let engine = tls.engine else { return }
        let step = engine.handshake()
        flushLane(ctx, lane, engine)
        switch step {
        case .needsMoreInput:
            return
        case .failed(let error):
            laneFailed(ctx, lane, "TLS handshake failed: \(error)", relay)
        case .complete:
            tls.ready = true
            let pending = tls.pending
            tls.pending = []
            if !pending.isEmpty { sendToLane(ctx, lane, pending) }
            applyLaneOutput(ctx, relay.laneConnected(lane))
            // Bytes that came with the end of the handshake.
            let (plaintext, _, _) = drain(engine)
            if !plaintext.isEmpty { applyLaneOutput(ctx, relay.laneBytes(lane, plaintext)) }
        }
    }

    private func laneFailed(_ ctx: SessionContext, _ lane: UpstreamLane, _ error: String, _ relay: any LaneRelay) {
        ctx.notice("\(host):\(port): extra upstream connection (\(lane)) failed: \(error)")
        closeLane(ctx, lane)
        applyLaneOutput(ctx, relay.laneFailed(lane, error: error))
    }

    private func laneEnded(_ ctx: SessionContext, _ lane: UpstreamLane, _ relay: any LaneRelay) {
        applyLaneOutput(ctx, relay.laneEOF(lane))
        closeLane(ctx, lane)
    }

    /// Closes every lane (the session ends).
    func closeAllLanes(_ ctx: SessionContext) {
        for lane in Array(lanes.keys) { closeLane(ctx, lane) }
    }
}
