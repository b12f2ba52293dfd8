import ATSPolicy
import Foundation
import Testing
import TLSCore

@Suite("ClientHelloParser")
struct ClientHelloParserTests {
    /// A real hello from OpenSSL's own client tool.
    static let openSSLHello: [UInt8] = {
        (try? captureOpenSSLClientHello(["-servername", "api.example.com", "-alpn", "h2,http/1.1"])) ?? []
    }()

    /// A real hello from our TLSEngine client.
    static func engineHello(alpn: [String], sni: String?, max: TLSVersion? = nil) throws -> [UInt8] {
        var config = TLSConfiguration.client(alpn: alpn)
        config.maximumVersion = max
        let engine = try TLSEngine(context: TLSContext(config), serverName: sni)
        _ = engine.handshake()
        return engine.takeOutput()
    }

    @Test func parsesOpenSSLClientHello() throws {
        let bytes = Self.openSSLHello
        let hello = try #require(try ClientHelloParser.parse(bytes))
        #expect(hello.serverName == "api.example.com")
        #expect(hello.alpnProtocols == ["h2", "http/1.1"])
        #expect(hello.legacyVersion == 0x0303)
        #expect(hello.supportedVersions.contains(0x0304))
        #expect(hello.offeredVersions.contains(.tls13))
        #expect(hello.cipherSuites.contains(0x1301))
        #expect(hello.recordBytesConsumed == bytes.count)
    }

    @Test func parsesTLS12OnlyEngineHelloWithoutSupportedVersions() throws {
        let bytes = try Self.engineHello(alpn: ["http/1.1"], sni: "host.test", max: .tls12)
        let hello = try #require(try ClientHelloParser.parse(bytes))
        #expect(hello.serverName == "host.test")
        #expect(hello.alpnProtocols == ["http/1.1"])
        #expect(hello.supportedVersions.isEmpty)
        #expect(hello.offeredVersions == [.tls10, .tls11, .tls12])
        #expect(!hello.cipherSuites.contains(0x1301))
    }

    @Test func helloWithoutSNIOrALPN() throws {
        let hello = try #require(try ClientHelloParser.parse(Self.engineHello(alpn: [], sni: nil)))
        #expect(hello.serverName == nil)
        #expect(hello.alpnProtocols.isEmpty)
    }

    @Test(arguments: ["openssl", "engine"])
    func everyPrefixNeedsMoreDataAndTheWholeParses(source: String) throws {
        let bytes = source == "openssl" ? Self.openSSLHello : try Self.engineHello(alpn: ["h2"], sni: "a.test")
        #expect(bytes.count > 100)
        let full = try #require(try ClientHelloParser.parse(bytes))
        for cut in 0..<bytes.count {
            #expect(try ClientHelloParser.parse(bytes[0..<cut]) == nil, "prefix of \(cut) bytes")
        }
        // Bytes after the hello (e.g. early data) do not change the result.
        #expect(try ClientHelloParser.parse(bytes + [0x17, 0x03, 0x03]) == full)
    }

    @Test(arguments: [1, 3, 4, 5, 64, 500])
    func helloSplitAcrossRecords(fragment: Int) throws {
        let bytes = try Self.engineHello(alpn: ["h2", "http/1.1"], sni: "split.test")
        let expected = try #require(try ClientHelloParser.parse(bytes))
        let message = Array(bytes[5...])
        var reframed: [UInt8] = []
        var i = 0
        while i < message.count {
            let chunk = message[i..<min(i + fragment, message.count)]
            reframed += [0x16, 0x03, 0x01, UInt8(chunk.count >> 8), UInt8(chunk.count & 0xFF)] + chunk
            i += fragment
        }
        let hello = try #require(try ClientHelloParser.parse(reframed))
        #expect(hello.serverName == expected.serverName)
        #expect(hello.alpnProtocols == expected.alpnProtocols)
        #expect(hello.cipherSuites == expected.cipherSuites)
        #expect(hello.recordBytesConsumed == reframed.count)
        for cut in stride(from: 0, to: reframed.count, by: 7) {
            #expect(try ClientHelloParser.parse(reframed[0..<cut]) == nil)
        }
    }

    @Test(arguments: [
        (Array("GET / HTTP/1.1\r\nHost: x\r\n\r\n".utf8), TLSHelloError.Kind.notTLS),
        ([0x16, 0x02, 0x00], .notTLS),
        ([0x16, 0x03, 0x03, 0x00, 0x04, 0x02, 0x00, 0x00, 0x00], .unexpectedMessage),
        ([0x16, 0x03, 0x01, 0x00, 0x00], .malformed),
        ([0x16, 0x03, 0x01, 0x00, 0x04, 0x01, 0x00, 0x00, 0x00], .malformed),
        ([0x16, 0x03, 0x01, 0x00, 0x04, 0x01, 0x10, 0x00, 0x00], .tooLarge),
    ] as [([UInt8], TLSHelloError.Kind)])
    func rejectsGarbageWithAClearError(bytes: [UInt8], kind: TLSHelloError.Kind) {
        #expect {
            _ = try ClientHelloParser.parse(bytes)
        } throws: { error in
            (error as? TLSHelloError)?.kind == kind
        }
    }

    @Test func lengthFieldsPointingPastTheEndAreMalformed() throws {
        var bytes = try Self.engineHello(alpn: ["h2"], sni: "len.test")
        // Session-ID length byte sits after 5 (record) + 4 (handshake) + 2 (version) + 32 (random).
        bytes[43] = 0xFF
        #expect(throws: TLSHelloError.self) { try ClientHelloParser.parse(bytes) }
    }

    @Test func randomAndMutatedInputsNeverCrash() throws {
        var rng = SystemRandomNumberGenerator()
        let base = try Self.engineHello(alpn: ["h2"], sni: "fuzz.test")
        var outcomes = (parsed: 0, needMore: 0, rejected: 0)
        for round in 0..<3000 {
            var input: [UInt8]
            if round % 2 == 0 {
                input = base
                for _ in 0..<Int.random(in: 1...8, using: &rng) {
                    input[Int.random(in: 0..<input.count, using: &rng)] = UInt8.random(in: 0...255, using: &rng)
                }
                input = Array(input.prefix(Int.random(in: 0...input.count, using: &rng)))
            } else {
                input = [0x16, 0x03, UInt8.random(in: 0...4, using: &rng)]
                    + (0..<Int.random(in: 0...300, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) }
            }
            do {
                if try ClientHelloParser.parse(input) != nil { outcomes.parsed += 1 } else { outcomes.needMore += 1 }
            } catch {
                outcomes.rejected += 1
            }
        }
        #expect(outcomes.parsed + outcomes.needMore + outcomes.rejected == 3000)
        #expect(outcomes.rejected > 0)
    }

    @Test func looksLikeTLS() {
        #expect(ClientHelloParser.looksLikeTLS([UInt8]()) == nil)
        #expect(ClientHelloParser.looksLikeTLS([0x16]) == true)
        #expect(ClientHelloParser.looksLikeTLS(Array("GET".utf8)) == false)
    }
}
