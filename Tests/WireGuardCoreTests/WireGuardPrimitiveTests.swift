import Testing

@testable import WireGuardCore

func hex(_ text: String) -> [UInt8] {
    var bytes: [UInt8] = []
    var index = text.startIndex
    while index < text.endIndex {
        let next = text.index(index, offsetBy: 2)
        bytes.append(UInt8(text[index..<next], radix: 16)!)
        index = next
    }
    return bytes
}

@Suite("WireGuard primitives and replay window")
struct WireGuardPrimitiveTests {
    @Test("X25519 gives RFC 7748 §6.1's keys and shared secret")
    func x25519() throws {
        let alice = try #require(
            WireGuardKeyPair(privateKey: hex("77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a")))
        let bob = try #require(
            WireGuardKeyPair(privateKey: hex("5dab087e624a8a4b79e17f8b83800ee66f3bb1292618b6fd1c2f8b27ff88e0eb")))
        #expect(alice.publicKey == hex("8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a"))
        #expect(bob.publicKey == hex("de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f"))
        let shared = hex("4a5d9d5ba4ce2de1728e3bf480350f25e07e21c947d19e3376f09b3c1e161742")
        #expect(WireGuardCrypto.dh(privateKey: alice.privateKey, publicKey: bob.publicKey) == shared)
        #expect(WireGuardCrypto.dh(privateKey: bob.privateKey, publicKey: alice.publicKey) == shared)
        // A small-order public key (all zero) gives an all-zero secret, which WireGuard refuses.
        #expect(WireGuardCrypto.dh(privateKey: alice.privateKey, publicKey: [UInt8](repeating: 0, count: 32)) == nil)
    }

    @Test("BLAKE2s-256 gives RFC 7693's digest of \"abc\"")
    func blake2s() {
        #expect(
            WireGuardCrypto.hash(Array("abc".utf8))
                == hex("508c5e8c327c14e2e1a72ba34eeb452f37458b209ed63a294d999b4c86675982"))
    }

    @Test("The AEAD opens what it sealed, and nothing altered")
    func aead() throws {
        let key = [UInt8](repeating: 7, count: 32)
        let sealed = try #require(WireGuardCrypto.seal(key: key, counter: 5, plaintext: Array("hello".utf8), aad: [1]))
        #expect(WireGuardCrypto.open(key: key, counter: 5, ciphertext: sealed[...], aad: [1]) == Array("hello".utf8))
        #expect(WireGuardCrypto.open(key: key, counter: 6, ciphertext: sealed[...], aad: [1]) == nil)
        #expect(WireGuardCrypto.open(key: key, counter: 5, ciphertext: sealed[...], aad: [2]) == nil)
        #expect(WireGuardCrypto.open(key: key, counter: 5, ciphertext: sealed.dropLast(), aad: [1]) == nil)
    }

    @Test("Base64 keys: 32 bytes or nothing; a key pair's description hides its private key")
    func keys() throws {
        let pair = try #require(WireGuardKeyPair.generate())
        #expect(WireGuardKeyPair.decode(base64: pair.privateKeyBase64) == pair.privateKey)
        #expect(WireGuardKeyPair.decode(base64: "AAAA") == nil)
        #expect(!"\(pair)".contains(pair.privateKeyBase64))
    }

    @Test("TAI64N orders by time")
    func tai64n() {
        #expect(TAI64N(unixNanoseconds: 1) < TAI64N(unixNanoseconds: 2))
        #expect(TAI64N(unixNanoseconds: 999_999_999) < TAI64N(unixNanoseconds: 1_000_000_000))
        #expect(TAI64N(unixNanoseconds: 0).bytes.prefix(8) == [0x40, 0, 0, 0, 0, 0, 0, 0x0A])
    }

    @Test("The replay window takes each counter once, reordered within its size, and refuses older ones")
    func replayWindow() {
        let window = WindowBox()
        #expect(window.accept(0))
        #expect(!window.accept(0))
        #expect(window.accept(5))
        #expect(window.accept(3))
        #expect(!window.accept(3))
        #expect(window.accept(5000))
        #expect(!window.accept(5000 - ReplayWindow.size))
        #expect(window.accept(5000 - ReplayWindow.size + 1))
        #expect(!window.accept(5000 - ReplayWindow.size + 1))
        // A jump far ahead clears the whole ring: the old bits do not shadow new counters.
        #expect(window.accept(1_000_000))
        #expect(window.accept(1_000_000 - 64))
        #expect(window.accept(999_999))
        #expect(!window.accept(999_999))
        // Every counter of a long in-order run is taken exactly once.
        let fresh = WindowBox()
        #expect((0..<10_000).allSatisfy { fresh.accept(UInt64($0)) })
        #expect((8_100..<10_000).allSatisfy { !fresh.accept(UInt64($0)) })
    }
}

/// A window behind a reference, so that `#expect` can call its mutating method.
final class WindowBox {
    var window = ReplayWindow()
    func accept(_ counter: UInt64) -> Bool { window.accept(counter) }
}

@Suite("WireGuard client configuration")
struct WireGuardClientConfigTests {
    @Test("The wg-quick text names the device's key, the proxy's key and endpoint, and fits a QR code at level L")
    func text() throws {
        let device = try #require(WireGuardKeyPair.generate())
        let proxy = try #require(WireGuardKeyPair.generate())
        let config = WireGuardClientConfig(
            device: device, proxyPublicKey: proxy.publicKey, endpoint: "192.168.100.200:51820",
            deviceAddress: "198.19.0.2/32", dns: "198.19.0.1")
        let lines = config.text.split(separator: "\n").map(String.init)
        #expect(lines.contains("PrivateKey = \(device.privateKeyBase64)"))
        #expect(lines.contains("PublicKey = \(proxy.publicKeyBase64)"))
        #expect(lines.contains("Endpoint = 192.168.100.200:51820"))
        #expect(lines.contains("AllowedIPs = 0.0.0.0/0, ::/0"))
        #expect(lines.contains("DNS = 198.19.0.1"))
        #expect(!config.text.contains(proxy.privateKeyBase64))
        // Version 10 at level L holds 271 bytes.
        #expect(config.text.utf8.count <= 271)
    }
}
