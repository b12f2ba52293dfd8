import HTTP1Core

@testable import ProxyCore

/// A relay whose owner decides every request at once, in the step that asked, as the session does today: each
/// step's `toDecide` is answered with `decide`, and the answers' output is appended to the step's. For tests of what
/// a relay does with a decision, not of when it comes (the relay's own tests hold decisions for that).
@dynamicMemberLookup
final class DecidedRelay<Relay: ExchangeRelay> {
    let relay: Relay
    let decide: (HTTPRequestHead) -> RequestDecision
    /// The requests asked about, in order.
    private(set) var asked: [HTTPRequestHead] = []

    init(_ relay: Relay, decide: @escaping (HTTPRequestHead) -> RequestDecision) {
        self.relay = relay
        self.decide = decide
    }

    subscript<T>(dynamicMember keyPath: KeyPath<Relay, T>) -> T { relay[keyPath: keyPath] }

    /// Runs a step of the relay and answers what it asks, and what the answers ask in turn.
    func step(_ body: (Relay) -> RelayOutput) -> RelayOutput {
        var output = body(relay)
        var toDecide = output.takeToDecide()
        while let request = toDecide.popFirst() {
            asked.append(request.head)
            var next = relay.resolve(request.id, decide(request.head))
            toDecide.append(contentsOf: next.takeToDecide())
            output.append(next)
        }
        return output
    }

    func clientBytes(_ bytes: [UInt8]) -> RelayOutput { step { $0.clientBytes(bytes) } }
    func clientEOF() -> RelayOutput { step { $0.clientEOF() } }
    func clientGone(_ reason: String) -> RelayOutput { step { $0.clientGone(reason) } }
    func upstreamBytes(_ bytes: [UInt8]) -> RelayOutput { step { $0.upstreamBytes(bytes) } }
    func upstreamEOF() -> RelayOutput { step { $0.upstreamEOF() } }
    func upstreamReset(_ reason: String) -> RelayOutput { step { $0.upstreamReset(reason) } }
    func clientReadingHeld(_ held: Bool, at time: Double) { relay.clientReadingHeld(held, at: time) }
    func streamDeadlinesPassed(timeoutAnswer: ATSAnswer) -> RelayOutput {
        step { $0.streamDeadlinesPassed(timeoutAnswer: timeoutAnswer) }
    }
    func deadlinePassed(_ wait: RelayWait, limit: Duration, timeoutAnswer: ATSAnswer) -> RelayOutput {
        step { $0.deadlinePassed(wait, limit: limit, timeoutAnswer: timeoutAnswer) }
    }
}

extension DecidedRelay where Relay == HTTP1Relay {
    convenience init(
        connectedTo upstream: UpstreamTarget?, now: @escaping () -> Double,
        decide: @escaping (HTTPRequestHead) -> RequestDecision
    ) {
        self.init(HTTP1Relay(connectedTo: upstream, now: now), decide: decide)
    }

    func upstreamConnected(_ target: UpstreamTarget) -> RelayOutput { step { $0.upstreamConnected(target) } }
    func upstreamFailed(_ message: String) -> RelayOutput { step { $0.upstreamFailed(message) } }
}

extension DecidedRelay where Relay: LaneRelay {
    func laneConnected(_ lane: UpstreamLane) -> RelayOutput { step { $0.laneConnected(lane) } }
    func laneFailed(_ lane: UpstreamLane, error: String) -> RelayOutput { step { $0.laneFailed(lane, error: error) } }
    func laneBytes(_ lane: UpstreamLane, _ bytes: [UInt8]) -> RelayOutput { step { $0.laneBytes(lane, bytes) } }
    func laneEOF(_ lane: UpstreamLane) -> RelayOutput { step { $0.laneEOF(lane) } }
    func laneReset(_ lane: UpstreamLane, reason: String) -> RelayOutput {
        step { $0.laneReset(lane, reason: reason) }
    }
}

extension RelayOutput {
    /// Adds a later step's output to this one, as the session would have carried out both in turn.
    mutating func append(_ later: RelayOutput) {
        toDecide.append(contentsOf: later.toDecide)
        toClient += later.toClient
        toUpstream += later.toUpstream
        exchanges += later.exchanges
        connect = later.connect ?? connect
        closeClient = closeClient || later.closeClient
        abortClient = abortClient || later.abortClient
        closeUpstream = closeUpstream || later.closeUpstream
        switchedToRaw = switchedToRaw || later.switchedToRaw
        lanes.open += later.lanes.open
        lanes.bytes += later.lanes.bytes
        lanes.close += later.lanes.close
        pauseReading.merge(later.pauseReading) { _, new in new }
        unsolicitedUpstream = later.unsolicitedUpstream ?? unsolicitedUpstream
        lanes.unsolicited += later.lanes.unsolicited
        retry = later.retry ?? retry
    }
}
