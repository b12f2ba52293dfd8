import Foundation
import Testing
import WireGuardCore

@testable import atsproxy

/// WireGuard mode's key files for several devices (`--wireguard-devices N`), in a temporary CA folder.
@Suite("WireGuard key files for several devices")
struct WireGuardKeyFilesTests {
    static func folder() throws -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("wg-keys-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }

    static func mode(_ path: String) throws -> Int? {
        (try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? NSNumber)?.intValue
    }

    @Test("N devices: names, addresses, key files made once (0600) and kept across restarts")
    func devicesMadeOnceAndKept() throws {
        let ca = try Self.folder()
        defer { try? FileManager.default.removeItem(at: ca) }
        let first = try WireGuardKeyFiles(caDirectory: ca, deviceCount: 3)
        #expect(first.devices.map(\.name) == ["device", "device-2", "device-3"])
        #expect(first.devices.map(\.number) == [1, 2, 3])
        #expect(first.devices.map(\.address) == [[198, 19, 0, 2], [198, 19, 0, 3], [198, 19, 0, 4]])
        #expect(first.devices.allSatisfy(\.isNew) && first.created)
        let folder = ca.appendingPathComponent("wireguard")
        #expect(first.devices.map(\.configPath) == ["device.conf", "device-2.conf", "device-3.conf"].map {
            folder.appendingPathComponent($0).path
        })
        #expect(try Self.mode(folder.path) == 0o700)
        for name in ["proxy.key", "device.key", "device-2.key", "device-3.key"] {
            #expect(try Self.mode(folder.appendingPathComponent(name).path) == 0o600, "\(name)")
        }
        // Distinct keys, all different from the proxy's.
        let publicKeys = Set(first.devices.map(\.keyPair.publicKey) + [first.proxy.publicKey])
        #expect(publicKeys.count == 4)

        let again = try WireGuardKeyFiles(caDirectory: ca, deviceCount: 3)
        #expect(again.devices.map(\.keyPair.privateKey) == first.devices.map(\.keyPair.privateKey))
        #expect(again.proxy.privateKey == first.proxy.privateKey)
        #expect(!again.created && !again.devices.contains(where: \.isNew))

        // Fewer devices: the first ones, same keys; more: the new one alone is new, and its key file 0600.
        let fewer = try WireGuardKeyFiles(caDirectory: ca, deviceCount: 2)
        #expect(fewer.devices.map(\.keyPair.privateKey) == Array(first.devices.prefix(2).map(\.keyPair.privateKey)))
        let more = try WireGuardKeyFiles(caDirectory: ca, deviceCount: 4)
        #expect(more.devices.map(\.isNew) == [false, false, false, true])
        #expect(more.devices[3].address == [198, 19, 0, 5])
        #expect(try Self.mode(folder.appendingPathComponent("device-4.key").path) == 0o600)
    }

    @Test("The first device is the one of earlier versions: device.key, 198.19.0.2, device.conf, unchanged by N")
    func firstDeviceUnchanged() throws {
        let ca = try Self.folder()
        defer { try? FileManager.default.removeItem(at: ca) }
        // As an earlier version left it: one device, its configuration written with the default address.
        let single = try WireGuardKeyFiles(caDirectory: ca)
        #expect(single.devices.count == 1)
        let legacy = WireGuardClientConfig(
            device: single.device, proxyPublicKey: single.proxy.publicKey, endpoint: "192.0.2.1:51820",
            deviceAddress: "198.19.0.2/32", dns: "198.19.0.1")
        try legacy.text.write(toFile: single.devices[0].configPath, atomically: true, encoding: .utf8)

        let many = try WireGuardKeyFiles(caDirectory: ca, deviceCount: 5)
        #expect(many.device.privateKey == single.device.privateKey)
        #expect(many.devices[0].keyPair.privateKey == single.device.privateKey)
        #expect(!many.devices[0].isNew)
        let configs = try many.writeConfigs(endpoint: "192.0.2.1:51820", dns: [198, 19, 0, 1])
        // Byte for byte what the one-device version wrote: an imported configuration stays valid.
        #expect(configs[0].text == legacy.text)
        #expect(try String(contentsOfFile: many.devices[0].configPath, encoding: .utf8) == legacy.text)
        for (device, config) in zip(many.devices, configs) {
            let written = try String(contentsOfFile: device.configPath, encoding: .utf8)
            #expect(written == config.text)
            #expect(written.contains("PrivateKey = \(device.keyPair.privateKeyBase64)\n"))
            #expect(written.contains("Address = \(ipv4Text(device.address))/32\n"))
            #expect(written.contains("PublicKey = \(many.proxy.publicKeyBase64)\n"))
            #expect(try Self.mode(device.configPath) == 0o600)
        }
        // What the set-up page is given: every configuration as written, and their endpoint.
        let section = many.setUpSection(configs)
        #expect(section.endpoint == "192.0.2.1:51820")
        #expect(section.devices.map(\.number) == [1, 2, 3, 4, 5])
        #expect(section.devices.map(\.config) == configs.map(\.text))
        #expect(section.devices[4].address == "198.19.0.6")
    }

    @Test("The banner: the others one line each (a few) or one line (many), then the first's path and QR code")
    func bannerLines() throws {
        let ca = try Self.folder()
        defer { try? FileManager.default.removeItem(at: ca) }
        let three = try WireGuardKeyFiles(caDirectory: ca, deviceCount: 3)
        let configs = three.clientConfigs(endpoint: "192.0.2.1:51820", dns: [198, 19, 0, 1])
        let text = WireGuardKeyFiles.bannerLines(devices: three.devices, configs: configs, ansiColors: false)
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        #expect(lines.first == "")
        #expect(lines[1].hasPrefix("         device 2 (198.19.0.3): \(three.devices[1].configPath) (new keys"))
        #expect(lines[2].hasPrefix("         device 3 (198.19.0.4): \(three.devices[2].configPath)"))
        let heading = try #require(lines.firstIndex { $0.contains("device configuration: ") })
        #expect(lines[heading].contains(three.devices[0].configPath))
        #expect(lines.count > heading + 10)
        #expect(!text.hasSuffix("\n"))

        let many = try WireGuardKeyFiles(caDirectory: ca, deviceCount: 50)
        let manyText = WireGuardKeyFiles.bannerLines(
            devices: many.devices, configs: many.clientConfigs(endpoint: "192.0.2.1:51820", dns: [198, 19, 0, 1]),
            ansiColors: false)
        let folder = ca.appendingPathComponent("wireguard").path
        #expect(manyText.contains(
            "devices 2 to 50 (198.19.0.3 to 198.19.0.51): device-2.conf … device-50.conf in \(folder) (47 with new "
                + "keys: import them again)"))
        #expect(!manyText.contains("device 7 ("))
    }
}
