// Theory of operation: the proxy's end of every TCP connection a device opens through the tunnel. The device's
// packets arrive decrypted (IPv4, checked by `TunnelPacket`); this takes their TCP segments and gives back packets
// for the device and events for the session behind each connection. It is passive only (the device always opens),
// accepts a SYN to any address and port (that is the point: the destination is where the app was going), and
// completes the handshake before telling anyone (`opened`), so a flood of SYNs costs a table entry each and starts
// no session and no upstream connection.
//
// It is deliberately small, for a link of one hop whose far end is a real, well-behaved TCP (iOS, Android, Linux):
// - receive: only the next expected bytes are taken; a segment from the future is dropped and answered with a
//   duplicate ACK, which makes the device retransmit (its own stack keeps what it sent). Every segment carrying
//   data or FIN is acknowledged at once (no delayed ACK). The window is a fixed 64 KiB (no window scaling is
//   offered, so none is used either way), and 0 while the session cannot take more (`setReceivePaused`).
// - send: bytes the session gives are queued and sent as segments of the device's MSS within its window; a
//   retransmission timer (RFC 6298's estimator, Karn's rule, doubling back-off, 8 tries then RST) resends from the
//   first unacknowledged byte; three duplicate ACKs resend that segment at once (fast retransmit). No congestion
//   control beyond the device's window: one hop, and the WireGuard socket's own buffer in front of it.
// - close: FIN either way, a half-close held as long as the other side sends; both FINs acknowledged end in a
//   short TIME-WAIT (2 s, enough to answer a retransmitted FIN) and the flow is forgotten (`closed`). RST either
//   way forgets it at once.
// Sans-io: segments, session bytes and a monotonic time in nanoseconds in; packets and events out. Timers are one
// deadline per flow, kept in a set of the flows that have one, so `tick` never walks idle flows.

/// The TCP connections of one device inside the tunnel (see the theory of operation above).
public struct TunnelTCP: Sendable {
    /// One connection: the device's address and port, and the destination it asked for.
    public struct FlowID: Hashable, Sendable, CustomStringConvertible {
        public let device: UInt32
        public let devicePort: UInt16
        public let destination: UInt32
        public let destinationPort: UInt16

        public init(device: UInt32, devicePort: UInt16, destination: UInt32, destinationPort: UInt16) {
            self.device = device
            self.devicePort = devicePort
            self.destination = destination
            self.destinationPort = destinationPort
        }

        /// The destination's four address bytes.
        public var destinationBytes: [UInt8] { TunnelTCP.bytes(destination) }
        public var deviceBytes: [UInt8] { TunnelTCP.bytes(device) }
        public var description: String {
            "\(ipv4Text(deviceBytes)):\(devicePort) → \(ipv4Text(destinationBytes)):\(destinationPort)"
        }
    }

    /// What the stack tells the side that runs the sessions.
    public enum Event: Equatable, Sendable {
        /// The device completed the handshake: start a session toward the flow's destination.
        case opened(FlowID)
        /// Bytes from the device, in order.
        case data(FlowID, [UInt8])
        /// The device sent FIN: it sends nothing more (it may still read).
        case finished(FlowID)
        /// The device reset the connection, or stopped answering (retransmissions exhausted): abort its session.
        case reset(FlowID)
        /// Both directions ended; the flow is forgotten.
        case closed(FlowID)
        /// The bytes queued toward the device fell below half the limit after `send` said it was full.
        case writable(FlowID)
    }

    /// Packets for the device (whole IPv4 packets) and events, in order.
    public struct Output: Equatable, Sendable {
        public var packets: [[UInt8]] = []
        public var events: [Event] = []
        public init() {}
    }

    /// Bounds and timing.
    public struct Limits: Sendable {
        /// Connections a device may hold at once (SYN-RECEIVED included); a SYN beyond it is answered with RST.
        public var maximumFlows = 4096
        /// The receive window advertised (no scaling).
        public var receiveWindow: UInt16 = 65535
        /// The MSS offered: the tunnel's MTU (1420, wg-quick's default) less 40 bytes of IPv4 and TCP headers.
        public var maximumSegmentSize: UInt16 = 1380
        /// Bytes queued toward the device (sent or not, unacknowledged) beyond which `send` says "full".
        public var sendBufferLimit = 256 * 1024
        public var initialRTO: UInt64 = 1_000_000_000
        public var minimumRTO: UInt64 = 200_000_000
        public var maximumRTO: UInt64 = 30_000_000_000
        /// Retransmissions of the same data (or SYN-ACK) before giving up.
        public var maximumRetransmissions = 8
        public var timeWait: UInt64 = 2_000_000_000
        /// How long a flow whose FIN the device acknowledged waits for the device's own FIN (FIN-WAIT-2) before it
        /// is reset and forgotten: the session behind it is gone, so nothing else would end it.
        public var finWait2: UInt64 = 60_000_000_000
        public init() {}
    }

    let limits: Limits
    private var flows: [FlowID: Flow] = [:]
    /// Flows with a deadline (retransmission, persist or TIME-WAIT).
    private var timed: Set<FlowID> = []
    private var identification: UInt16 = 0
    private let initialSequence: @Sendable () -> UInt32

    /// `initialSequence` picks each connection's first sequence number (random by default; tests fix it).
    public init(limits: Limits = Limits(), initialSequence: @escaping @Sendable () -> UInt32 = { .random(in: .min ... .max) })
    {
        self.limits = limits
        self.initialSequence = initialSequence
    }

    /// Connections held now.
    public var flowCount: Int { flows.count }

    /// The earliest deadline among the flows, for the caller's timer; nil when none waits for time.
    public var nextDeadline: UInt64? { timed.lazy.compactMap { flows[$0]?.deadline }.min() }

    /// Whether the bytes queued toward the device on `flow` reached the limit (stop reading the session until
    /// `writable`). False for an unknown flow.
    public func isSendBufferFull(_ flow: FlowID) -> Bool {
        guard let entry = flows[flow] else { return false }
        return entry.queuedBytes >= limits.sendBufferLimit
    }

    // MARK: From the device

    /// Takes one TCP segment the device sent in a packet from `source` to `destination` (4-byte addresses).
    public mutating func receive(
        _ segment: TCPSegment, source: [UInt8], destination: [UInt8], now: UInt64
    ) -> Output {
        var out = Output()
        let id = FlowID(
            device: Self.value(source), devicePort: segment.sourcePort, destination: Self.value(destination),
            destinationPort: segment.destinationPort)
        guard var flow = flows[id] else {
            accept(segment, id: id, now: now, into: &out)
            return out
        }
        if segment.flags.contains(.rst) {
            // Taken only in the window (RFC 5961's simple form), so a stale reset does not end a live connection.
            let offset = segment.sequence &- flow.receiveNext
            if offset <= UInt32(limits.receiveWindow) {
                forget(id)
                if flow.state != .synReceived, flow.state != .timeWait { out.events.append(.reset(id)) }
            }
            return out
        }
        if segment.flags.contains(.syn) {
            if flow.state == .synReceived, segment.sequence &+ 1 == flow.receiveNext {
                sendSynAck(&flow, id: id, into: &out)  // our SYN-ACK was lost
                flows[id] = flow
            } else if flow.state == .timeWait, Self.after(segment.sequence, flow.receiveNext) {
                forget(id)  // the port used again for a new connection: the old one's session ends first
                out.events.append(.closed(id))
                accept(segment, id: id, now: now, into: &out)
            } else {
                sendAck(&flow, id: id, into: &out)  // challenge ACK (RFC 5961 §4)
                flows[id] = flow
            }
            return out
        }
        guard segment.flags.contains(.ack) else { return out }  // every segment after SYN carries ACK
        if flow.state == .synReceived {
            guard segment.acknowledgment == flow.sendUnacknowledged &+ 1 else {
                reset(id: id, sequence: segment.acknowledgment, acknowledgment: nil, into: &out)
                return out
            }
            flow.sendUnacknowledged &+= 1
            flow.sendNext = flow.sendUnacknowledged
            flow.sendMax = flow.sendUnacknowledged
            flow.state = .established
            flow.retries = 0
            flow.deadline = nil
            timed.remove(id)
            out.events.append(.opened(id))
        }
        var needsAck = acknowledge(segment, flow: &flow, id: id, now: now, into: &out)
        needsAck = takeData(segment, flow: &flow, id: id, into: &out) || needsAck
        if flow.state == .timeWait, segment.flags.contains(.fin) { needsAck = true }  // our ACK of its FIN was lost
        let sent = transmit(&flow, id: id, now: now, into: &out)
        if needsAck, !sent { sendAck(&flow, id: id, into: &out) }
        settle(flow, id: id, now: now, into: &out)
        return out
    }

    // MARK: From the session

    /// Queues `bytes` toward the device on `flow` and sends what its window allows. Nothing for an unknown flow
    /// or one already finished by `finish`.
    public mutating func send(_ bytes: [UInt8], on id: FlowID, now: UInt64) -> Output {
        var out = Output()
        guard var flow = flows[id], !flow.finishQueued, !bytes.isEmpty else { return out }
        flow.outgoing += bytes
        if flow.queuedBytes >= limits.sendBufferLimit { flow.senderBlocked = true }
        _ = transmit(&flow, id: id, now: now, into: &out)
        settle(flow, id: id, now: now, into: &out)
        return out
    }

    /// The session sends nothing more on `flow`: FIN after the queued bytes.
    public mutating func finish(_ id: FlowID, now: UInt64) -> Output {
        var out = Output()
        guard var flow = flows[id], !flow.finishQueued else { return out }
        flow.finishQueued = true
        _ = transmit(&flow, id: id, now: now, into: &out)
        settle(flow, id: id, now: now, into: &out)
        return out
    }

    /// Ends `flow` at once with RST (the session failed or was aborted). No event follows.
    public mutating func abort(_ id: FlowID) -> Output {
        var out = Output()
        guard let flow = flows[id] else { return out }
        forget(id)
        if flow.state != .timeWait {
            reset(id: id, sequence: flow.sendMax, acknowledgment: flow.receiveNext, into: &out)
        }
        return out
    }

    /// Closes the receive window while the session cannot take more, and opens it again (a window update).
    public mutating func setReceivePaused(_ paused: Bool, on id: FlowID) -> Output {
        var out = Output()
        guard var flow = flows[id], flow.receivePaused != paused else { return out }
        flow.receivePaused = paused
        if !paused, flow.state != .timeWait { sendAck(&flow, id: id, into: &out) }
        flows[id] = flow
        return out
    }

    // MARK: Time

    /// Retransmissions, window probes and TIME-WAIT ends due at `now`.
    public mutating func tick(now: UInt64) -> Output {
        var out = Output()
        for id in timed {
            guard var flow = flows[id], let deadline = flow.deadline, deadline <= now else { continue }
            expire(&flow, id: id, now: now, into: &out)
        }
        return out
    }

    private mutating func expire(_ flow: inout Flow, id: FlowID, now: UInt64, into out: inout Output) {
        if flow.state == .timeWait {
            forget(id)
            out.events.append(.closed(id))
            return
        }
        if flow.finAcknowledged, !flow.peerFinished {  // FIN-WAIT-2 ran out
            forget(id)
            reset(id: id, sequence: flow.sendMax, acknowledgment: flow.receiveNext, into: &out)
            out.events.append(.closed(id))
            return
        }
        flow.retries += 1
        if flow.retries > limits.maximumRetransmissions {
            let opened = flow.state != .synReceived
            forget(id)
            reset(id: id, sequence: flow.sendMax, acknowledgment: flow.receiveNext, into: &out)
            if opened { out.events.append(.reset(id)) }
            return
        }
        flow.rto = min(flow.rto * 2, limits.maximumRTO)
        flow.timing = nil  // Karn: no RTT sample from a retransmitted segment
        if flow.state == .synReceived {
            sendSynAck(&flow, id: id, into: &out)
        } else {
            // Go back to the first unacknowledged byte and send one segment; ACKs bring the rest.
            flow.sendNext = flow.sendUnacknowledged
            flow.finSent = false
            _ = transmit(&flow, id: id, now: now, limit: flow.peerWindow == 0 ? 1 : flow.mss, into: &out)
        }
        flow.deadline = now + flow.rto
        flows[id] = flow
    }

    // MARK: Handshake

    private mutating func accept(_ segment: TCPSegment, id: FlowID, now: UInt64, into out: inout Output) {
        if segment.flags.contains(.rst) { return }
        guard segment.flags.contains(.syn), segment.flags.isDisjoint(with: [.ack, .fin]) else {
            // Not a connection of ours (ended, or never opened): RST as RFC 793 §3.4 says.
            if segment.flags.contains(.ack) {
                reset(id: id, sequence: segment.acknowledgment, acknowledgment: nil, into: &out)
            } else {
                reset(id: id, sequence: 0, acknowledgment: segment.sequence &+ segment.sequenceLength, into: &out)
            }
            return
        }
        guard flows.count < limits.maximumFlows else {
            reset(id: id, sequence: 0, acknowledgment: segment.sequence &+ 1, into: &out)
            return
        }
        let first = initialSequence()
        var flow = Flow(
            sendUnacknowledged: first, receiveNext: segment.sequence &+ 1,
            mss: max(Int(min(segment.maximumSegmentSize ?? 536, limits.maximumSegmentSize)), Self.minimumSegmentSize),
            rto: limits.initialRTO)
        flow.peerWindow = UInt32(segment.window)
        sendSynAck(&flow, id: id, into: &out)
        flow.deadline = now + flow.rto
        timed.insert(id)
        flows[id] = flow
    }

    private mutating func sendSynAck(_ flow: inout Flow, id: FlowID, into out: inout Output) {
        emit(
            TCPSegment(
                sourcePort: id.destinationPort, destinationPort: id.devicePort, sequence: flow.sendUnacknowledged,
                acknowledgment: flow.receiveNext, flags: [.syn, .ack], window: advertise(&flow),
                maximumSegmentSize: limits.maximumSegmentSize), id: id, into: &out)
    }

    // MARK: Acknowledgments and data

    /// Takes the segment's ACK and window; true when it must be answered with an ACK (it acknowledged data not
    /// sent yet).
    private mutating func acknowledge(
        _ segment: TCPSegment, flow: inout Flow, id: FlowID, now: UInt64, into out: inout Output
    ) -> Bool {
        let acked = segment.acknowledgment &- flow.sendUnacknowledged
        let outstanding = flow.sendMax &- flow.sendUnacknowledged
        if acked > outstanding && !Self.after(flow.sendUnacknowledged, segment.acknowledgment) {
            return true  // acknowledges what was never sent: answer with our ACK and take nothing
        }
        if Self.after(flow.sendUnacknowledged, segment.acknowledgment) { return false }  // an old ACK
        let windowChanged = flow.peerWindow != UInt32(segment.window)
        let wasClosed = flow.peerWindow == 0
        flow.peerWindow = UInt32(segment.window)
        if acked == 0, wasClosed {
            // An answer to a window probe: the device is alive, so probing goes on as long as it answers (RFC 1122
            // §4.2.2.17); the probe's byte was refused (it would have been acknowledged), so once the window opens,
            // sending starts again from SND.UNA.
            flow.retries = 0
            if flow.peerWindow > 0, flow.sendNext != flow.sendUnacknowledged {
                flow.sendNext = flow.sendUnacknowledged
                flow.finSent = false
                flow.timing = nil
            }
            return false
        }
        if acked == 0 {
            if outstanding > 0, segment.payload.isEmpty, !segment.flags.contains(.fin), !windowChanged {
                flow.duplicateAcks += 1
                if flow.duplicateAcks == 3 {  // fast retransmit of the first unacknowledged segment
                    let resume = flow.sendNext
                    let finWasSent = flow.finSent
                    flow.sendNext = flow.sendUnacknowledged
                    flow.finSent = false
                    flow.timing = nil
                    _ = transmit(&flow, id: id, now: now, limit: flow.mss, into: &out)
                    if Self.after(resume, flow.sendNext) {
                        flow.sendNext = resume
                        flow.finSent = finWasSent
                    }
                }
            }
            return false
        }
        let queued = flow.queuedBytes
        let dataAcked = min(Int(acked), queued)
        flow.dropAcknowledged(dataAcked)
        if flow.finishQueued, Int(acked) == queued + 1 {  // up to SND.MAX: the FIN was sent, maybe before a timeout
            flow.finAcknowledged = true
            flow.finSent = true
        }
        flow.sendUnacknowledged = segment.acknowledgment
        if Self.after(segment.acknowledgment, flow.sendNext) { flow.sendNext = segment.acknowledgment }
        if let timing = flow.timing, !Self.after(timing.sequence, segment.acknowledgment) {
            sampleRTT(&flow, now &- timing.sentAt)
            flow.timing = nil
        }
        flow.retries = 0
        flow.duplicateAcks = 0
        flow.deadline = flow.sendMax == flow.sendUnacknowledged ? nil : now + flow.rto
        if flow.senderBlocked, flow.queuedBytes < limits.sendBufferLimit / 2 {
            flow.senderBlocked = false
            out.events.append(.writable(id))
        }
        return false
    }

    /// RFC 6298 §2.
    private func sampleRTT(_ flow: inout Flow, _ rtt: UInt64) {
        if let smoothed = flow.smoothedRTT {
            let difference = smoothed > rtt ? smoothed - rtt : rtt - smoothed
            flow.rttVariance = (3 * flow.rttVariance + difference) / 4
            flow.smoothedRTT = (7 * smoothed + rtt) / 8
        } else {
            flow.smoothedRTT = rtt
            flow.rttVariance = rtt / 2
        }
        let rto = flow.smoothedRTT! + max(4 * flow.rttVariance, 1_000_000)
        flow.rto = min(max(rto, limits.minimumRTO), limits.maximumRTO)
    }

    /// Takes the in-order part of the segment's data and its FIN; true when an ACK must answer.
    private mutating func takeData(_ segment: TCPSegment, flow: inout Flow, id: FlowID, into out: inout Output)
        -> Bool
    {
        let fin = segment.flags.contains(.fin)
        guard !segment.payload.isEmpty || fin else { return false }
        guard !flow.peerFinished else { return true }  // retransmitted after its FIN: ACK again
        var payload = segment.payload
        var sequence = segment.sequence
        if Self.after(flow.receiveNext, sequence) {
            let duplicate = Int(flow.receiveNext &- sequence)
            guard duplicate < payload.count || (fin && duplicate == payload.count) else { return true }
            payload = payload.dropFirst(duplicate)
            sequence = flow.receiveNext
        }
        guard sequence == flow.receiveNext else { return true }  // from the future: duplicate ACK
        let room = Int(Int32(bitPattern: flow.advertisedEdge &- flow.receiveNext))
        let taken = min(payload.count, max(room, 0))
        if taken > 0 {
            out.events.append(.data(id, Array(payload.prefix(taken))))
            flow.receiveNext &+= UInt32(taken)
            if flow.finAcknowledged { flow.deadline = nil }  // FIN-WAIT-2 counts from the device's last byte
        }
        if fin, taken == payload.count {
            flow.receiveNext &+= 1
            flow.peerFinished = true
            out.events.append(.finished(id))
        }
        return true
    }

    // MARK: Sending

    /// Sends queued bytes (and the FIN once they are all out) within the device's window, at most `limit` bytes
    /// of data; true when a segment went out (it carried the ACK).
    @discardableResult
    private mutating func transmit(
        _ flow: inout Flow, id: FlowID, now: UInt64, limit: Int = .max, into out: inout Output
    ) -> Bool {
        guard flow.state != .synReceived, flow.state != .timeWait, !flow.finAcknowledged else { return false }
        var sentSomething = false
        let queued = flow.queuedBytes
        var offset = Int(flow.sendNext &- flow.sendUnacknowledged)
        if flow.finSent { offset -= 1 }
        let window = flow.peerWindow == 0 && limit == 1 ? 1 : Int(flow.peerWindow)
        var budget = limit
        while offset < queued, budget > 0 {
            let room = window - offset
            guard room > 0 else { break }
            let count = min(flow.mss, queued - offset, room, budget)
            let start = flow.outgoingStart + offset
            let last = offset + count == queued
            let sequence = flow.sendUnacknowledged &+ UInt32(offset)
            emit(
                TCPSegment(
                    sourcePort: id.destinationPort, destinationPort: id.devicePort, sequence: sequence,
                    acknowledgment: flow.receiveNext, flags: last ? [.ack, .psh] : .ack, window: advertise(&flow),
                    payload: flow.outgoing[start..<(start + count)]), id: id, into: &out)
            if flow.timing == nil, flow.retries == 0 { flow.timing = (sequence, now) }
            offset += count
            budget -= count
            flow.sendNext = flow.sendUnacknowledged &+ UInt32(offset)
            sentSomething = true
        }
        if flow.finishQueued, !flow.finSent, !flow.finAcknowledged, offset == queued, budget > 0 || queued == 0 {
            emit(
                TCPSegment(
                    sourcePort: id.destinationPort, destinationPort: id.devicePort,
                    sequence: flow.sendUnacknowledged &+ UInt32(queued), acknowledgment: flow.receiveNext,
                    flags: [.fin, .ack], window: advertise(&flow)), id: id, into: &out)
            flow.finSent = true
            flow.sendNext = flow.sendUnacknowledged &+ UInt32(queued) &+ 1
            sentSomething = true
        }
        if Self.after(flow.sendNext, flow.sendMax) { flow.sendMax = flow.sendNext }
        if flow.sendNext != flow.sendUnacknowledged || (queued > offset && flow.peerWindow == 0) {
            if flow.deadline == nil { flow.deadline = now + flow.rto }  // retransmission or window probe
        }
        return sentSomething
    }

    private mutating func sendAck(_ flow: inout Flow, id: FlowID, into out: inout Output) {
        emit(
            TCPSegment(
                sourcePort: id.destinationPort, destinationPort: id.devicePort, sequence: flow.sendNext,
                acknowledgment: flow.receiveNext, flags: .ack, window: advertise(&flow)), id: id, into: &out)
    }

    /// The window to put in a segment now, remembering its right edge (never moved left: bytes already allowed
    /// are still taken after a pause).
    private func advertise(_ flow: inout Flow) -> UInt16 {
        let window = flow.receivePaused ? 0 : limits.receiveWindow
        let edge = flow.receiveNext &+ UInt32(window)
        if Self.after(edge, flow.advertisedEdge) { flow.advertisedEdge = edge }
        return window
    }

    private mutating func reset(id: FlowID, sequence: UInt32, acknowledgment: UInt32?, into out: inout Output) {
        emit(
            TCPSegment(
                sourcePort: id.destinationPort, destinationPort: id.devicePort, sequence: sequence,
                acknowledgment: acknowledgment ?? 0, flags: acknowledgment == nil ? .rst : [.rst, .ack], window: 0),
            id: id, into: &out)
    }

    private mutating func emit(_ segment: TCPSegment, id: FlowID, into out: inout Output) {
        identification &+= 1
        out.packets.append(segment.packet(from: id.destinationBytes, to: id.deviceBytes, identification: identification))
    }

    // MARK: Bookkeeping

    /// Stores the flow after a change: closes it when both sides are done, keeps the timer set in step.
    private mutating func settle(_ flow: Flow, id: FlowID, now: UInt64, into out: inout Output) {
        var flow = flow
        if flow.state != .timeWait, flow.peerFinished, flow.finAcknowledged {
            flow.state = .timeWait
            flow.deadline = now + limits.timeWait
            flow.outgoing = []
            flow.outgoingStart = 0
        } else if flow.finAcknowledged, !flow.peerFinished, flow.deadline == nil {
            flow.deadline = now + limits.finWait2
        }
        if flow.deadline == nil { timed.remove(id) } else { timed.insert(id) }
        flows[id] = flow
    }

    private mutating func forget(_ id: FlowID) {
        flows[id] = nil
        timed.remove(id)
    }

    /// The smallest segment sent whatever MSS the device offers (Linux's TCP_MIN_SND_MSS): an MSS of 0 made
    /// `transmit` loop for ever on empty segments, and a tiny one would cost a packet per byte.
    static let minimumSegmentSize = 48

    /// Whether sequence number `a` is after `b` (modulo 2^32).
    static func after(_ a: UInt32, _ b: UInt32) -> Bool { Int32(bitPattern: a &- b) > 0 }

    /// The 4 bytes of an IPv4 address as one number (as `FlowID` keeps addresses).
    public static func value(_ bytes: [UInt8]) -> UInt32 {
        UInt32(bytes[0]) << 24 | UInt32(bytes[1]) << 16 | UInt32(bytes[2]) << 8 | UInt32(bytes[3])
    }

    static func bytes(_ value: UInt32) -> [UInt8] {
        [UInt8(value >> 24), UInt8((value >> 16) & 0xFF), UInt8((value >> 8) & 0xFF), UInt8(value & 0xFF)]
    }
}

/// One connection's state: sequence numbers, the bytes not yet acknowledged, timers.
private struct Flow: Sendable {
    enum State: Sendable { case synReceived, established, timeWait }
    var state = State.synReceived
    /// SND.UNA: the first byte the device has not acknowledged (our SYN's sequence until the handshake ends).
    var sendUnacknowledged: UInt32
    /// SND.NXT: the next sequence number to send.
    var sendNext: UInt32 = 0
    /// SND.MAX: the highest sequence number sent (SND.NXT goes back after a timeout; an ACK up to here is good).
    var sendMax: UInt32 = 0
    /// The bytes from SND.UNA on, sent or not, starting at `outgoingStart` (compacted as ACKs come).
    var outgoing: [UInt8] = []
    var outgoingStart = 0
    var finishQueued = false
    var finSent = false
    var finAcknowledged = false
    var senderBlocked = false
    /// RCV.NXT, and the right edge of the window last advertised.
    var receiveNext: UInt32
    var advertisedEdge: UInt32 = 0
    var receivePaused = false
    var peerFinished = false
    var peerWindow: UInt32 = 0
    let mss: Int
    var rto: UInt64
    var smoothedRTT: UInt64?
    var rttVariance: UInt64 = 0
    var timing: (sequence: UInt32, sentAt: UInt64)?
    var deadline: UInt64?
    var retries = 0
    var duplicateAcks = 0

    init(sendUnacknowledged: UInt32, receiveNext: UInt32, mss: Int, rto: UInt64) {
        self.sendUnacknowledged = sendUnacknowledged
        self.sendNext = sendUnacknowledged
        self.sendMax = sendUnacknowledged
        self.receiveNext = receiveNext
        self.advertisedEdge = receiveNext
        self.mss = mss
        self.rto = rto
    }

    /// Bytes queued from SND.UNA on.
    var queuedBytes: Int { outgoing.count - outgoingStart }

    mutating func dropAcknowledged(_ count: Int) {
        outgoingStart += count
        if outgoingStart == outgoing.count {
            outgoing.removeAll(keepingCapacity: outgoing.capacity <= 64 * 1024)
            outgoingStart = 0
        } else if outgoingStart >= 64 * 1024 {
            outgoing.removeFirst(outgoingStart)
            outgoingStart = 0
        }
    }
}
