import ATSPolicy

extension PolicyLoader {
    /// The key whose value is the ATS policy in an Info.plist.
    public static let infoPlistKey = "NSAppTransportSecurity"

    /// Prefixes of Info.plist keys that never appear in an NSAppTransportSecurity dictionary (Core Foundation,
    /// Launch Services, UIKit, Xcode build metadata).
    static let infoPlistKeyPrefixes = ["CF", "LS", "UI", "DT", "MinimumOSVersion"]

    static func isInfoPlistKey(_ key: String) -> Bool {
        infoPlistKeyPrefixes.contains(where: { key.hasPrefix($0) })
    }

    /// Applies the whole-Info.plist-or-bare-ATS rule documented on `PolicyLoader`.
    static func interpret(
        _ root: PlistDictionary, format: LoadedPolicy.Format, source: String, forceWholeInfoPlist: Bool
    ) throws(PolicyLoadError) -> LoadedPolicy {
        let hasATS = root[infoPlistKey] != nil
        let isWhole = forceWholeInfoPlist || hasATS || root.keys.contains(where: isInfoPlistKey)
        guard isWhole else {
            return LoadedPolicy(
                sourceDescription: source, format: format, isWholeInfoPlist: false,
                atsDictionary: .dictionary(root), bundleIdentifier: nil,
                notes: ["the file is a bare NSAppTransportSecurity dictionary (no Info.plist keys at its root)"])
        }

        let bundleID = root["CFBundleIdentifier"]?.stringValue
        let topLevelATSKeys = Set(ATSKey.keys(at: .topLevel).map(\.rawValue))
        let misplaced = root.keys.filter { topLevelATSKeys.contains($0) }.sorted()
        var notes: [String] = []
        if !misplaced.isEmpty {
            notes.append(
                "\(misplaced.joined(separator: ", ")) at the Info.plist top level is outside NSAppTransportSecurity; "
                    + "ATS never reads it there")
        }
        switch root[infoPlistKey] {
        case nil:
            notes.append("the Info.plist has no NSAppTransportSecurity: full ATS defaults apply")
            return LoadedPolicy(
                sourceDescription: source, format: format, isWholeInfoPlist: true, atsDictionary: nil,
                bundleIdentifier: bundleID, misplacedATSKeys: misplaced, notes: notes)
        case .dictionary(let ats)?:
            return LoadedPolicy(
                sourceDescription: source, format: format, isWholeInfoPlist: true, atsDictionary: .dictionary(ats),
                bundleIdentifier: bundleID, misplacedATSKeys: misplaced, notes: notes)
        case let other?:
            throw PolicyLoadError(
                file: source, keyPath: [infoPlistKey], kind: .atsNotDictionary(actualType: other.typeName))
        }
    }
}
