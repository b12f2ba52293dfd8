import ATSPolicy

/// One row of the nscurl `--ats-diagnostics` matrix: a test name and the ATS dictionary it loads with.
public struct DiagnoseCase: Sendable, Hashable, Codable {
    /// Section title as nscurl prints it (`Configuring TLS exceptions for HOST`).
    public var section: String
    /// Test name (`TLSv1.2 with PFS disabled`).
    public var name: String
    /// The `NSAppTransportSecurity` dictionary the test uses (always a `.dictionary`).
    public var atsDictionary: PlistValue
    /// The per-domain keys this test sets (empty for the default and Allow All Loads tests).
    public var exceptionKeys: [FixKey]

    /// The ATS dictionary as a dictionary.
    public var dictionary: PlistDictionary { atsDictionary.dictionaryValue ?? PlistDictionary() }

    /// The seven sections of `nscurl --ats-diagnostics`, in nscurl's order (reference §5.1, obs P4/A3/I2).
    public static func matrix(host: String) -> [[DiagnoseCase]] {
        let versions: [TLSVersion] = [.tls13, .tls12, .tls11, .tls10]
        func exception(_ keys: [FixKey]) -> PlistDictionary {
            var entry = PlistDictionary()
            // nscurl prints the keys alphabetically (obs P4); PlistDictionary keeps insertion order, so sort.
            for k in keys.sorted(by: { $0.key < $1.key }) { entry.set(k.key, k.value) }
            var domains = PlistDictionary()
            domains.set(host, .dictionary(entry))
            var ats = PlistDictionary()
            ats.set("NSExceptionDomains", .dictionary(domains))
            return ats
        }
        func minTLS(_ v: TLSVersion) -> FixKey { FixKey(key: "NSExceptionMinimumTLSVersion", value: .string(v.plistName)) }
        let noPFS = FixKey(key: "NSExceptionRequiresForwardSecrecy", value: .bool(false))
        let insecure = FixKey(key: "NSExceptionAllowsInsecureHTTPLoads", value: .bool(true))
        func row(_ section: String, _ name: String, _ keys: [FixKey]) -> DiagnoseCase {
            DiagnoseCase(section: section, name: name, atsDictionary: .dictionary(exception(keys)), exceptionKeys: keys)
        }
        var allLoads = PlistDictionary()
        allLoads.set("NSAllowsArbitraryLoads", .bool(true))
        return [
            [DiagnoseCase(section: "Default ATS Secure Connection", name: "ATS Default Connection",
                          atsDictionary: .dictionary(PlistDictionary()), exceptionKeys: [])],
            [DiagnoseCase(section: "Allowing Arbitrary Loads", name: "Allow All Loads", atsDictionary: .dictionary(allLoads),
                          exceptionKeys: [])],
            versions.map { row("Configuring TLS exceptions for \(host)", $0.plistName, [minTLS($0)]) },
            [row("Configuring PFS exceptions for \(host)", "Disabling Perfect Forward Secrecy", [noPFS])],
            [row("Configuring PFS exceptions and allowing insecure HTTP for \(host)",
                 "Disabling Perfect Forward Secrecy and Allowing Insecure HTTP", [insecure, noPFS])],
            versions.map {
                row("Configuring TLS exceptions with PFS disabled for \(host)", "\($0.plistName) with PFS disabled",
                    [minTLS($0), noPFS])
            },
            versions.map {
                row("Configuring TLS exceptions with PFS disabled and insecure HTTP allowed for \(host)",
                    "\($0.plistName) with PFS disabled and insecure HTTP allowed", [insecure, minTLS($0), noPFS])
            },
        ]
    }

    /// How much a passing row relaxes ATS; lower is narrower. Rows that relax nothing beyond the default
    /// (`TLSv1.3`, `TLSv1.2` minimums) count as 0 so they are never recommended over "no exception needed".
    var relaxation: Int {
        var score = 0
        for k in exceptionKeys {
            switch (k.key, k.value) {
            case ("NSExceptionMinimumTLSVersion", .string("TLSv1.1")): score += 1
            case ("NSExceptionMinimumTLSVersion", .string("TLSv1.0")): score += 2
            case ("NSExceptionRequiresForwardSecrecy", _): score += 4
            case ("NSExceptionAllowsInsecureHTTPLoads", _): score += 8
            default: break
            }
        }
        return score
    }
}
