import Foundation
import WireGuardCore

#if canImport(Glibc)
    import Glibc
#endif

/// WireGuard mode's keys, kept beside the CA in `--ca-dir`/wireguard/: the proxy's static key pair and the one
/// device's, each a private key in base64 in a file of mode 0600, made on first use and never replaced (a device
/// that imported the configuration keeps working across runs). Private keys are never logged.
struct WireGuardKeyFiles {
    static let folderName = "wireguard"
    static let proxyKeyName = "proxy.key"
    static let deviceKeyName = "device.key"
    /// The device's configuration as last written (it holds the device's private key, so it is 0600 too).
    static let deviceConfigName = "device.conf"

    let folder: URL
    let proxy: WireGuardKeyPair
    let device: WireGuardKeyPair
    /// Whether either key was made now (the device must import the configuration again).
    let created: Bool

    /// Loads the keys from `caDirectory`/wireguard/, making whichever is missing.
    init(caDirectory: URL) throws {
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
        let (device, deviceCreated) = try Self.loadOrCreate(folder.appendingPathComponent(Self.deviceKeyName))
        (self.proxy, self.device, created) = (proxy, device, proxyCreated || deviceCreated)
    }

    /// Writes the device's configuration to wireguard/device.conf (0600), replacing the last one.
    func writeDeviceConfig(_ text: String) throws {
        let path = folder.appendingPathComponent(Self.deviceConfigName).path
        let temporary = try Self.writeTemporary(Array(text.utf8), beside: path)
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
