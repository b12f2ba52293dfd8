/// How the policy engine reads an `NSAppTransportSecurity` dictionary: which OS to simulate, which client is
/// loading, and which reading to take where the reference leaves a point unconfirmed. Every unconfirmed choice
/// in force shows up in `PolicyDecision.notes`.
public struct PolicyOptions: Sendable, Hashable, Codable {
    /// The OS release whose ATS behaviour is simulated.
    public var profile: IOSProfile
    /// The API the app loads through. ATS relaxations for web content and media only exist for WebKit and
    /// AVFoundation (reference §2.1 row 6, src S1 `client_is_WebKit` / `client_is_mediaserverd`).
    public var client: ClientKind
    /// Whether the iOS 9-era `NSThirdParty*` / `NSTemporary*` keys count (reference §1.2: unconfirmed).
    public var legacyKeys: LegacyKeyReading
    /// How a missing serverAuth EKU is judged under a user-installed root (reference open question 7).
    public var userRootEKU: UserRootEKUReading
    /// iOS 17+: whether RFC 1918 / unique-local IP literals count as "local" and are exempt by default
    /// (reference §2.4: decided by closed-source libnetwork, unconfirmed).
    public var privateAddressesAreLocal: Bool
    /// Register Apple's built-in exceptions (apple.com, …) before the app's entries (reference §2.1 row 9).
    public var builtInExceptions: Bool

    /// Defaults: newest profile, URLSession, and the readings documented on each type.
    public init(
        profile: IOSProfile = .newest, client: ClientKind = .urlSession, legacyKeys: LegacyKeyReading = .byProfile,
        userRootEKU: UserRootEKUReading = .sourceLenient, privateAddressesAreLocal: Bool = false,
        builtInExceptions: Bool = true
    ) {
        self.profile = profile
        self.client = client
        self.legacyKeys = legacyKeys
        self.userRootEKU = userRootEKU
        self.privateAddressesAreLocal = privateAddressesAreLocal
        self.builtInExceptions = builtInExceptions
    }

    /// True when legacy exception keys take effect under these options.
    public var honoursLegacyKeys: Bool {
        switch legacyKeys {
        // The iOS 9/10 betas and 2015 gists used these spellings; Apple's current parser (src S1, the
        // Network.framework side used from iOS 12 on) does not read them. So: honoured up to iOS 10 only.
        case .byProfile: profile <= .ios10
        case .always: true
        case .never: false
        }
    }
}

/// The loading API whose ATS rules apply.
public enum ClientKind: String, Sendable, Hashable, Codable, CaseIterable {
    /// URLSession / NSURLConnection: the default, and what the proxy simulates.
    case urlSession
    /// WKWebView content (`NSAllowsArbitraryLoadsInWebContent` applies).
    case webView
    /// AVFoundation media playback (`NSAllowsArbitraryLoadsForMedia` applies).
    case media
}

/// Readings of the legacy `NSThirdPartyException*` / `NSTemporaryException*` keys.
public enum LegacyKeyReading: String, Sendable, Hashable, Codable, CaseIterable {
    /// Honoured on the iOS 9 and iOS 10 profiles, ignored from iOS 14 (Apple's current parser, src S1, skips them).
    case byProfile
    /// Always honoured (an `NSException*` key on the same entry still wins).
    case always
    /// Never honoured.
    case never
}

/// Readings of the serverAuth EKU rule for chains that end in a user-installed root.
public enum UserRootEKUReading: String, Sendable, Hashable, Codable, CaseIterable {
    /// Apple's trust source (src S8 `SecPolicyCheckServerAuthEKU`) skips the strict check for user/admin anchors;
    /// only the generic rule runs: an EKU extension, if present, must allow serverAuth (or anyEKU).
    case sourceLenient
    /// Apple's support note (doc A16): every TLS server certificate issued after 2019-07-01 needs serverAuth.
    case documentedStrict
}
