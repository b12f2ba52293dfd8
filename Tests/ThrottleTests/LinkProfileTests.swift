import Testing

@testable import Throttle

@Suite("Network Link Conditioner presets and the --throttle spec")
struct LinkProfileTests {
    @Test("3G is 780 kbit/s down and 330 kbit/s up with 100 ms each way, as NLC has it")
    func threeG() throws {
        let p = try LinkProfile(parsing: "3G")
        #expect(p.downlink == .init(bitsPerSecond: 780_000, delay: .milliseconds(100)))
        #expect(p.uplink == .init(bitsPerSecond: 330_000, delay: .milliseconds(100)))
        #expect(p.dnsDelay == .zero)
        #expect(p.roundTrip == .milliseconds(200))
    }

    @Test("Every NLC preset is found by its name, whatever the case, spaces or hyphens")
    func names() throws {
        let spellings: [(String, String)] = [
            ("3g", "3G"), ("DSL", "DSL"), ("EDGE", "Edge"), ("edge", "Edge"), ("LTE", "LTE"),
            ("very bad network", "Very Bad Network"), ("Very-Bad-Network", "Very Bad Network"),
            ("High Latency DNS", "High Latency DNS"), ("100% Loss", "100% Loss"), ("WiFi", "Wi-Fi"),
            ("wi-fi", "Wi-Fi"), ("WiFi 802.11ac", "Wi-Fi 802.11ac"), ("Wi-Fi 802.11ac", "Wi-Fi 802.11ac"),
        ]
        for (written, name) in spellings {
            #expect(try LinkProfile(parsing: written).name == name, "\(written)")
        }
        #expect(LinkProfile.presets.count == 9)
        #expect(Set(LinkProfile.presets.map { LinkProfile.presetKey($0.name) }).count == 9)
    }

    @Test("The presets carry their distinctive conditions: loss, DNS delay, stall")
    func distinctive() {
        #expect(LinkProfile.veryBadNetwork.downlink.lossPercent == 10)
        #expect(LinkProfile.veryBadNetwork.uplink.delay == .milliseconds(500))
        #expect(LinkProfile.highLatencyDNS.dnsDelay == .seconds(3))
        #expect(LinkProfile.highLatencyDNS.downlink.bitsPerSecond == nil)
        #expect(LinkProfile.totalLoss.dropsEverything)
        #expect(!LinkProfile.threeG.dropsEverything)
        #expect(LinkProfile.edge.uplink == .init(bitsPerSecond: 200_000, delay: .milliseconds(440)))
    }

    @Test("A custom spec sets both directions' bandwidth, latency and loss")
    func custom() throws {
        let p = try LinkProfile(parsing: "down=780kbit,up=330kbit,latency=100ms,loss=1%")
        #expect(p.name == "custom")
        #expect(p.downlink == .init(bitsPerSecond: 780_000, lossPercent: 1, delay: .milliseconds(100)))
        #expect(p.uplink == .init(bitsPerSecond: 330_000, lossPercent: 1, delay: .milliseconds(100)))
    }

    @Test("Units: bit, kbit, Mbit, Gbit, kbps, B, kB, MB per second; ms and s; per-direction keys; unlimited")
    func units() throws {
        let cases: [(String, Int?)] = [
            ("500bit", 500), ("64kbit", 64_000), ("1.5Mbit", 1_500_000), ("1Gbit", 1_000_000_000),
            ("780Kbps", 780_000), ("2mbit/s", 2_000_000), ("100B", 800), ("100kB", 800_000), ("1.5MB", 12_000_000),
            ("3MB/s", 24_000_000), ("unlimited", nil),
        ]
        for (text, bits) in cases {
            #expect(try LinkProfile(parsing: "down=\(text)").downlink.bitsPerSecond == bits, "\(text)")
        }
        let p = try LinkProfile(parsing: " down = 1Mbit , up-latency=1.5s, down-latency=20ms, up-loss=2.5%, dns=3s ")
        #expect(p.uplink.delay == .milliseconds(1500))
        #expect(p.downlink.delay == .milliseconds(20))
        #expect(p.uplink.lossPercent == 2.5)
        #expect(p.downlink.lossPercent == 0)
        #expect(p.uplink.bitsPerSecond == nil)
        #expect(p.dnsDelay == .seconds(3))
        #expect(try LinkProfile(parsing: "latency=0,loss=0").downlink.delay == .zero)
    }

    @Test("Bad specs are refused with an error naming the part at fault", arguments: [
        ("", ThrottleSpecError.empty),
        ("4G", .unknownProfile("4G")),
        ("down=780", .badBandwidth(key: "down", value: "780")),
        ("down=780kbit/h", .badBandwidth(key: "down", value: "780kbit/h")),
        ("down=fast", .badBandwidth(key: "down", value: "fast")),
        ("down=0kbit", .zeroBandwidth(key: "down")),
        ("latency=100", .badDuration(key: "latency", value: "100")),
        ("latency=2h", .badDuration(key: "latency", value: "2h")),
        ("loss=150%", .badLoss(key: "loss", value: "150%")),
        ("loss=1", .badLoss(key: "loss", value: "1")),
        ("down=1Mbit,speed=3", .unknownKey("speed")),
        ("down=1Mbit,down=2Mbit", .duplicateKey("down")),
        ("latency=10ms,up-latency=20ms", .duplicateKey("up-latency")),
        ("down=", .missingValue(key: "down")),
        ("down=1Mbit,up", .missingValue(key: "up")),
    ])
    func refused(text: String, error: ThrottleSpecError) {
        #expect(throws: error) { try LinkProfile(parsing: text) }
    }

    @Test("An unknown profile's message lists the known ones and the custom syntax")
    func unknownMessage() {
        let message = ThrottleSpecError.unknownProfile("4G").description
        #expect(message.contains("\"4G\""))
        #expect(message.contains("Very Bad Network"))
        #expect(message.contains("down=780kbit"))
    }

    @Test("The description states the figures")
    func description() {
        #expect(LinkProfile.threeG.description == "3G: down 780 kbit/s, 100 ms; up 330 kbit/s, 100 ms")
        #expect(LinkProfile.highLatencyDNS.description.contains("DNS +3000 ms"))
        #expect(LinkProfile.veryBadNetwork.description
            == "Very Bad Network: down 1 Mbit/s, 500 ms, 10% loss; up 1 Mbit/s, 500 ms, 10% loss")
    }
}

@Suite("The --throttle spec parser on arbitrary text")
struct LinkProfileSpecRobustnessTests {
    @Test("Mutated specs either parse to a sane profile or throw; none crash")
    func mutated() {
        var random = SplitMix64(seed: 33)
        let seeds = ["down=780kbit,up=330kbit,latency=100ms,loss=1%", "3G", "dns=3s,down-loss=0.5%", "up=1.5MB/s"]
        let alphabet = Array("=,.%0123456789kKmMgGbBitps/ -unlimitedlatencyloss\u{0}é")
        for i in 0..<5_000 {
            var text = Array(seeds[i % seeds.count])
            for _ in 0..<Int.random(in: 1...4, using: &random) {
                let at = Int.random(in: 0...text.count, using: &random)
                switch Int.random(in: 0..<3, using: &random) {
                case 0 where at < text.count: text.remove(at: at)
                case 1 where at < text.count: text[at] = alphabet.randomElement(using: &random)!
                default: text.insert(alphabet.randomElement(using: &random)!, at: at)
                }
            }
            guard let p = try? LinkProfile(parsing: String(text)) else { continue }
            for d in [p.downlink, p.uplink] {
                #expect((0...100).contains(d.lossPercent), "\(String(text))")
                #expect(d.bitsPerSecond.map { $0 > 0 } ?? true, "\(String(text))")
                #expect(d.delay >= .zero && d.delay <= .seconds(3_600), "\(String(text))")
            }
        }
    }
}
