import Foundation

// Theory of operation: apps that pin a host in code (a URLSession delegate, TrustKit, Alamofire's evaluators) refuse
// the proxy's minted leaf for that host on every connection, while trusting it for every other host. The proxy
// cannot satisfy such a pin, but it can stop breaking the app: after `threshold` consecutive refusals of one host by
// one client that has trusted the proxy for some other host, that host is tunnelled untouched for the rest of the run.
//
// - A refusal is a certificate alert (certificate_unknown, bad_certificate, unknown_ca), a close during the handshake,
//   or a close right after it with no request (a pin checked once the handshake is done). The session says which.
// - An acceptance is a request sent over an intercepted connection: it resets that host's count.
// - A refusal while the client trusts no other host says nothing about pinning: a device that does not trust the CA
//   refuses every host. Such refusals are counted apart, and after `threshold` of them the client is told once that
//   the CA is not trusted; they never tunnel a host.
// - Clients are told apart by their address without the port: one device is one address. Several devices behind one
//   NAT share a ledger, and one device's apps share it too (a pin is per host, which is what is kept).
//
// `AutoPassthroughLedger` is the pure decision logic of one client; `AutoPassthroughStore` holds a ledger per client
// under a lock, since sessions run on several loop threads.

/// What one client refused and accepted, and the hosts it has made the proxy tunnel. Pure value logic.
public struct AutoPassthroughLedger: Sendable, Equatable {
    /// Consecutive refusals of one host that make it tunnelled.
    public static let defaultThreshold = 3
    /// Hosts remembered per client: a client past it starts a new ledger (the tunnelled hosts are kept).
    static let hostCapacity = 4096

    public let threshold: Int
    /// Hosts whose minted leaf the client accepted (it sent a request).
    public private(set) var trusted: Set<String> = []
    /// Consecutive refusals per host, counted only while some other host is trusted.
    public private(set) var refusals: [String: Int] = [:]
    /// Refusals while the client trusted no host at all.
    public private(set) var refusalsWithNoTrust = 0
    /// Hosts refused with no trust, for the notice.
    public private(set) var hostsRefusedWithNoTrust: Set<String> = []
    /// Hosts tunnelled from now on.
    public private(set) var tunnelled: Set<String> = []
    /// The "CA not trusted" notice was given (again after the client trusted a host and then stopped).
    public private(set) var toldUntrusted = false

    public init(threshold: Int = Self.defaultThreshold) {
        self.threshold = max(1, threshold)
    }

    /// What a refusal or an acceptance makes the proxy do.
    public enum Decision: Sendable, Equatable {
        case nothing
        /// Tunnel `host` from now on: it was refused `refusals` times in a row while `trustedHosts` other hosts were
        /// trusted.
        case tunnel(host: String, refusals: Int, trustedHosts: Int)
        /// The client refused the proxy's certificate `refusals` times for `hosts` hosts and trusted none.
        case caNotTrusted(refusals: Int, hosts: Int)
    }

    /// The client accepted the minted leaf for `host`.
    public mutating func accepted(host: String) {
        if trusted.count >= Self.hostCapacity { trusted.removeAll(keepingCapacity: true) }
        trusted.insert(host)
        refusals[host] = nil
        refusalsWithNoTrust = 0
        hostsRefusedWithNoTrust = []
        toldUntrusted = false
    }

    /// The client refused the minted leaf for `host`.
    public mutating func refused(host: String) -> Decision {
        guard !tunnelled.contains(host) else { return .nothing }
        let trustedElsewhere = trusted.subtracting([host]).count
        guard trustedElsewhere > 0 else {
            refusalsWithNoTrust += 1
            if hostsRefusedWithNoTrust.count < Self.hostCapacity { hostsRefusedWithNoTrust.insert(host) }
            guard !toldUntrusted, refusalsWithNoTrust >= threshold else { return .nothing }
            toldUntrusted = true
            return .caNotTrusted(refusals: refusalsWithNoTrust, hosts: hostsRefusedWithNoTrust.count)
        }
        if refusals.count >= Self.hostCapacity { refusals.removeAll(keepingCapacity: true) }
        let count = (refusals[host] ?? 0) + 1
        guard count >= threshold else {
            refusals[host] = count
            return .nothing
        }
        refusals[host] = nil
        tunnelled.insert(host)
        return .tunnel(host: host, refusals: count, trustedHosts: trustedElsewhere)
    }
}

/// A ledger per client address, shared by every loop thread. Bounded: past `clientCapacity` clients it starts over
/// (tunnelled hosts are forgotten then too, and learnt again).
public final class AutoPassthroughStore: @unchecked Sendable {
    // @unchecked: `ledgers` and `anyTunnelled` are only touched under `lock`.
    private let lock = NSLock()
    private var ledgers: [String: AutoPassthroughLedger] = [:]
    private var anyTunnelled = false
    private let threshold: Int
    private let clientCapacity = 4096

    public init(threshold: Int = AutoPassthroughLedger.defaultThreshold) {
        self.threshold = threshold
    }

    /// Whether `client` has made the proxy tunnel `host`.
    public func isTunnelled(client: String, host: String) -> Bool {
        lock.lock()
        defer { lock.unlock() }
        return anyTunnelled && ledgers[client]?.tunnelled.contains(host) == true
    }

    /// Whether any host is tunnelled for any client: a CONNECT needs the client's address only then.
    public var hasTunnelledHosts: Bool {
        lock.lock()
        defer { lock.unlock() }
        return anyTunnelled
    }

    public func accepted(client: String, host: String) {
        lock.lock()
        defer { lock.unlock() }
        // Acceptances are the common case: a client that never refused needs a ledger only to count them.
        makeRoom(for: client)
        ledgers[client, default: AutoPassthroughLedger(threshold: threshold)].accepted(host: host)
    }

    public func refused(client: String, host: String) -> AutoPassthroughLedger.Decision {
        lock.lock()
        defer { lock.unlock() }
        makeRoom(for: client)
        let decision = ledgers[client, default: AutoPassthroughLedger(threshold: threshold)].refused(host: host)
        if case .tunnel = decision { anyTunnelled = true }
        return decision
    }

    private func makeRoom(for client: String) {
        if ledgers[client] == nil, ledgers.count >= clientCapacity {
            ledgers.removeAll(keepingCapacity: true)
            anyTunnelled = false
        }
    }
}
