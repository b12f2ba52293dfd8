// The Network Link Conditioner's built-in profiles. Apple publishes no table of their figures (they live in the
// prefPane's profile plist, shown in its "Manage Profiles" sheet), so they are taken from public copies. Sources, and
// which figure each confirms (docs/rules-throttle.md has the same table):
//
// [1] NSHipster, "Network Link Conditioner" (github.com/NSHipster/articles, 2013-09-09-network-link-conditioner.md,
//     revised 2019): the preset NAMES of the current tool: 100% Loss, 3G, DSL, EDGE, High Latency DNS, LTE,
//     Very Bad Network, WiFi, WiFi 802.11ac. No Cable Modem: it is not among today's presets, so it is left out.
// [2] A public ipfw/dummynet script reproducing the OS X 10.8 presets ("network link conditioner, tested on MacOSX
//     10.8 & FreeBSD 9.1"): 3G = down 780 kbit/s 100 ms, up 330 kbit/s 100 ms, no loss; Edge = down 240 kbit/s
//     400 ms, up 200 kbit/s 440 ms, no loss.
// [3] Proxyman's documentation of its NLC-like presets (github.com/ProxymanApp/docs,
//     advanced-features/network-throttling.md): the bandwidth ceilings Edge 240/200 kbit/s, 3G 780/~300 kbit/s,
//     LTE 50/10 Mbit/s, Wi-Fi 40/~30 Mbit/s, Wi-Fi 802.11ac 250/100 Mbit/s, Very Bad Network < 1 Mbit/s.
// [4] The figures of Apple's profile plist as commonly quoted (DSL 2 Mbit/s / 256 kbit/s 5 ms; LTE delays 50/65 ms;
//     Wi-Fi 40/33 Mbit/s 1 ms; Very Bad Network 1 Mbit/s, 10% loss, 500 ms each way; High Latency DNS +3000 ms;
//     100% Loss). No stored copy of the plist itself was found: these are the values the lead should check
//     on a Mac (System Settings → Network Link Conditioner → Manage Profiles) before release.
//
// Where sources disagree: some blog posts give 3G 200 ms, DSL 50 ms, LTE 12/12 Mbit/s 100 ms and Very Bad Network
// 400 ms 5% or 500 ms 20% loss. Those do not match [2] and [3] (which agree with each other where they overlap),
// so the table follows [2] and [3] and, for what they do not cover, [4].

extension LinkProfile {
    private static func kbit(_ k: Int) -> Int { k * 1_000 }
    private static func mbit(_ m: Int) -> Int { m * 1_000_000 }

    /// 3G [2][3]: 780 kbit/s down, 330 kbit/s up, 100 ms each way.
    public static let threeG = LinkProfile(
        name: "3G",
        downlink: Direction(bitsPerSecond: kbit(780), delay: .milliseconds(100)),
        uplink: Direction(bitsPerSecond: kbit(330), delay: .milliseconds(100)))

    /// DSL [4]: 2 Mbit/s down, 256 kbit/s up, 5 ms each way.
    public static let dsl = LinkProfile(
        name: "DSL",
        downlink: Direction(bitsPerSecond: mbit(2), delay: .milliseconds(5)),
        uplink: Direction(bitsPerSecond: kbit(256), delay: .milliseconds(5)))

    /// Edge [2][3]: 240 kbit/s down with 400 ms, 200 kbit/s up with 440 ms.
    public static let edge = LinkProfile(
        name: "Edge",
        downlink: Direction(bitsPerSecond: kbit(240), delay: .milliseconds(400)),
        uplink: Direction(bitsPerSecond: kbit(200), delay: .milliseconds(440)))

    /// LTE [3][4]: 50 Mbit/s down with 50 ms, 10 Mbit/s up with 65 ms.
    public static let lte = LinkProfile(
        name: "LTE",
        downlink: Direction(bitsPerSecond: mbit(50), delay: .milliseconds(50)),
        uplink: Direction(bitsPerSecond: mbit(10), delay: .milliseconds(65)))

    /// Very Bad Network [3][4]: 1 Mbit/s, 10% loss, 500 ms, both ways.
    public static let veryBadNetwork = LinkProfile(
        name: "Very Bad Network",
        downlink: Direction(bitsPerSecond: mbit(1), lossPercent: 10, delay: .milliseconds(500)),
        uplink: Direction(bitsPerSecond: mbit(1), lossPercent: 10, delay: .milliseconds(500)))

    /// High Latency DNS [4]: no limit on the link, 3 s added to each DNS look-up.
    public static let highLatencyDNS = LinkProfile(
        name: "High Latency DNS", downlink: .unconditioned, uplink: .unconditioned, dnsDelay: .seconds(3))

    /// 100% Loss [1][4]: every packet lost both ways; nothing passes.
    public static let totalLoss = LinkProfile(
        name: "100% Loss",
        downlink: Direction(bitsPerSecond: nil, lossPercent: 100),
        uplink: Direction(bitsPerSecond: nil, lossPercent: 100))

    /// Wi-Fi [3][4]: 40 Mbit/s down, 33 Mbit/s up, 1 ms each way.
    public static let wifi = LinkProfile(
        name: "Wi-Fi",
        downlink: Direction(bitsPerSecond: mbit(40), delay: .milliseconds(1)),
        uplink: Direction(bitsPerSecond: mbit(33), delay: .milliseconds(1)))

    /// Wi-Fi 802.11ac [3][4]: 250 Mbit/s down, 100 Mbit/s up, 1 ms each way.
    public static let wifi80211ac = LinkProfile(
        name: "Wi-Fi 802.11ac",
        downlink: Direction(bitsPerSecond: mbit(250), delay: .milliseconds(1)),
        uplink: Direction(bitsPerSecond: mbit(100), delay: .milliseconds(1)))

    /// Every preset, in the order NLC lists them.
    public static let presets: [LinkProfile] = [
        totalLoss, threeG, dsl, edge, highLatencyDNS, lte, veryBadNetwork, wifi, wifi80211ac,
    ]

    /// The preset called `name`, ignoring case, spaces, hyphens and underscores ("3g", "wifi", "very-bad-network",
    /// "WiFi 802.11ac", "EDGE" all match); nil for any other name.
    public static func preset(named name: String) -> LinkProfile? {
        let key = presetKey(name)
        guard !key.isEmpty else { return nil }
        return presets.first { presetKey($0.name) == key }
    }

    static func presetKey(_ name: String) -> String {
        String(name.lowercased().filter { !" -_".contains($0) })
    }
}
