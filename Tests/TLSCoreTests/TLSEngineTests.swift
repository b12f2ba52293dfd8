import ATSPolicy
import Foundation
import Testing
import TLSCore

@Suite("TLSEngine in memory")
struct TLSEngineTests {
    let dir: TempDirectory
    let identity: TLSConfiguration.ServerIdentity

    init() throws {
        dir = try TempDirectory()
        identity = try makeServerIdentity(in: dir)
    }

    func pair(
        client: TLSConfiguration = .client(), server: TLSConfiguration? = nil, sni: String? = "localhost",
        alpn: [String]? = nil
    ) throws -> EnginePair {
        let serverConfig = server ?? .server(identity: identity)
        return EnginePair(
            client: try TLSEngine(context: TLSContext(client), serverName: sni, alpn: alpn),
            server: try TLSEngine(context: TLSContext(serverConfig)))
    }

    @Test func handshakeNegotiatesTLS13AndServerLearnsSNI() throws {
        let p = try pair()
        let (c, s) = p.handshake()
        #expect(c == .complete)
        #expect(s == .complete)
        #expect(p.server.serverName == "localhost")
        let n = try #require(p.client.negotiated)
        #expect(n.version == .tls13)
        #expect(n.cipherSuiteName == "TLS_AES_256_GCM_SHA384")
        #expect(n.cipherSuiteCode == 0x1302)
        #expect(n.isForwardSecret)
        #expect(n.keyExchangeGroup == "x25519")
        #expect(p.client.peerCertificateChain.first?.subject == "CN=localhost")
    }

    /// A host name over 255 bytes cannot be sent as SNI: the engine must throw, once. It used to free its `SSL`
    /// in the error path and again in deinit (`free(): double free detected`, the whole proxy aborted).
    @Test func serverNameTooLongForSNIThrowsWithoutDoubleFree() throws {
        let label = String(repeating: "a", count: 60)
        let host = Array(repeating: label, count: 5).joined(separator: ".") + ".x.test"
        #expect(host.utf8.count > 255)
        let context = try TLSContext(.client())
        for _ in 0..<3 {
            #expect(throws: OpenSSLError.self) { _ = try TLSEngine(context: context, serverName: host) }
        }
        // The context is still usable for a valid name afterwards.
        let p = try pair()
        #expect(p.handshake().0 == .complete)
    }

    @Test func serverPicksALPNByItsOwnPreference() throws {
        let p = try pair(
            client: .client(alpn: ["http/1.1", "h2"]), server: .server(identity: identity, alpn: ["h2", "http/1.1"]))
        p.handshake()
        #expect(p.client.negotiated?.alpn == "h2")
        #expect(p.server.negotiated?.alpn == "h2")
        #expect(p.server.offeredALPN == ["http/1.1", "h2"])
    }

    @Test func perConnectionALPNPreferenceOverridesTheContext() throws {
        let p = try pair(
            client: .client(alpn: ["h2", "http/1.1"]), server: .server(identity: identity, alpn: ["h2", "http/1.1"]))
        p.server.alpnPreference = ["http/1.1"]
        p.handshake()
        #expect(p.client.negotiated?.alpn == "http/1.1")
    }

    @Test func noCommonALPNMeansNoProtocol() throws {
        let p = try pair(client: .client(alpn: ["spdy/3"]), server: .server(identity: identity, alpn: ["h2"]))
        let (c, _) = p.handshake()
        #expect(c == .complete)
        #expect(p.client.negotiated?.alpn == nil)
    }

    @Test func tls12WithChosenSuite() throws {
        var client = TLSConfiguration.client()
        client.maximumVersion = .tls12
        client.cipherList = "ECDHE-ECDSA-AES128-GCM-SHA256"
        let p = try pair(client: client)
        #expect(p.handshake().client == .complete)
        let n = try #require(p.client.negotiated)
        #expect(n.version == .tls12)
        #expect(n.cipherSuiteCode == 0xC02B)
        #expect(n.cipherSuiteName == "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256")
        #expect(n.cipherSuiteOpenSSLName == "ECDHE-ECDSA-AES128-GCM-SHA256")
    }

    @Test func versionMismatchReportsProtocolVersionAlertOnBothSides() throws {
        var client = TLSConfiguration.client()
        client.maximumVersion = .tls12
        var server = TLSConfiguration.server(identity: identity)
        server.minimumVersion = .tls13
        let p = try pair(client: client, server: server)
        let (c, s) = p.handshake()
        #expect(c == .failed(.peerAlert(.protocolVersion)))
        guard case .failed(.localFailure(let sent, _)) = s else {
            Issue.record("server step was \(s)")
            return
        }
        #expect(sent == .protocolVersion)
    }

    @Test(arguments: [TLSAlert.protocolVersion, .handshakeFailure])
    func serverAbortsWithChosenAlert(alert: TLSAlert) throws {
        let p = try pair()
        #expect(p.server.abortHandshake(with: alert))
        let (c, s) = p.handshake()
        #expect(s == .failed(.aborted(alert)))
        #expect(c == .failed(.peerAlert(alert)))
    }

    @Test func applicationDataAndCloseNotify() throws {
        let p = try pair()
        p.handshake()
        try p.client.write(Array("GET / HTTP/1.1\r\n\r\n".utf8))
        p.server.feed(p.client.takeOutput())
        #expect(p.server.read() == .data(Array("GET / HTTP/1.1\r\n\r\n".utf8)))
        #expect(p.server.read() == .needsMoreInput)
        p.server.close()
        p.client.feed(p.server.takeOutput())
        #expect(p.client.read() == .closed)
    }

    @Test("Records fed in odd slices read back whole, whatever part of a record is pending when read() is called",
          arguments: [7, 1000, 16_389, 70_000])
    func recordsFedInSlices(slice: Int) throws {
        let p = try pair()
        p.handshake()
        let message = (0..<50_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        try p.client.write(message)
        let ciphertext = p.client.takeOutput()
        var received: [UInt8] = []
        var offset = 0
        // Bounded: every turn feeds at least one byte.
        while offset < ciphertext.count {
            let end = min(ciphertext.count, offset + slice)
            p.server.feed(ciphertext[offset..<end])
            offset = end
            received += readAvailable(p.server)
        }
        #expect(received == message)
        #expect(p.server.read() == .needsMoreInput)
        p.client.close()
        p.server.feed(p.client.takeOutput())
        #expect(p.server.read() == .closed)
        #expect(p.server.read() == .closed)
    }

    @Test("Lent input is read in place; what a loan leaves unread survives the lender's buffer being reused",
          arguments: [5, 999, 16_389, 70_000])
    func lentInputKeepsItsUnreadTail(slice: Int) throws {
        let p = try pair()
        p.handshake()
        let message = (0..<50_000).map { UInt8(truncatingIfNeeded: $0 &* 13) }
        try p.client.write(message)
        let ciphertext = p.client.takeOutput()
        var received: [UInt8] = []
        // One reused buffer, as the event loop's read buffer is: a kept reference to it would read garbage.
        var socketBuffer = [UInt8](repeating: 0, count: slice)
        var turn = 0
        // Bounded: every turn hands over at least one byte.
        for start in stride(from: 0, to: ciphertext.count, by: slice) {
            let piece = ciphertext[start..<min(ciphertext.count, start + slice)]
            turn += 1
            if turn % 3 == 0 {
                p.server.feed(piece)  // fed (copied) between loans: the order must still be the wire's
            } else {
                socketBuffer.replaceSubrange(0..<piece.count, with: piece)
                socketBuffer.withUnsafeBytes { buffer in
                    p.server.withLentInput(UnsafeRawBufferPointer(rebasing: buffer[0..<piece.count])) {
                        // Every other loan ends without a read, so the whole loan has to be kept.
                        guard turn % 3 == 1 else { return }
                        received += readAvailable(p.server)
                    }
                }
                for i in socketBuffer.indices { socketBuffer[i] = 0xEE }
            }
        }
        received += readAvailable(p.server)
        #expect(received.count == message.count)
        #expect(received.elementsEqual(message))  // not ==: a failure would print 50,000 numbers
        #expect(p.server.read() == .needsMoreInput)
        #expect(p.server.readableBound == 0)
    }

    @Test func bytesFedDuringALoanComeAfterTheLentOnes() throws {
        let p = try pair()
        p.handshake()
        let message = (0..<30_000).map { UInt8(truncatingIfNeeded: $0 &* 5) }
        try p.client.write(message)
        let ciphertext = p.client.takeOutput()
        var received: [UInt8] = []
        ciphertext[..<20_000].withUnsafeBytes { lent in
            p.server.withLentInput(lent) {
                p.server.feed(ciphertext[20_000...])
                received += readAvailable(p.server)
            }
        }
        #expect(received.count == message.count)
        #expect(received.elementsEqual(message))
    }

    @Test("read(into:) fills the caller's buffer across records, stops when full, and the bound covers what is left",
          arguments: [1, 100, 16_384, 70_000])
    func readIntoBuffer(room: Int) throws {
        let p = try pair()
        p.handshake()
        let message = (0..<50_000).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        try p.client.write(message)
        p.server.feed(p.client.takeOutput())
        var received: [UInt8] = []
        // Bounded: each turn reads at least one byte or ends.
        for _ in 0..<60_000 {
            #expect(p.server.readableBound >= message.count - received.count)
            var buffer = [UInt8](repeating: 0, count: room)
            let (count, stop) = buffer.withUnsafeMutableBytes { p.server.read(into: $0) }
            received += buffer[..<count]
            if case .bufferFull = stop {
                #expect(count == room)
                continue
            }
            guard case .needsMoreInput = stop else {
                Issue.record("unexpected stop \(stop)")
                break
            }
            break
        }
        #expect(received == message)
        p.client.close()
        p.server.feed(p.client.takeOutput())
        var byte: UInt8 = 0
        let end = withUnsafeMutableBytes(of: &byte) { p.server.read(into: $0) }
        guard case .closed = end.stop else {
            Issue.record("expected close_notify to read as closed, got \(end.stop)")
            return
        }
        #expect(end.count == 0)
    }

    /// As a client (the proxy's upstream leg), an end of input without close_notify is a failure: it can be a
    /// truncation.
    @Test func readIntoAtTheEndOfInputWithoutCloseNotifyIsClosedByPeer() throws {
        let p = try pair()
        p.handshake()
        p.client.feedEndOfInput()
        var byte: UInt8 = 0
        let end = withUnsafeMutableBytes(of: &byte) { p.client.read(into: $0) }
        guard case .failed(.closedByPeer) = end.stop else {
            Issue.record("expected closedByPeer, got \(end.stop)")
            return
        }
    }

    @Test func endOfInputAfterTheHandshakeIsClosedByPeer() throws {
        let p = try pair()
        p.handshake()
        #expect(p.client.read() == .needsMoreInput)
        p.client.feedEndOfInput()
        #expect(p.client.read() == .failed(.closedByPeer))
    }

    /// As a server (the client leg), a client's FIN without close_notify reads as a close, and sends no alert:
    /// OpenSSL 3 otherwise answers it with a fatal decode_error, which a well-behaved client would then receive.
    @Test func aServerTakesAnEndOfInputWithoutCloseNotifyAsAClose() throws {
        let p = try pair()
        p.handshake()
        _ = p.server.takeOutput()
        #expect(p.server.read() == .needsMoreInput)
        p.server.feedEndOfInput()
        #expect(p.server.read() == .closed)
        #expect(p.server.lastAlertSent == nil)
        #expect(p.server.takeOutput().isEmpty)
    }

    @Test func releasedRecordBuffersComeBackWithTheNextRecordEvenMidRecord() throws {
        let p = try pair()
        p.handshake()
        let request = (0..<10_000).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        try p.client.write(request)
        let ciphertext = p.client.takeOutput()
        // Half a record in: releasing must keep the partial record, not lose it.
        p.server.feed(ciphertext[0..<4_000])
        #expect(p.server.read() == .needsMoreInput)
        p.server.releaseBuffers()
        p.client.releaseBuffers()
        p.server.feed(ciphertext[4_000...])
        var received: [UInt8] = []
        received += readAvailable(p.server)
        #expect(received == request)
        // Both directions work again after both sides gave their buffers back while quiet.
        p.server.releaseBuffers()
        try p.server.write(Array("pong".utf8))
        p.client.feed(p.server.takeOutput())
        #expect(p.client.read() == .data(Array("pong".utf8)))
        #expect(p.client.read() == .needsMoreInput)
    }

    @Test func endOfInputDuringHandshakeIsClosedByPeer() throws {
        let p = try pair()
        _ = p.client.handshake()
        p.client.feedEndOfInput()
        #expect(p.client.handshake() == .failed(.closedByPeer))
    }

    @Test func nonTLSAnswerIsReportedAsNotTLS() throws {
        let client = try TLSEngine(context: TLSContext(.client()), serverName: "localhost")
        _ = client.handshake()
        client.feed(Array("HTTP/1.1 400 Bad Request\r\n\r\n".utf8))
        #expect(client.handshake() == .failed(.notTLS))
    }

    @Test func clientHelloFedOneByteAtATime() throws {
        let p = try pair(client: .client(alpn: ["h2"]), server: .server(identity: identity, alpn: ["h2"]))
        _ = p.client.handshake()
        let hello = p.client.takeOutput()
        #expect(hello.count > 100)
        for (i, byte) in hello.enumerated() {
            p.server.feed([byte])
            let step = p.server.handshake()
            if i < hello.count - 1 { #expect(step == .needsMoreInput) }
        }
        #expect(p.server.hasOutput)
        p.client.feed(p.server.takeOutput())
        #expect(p.handshake().client == .complete)
        #expect(p.server.negotiated?.alpn == "h2")
    }

    @Test func certificateSelectorPicksPerSNI() throws {
        let other = try makeServerIdentity(in: dir, cn: "other.test", san: "DNS:other.test")
        var server = TLSConfiguration.server(identity: identity)
        server.certificateSelector = { name in name == "other.test" ? other : nil }
        let p1 = try pair(server: server, sni: "other.test")
        p1.handshake()
        #expect(p1.client.peerCertificateChain.first?.subject == "CN=other.test")
        let p2 = try pair(server: server, sni: "localhost")
        p2.handshake()
        #expect(p2.client.peerCertificateChain.first?.subject == "CN=localhost")
    }

    @Test func verifyingClientRejectsUntrustedServer() throws {
        var client = TLSConfiguration.client()
        client.verifyPeer = true
        let p = try pair(client: client)
        let (c, _) = p.handshake()
        guard case .failed(.localFailure(let sent, let error)) = c else {
            Issue.record("client step was \(c)")
            return
        }
        #expect(sent == .unknownCA || sent == .badCertificate)
        #expect(error.entries.contains { $0.reason.contains("certificate verify failed") })
    }

    @Test func verifyingClientAcceptsExtraRoot() throws {
        var client = TLSConfiguration.client()
        client.verifyPeer = true
        client.additionalTrustRoots = identity.chain
        let p = try pair(client: client)
        #expect(p.handshake().client == .complete)
        #expect(p.client.verifyResult == 0)
    }

    @Test func badPEMThrowsTypedError() {
        #expect(throws: OpenSSLError.self) { try PrivateKey(pem: "not a key") }
        #expect(throws: OpenSSLError.self) { try Certificate(pem: "-----BEGIN CERTIFICATE-----\nAAAA\n") }
    }

    @Test func unknownCipherNameIsRejectedWithOpenSSLReason() {
        var config = TLSConfiguration.client()
        config.cipherList = "NOT-A-CIPHER"
        #expect {
            try TLSContext(config)
        } throws: { error in
            (error as? OpenSSLError)?.entries.contains { $0.reason.contains("no cipher match") } == true
        }
    }
}

/// Every piece of plaintext `engine` can return now, read until the first result that is not data (bounded).
private func readAvailable(_ engine: TLSEngine) -> [UInt8] {
    var received: [UInt8] = []
    for _ in 0..<10_000 {
        guard case .data(let piece) = engine.read() else { break }
        received += piece
    }
    return received
}
