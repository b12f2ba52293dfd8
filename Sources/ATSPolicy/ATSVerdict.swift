/// The post-handshake answer: the app's load would succeed, or fail for every reason listed.
public enum ATSVerdict: Sendable, Hashable, Codable {
    case allowed
    /// Every violation found (not only the first), most fundamental first: protocol, then trust, then
    /// certificate details, then pins. The first one's codes are what the app would see.
    case blocked([ATSViolation])

    /// True when the load would succeed.
    public var isAllowed: Bool { if case .allowed = self { true } else { false } }

    /// Every violation, empty when allowed.
    public var violations: [ATSViolation] {
        if case .blocked(let v) = self { v } else { [] }
    }

    /// The error the app would see: the first violation's.
    public var primaryViolation: ATSViolation? { violations.first }

    /// One fix for all violations: their `setKeys` merged per domain. nil when the connection is allowed, or when
    /// some violation has no Info.plist fix (then that violation's `.noExceptionCanHelp` says why).
    public var combinedFix: ExceptionFix? {
        var domain: String?
        var keys: [FixKey] = []
        for v in violations {
            guard case .setKeys(let d, let ks) = v.fix, domain == nil || domain == d else { return nil }
            domain = d
            for k in ks {
                if let i = keys.firstIndex(where: { $0.key == k.key }) { keys[i] = k } else { keys.append(k) }
            }
        }
        return domain.map { .setKeys(domain: $0, keys: keys) }
    }
}
