import Foundation
import Onboarding
import QRCode
import WireGuardCore

#if canImport(Glibc)
    import Glibc
#endif

/// One device of WireGuard mode (`--wireguard-devices N` makes N): what the listener needs to accept it and give
/// it its tunnel address, and where its configuration is written.
struct WireGuardDevice: Sendable {
    /// `device` for the first (its files keep the names they had before several devices: an imported configuration
    /// keeps working), `device-2`, `device-3`, … for the others. Also the stem of its key and configuration files.
    let name: String
    /// 1 for the first device, n for `device-n`.
    let number: Int
    let keyPair: WireGuardKeyPair
    /// Its IPv4 address in the tunnel: 198.19.0.2 for the first, 198.19.0.(n+1) for device n.
    let address: [UInt8]
    /// Where its configuration (wg-quick text, holding its private key) is written, mode 0600.
    let configPath: String
    /// Its key or the proxy's was made by this start: the device must import its configuration (again).
    let isNew: Bool
}

/// WireGuard mode's keys, kept beside the CA in `--ca-dir`/wireguard/: the proxy's static key pair and one per device
/// (`device.key`, then `device-2.key` … for `--wireguard-devices N`), each a private key in base64 in a file of mode
/// 0600, made on first use and never replaced (a device that imported the configuration keeps working across runs).
/// Keys of devices beyond N are kept but not used, so raising N again gives those devices back their keys. Private
/// keys are never logged.
struct WireGuardKeyFiles {
    static let folderName = "wireguard"
    static let proxyKeyName = "proxy.key"
    static let deviceKeyName = "device.key"
    /// The first device's configuration as last written (it holds the device's private key, so it is 0600 too).
    static let deviceConfigName = "device.conf"
    /// The most devices `--wireguard-devices` takes: their addresses 198.19.0.2 … 198.19.0.251 stay in one /24 of
    /// the tunnel's 198.19.0.0/16 (device n is 198.19.0.(n+1), easy to read in the log), five times the 50 idle
    /// peers the benchmark wants; each device is one peer the responder keeps and one handshake's DH per rekey.
    static let maxDevices = 250

    let folder: URL
    let proxy: WireGuardKeyPair
    /// Every device, the first one first (index 0 is the one device of earlier versions, unchanged).
    let devices: [WireGuardDevice]
    /// The first device's key pair.
    var device: WireGuardKeyPair { devices[0].keyPair }
    /// Whether any key was made now (those devices must import their configuration again).
    var created: Bool { devices.contains { $0.isNew } }

    /// Loads the keys from `caDirectory`/wireguard/, making whichever is missing: the proxy's and `deviceCount`
    /// devices' (1 … `maxDevices`).
    init(caDirectory: URL, deviceCount: Int = 1) throws {
        precondition((1...Self.maxDevices).contains(deviceCount), "--wireguard-devices is checked when parsed")
        folder = caDirectory.appendingPathComponent(Self.folderName)
        do {
            // 0700 whatever the umask: the folder holds private keys.
            try FileManager.default.createDirectory(
                at: folder, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        } catch {
            throw failure(
                "atsproxy run: error: --mode wireguard: cannot create \(folder.path): "
                    + error.localizedDescription)
        }
        let (proxy, proxyCreated) = try Self.loadOrCreate(folder.appendingPathComponent(Self.proxyKeyName))
        var devices: [WireGuardDevice] = []
        for number in 1...deviceCount {
            let name = Self.deviceName(number)
            let (pair, made) = try Self.loadOrCreate(folder.appendingPathComponent(name + ".key"))
            devices.append(WireGuardDevice(
                name: name, number: number, keyPair: pair, address: Self.deviceAddress(number),
                configPath: folder.appendingPathComponent(name + ".conf").path, isNew: made || proxyCreated))
        }
        (self.proxy, self.devices) = (proxy, devices)
    }

    /// `device` for the first device, `device-n` for the others.
    static func deviceName(_ number: Int) -> String { number == 1 ? "device" : "device-\(number)" }

    /// Device n's tunnel address: the first keeps WireGuardClientConfig's default, 198.19.0.2; device n is
    /// 198.19.0.(n+1).
    static func deviceAddress(_ number: Int) -> [UInt8] {
        let first = WireGuardClientConfig.defaultDeviceAddress
        return Array(first.dropLast()) + [first[3] + UInt8(number - 1)]
    }

    /// Each device's configuration: its own key and address, the proxy's public key, `endpoint` (`HOST:PORT` the
    /// devices reach the UDP port at) and `dns` (the proxy's tunnel address).
    func clientConfigs(endpoint: String, dns: [UInt8]) -> [WireGuardClientConfig] {
        devices.map { device in
            WireGuardClientConfig(
                device: device.keyPair, proxyPublicKey: proxy.publicKey, endpoint: endpoint,
                deviceAddress: ipv4Text(device.address) + "/32", dns: ipv4Text(dns))
        }
    }

    /// Writes every device's configuration to its `configPath` (0600, each replacing the last one) and returns them,
    /// in the order of `devices`: what the banner prints and the set-up page serves.
    @discardableResult
    func writeConfigs(endpoint: String, dns: [UInt8]) throws -> [WireGuardClientConfig] {
        let configs = clientConfigs(endpoint: endpoint, dns: dns)
        for (device, config) in zip(devices, configs) { try Self.replace(device.configPath, with: config.text) }
        return configs
    }

    /// The set-up page's WireGuard section from `configs`, `devices`' in order (`writeConfigs`' result).
    func setUpSection(_ configs: [WireGuardClientConfig]) -> OnboardingWireGuard {
        OnboardingWireGuard(
            endpoint: configs.first?.endpoint ?? "",
            devices: zip(devices, configs).map { device, config in
                .init(number: device.number, address: ipv4Text(device.address), config: config.text)
            })
    }

    /// The banner's lines about the devices, after its `WireGuard: UDP …` lines: the devices after the first (one
    /// line each for a few, one line for many), then the first device's configuration path and its QR code (last,
    /// without its final newline: the banner's next line follows). `configs` are `devices`' in order (`writeConfigs`).
    static func bannerLines(
        devices: [WireGuardDevice], configs: [WireGuardClientConfig], ansiColors: Bool
    ) -> String {
        let indent = "\n         "
        func renew(_ device: WireGuardDevice) -> String { device.isNew ? " (new keys: import it again)" : "" }
        var text = ""
        let others = devices.dropFirst()
        if others.count <= 4 {
            for device in others {
                text += indent + "device \(device.number) (\(ipv4Text(device.address))): \(device.configPath)"
                    + renew(device)
            }
        } else if let second = others.first, let last = others.last {
            let folder = URL(fileURLWithPath: second.configPath).deletingLastPathComponent().path
            let made = others.filter(\.isNew).count
            text += indent
                + "devices 2 to \(last.number) (\(ipv4Text(second.address)) to \(ipv4Text(last.address))): "
                + "\(second.name).conf … \(last.name).conf in \(folder)"
                + (made == 0 ? "" : " (\(made) with new keys: import them again)")
        }
        if others.count > 0 {
            text += indent + "(each device's configuration and QR code are also on the set-up page, given only with "
                + "the proxy's credentials when it has them)"
        }
        guard let first = devices.first, let config = configs.first else { return text }
        text += indent + "device configuration: \(first.configPath)\(renew(first))"
            + "; scan this in the WireGuard app (it holds the device's private key):\n"
        do {
            let code = try QRCode(text: config.text, errorCorrection: .low)
            text += code.terminalText(quietZone: 2, ansiColors: ansiColors).dropLast()
        } catch {
            text += "(no QR code: \(error); import \(first.configPath) instead)"
        }
        return text
    }

    /// `text` written to `path` whole or not at all (a temporary file, O_EXCL and 0600 before any byte, renamed).
    private static func replace(_ path: String, with text: String) throws {
        let temporary = try writeTemporary(Array(text.utf8), beside: path)
        guard rename(temporary, path) == 0 else {
            let reason = String(cString: strerror(errno))
            unlink(temporary)
            throw failure("atsproxy run: error: --mode wireguard: cannot write \(path) (\(reason))")
        }
    }

    /// The key pair in `url`, or a new one written there. The new file appears whole or not at all: it is written
    /// to a temporary file (O_EXCL, 0600 before any byte), then hard-linked to its name, which fails if another
    /// proxy sharing the folder made it first (then that one is used).
    private static func loadOrCreate(_ url: URL) throws -> (WireGuardKeyPair, Bool) {
        if let existing = try load(url) { return (existing, false) }
        guard let pair = WireGuardKeyPair.generate() else {
            throw failure("atsproxy run: error: --mode wireguard: OpenSSL could not generate a key")
        }
        let temporary = try writeTemporary(Array((pair.privateKeyBase64 + "\n").utf8), beside: url.path)
        defer { unlink(temporary) }
        if link(temporary, url.path) != 0 {
            guard errno == EEXIST, let existing = try load(url) else {
                throw failure(
                    "atsproxy run: error: --mode wireguard: cannot write \(url.path) "
                        + "(\(String(cString: strerror(errno))))"
                )
            }
            return (existing, false)
        }
        return (pair, true)
    }

    private static func load(_ url: URL) throws -> WireGuardKeyPair? {
        guard FileManager.default.fileExists(atPath: url.path) else { return nil }
        guard let text = try? String(contentsOf: url, encoding: .utf8),
            let key = WireGuardKeyPair.decode(base64: text), let pair = WireGuardKeyPair(privateKey: key)
        else {
            throw failure(
                "atsproxy run: error: --mode wireguard: \(url.path) holds no WireGuard private key (32 bytes "
                    + "in base64); remove it to make a new one (the device must then import the new configuration)")
        }
        return pair
    }

    /// A new file beside `path` holding `bytes`, created with O_EXCL and mode 0600 before anything is written.
    private static func writeTemporary(_ bytes: [UInt8], beside path: String) throws -> String {
        let temporary = "\(path).\(String(UInt64.random(in: 0...UInt64.max), radix: 16)).tmp"
        func failed(_ step: String) -> Error {
            failure(
                "atsproxy run: error: --mode wireguard: cannot write \(path) (\(step): "
                    + "\(String(cString: strerror(errno))))")
        }
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw failed("create") }
        var error: Error?
        if fchmod(fd, 0o600) != 0 { error = failed("chmod") }
        var written = 0
        while error == nil, written < bytes.count {
            let n = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + written, $0.count - written) }
            if n > 0 { written += n } else if n == 0 || errno != EINTR { error = failed("write") }
        }
        if error == nil, fsync(fd) != 0 { error = failed("fsync") }
        if close(fd) != 0, error == nil { error = failed("close") }
        if let error {
            unlink(temporary)
            throw error
        }
        return temporary
    }
}
