/// How an exception entry was found for a host.
public struct ExceptionMatch: Sendable, Hashable, Codable {
    /// The matching rule that found the entry.
    public enum How: Sendable, Hashable, Codable {
        /// The key is exactly the host (or IP literal) string.
        case exact
        /// A parent domain's entry with `NSIncludesSubdomains = YES`.
        case parentDomain
        /// The longest-prefix CIDR range containing the address (iOS 17+).
        case cidr(prefixLength: Int)
    }

    /// The governing entry.
    public var entry: ExceptionDomainEntry
    /// Whether it matched exactly, as a parent with subdomains, or as a CIDR range.
    public var how: How
    /// Entries on the way up that were passed over because they lack `NSIncludesSubdomains = YES`.
    public var passedOver: [String]
}

extension ATSPolicy {
    /// The one exception entry that governs `host`, if any (reference §2.2 for names, §2.3 for IP literals).
    ///
    /// Names: exact string lookup (case and trailing dot significant), then each parent in turn, a parent
    /// counting only with `NSIncludesSubdomains = YES`; the first hit wins. IP literals (iOS 17+): exact key, then
    /// the longest matching CIDR prefix of the same family. Name entries never apply to IP literals, nor IP entries
    /// to names.
    public func exceptionMatch(for host: String) -> ExceptionMatch? {
        if let address = IPAddress(host) {
            return addressMatch(host: host, address: address)
        }
        var passedOver: [String] = []
        var candidate = Substring(host)
        var isParent = false
        while true {
            let key = String(candidate)
            if let entry = exceptionDomains.last(where: { $0.kind == .dnsName && $0.key == key }) {
                if !isParent { return ExceptionMatch(entry: entry, how: .exact, passedOver: []) }
                if entry.includesSubdomains {
                    return ExceptionMatch(entry: entry, how: .parentDomain, passedOver: passedOver)
                }
                passedOver.append(key)
            }
            // Apple's `_find_parent_domain`: everything after the first dot, down to the empty string.
            guard let dot = candidate.firstIndex(of: ".") else { return nil }
            candidate = candidate[candidate.index(after: dot)...]
            isParent = true
        }
    }

    private func addressMatch(host: String, address: IPAddress) -> ExceptionMatch? {
        // IP and CIDR keys exist only from iOS 17 (doc A4); earlier an IP literal can only be covered by the
        // global keys or the local exemption.
        guard profile >= .ios17 else { return nil }
        for entry in exceptionDomains.reversed() {
            if case .ipAddress = entry.kind, entry.key == host {
                return ExceptionMatch(entry: entry, how: .exact, passedOver: [])
            }
        }
        var best: (entry: ExceptionDomainEntry, prefix: Int)?
        for entry in exceptionDomains {
            guard case .cidr(let range) = entry.kind, range.contains(address) else { continue }
            if let current = best, range.prefixLength < current.prefix { continue }
            best = (entry, range.prefixLength)
        }
        return best.map { ExceptionMatch(entry: $0.entry, how: .cidr(prefixLength: $0.prefix), passedOver: []) }
    }

    /// Why `host` counts as local/"direct" on the simulated OS, or nil when it does not (reference §2.4).
    /// This ignores `NSAllowsLocalNetworking`; the decision order applies it.
    public func localNetworkReason(for host: String) -> String? {
        // iOS 9: ATS applied to every host, local or not (doc A6, A18).
        guard profile >= .ios10 else { return nil }
        if let address = IPAddress(host) {
            if profile < .ios17 { return "an IP address literal (exempt by default on iOS 10–16)" }
            if address.isLoopback { return "a loopback address" }
            if address.isLinkLocal { return "a link-local address" }
            if address.isPrivate && options.privateAddressesAreLocal {
                return "a private (RFC 1918 / unique-local) address, counted as local by the chosen reading"
            }
            return nil
        }
        let name = host.lowercased()
        // Apple's test suite (src S4 `isLocalTLD`): ends in .local / .local., or has no dot at all.
        if name.hasSuffix(".local") || name.hasSuffix(".local.") { return "a .local (mDNS) name" }
        if !name.contains(".") { return "an unqualified host name" }
        return nil
    }

    /// The `NSPinnedDomains` pins for `host` (iOS 14+): case-insensitive, trailing dot stripped; a parent entry
    /// with `NSIncludesSubdomains = YES` covers only hosts exactly one label below it — Apple's
    /// `CopyParentDomainNameFromHostName` strips a single label (reference §1.3, src S7).
    public func pinSet(for host: String) -> PinSet? {
        guard profile >= .ios14 else { return nil }
        var name = host.lowercased()
        if name.hasSuffix(".") { name.removeLast() }
        if let entry = pinnedDomains.first(where: { $0.domain == name }) {
            return PinSet(domain: entry.domain, leafSPKISHA256: entry.leafSPKISHA256, caSPKISHA256: entry.caSPKISHA256)
        }
        guard let dot = name.firstIndex(of: ".") else { return nil }
        let parent = String(name[name.index(after: dot)...])
        guard let entry = pinnedDomains.first(where: { $0.domain == parent && $0.includesSubdomains }) else {
            return nil
        }
        return PinSet(domain: entry.domain, leafSPKISHA256: entry.leafSPKISHA256, caSPKISHA256: entry.caSPKISHA256)
    }
}
