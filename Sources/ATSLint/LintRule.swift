/// Every lint rule, with its stable identifier. Identifiers are never reused or renumbered.
public enum LintRule: String, CaseIterable, Sendable {
    case arbitraryLoads = "ATS001"
    case arbitraryLoadsIgnored = "ATS002"
    case webOrMediaOnly = "ATS003"
    case insecureHTTPException = "ATS004"
    case legacyTLSVersion = "ATS005"
    case legacyTLSRefused = "ATS006"
    case invalidTLSVersion = "ATS007"
    case forwardSecrecyDisabled = "ATS008"
    case domainNotLowercase = "ATS009"
    case domainHasPort = "ATS010"
    case domainWildcard = "ATS011"
    case domainSchemeOrPath = "ATS012"
    case ipKeyBeforeIOS17 = "ATS013"
    case invalidCIDR = "ATS014"
    case unknownKey = "ATS015"
    case misplacedKey = "ATS016"
    case wrongType = "ATS017"
    case redundantEntry = "ATS018"
    case duplicateKeyCase = "ATS019"
    case reenableIncomplete = "ATS020"
    case certificateTransparencyObsolete = "ATS021"
    case pinWithoutIdentities = "ATS022"
    case malformedPin = "ATS023"
    case keyUnavailableOnProfile = "ATS024"
    case legacyKey = "ATS025"
    case atsNotDictionary = "ATS026"
    case atsKeyOutsideATS = "ATS027"
    case entryHasNoEffect = "ATS028"
    case pinSubdomainDepth = "ATS029"
    case invalidDomainKey = "ATS030"
    case domainTrailingDot = "ATS031"

    /// A short CamelCase name, used as SARIF's `rules[].name`.
    public var name: String {
        switch self {
        case .arbitraryLoads: "ArbitraryLoads"
        case .arbitraryLoadsIgnored: "ArbitraryLoadsIgnored"
        case .webOrMediaOnly: "WebOrMediaOnly"
        case .insecureHTTPException: "InsecureHTTPException"
        case .legacyTLSVersion: "LegacyTLSVersion"
        case .legacyTLSRefused: "LegacyTLSRefused"
        case .invalidTLSVersion: "InvalidTLSVersion"
        case .forwardSecrecyDisabled: "ForwardSecrecyDisabled"
        case .domainNotLowercase: "DomainNotLowercase"
        case .domainHasPort: "DomainHasPort"
        case .domainWildcard: "DomainWildcard"
        case .domainSchemeOrPath: "DomainSchemeOrPath"
        case .ipKeyBeforeIOS17: "IPKeyBeforeIOS17"
        case .invalidCIDR: "InvalidCIDR"
        case .unknownKey: "UnknownKey"
        case .misplacedKey: "MisplacedKey"
        case .wrongType: "WrongType"
        case .redundantEntry: "RedundantEntry"
        case .duplicateKeyCase: "DuplicateKeyCase"
        case .reenableIncomplete: "ReenableIncomplete"
        case .certificateTransparencyObsolete: "CertificateTransparencyObsolete"
        case .pinWithoutIdentities: "PinWithoutIdentities"
        case .malformedPin: "MalformedPin"
        case .keyUnavailableOnProfile: "KeyUnavailableOnProfile"
        case .legacyKey: "LegacyKey"
        case .atsNotDictionary: "ATSNotDictionary"
        case .atsKeyOutsideATS: "ATSKeyOutsideATS"
        case .entryHasNoEffect: "EntryHasNoEffect"
        case .pinSubdomainDepth: "PinSubdomainDepth"
        case .invalidDomainKey: "InvalidDomainKey"
        case .domainTrailingDot: "DomainTrailingDot"
        }
    }

    /// The severity findings of this rule usually have (a few findings adjust it, e.g. by profile).
    public var defaultSeverity: LintSeverity {
        switch self {
        case .webOrMediaOnly, .redundantEntry, .entryHasNoEffect, .pinSubdomainDepth:
            .note
        case .arbitraryLoads, .insecureHTTPException, .legacyTLSVersion, .forwardSecrecyDisabled, .duplicateKeyCase,
            .reenableIncomplete, .certificateTransparencyObsolete, .keyUnavailableOnProfile, .legacyKey,
            .domainTrailingDot:
            .warning
        default:
            .error
        }
    }

    /// One line saying what the rule looks for.
    public var shortDescription: String {
        switch self {
        case .arbitraryLoads: "NSAllowsArbitraryLoads turns ATS off for every host without an exception"
        case .arbitraryLoadsIgnored:
            "NSAllowsArbitraryLoads is silently ignored because another global ATS key is present (iOS 10+)"
        case .webOrMediaOnly: "…InWebContent / …ForMedia relax web views or AVFoundation only, never URLSession"
        case .insecureHTTPException: "An exception domain allows plain HTTP"
        case .legacyTLSVersion: "An exception domain accepts TLS below 1.2"
        case .legacyTLSRefused: "A TLS 1.0/1.1 exception has no effect on iOS 26"
        case .invalidTLSVersion: "NSExceptionMinimumTLSVersion is not a value ATS recognises; TLS 1.2 applies"
        case .forwardSecrecyDisabled: "An exception domain accepts cipher suites without forward secrecy"
        case .domainNotLowercase: "An exception domain key has uppercase letters and never matches"
        case .domainHasPort: "An exception domain key has a port and never matches"
        case .domainWildcard: "An exception domain key has a wildcard and never matches"
        case .domainSchemeOrPath: "An exception domain key has a scheme or a path and never matches"
        case .ipKeyBeforeIOS17: "IP address and CIDR exception keys work only from iOS 17"
        case .invalidCIDR: "A CIDR exception key cannot be parsed and is unusable"
        case .unknownKey: "A key ATS does not know at this level (often a misspelling)"
        case .misplacedKey: "An ATS key at the wrong level of the dictionary"
        case .wrongType:
            "A value of the wrong plist type: ATS ignores it and uses the default (a number in a Boolean key is "
                + "read as 1 = YES, else NO: a warning, as that reading is unconfirmed)"
        case .redundantEntry: "An exception entry identical to what its NSIncludesSubdomains parent gives"
        case .duplicateKeyCase: "Keys that differ only by letter case"
        case .reenableIncomplete:
            "An exception under NSAllowsArbitraryLoads that does not fully re-secure its host"
        case .certificateTransparencyObsolete: "NSRequiresCertificateTransparency is obsolete"
        case .pinWithoutIdentities: "A pinned domain with no NSPinnedCAIdentities or NSPinnedLeafIdentities"
        case .malformedPin: "A pinned identity that is not the base64 of a 32-byte SHA-256 digest"
        case .keyUnavailableOnProfile: "A key that has no effect on the chosen iOS version"
        case .legacyKey: "An iOS 9-era NSThirdParty*/NSTemporary* key that Apple's current parser ignores"
        case .atsNotDictionary: "NSAppTransportSecurity is not a dictionary"
        case .atsKeyOutsideATS: "An ATS key at the Info.plist top level, outside NSAppTransportSecurity"
        case .entryHasNoEffect: "An exception entry that only restates ATS defaults"
        case .pinSubdomainDepth: "Pinned NSIncludesSubdomains covers one label only"
        case .invalidDomainKey: "An exception domain key that cannot be a host name"
        case .domainTrailingDot: "An exception domain key with a trailing dot matches only hosts written with one"
        }
    }

    /// Apple's documentation page for the key the rule is about, when there is one.
    public var helpURI: String? {
        let base = "https://developer.apple.com/documentation/bundleresources/information-property-list/"
        let ats = base + "nsapptransportsecurity"
        switch self {
        case .arbitraryLoads, .arbitraryLoadsIgnored: return ats + "/nsallowsarbitraryloads"
        case .webOrMediaOnly: return ats + "/nsallowsarbitraryloadsinwebcontent"
        case .insecureHTTPException, .reenableIncomplete: return base + "nsexceptionallowsinsecurehttploads"
        case .legacyTLSVersion, .legacyTLSRefused, .invalidTLSVersion: return base + "nsexceptionminimumtlsversion"
        case .forwardSecrecyDisabled: return base + "nsexceptionrequiresforwardsecrecy"
        case .certificateTransparencyObsolete: return base + "nsrequirescertificatetransparency"
        case .pinWithoutIdentities, .malformedPin, .pinSubdomainDepth: return ats + "/nspinneddomains"
        case .domainNotLowercase, .domainHasPort, .domainWildcard, .domainSchemeOrPath, .ipKeyBeforeIOS17,
            .invalidCIDR, .redundantEntry, .entryHasNoEffect, .invalidDomainKey, .domainTrailingDot:
            return ats + "/nsexceptiondomains"
        default: return ats
        }
    }
}
