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

extension ProxySession {
    /// Carries out what a lane relay asked for: lanes to open, bytes for them, lanes to close, reads to pause.
    func applyLanes(_ o: borrowing RelayOutput, _ i: InterceptLayer) {
        for lane in o.lanes.unsolicited {
            notice("\(i.host):\(i.port): the upstream sent bytes with no request outstanding on \(lane) (a response "
                + "nobody asked for); closed that connection")
        }
        for lane in o.lanes.open { openLane(lane, i) }
        for (lane, bytes) in o.lanes.bytes { sendToLane(lane, bytes, i) }
        for lane in o.lanes.close { closeLane(lane, i) }
        if o.closeUpstream, i.relay is LaneRelay, i.upstreamOpen {
            // The relay is done with its first connection (lane `.primary`): close_notify, then close.
            i.upstream?.close()
            if let bytes = i.upstream?.takeOutput(), !bytes.isEmpty { commands.append(.sendToUpstream(bytes)) }
            commands.append(.closeUpstream)
            i.upstreamOpen = false
            i.upstream = nil
        }
    }

    func handleLaneEvent(_ event: ProxyEvent, _ i: InterceptLayer) {
        guard let relay = i.relay as? LaneRelay else { return }
        switch event {
        case .laneConnected(let lane):
            guard let tls = i.lanes[lane], let context = i.upstreamContext else { return }
            do {
                // The lane speaks what the first connection negotiated (HTTP/1.1).
                tls.engine = try TLSEngine(
                    context: context, serverName: i.upstreamSNI, alpn: i.upstreamALPN.map { [$0] })
            } catch {
                laneFailed(lane, "cannot set up TLS: \(error)", i, relay)
                return
            }
            stepLaneHandshake(lane, tls, i, relay)
        case .laneConnectFailed(let lane, let error):
            laneFailed(lane, error, i, relay)
        case .laneBytes(let lane, let bytes):
            guard let tls = i.lanes[lane], let engine = tls.engine else { return }
            if !tls.ready {
                engine.feed(bytes)
                stepLaneHandshake(lane, tls, i, relay)
                return
            }
            let (plaintext, ended, error) = bytes.withUnsafeBytes { drain(engine, feeding: $0) }
            flushLane(lane, engine)
            if !plaintext.isEmpty { applyLaneOutput(i, relay.laneBytes(lane, plaintext)) }
            if ended || error != nil { laneEnded(lane, i, relay) }
        case .laneClosed(let lane, let error?):
            // A reset: what the lane had in flight is cut off, not ended.
            guard let tls = i.lanes[lane] else { return }
            if tls.ready {
                applyLaneOutput(i, relay.laneReset(lane, reason: "the upstream connection failed: \(error)"))
                closeLane(lane, i)
            } else {
                laneFailed(lane, "the connection failed during the TLS handshake: \(error)", i, relay)
            }
        case .laneEOF(let lane), .laneClosed(let lane, nil):
            guard let tls = i.lanes[lane] else { return }
            if tls.ready, let engine = tls.engine {
                engine.feedEndOfInput()
                let (plaintext, _, _) = drain(engine)
                if !plaintext.isEmpty { applyLaneOutput(i, relay.laneBytes(lane, plaintext)) }
                laneEnded(lane, i, relay)
            } else {
                laneFailed(lane, "the connection closed during the TLS handshake", i, relay)
            }
        default:
            break
        }
    }

    private func applyLaneOutput(_ i: InterceptLayer, _ o: RelayOutput) { applyIntercepted(o, i) }

    private func openLane(_ lane: UpstreamLane, _ i: InterceptLayer) {
        i.lanes[lane] = LaneTLS()
        let (address, port) = upstreamAddress(host: i.host, port: i.port)
        commands.append(.connectLane(lane, address: address, port: port))
    }

    private func sendToLane(_ lane: UpstreamLane, _ bytes: [UInt8], _ i: InterceptLayer) {
        guard let tls = i.lanes[lane] else { return }
        guard tls.ready, let engine = tls.engine else {
            tls.pending += bytes
            return
        }
        do { try engine.write(bytes) } catch {
            notice("\(i.host): cannot write to upstream \(lane): \(error)")
            closeLane(lane, i)
            return
        }
        flushLane(lane, engine)
    }

    private func flushLane(_ lane: UpstreamLane, _ engine: TLSEngine) {
        let out = engine.takeOutput()
        if !out.isEmpty { commands.append(.sendToLane(lane, out)) }
    }

    func closeLane(_ lane: UpstreamLane, _ i: InterceptLayer) {
        guard let tls = i.lanes.removeValue(forKey: lane) else { return }
        if tls.ready, let engine = tls.engine {
            engine.close()
            flushLane(lane, engine)
        }
        commands.append(.closeLane(lane))
    }

    private func stepLaneHandshake(_ lane: UpstreamLane, _ tls: LaneTLS, _ i: InterceptLayer, _ relay: any LaneRelay) {
        guard let engine = tls.engine else { return }
        let step = engine.handshake()
        flushLane(lane, engine)
        switch step {
        case .needsMoreInput:
            return
        case .failed(let error):
            laneFailed(lane, "TLS handshake failed: \(error)", i, relay)
        case .complete:
            tls.ready = true
            let pending = tls.pending
            tls.pending = []
            if !pending.isEmpty { sendToLane(lane, pending, i) }
            applyLaneOutput(i, relay.laneConnected(lane))
            // Bytes that came with the end of the handshake.
            let (plaintext, _, _) = drain(engine)
            if !plaintext.isEmpty { applyLaneOutput(i, relay.laneBytes(lane, plaintext)) }
        }
    }

    private func laneFailed(_ lane: UpstreamLane, _ error: String, _ i: InterceptLayer, _ relay: any LaneRelay) {
        notice("\(i.host):\(i.port): extra upstream connection (\(lane)) failed: \(error)")
        closeLane(lane, i)
        applyLaneOutput(i, relay.laneFailed(lane, error: error))
    }

    private func laneEnded(_ lane: UpstreamLane, _ i: InterceptLayer, _ relay: any LaneRelay) {
        applyLaneOutput(i, relay.laneEOF(lane))
        closeLane(lane, i)
    }

    /// Closes every lane (the session ends).
    func closeAllLanes(_ i: InterceptLayer) {
        for lane in Array(i.lanes.keys) { closeLane(lane, i) }
    }
}
