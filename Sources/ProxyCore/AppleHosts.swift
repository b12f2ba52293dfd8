// Apple's own services that iOS pins or that fail when intercepted. They are the device's traffic, not the app's:
// intercepting them breaks Apple Account sign-in (Sign in with Apple included), iCloud, push and the App Store on
// the device under test, and reports problems that are not the app's. They are tunnelled untouched by default
// (`--intercept-apple-hosts` turns that off) and their hellos are not judged against the app's policy; their
// cleartext requests (App Store content, OCSP, CRLs) are relayed without a verdict.
//
// The list is deliberately narrower than `*.apple.com`: an app's own calls to other Apple hosts (a developer
// API, a web page) are still intercepted and judged.

/// The built-in list of Apple hosts tunnelled without interception, each with why and where that is documented.
public struct AppleHosts: Sendable {
    /// One entry: the hosts it covers (HostPattern syntax), the service, and its source.
    public struct Entry: Sendable {
        public let pattern: HostPattern
        public let service: String
        /// Where the entry comes from: Apple's documentation, or a public report of the failure.
        public let source: String
    }

    public let entries: [Entry]
    private let table: HostPatternTable<Entry>

    init(_ entries: [Entry]) {
        self.entries = entries
        table = HostPatternTable(entries.map { ($0.pattern, $0) })
    }

    /// The entry that covers `host` (lower case), if any.
    public func entry(for host: String) -> Entry? { table.lookup(host)?.value }

    /// Apple's "Use Apple products on enterprise networks" (support.apple.com/101555, formerly HT210060): "Apple
    /// services will fail any connection that uses HTTPS Interception (SSL Inspection)", for the hosts it lists.
    static let enterpriseNetworks = "Apple, Use Apple products on enterprise networks (support.apple.com/101555, formerly HT210060)"

    /// The built-in list.
    public static let builtIn = AppleHosts([
        e("gsa.apple.com", "Apple Account sign-in (GrandSlam; Sign in with Apple)",
          enterpriseNetworks + "; httptoolkit/httptoolkit#814 (\"Aborted connection to gsa.apple.com\"); "
            + "ProxymanApp/Proxyman#1536 (pinned)"),
        e("idmsa.apple.com", "Apple Account sign-in", enterpriseNetworks),
        e("appleid.apple.com", "Apple Account", enterpriseNetworks),
        e("appleid.cdn-apple.com", "Apple Account", enterpriseNetworks),
        e("gateway.icloud.com", "iCloud sign-in gateway",
          "httptoolkit/httptoolkit#814 (fails with gsa.apple.com during Sign in with Apple)"),
        e(".icloud.com", "iCloud", enterpriseNetworks),
        e(".icloud-content.com", "iCloud content", enterpriseNetworks),
        e(".apple-cloudkit.com", "CloudKit", enterpriseNetworks),
        e(".push.apple.com", "Apple Push Notification service", enterpriseNetworks),
        e("albert.apple.com", "device activation", enterpriseNetworks),
        e("humb.apple.com", "device activation", enterpriseNetworks),
        e("static.ips.apple.com", "device activation", enterpriseNetworks),
        e("tbsc.apple.com", "device activation", enterpriseNetworks),
        e("gs.apple.com", "device setup and software updates", enterpriseNetworks),
        e("sq-device.apple.com", "device setup (eSIM)", enterpriseNetworks),
        e("deviceenrollment.apple.com", "device enrollment (MDM)", enterpriseNetworks),
        e("mdmenrollment.apple.com", "device enrollment (MDM)", enterpriseNetworks),
        e("iprofiles.apple.com", "device enrollment profiles (MDM)", enterpriseNetworks),
        e("identity.apple.com", "MDM push certificates", enterpriseNetworks),
        e("gdmf.apple.com", "software update catalogue (MDM)", enterpriseNetworks),
        e("mesu.apple.com", "software update catalogue", enterpriseNetworks),
        e("xp.apple.com", "software update and App Store analytics", enterpriseNetworks),
        e(".itunes.apple.com", "App Store", enterpriseNetworks),
        e("apps.apple.com", "App Store", enterpriseNetworks),
        e(".mzstatic.com", "App Store content", enterpriseNetworks),
        e("ppq.apple.com", "enterprise app validation", enterpriseNetworks),
        e("captive.apple.com", "captive-portal detection", enterpriseNetworks),
        e("crl.apple.com", "certificate validation (CRL)", enterpriseNetworks),
        e("ocsp.apple.com", "certificate validation (OCSP)", enterpriseNetworks),
        e("ocsp2.apple.com", "certificate validation (OCSP)", enterpriseNetworks),
        e("valid.apple.com", "certificate validation", enterpriseNetworks),
        e("certs.apple.com", "certificate validation", enterpriseNetworks),
    ])

    /// `.domain` for a domain and the names below it, else an exact host; the test suite checks that each parses
    /// as `--passthrough` would parse it.
    private static func e(_ pattern: String, _ service: String, _ source: String) -> Entry {
        let below = pattern.hasPrefix(".")
        return Entry(
            pattern: HostPattern(builtIn: below ? String(pattern.dropFirst()) : pattern,
                                 kind: below ? .domainAndSubdomains : .exact),
            service: service, source: source)
    }
}

extension HostPattern {
    /// A pattern from a list fixed in the source, already lower case and valid.
    init(builtIn name: String, kind: Kind) {
        self.kind = kind
        self.name = name
    }
}

/// The tunnel of an Apple host: its record and its notice.
enum AppleHostsTunnel {
    /// Not watched: the hellos of the device's own services are not judged against the app's policy, so nothing
    /// but the app's own traffic is reported.
    static func record(host: String, port: Int, entry: AppleHosts.Entry, started: Double) -> Tunnel {
        var record = Tunnel(
            host: host, port: port,
            note: "tunnel, not intercepted: Apple's own service (\(entry.service)), which fails when intercepted; "
                + "--intercept-apple-hosts to intercept it",
            started: started)
        record.clientFirstFlight = nil
        record.serverFirstFlight = nil
        return record
    }

    static func notice(host: String, port: Int, entry: AppleHosts.Entry) -> String {
        "\(host):\(port): tunnelled without interception: Apple's own service (\(entry.service)) fails when "
            + "intercepted, and it is the device's traffic, not the app's (--intercept-apple-hosts to intercept; "
            + "`atsproxy passthrough --list` shows the list)"
    }
}
