/// Every key ATS defines (reference §1), with where it may appear, its type, and when it exists.
/// The single catalogue that the policy decoder, `explain` and `lint` share.
public enum ATSKey: String, CaseIterable, Sendable, Codable {
    // Top level of NSAppTransportSecurity (§1.1).
    case allowsArbitraryLoads = "NSAllowsArbitraryLoads"
    case allowsArbitraryLoadsForMedia = "NSAllowsArbitraryLoadsForMedia"
    case allowsArbitraryLoadsInWebContent = "NSAllowsArbitraryLoadsInWebContent"
    case allowsLocalNetworking = "NSAllowsLocalNetworking"
    case exceptionDomains = "NSExceptionDomains"
    case pinnedDomains = "NSPinnedDomains"
    case requiresNIAPTLSPackageVersion = "NSRequiresNIAPTLSPackageVersion"

    // Inside an NSExceptionDomains entry (§1.2).
    case includesSubdomains = "NSIncludesSubdomains"
    case exceptionAllowsInsecureHTTPLoads = "NSExceptionAllowsInsecureHTTPLoads"
    case exceptionMinimumTLSVersion = "NSExceptionMinimumTLSVersion"
    case exceptionRequiresForwardSecrecy = "NSExceptionRequiresForwardSecrecy"
    case requiresCertificateTransparency = "NSRequiresCertificateTransparency"
    case exceptionRequiresNIAPTLSPackageVersion = "NSExceptionRequiresNIAPTLSPackageVersion"
    case thirdPartyExceptionAllowsInsecureHTTPLoads = "NSThirdPartyExceptionAllowsInsecureHTTPLoads"
    case thirdPartyExceptionMinimumTLSVersion = "NSThirdPartyExceptionMinimumTLSVersion"
    case thirdPartyExceptionRequiresForwardSecrecy = "NSThirdPartyExceptionRequiresForwardSecrecy"
    case temporaryExceptionAllowsInsecureHTTPLoads = "NSTemporaryExceptionAllowsInsecureHTTPLoads"
    case temporaryExceptionMinimumTLSVersion = "NSTemporaryExceptionMinimumTLSVersion"
    case temporaryExceptionRequiresForwardSecrecy = "NSTemporaryExceptionRequiresForwardSecrecy"
    case temporaryThirdPartyExceptionAllowsInsecureHTTPLoads = "NSTemporaryThirdPartyExceptionAllowsInsecureHTTPLoads"
    case temporaryThirdPartyExceptionMinimumTLSVersion = "NSTemporaryThirdPartyExceptionMinimumTLSVersion"
    case temporaryThirdPartyExceptionRequiresForwardSecrecy = "NSTemporaryThirdPartyExceptionRequiresForwardSecrecy"

    // Inside an NSPinnedDomains entry (§1.3). NSIncludesSubdomains is shared with exception entries.
    case pinnedCAIdentities = "NSPinnedCAIdentities"
    case pinnedLeafIdentities = "NSPinnedLeafIdentities"
    // Inside each pinned identity dictionary.
    case spkiSHA256Base64 = "SPKI-SHA256-BASE64"

    /// Where a key may stand.
    public enum Level: String, Sendable, Codable {
        case topLevel, exceptionDomain, pinnedDomain, pinnedIdentity
    }

    /// The plist type a key must have; any other type means the key is ignored and its default applies.
    public enum ValueType: String, Sendable, Codable {
        case boolean = "Boolean"
        case string = "String"
        case dictionary = "Dictionary"
        case array = "Array"
    }

    /// The levels this key is valid at.
    public var levels: [Level] {
        switch self {
        case .allowsArbitraryLoads, .allowsArbitraryLoadsForMedia, .allowsArbitraryLoadsInWebContent,
            .allowsLocalNetworking, .exceptionDomains, .pinnedDomains, .requiresNIAPTLSPackageVersion:
            [.topLevel]
        case .includesSubdomains: [.exceptionDomain, .pinnedDomain]
        case .pinnedCAIdentities, .pinnedLeafIdentities: [.pinnedDomain]
        case .spkiSHA256Base64: [.pinnedIdentity]
        default: [.exceptionDomain]
        }
    }

    public var valueType: ValueType {
        switch self {
        case .exceptionDomains, .pinnedDomains: .dictionary
        case .pinnedCAIdentities, .pinnedLeafIdentities: .array
        case .exceptionMinimumTLSVersion, .thirdPartyExceptionMinimumTLSVersion, .temporaryExceptionMinimumTLSVersion,
            .temporaryThirdPartyExceptionMinimumTLSVersion, .requiresNIAPTLSPackageVersion,
            .exceptionRequiresNIAPTLSPackageVersion, .spkiSHA256Base64:
            .string
        default: .boolean
        }
    }

    /// The first profile on which the key has any effect (§1.1–§1.3).
    public var introduced: IOSProfile {
        switch self {
        case .allowsArbitraryLoadsForMedia, .allowsArbitraryLoadsInWebContent, .allowsLocalNetworking: .ios10
        case .pinnedDomains, .pinnedCAIdentities, .pinnedLeafIdentities, .spkiSHA256Base64: .ios14
        // Unconfirmed (reference §1.1: SDK 26.5 adds the NIAP cipher group); taken as iOS 26.
        case .requiresNIAPTLSPackageVersion, .exceptionRequiresNIAPTLSPackageVersion: .ios26
        default: .ios9
        }
    }

    /// True for the iOS 9-era `NSThirdParty*` / `NSTemporary*` spellings, which Apple's current parser does not
    /// read (reference §1.2, src S1; whether CFNetwork still honours them is unconfirmed).
    public var isLegacy: Bool { legacyCounterpart != nil }

    /// For a legacy key, the current `NSException*` key it stands for.
    public var legacyCounterpart: ATSKey? {
        switch self {
        case .thirdPartyExceptionAllowsInsecureHTTPLoads, .temporaryExceptionAllowsInsecureHTTPLoads,
            .temporaryThirdPartyExceptionAllowsInsecureHTTPLoads:
            .exceptionAllowsInsecureHTTPLoads
        case .thirdPartyExceptionMinimumTLSVersion, .temporaryExceptionMinimumTLSVersion,
            .temporaryThirdPartyExceptionMinimumTLSVersion:
            .exceptionMinimumTLSVersion
        case .thirdPartyExceptionRequiresForwardSecrecy, .temporaryExceptionRequiresForwardSecrecy,
            .temporaryThirdPartyExceptionRequiresForwardSecrecy:
            .exceptionRequiresForwardSecrecy
        default: nil
        }
    }

    /// Apple documents the key as obsolete (NSRequiresCertificateTransparency, reference §1.2, §3.5).
    public var isObsolete: Bool { self == .requiresCertificateTransparency }

    /// Keys valid at `level`.
    public static func keys(at level: Level) -> [ATSKey] { allCases.filter { $0.levels.contains(level) } }
}
