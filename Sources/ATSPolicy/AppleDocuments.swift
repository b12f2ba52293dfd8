/// Apple's public documents that texts users read cite by name (users do not have the project's own notes).
enum AppleDocuments {
    /// Apple support article 103769, formerly HT210176.
    static let trustedCertificates =
        "Apple's support article \"Requirements for trusted certificates in iOS 13 and macOS 10.15\""
}
