// Theory of operation: a link profile is what Apple's Network Link Conditioner (NLC) calls a profile: for each
// direction a bandwidth, a packet loss rate and a delay, plus a delay for DNS look-ups. "Down" is the server → device
// direction (response bytes the proxy writes to the client leg), "up" the device → server direction (request bytes the
// proxy writes to the upstream leg). A profile is plain data: the presets (LinkProfile+Presets) and the custom
// `down=…,up=…,latency=…,loss=…` spec (LinkProfile+Spec) both produce one, and a `LinkShaper` per direction turns it
// into a schedule. The delay is one-way, as in NLC, so a profile's round trip is the sum of both directions' delays.

/// A network link's conditions, as a Network Link Conditioner profile states them.
public struct LinkProfile: Sendable, Equatable, CustomStringConvertible {
    /// One direction of the link.
    public struct Direction: Sendable, Equatable {
        /// The bandwidth in bits per second; nil means unlimited (NLC's 0).
        public var bitsPerSecond: Int?
        /// Packets lost, in percent (0–100).
        public var lossPercent: Double
        /// One-way delay added to every byte.
        public var delay: Duration

        public init(bitsPerSecond: Int?, lossPercent: Double = 0, delay: Duration = .zero) {
            self.bitsPerSecond = bitsPerSecond
            self.lossPercent = lossPercent
            self.delay = delay
        }

        /// No limit, no loss, no delay.
        public static let unconditioned = Direction(bitsPerSecond: nil)

        /// True when every packet is lost: nothing ever passes (NLC's "100% Loss").
        public var dropsEverything: Bool { lossPercent >= 100 }
    }

    /// The profile's name: a preset's own name, or "custom".
    public var name: String
    /// Server → device.
    public var downlink: Direction
    /// Device → server.
    public var uplink: Direction
    /// Added before each DNS look-up; the proxy waits this long before it contacts the upstream.
    public var dnsDelay: Duration

    public init(name: String, downlink: Direction, uplink: Direction, dnsDelay: Duration = .zero) {
        self.name = name
        self.downlink = downlink
        self.uplink = uplink
        self.dnsDelay = dnsDelay
    }

    /// Both directions' delays: what one request/response exchange waits at the least.
    public var roundTrip: Duration { downlink.delay + uplink.delay }

    /// True when the link passes nothing at all in either direction: the connection stalls and the app times out.
    public var dropsEverything: Bool { downlink.dropsEverything || uplink.dropsEverything }

    public var description: String {
        func rate(_ d: Direction) -> String {
            guard let bits = d.bitsPerSecond else { return "unlimited" }
            if bits >= 1_000_000, bits % 1_000_000 == 0 { return "\(bits / 1_000_000) Mbit/s" }
            if bits >= 1_000, bits % 1_000 == 0 { return "\(bits / 1_000) kbit/s" }
            return "\(bits) bit/s"
        }
        func ms(_ d: Duration) -> String { "\(d.nanoseconds / 1_000_000) ms" }
        func loss(_ d: Direction) -> String {
            guard d.lossPercent > 0 else { return "" }
            let whole = d.lossPercent.rounded() == d.lossPercent
            return ", \(whole ? String(Int(d.lossPercent)) : String(d.lossPercent))% loss"
        }
        var text = "\(name): down \(rate(downlink)), \(ms(downlink.delay))\(loss(downlink))"
        text += "; up \(rate(uplink)), \(ms(uplink.delay))\(loss(uplink))"
        if dnsDelay > .zero { text += "; DNS +\(ms(dnsDelay))" }
        return text
    }
}

extension Duration {
    /// The duration in whole nanoseconds, clamped at zero (the shaper's instants are unsigned).
    var nanoseconds: UInt64 {
        let (seconds, attoseconds) = components
        guard seconds >= 0 else { return 0 }
        return UInt64(seconds) * 1_000_000_000 + UInt64(attoseconds / 1_000_000_000)
    }
}
