import ProxyCore
import ProxyEventLoop
import ProxyTrace
import Throttle

// Theory of operation: a throttled connection's writes (ProxyCommand.throttle), on the event loop.
//
// The session decides that a connection is shaped; the adapter applies it here, because pacing is about when bytes
// reach the socket, and only the adapter has a clock to wait on. Each leg of the connection (the client, the
// upstream, each lane of an HTTP/1.1 pool) gets a `ShapedLeg`: a queue of the bytes the session asked to send, and
// the `LinkShaper` (Sources/Throttle) that says how many of them may go now and when to ask again. The client leg
// is the link's downlink (server → device), the others its uplink (device → server). So:
//
// - A send queues its bytes and offers their count to the shaper at the loop's monotonic clock; `pump` writes what
//   the shaper releases into the connection and arms one loop timer at the instant it names. Nothing sleeps.
// - A leg is pumped only while its socket's write buffer is below its high-water mark (a shaper's poll reserves
//   bandwidth, which a reservation never written would waste, for every connection on a shared link); the socket's
//   writability event pumps it again.
// - Backpressure: a leg holding more than the loop's high-water mark counts as a full write buffer (the other
//   side's reading pauses until it drains below the low-water mark), so a slow link slows the server, as TCP would.
// - A FIN, close or reset the session asks for waits until the bytes queued before it are written; so does an
//   exchange's record, whose duration and end then count the wait (the app waited that long too).
// - The connection's legs draw from one `SharedLink`: the rule's own when it covers the whole proxy (every throttled
//   connection then shares its bandwidth), else one made for this connection (its upstream and lanes share it).
// - The DNS delay waits before each upstream (or lane) connect; with 100% loss nothing is connected or released,
//   and the app times out as under NLC.

/// One leg's shaped writes: the bytes waiting for the shaper, and what to do once they are all out.
final class ShapedLeg {
    /// What waits for the bytes queued before it: a connection ending, or an exchange's record (written once its
    /// last byte went out, its duration counting the wait).
    enum Ending {
        case shutdownWrite
        case close
        case reset
        case log(ProxyLog, queuedAt: UInt64)
    }

    private var shaper: LinkShaper
    private var queue: [[UInt8]] = []
    private var head = 0
    private var offset = 0
    /// Bytes queued and not yet written to the connection.
    private(set) var queuedBytes = 0
    /// Holds more than the high-water mark (until it drains to the low-water mark).
    private(set) var isFull = false
    /// Endings to carry out once the queue is empty, in order.
    var endings: [Ending] = []
    /// The pending timer and its instant (monotonic nanoseconds).
    var timer: TimerID?
    var timerAt: UInt64 = 0

    init(_ shaper: LinkShaper) { self.shaper = shaper }

    var isEmpty: Bool { queuedBytes == 0 }

    /// Queues `bytes`, arrived at `now`.
    func offer(_ bytes: [UInt8], at now: UInt64) {
        guard !bytes.isEmpty else { return }
        queue.append(bytes)
        queuedBytes += bytes.count
        shaper.offer(bytes.count, at: now)
    }

    /// Writes into `connection` what the shaper releases at `now`; returns when to pump again (nil: when more bytes
    /// are offered, or never at 100% loss).
    func pump(into connection: Connection, at now: UInt64) -> UInt64? {
        let release = shaper.poll(at: now)
        write(release.byteCount, into: connection)
        return release.wakeAt
    }

    /// Writes everything queued at once, unshaped (the leg is being replaced or handed to a raw relay).
    func flush(into connection: Connection?) {
        if let connection { write(queuedBytes, into: connection) }
        queue = []
        head = 0
        offset = 0
        queuedBytes = 0
    }

    /// Updates `isFull` with hysteresis; true when it changed.
    func updateFull(highWater: Int, lowWater: Int) -> Bool {
        let full = isFull ? queuedBytes > lowWater : queuedBytes >= highWater
        defer { isFull = full }
        return full != isFull
    }

    /// Whether `entry` is an exchange's record (the console line, or its JSON event), which waits for the response's
    /// last byte to leave through the throttle.
    static func waitsForBytes(_ entry: ProxyLog) -> Bool {
        switch entry {
        case .exchange: true
        case .event(let event): event.exchange != nil
        default: false
        }
    }

    /// The record with `nanoseconds` more in its duration and end (what the throttle held its last bytes).
    static func delayed(_ entry: ProxyLog, by nanoseconds: UInt64) -> ProxyLog {
        func delayed(_ record: ExchangeSummary) -> ExchangeSummary {
            var record = record
            let seconds = Double(nanoseconds) / 1e9
            record.durationMilliseconds += seconds * 1000
            if var detail = record.detail {
                detail.timings.ended += seconds
                record.detail = detail
            }
            return record
        }
        switch entry {
        case .exchange(let record): return .exchange(delayed(record))
        case .event(var event):
            event.exchange = event.exchange.map(delayed)
            return .event(event)
        default: return entry
        }
    }

    private func write(_ count: Int, into connection: Connection) {
        var left = min(count, queuedBytes)
        queuedBytes -= left
        while left > 0 {
            let chunk = queue[head]
            let n = min(left, chunk.count - offset)
            if offset == 0 && n == chunk.count {
                connection.write(chunk)
            } else {
                chunk.withUnsafeBytes { connection.write(UnsafeRawBufferPointer(rebasing: $0[offset..<(offset + n)])) }
            }
            left -= n
            offset += n
            if offset == chunk.count {
                head += 1
                offset = 0
            }
        }
        if head == queue.count {
            queue.removeAll(keepingCapacity: true)
            head = 0
        } else if head > 64 && head * 2 > queue.count {
            queue.removeFirst(head)
            head = 0
        }
    }
}

/// The shaped legs of one throttled client connection (see the theory of operation).
final class ThrottledConnection {
    let profile: LinkProfile
    /// The buckets every leg draws from: the rule's for the whole proxy, or this connection's own.
    let link: SharedLink
    let client: ShapedLeg
    private(set) var upstream: ShapedLeg
    private(set) var lanes: [UpstreamLane: ShapedLeg] = [:]
    /// Seeds each leg's loss draws (drawn from the system generator, then derived per leg).
    private var seed: UInt64

    init(_ order: ThrottleOrder) {
        profile = order.profile
        link = order.sharedLink ?? SharedLink(profile: order.profile)
        seed = UInt64.random(in: .min ... .max)
        client = ShapedLeg(
            LinkShaper(direction: profile.downlink, roundTrip: profile.roundTrip, seed: seed, shared: link.downlink))
        upstream = ShapedLeg(
            LinkShaper(
                direction: profile.uplink, roundTrip: profile.roundTrip, seed: seed ^ 0x5DEE_CE66_D1CE_4E5B,
                shared: link.uplink))
    }

    /// Nothing ever passes (100% loss): connect nothing, write nothing.
    var stalls: Bool { profile.dropsEverything }
    /// The wait before each upstream connect (High Latency DNS).
    var connectDelay: Duration { profile.dnsDelay }

    /// The leg for `peer` (a lane's made when first asked for).
    func leg(_ peer: ProxyPeer) -> ShapedLeg {
        switch peer {
        case .client: return client
        case .upstream: return upstream
        case .lane(let lane):
            if let leg = lanes[lane] { return leg }
            let leg = newUplink()
            lanes[lane] = leg
            return leg
        }
    }

    /// The leg for `peer` if it exists (a lane's is not made).
    func existingLeg(_ peer: ProxyPeer) -> ShapedLeg? {
        if case .lane(let lane) = peer { return lanes[lane] }
        return leg(peer)
    }

    /// A fresh upstream leg for the next upstream connection; the old one is returned (to flush and end).
    func replaceUpstream() -> ShapedLeg {
        let old = upstream
        upstream = newUplink()
        return old
    }

    func removeLane(_ lane: UpstreamLane) -> ShapedLeg? { lanes.removeValue(forKey: lane) }

    /// Whether some upstream-side leg holds more than the high-water mark.
    var upstreamSideFull: Bool { upstream.isFull || lanes.values.contains(where: \.isFull) }

    /// Every leg, for cancelling their timers.
    var allLegs: [ShapedLeg] { [client, upstream] + Array(lanes.values) }

    private func newUplink() -> ShapedLeg {
        seed = seed &+ 0x9E37_79B9_7F4A_7C15
        return ShapedLeg(
            LinkShaper(direction: profile.uplink, roundTrip: profile.roundTrip, seed: seed, shared: link.uplink))
    }
}
