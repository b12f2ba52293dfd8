import ATSPolicy

/// An ATS policy read from disk, with where it came from.
public struct LoadedPolicy: Sendable, Equatable {
    /// The property-list encoding of the file that held the policy.
    public enum Format: String, Sendable, Equatable {
        case xml
        case binary
    }

    /// Human-readable origin, e.g. `MyApp.ipa › Payload/MyApp.app/Info.plist` or `config/media-server.plist`.
    public let sourceDescription: String
    /// The encoding of the plist that was read.
    public let format: Format
    /// True when the file was a whole Info.plist (its `NSAppTransportSecurity` value was taken); false when the
    /// file itself is a bare `NSAppTransportSecurity` dictionary.
    public let isWholeInfoPlist: Bool
    /// The `NSAppTransportSecurity` dictionary with the file's own value types, keys sorted (see `PolicyLoader`).
    /// `nil` means the Info.plist has no `NSAppTransportSecurity`: full ATS defaults apply. Always a
    /// `.dictionary` when present.
    public let atsDictionary: PlistValue?
    /// `CFBundleIdentifier` of a whole Info.plist, when it is a string.
    public let bundleIdentifier: String?
    /// ATS keys found at the top level of a whole Info.plist, outside `NSAppTransportSecurity`, where ATS never
    /// reads them (a common mistake). Sorted.
    public let misplacedATSKeys: [String]
    /// Facts about how the file was interpreted, for the user to see (e.g. "no NSAppTransportSecurity: full ATS
    /// defaults apply").
    public let notes: [String]

    /// Memberwise initialiser (tests and callers that build policies in memory).
    public init(
        sourceDescription: String, format: Format, isWholeInfoPlist: Bool, atsDictionary: PlistValue?,
        bundleIdentifier: String?, misplacedATSKeys: [String] = [], notes: [String] = []
    ) {
        self.sourceDescription = sourceDescription
        self.format = format
        self.isWholeInfoPlist = isWholeInfoPlist
        self.atsDictionary = atsDictionary
        self.bundleIdentifier = bundleIdentifier
        self.misplacedATSKeys = misplacedATSKeys
        self.notes = notes
    }
}
