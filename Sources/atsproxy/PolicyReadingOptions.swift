import ATSPolicy
import ArgumentParser

/// How to read the points where Apple's behaviour is unconfirmed (see README, "Choices where Apple's behaviour is
/// unconfirmed"). Shared by every command that applies a policy: explain, run, diagnose.
struct PolicyReadingOptions: ParsableArguments {
    @Option(
        name: .customLong("legacy-keys"),
        help: "NSThirdParty*/NSTemporary* keys: byProfile (iOS 9/10 only), always or never.")
    var legacyKeys: LegacyKeyReading = .byProfile

    @Option(
        name: .customLong("user-root-eku"),
        help: "serverAuth EKU under a user-installed root: sourceLenient or documentedStrict.")
    var userRootEKU: UserRootEKUReading = .sourceLenient

    @Flag(
        name: .customLong("private-ips-local"),
        help: "iOS 17+: count RFC 1918 / unique-local IP literals as local (exempt).")
    var privateAddressesAreLocal = false

    /// The engine's options for `profile` with these readings.
    func policyOptions(profile: IOSProfile) -> PolicyOptions {
        PolicyOptions(
            profile: profile, legacyKeys: legacyKeys, userRootEKU: userRootEKU,
            privateAddressesAreLocal: privateAddressesAreLocal)
    }
}
