import ATSPolicy

/// The policy `run` and `explain` apply without `--plist`: an app that relaxes nothing, i.e. Apple's defaults.
enum AppleDefaultPolicy {
    static let atsDictionary: PlistValue = .dictionary(PlistDictionary())
    static let source = "Apple's defaults (no --plist)"
}

extension IOSProfile {
    /// The note for an `--ios` version that has no band of its own, nil when `version` starts this band:
    /// "iOS 16 is checked with the iOS 14 behaviour band". `verb` is what the command does with the policy.
    func bandNote(forVersion version: Int, verb: String) -> String? {
        rawValue == version ? nil : "iOS \(version) is \(verb) with the \(self) behaviour band"
    }
}
