/// The OS release whose ATS behaviour is simulated (`--ios 9|10|14|17|26`).
///
/// Each case stands for the first release of a behaviour band (reference §2.3, §2.4, §3.2, §4.4):
/// - `ios9`: only `NSAllowsArbitraryLoads` among the global keys; ATS applies to local hosts; 2015 cipher list;
///   SecureTransport error codes (-9824 for a refused handshake).
/// - `ios10`: `…InWebContent`/`…ForMedia`/`NSAllowsLocalNetworking` exist and silence `NSAllowsArbitraryLoads`;
///   local hosts exempt; coreTLS codes (-9801).
/// - `ios14`: `NSPinnedDomains`; the 2020/22 cipher list.
/// - `ios17`: IP and CIDR exception keys; the current cipher list (no CBC-SHA256/384).
/// - `ios26`: TLS 1.0/1.1 refused even with an exception (-9836).
public enum IOSProfile: Int, CaseIterable, Sendable, Codable, Comparable, CustomStringConvertible {
    case ios9 = 9
    case ios10 = 10
    case ios14 = 14
    case ios17 = 17
    case ios26 = 26

    /// The default profile: the newest release modelled.
    public static let newest: IOSProfile = .ios26

    public static func < (lhs: IOSProfile, rhs: IOSProfile) -> Bool { lhs.rawValue < rhs.rawValue }

    public var description: String { "iOS \(rawValue)" }
}
