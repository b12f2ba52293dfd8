// The text of a `--throttle` profile: a preset's name ("3G", "Very Bad Network") or a custom spec of comma-separated
// `key=value` pairs. Keys: `down`, `up` (bandwidth), `latency` (one-way delay for both directions), `down-latency`,
// `up-latency`, `loss` (both directions), `down-loss`, `up-loss`, `dns` (DNS delay). A direction without a bandwidth
// is unlimited. Bandwidth units are per second and decimal (k = 1000): bit, kbit, Mbit, Gbit (also kbps, Mbps) and
// B, kB, MB (bytes); `unlimited` is allowed. Times: ms or s. Loss: a percentage with %, 0 to 100.

/// Why a `--throttle` profile text was refused; the description names the part at fault and what was expected.
public enum ThrottleSpecError: Error, Equatable, CustomStringConvertible {
    case empty
    case unknownProfile(String)
    case missingValue(key: String)
    case unknownKey(String)
    case duplicateKey(String)
    case badBandwidth(key: String, value: String)
    case zeroBandwidth(key: String)
    case badDuration(key: String, value: String)
    case badLoss(key: String, value: String)

    public var description: String {
        switch self {
        case .empty:
            return "empty throttle profile: give a profile name (\(LinkProfile.presetNames)) or down=…,up=…,latency=…,loss=…"
        case .unknownProfile(let name):
            return "unknown throttle profile \"\(name)\": known profiles are \(LinkProfile.presetNames), "
                + "or a custom one such as down=780kbit,up=330kbit,latency=100ms,loss=1%"
        case .missingValue(let key):
            return "throttle: \"\(key)\" needs a value (key=value)"
        case .unknownKey(let key):
            return "throttle: unknown key \"\(key)\" (known: \(LinkProfile.specKeys.joined(separator: ", ")))"
        case .duplicateKey(let key):
            return "throttle: \"\(key)\" is given twice"
        case .badBandwidth(let key, let value):
            return "throttle: \(key)=\(value) is not a bandwidth: write a number and a unit per second "
                + "(bit, kbit, Mbit, Gbit, kbps, Mbps, B, kB, MB), e.g. 780kbit, or unlimited"
        case .zeroBandwidth(let key):
            return "throttle: \(key) of 0 would pass nothing: use loss=100% to stall a link, or unlimited"
        case .badDuration(let key, let value):
            return "throttle: \(key)=\(value) is not a duration: write a number with ms or s, e.g. 100ms"
        case .badLoss(let key, let value):
            return "throttle: \(key)=\(value) is not a loss rate: write a percentage from 0% to 100%, e.g. 1%"
        }
    }
}

extension LinkProfile {
    /// The keys a custom spec may use.
    static let specKeys = ["down", "up", "latency", "down-latency", "up-latency", "loss", "down-loss", "up-loss", "dns"]

    static var presetNames: String { presets.map(\.name).joined(separator: ", ") }

    /// Parses a preset's name or a custom `down=…,up=…,latency=…,loss=…` spec.
    public init(parsing text: String) throws(ThrottleSpecError) {
        let trimmed = text.trimmingSpaces
        guard !trimmed.isEmpty else { throw .empty }
        guard trimmed.contains("=") else {
            guard let preset = LinkProfile.preset(named: trimmed) else { throw .unknownProfile(trimmed) }
            self = preset
            return
        }
        var profile = LinkProfile(name: "custom", downlink: .unconditioned, uplink: .unconditioned)
        var seen: Set<String> = []
        for part in trimmed.split(separator: ",", omittingEmptySubsequences: false) {
            let pair = part.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let key = String(pair[0]).trimmingSpaces.lowercased()
            guard LinkProfile.specKeys.contains(key) else {
                throw key.isEmpty ? .missingValue(key: String(part)) : .unknownKey(key)
            }
            guard pair.count == 2, !String(pair[1]).trimmingSpaces.isEmpty else { throw .missingValue(key: key) }
            let value = String(pair[1]).trimmingSpaces
            guard seen.insert(key).inserted else { throw .duplicateKey(key) }
            switch key {
            case "down": profile.downlink.bitsPerSecond = try Self.bandwidth(value, key: key)
            case "up": profile.uplink.bitsPerSecond = try Self.bandwidth(value, key: key)
            case "latency":
                let d = try Self.duration(value, key: key)
                profile.downlink.delay = d
                profile.uplink.delay = d
            case "down-latency": profile.downlink.delay = try Self.duration(value, key: key)
            case "up-latency": profile.uplink.delay = try Self.duration(value, key: key)
            case "loss":
                let l = try Self.loss(value, key: key)
                profile.downlink.lossPercent = l
                profile.uplink.lossPercent = l
            case "down-loss": profile.downlink.lossPercent = try Self.loss(value, key: key)
            case "up-loss": profile.uplink.lossPercent = try Self.loss(value, key: key)
            default: profile.dnsDelay = try Self.duration(value, key: key)  // "dns"
            }
        }
        // `latency` with `down-latency` (or `loss` with `down-loss`) would depend on the order written: refuse it.
        for (both, one) in [("latency", "down-latency"), ("latency", "up-latency"), ("loss", "down-loss"),
                            ("loss", "up-loss")] where seen.contains(both) && seen.contains(one) {
            throw .duplicateKey(one)
        }
        self = profile
    }

    /// Bits per second, or nil for `unlimited`.
    static func bandwidth(_ value: String, key: String) throws(ThrottleSpecError) -> Int? {
        if value.lowercased() == "unlimited" { return nil }
        guard let (number, unit) = splitNumber(value) else { throw .badBandwidth(key: key, value: value) }
        let bits: Double
        switch unit {
        case "B", "B/s", "Bps": bits = number * 8
        case "kB", "KB", "kB/s", "KB/s": bits = number * 8_000
        case "MB", "MB/s": bits = number * 8_000_000
        default:
            // The bit units, any case: "kbit", "Kbit", "mbit/s", "Mbps".
            let multipliers: [String: Double] = [
                "bit": 1, "bps": 1, "kbit": 1e3, "kbps": 1e3, "mbit": 1e6, "mbps": 1e6, "gbit": 1e9, "gbps": 1e9,
            ]
            var u = unit.lowercased()
            if u.hasSuffix("/s") { u.removeLast(2) }
            guard let m = multipliers[u] else { throw .badBandwidth(key: key, value: value) }
            bits = number * m
        }
        guard bits.isFinite, bits < 1e15 else { throw .badBandwidth(key: key, value: value) }
        guard bits >= 1 else { throw .zeroBandwidth(key: key) }
        return Int(bits.rounded())
    }

    static func duration(_ value: String, key: String) throws(ThrottleSpecError) -> Duration {
        guard let (number, unit) = splitNumber(value) else { throw .badDuration(key: key, value: value) }
        let milliseconds: Double
        switch unit.lowercased() {
        case "ms": milliseconds = number
        case "s": milliseconds = number * 1000
        case "" where number == 0: milliseconds = 0
        default: throw .badDuration(key: key, value: value)
        }
        // An hour is far past any app's timeout: larger is a typo.
        guard milliseconds <= 3_600_000 else { throw .badDuration(key: key, value: value) }
        return .nanoseconds(Int64((milliseconds * 1e6).rounded()))
    }

    static func loss(_ value: String, key: String) throws(ThrottleSpecError) -> Double {
        guard let (number, unit) = splitNumber(value), unit == "%" || (unit.isEmpty && number == 0),
              number <= 100
        else { throw .badLoss(key: key, value: value) }
        return number
    }

    /// A non-negative decimal number and the unit after it ("780kbit" → (780, "kbit")).
    private static func splitNumber(_ text: String) -> (Double, String)? {
        let digits = text.prefix { $0.isASCII && ($0.isNumber || $0 == ".") }
        guard !digits.isEmpty, digits.first != ".", let number = Double(digits), number.isFinite else { return nil }
        return (number, String(text.dropFirst(digits.count)).trimmingSpaces)
    }
}

extension String {
    var trimmingSpaces: String {
        var s = Substring(self)
        while s.first?.isWhitespace == true { s.removeFirst() }
        while s.last?.isWhitespace == true { s.removeLast() }
        return String(s)
    }
}
