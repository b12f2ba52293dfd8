extension ATSPolicy {
    /// Apple's built-in exceptions, registered before the app's entries; an app entry with the same key replaces
    /// one (reference §2.1 row 9, src S1 `register_builtin_exceptions`, S4 `testExceptionOverridesBuiltInException`).
    /// All include subdomains, allow insecure HTTP and do not require forward secrecy.
    public static let builtInExceptions: [ExceptionDomainEntry] = [
        builtIn("apple.com", .tls12),
        builtIn("ls.apple.com", .tls10),
        builtIn("gs.apple.com", .tls10),
        builtIn("geo.apple.com", .tls10),
        builtIn("is.autonavi.com", .tls10),
        builtIn("apple-mapkit.com", .tls10),
        builtIn("setup.icloud.com", .tls12),
    ]

    private static func builtIn(_ host: String, _ minimum: TLSVersion) -> ExceptionDomainEntry {
        ExceptionDomainEntry(
            key: host, kind: .dnsName, origin: .builtIn, includesSubdomains: true, allowsInsecureHTTPLoads: true,
            minimumTLSVersion: minimum, requiresForwardSecrecy: false,
            effectiveKeys: [
                FixKey(key: ATSKey.includesSubdomains.rawValue, value: .bool(true)),
                FixKey(key: ATSKey.exceptionAllowsInsecureHTTPLoads.rawValue, value: .bool(true)),
                FixKey(key: ATSKey.exceptionMinimumTLSVersion.rawValue, value: .string(minimum.plistName)),
                FixKey(key: ATSKey.exceptionRequiresForwardSecrecy.rawValue, value: .bool(false)),
            ])
    }
}
