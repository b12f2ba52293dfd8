import Testing

@testable import WireGuardCore

/// Real queries, made by glibc's `res_mkquery` (Python ctypes on Debian 12: `res_mkquery(QUERY, name, C_IN, type,
/// …)`), laid out as RFC 1035 §4.1: id, flags 0100 (RD), QDCOUNT 1, AN/NS/AR 0, then the name's labels, type, class.
enum DNSQueries {
    /// example.com A, id 2a8f.
    static let exampleA = hexBytes(
        "2a8f 0100 0001 0000 0000 0000 07 6578616d706c65 03 636f6d 00 0001 0001")
    /// www.Apple.com AAAA (case kept), id f38d.
    static let appleAAAA = hexBytes(
        "f38d 0100 0001 0000 0000 0000 03 777777 05 4170706c65 03 636f6d 00 001c 0001")
    /// cdn.example.org HTTPS (65), id bc5a.
    static let cdnHTTPS = hexBytes(
        "bc5a 0100 0001 0000 0000 0000 03 63646e 07 6578616d706c65 03 6f7267 00 0041 0001")
    /// example.com A as `dig` sends it by default (written by hand from RFC 6891 §6.1.2 and RFC 7873 §4): RD and AD
    /// set, ARCOUNT 1, an OPT record (root name, type 41, UDP size 1232, TTL 0, 12 bytes of options: a client
    /// COOKIE, option 10, 8 bytes).
    static let exampleAWithEDNS = hexBytes(
        """
        1d2e 0120 0001 0000 0000 0001 07 6578616d706c65 03 636f6d 00 0001 0001
        00 0029 04d0 00000000 000c 000a 0008 0123456789abcdef
        """)
}

/// A response decoded by hand (RFC 1035 §4.1), for expectations that do not trust the builder.
struct DecodedResponse {
    var id: UInt16, flags: UInt16, questions: Int, answers: Int, authority: Int, additional: Int
    var question: [UInt8]
    var records: [(ttl: UInt32, address: [UInt8])]
    var rcode: UInt8 { UInt8(flags & 0x0F) }

    /// Decodes `bytes`, whose question (if any) is `questionLength` bytes, answers being A records by pointer.
    init?(_ bytes: [UInt8], questionLength: Int) {
        guard bytes.count >= 12 else { return nil }
        func word(_ at: Int) -> Int { Int(bytes[at]) << 8 | Int(bytes[at + 1]) }
        id = UInt16(word(0))
        flags = UInt16(word(2))
        questions = word(4)
        answers = word(6)
        authority = word(8)
        additional = word(10)
        let questionEnd = 12 + (questions == 1 ? questionLength : 0)
        guard bytes.count == questionEnd + 16 * answers else { return nil }
        question = Array(bytes[12..<questionEnd])
        records = []
        for index in 0..<answers {
            let at = questionEnd + 16 * index
            guard bytes[at..<(at + 6)] == [0xC0, 12, 0, 1, 0, 1], bytes[(at + 10)..<(at + 12)] == [0, 4] else {
                return nil
            }
            let ttl = bytes[(at + 6)..<(at + 10)].reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
            records.append((ttl, Array(bytes[(at + 12)..<(at + 16)])))
        }
    }
}

@Suite("WireGuard tunnel DNS")
struct TunnelDNSTests {
    func question(_ bytes: [UInt8]) throws -> DNSQuestion { try TunnelDNS.parseQuery(bytes[...]).get() }

    func refusal(_ bytes: [UInt8]) -> DNSRefusal? {
        guard case .failure(let refusal) = TunnelDNS.parseQuery(bytes[...]) else { return nil }
        return refusal
    }

    @Test("glibc's queries parse: id, RD, labels with case kept, type; the question is kept as sent")
    func parsesRealQueries() throws {
        let a = try question(DNSQueries.exampleA)
        #expect(a.id == 0x2A8F && a.recursionDesired && a.type == 1)
        #expect(a.name == "example.com" && a.hostName == "example.com")
        #expect(a.wire == Array(DNSQueries.exampleA[12...]))
        let aaaa = try question(DNSQueries.appleAAAA)
        #expect(aaaa.name == "www.Apple.com" && aaaa.type == 28 && aaaa.id == 0xF38D)
        let https = try question(DNSQueries.cdnHTTPS)
        #expect(https.name == "cdn.example.org" && https.type == 65)
        // The query inside a UDP packet from the device, as the caller will get it.
        guard case .success(.ipv4(let header, let segment)) = TunnelPacket.parse(TunnelUDPTests.knownPacket),
            case .success(let datagram) = UDPDatagram.parse(header, segment: segment)
        else {
            Issue.record("the known packet does not parse")
            return
        }
        #expect(datagram.destinationPort == TunnelDNS.port)
        #expect(try TunnelDNS.parseQuery(datagram.payload).get() == a)
    }

    @Test("An EDNS query (OPT with a cookie in the additional section) is taken; the response has no OPT")
    func toleratesEDNS() throws {
        let q = try question(DNSQueries.exampleAWithEDNS)
        #expect(q.id == 0x1D2E && q.recursionDesired && q.name == "example.com" && q.type == 1)
        #expect(q.wire == Array(DNSQueries.exampleA[12...]))
        let response = TunnelDNS.response(to: q, answer: .addresses([[93, 184, 215, 14]]))
        let decoded = try #require(DecodedResponse(response, questionLength: q.wire.count))
        #expect(decoded.additional == 0 && decoded.answers == 1)
    }

    @Test("What each question needs: A is looked up; AAAA, HTTPS, SVCB and the rest are NODATA at once")
    func actions() throws {
        #expect(TunnelDNS.action(for: try question(DNSQueries.exampleA)) == .lookUp(hostName: "example.com"))
        #expect(TunnelDNS.action(for: try question(DNSQueries.appleAAAA)) == .answer(.noData))
        #expect(TunnelDNS.action(for: try question(DNSQueries.cdnHTTPS)) == .answer(.noData))
        func ofType(_ type: UInt16) throws -> DNSAction {
            var bytes = DNSQueries.exampleA
            bytes[bytes.count - 4] = UInt8(type >> 8)
            bytes[bytes.count - 3] = UInt8(type & 0xFF)
            return TunnelDNS.action(for: try question(bytes))
        }
        for type: UInt16 in [64, 15, 16, 33, 12, 5, 255, 0, 65_535] {
            #expect(try ofType(type) == .answer(.noData), "type \(type)")
        }
        // A name getaddrinfo cannot be asked faithfully: a dot or a space inside a label.
        let dotted = hexBytes("0001 0100 0001 0000 0000 0000 03 612e62 03 636f6d 00 0001 0001")
        let odd = try question(dotted)
        #expect(odd.name == "a\\.b.com" && odd.hostName == nil)
        #expect(TunnelDNS.action(for: odd) == .answer(.noSuchName))
        let spaced = try question(hexBytes("0001 0100 0001 0000 0000 0000 03 612062 00 0001 0001"))
        #expect(spaced.name == "a\\032b" && TunnelDNS.action(for: spaced) == .answer(.noSuchName))
        // The root: no labels, no lookup.
        let root = try question(hexBytes("0001 0100 0001 0000 0000 0000 00 0001 0001"))
        #expect(root.name == "." && root.labels.isEmpty && TunnelDNS.action(for: root) == .answer(.noData))
        // Underscores and one-label names are looked up as they are.
        let service = try question(hexBytes("0001 0000 0001 0000 0000 0000 05 5f73697030 04 6c616273 00 0001 0001"))
        #expect(TunnelDNS.action(for: service) == .lookUp(hostName: "_sip0.labs") && !service.recursionDesired)
    }

    @Test("The A response, byte for byte: id, QR RD RA, the question echoed, one record by pointer, TTL 60")
    func knownResponse() throws {
        let q = try question(DNSQueries.exampleA)
        let response = TunnelDNS.response(to: q, answer: .addresses([[93, 184, 215, 14]]))
        // Decoded by hand: 2a8f id; 8180 = QR, opcode 0, RD, RA, NOERROR; 1 question, 1 answer; the question as
        // sent; c00c (pointer to offset 12) type 1 class 1, TTL 0000003c, RDLENGTH 4, 93.184.215.14.
        #expect(
            response
                == hexBytes(
                    """
                    2a8f 8180 0001 0001 0000 0000 07 6578616d706c65 03 636f6d 00 0001 0001
                    c00c 0001 0001 0000003c 0004 5db8d70e
                    """))
    }

    @Test("Each outcome of a lookup: addresses deduplicated, NODATA, NXDOMAIN, SERVFAIL; RD copied")
    func outcomes() throws {
        let q = try question(DNSQueries.exampleA)
        let n = q.wire.count
        let two = try #require(
            DecodedResponse(
                TunnelDNS.response(
                    to: q, answer: .addresses([[10, 0, 0, 1], [10, 0, 0, 2], [10, 0, 0, 1], [1, 2, 3], [10, 0, 0, 1]])),
                questionLength: n))
        #expect(two.records.map { $0.address } == [[10, 0, 0, 1], [10, 0, 0, 2]])
        #expect(two.records.allSatisfy { $0.ttl == 60 })
        #expect(two.rcode == 0 && two.flags == 0x8180 && two.question == q.wire)
        for (answer, rcode) in [
            (DNSAnswer.noData, UInt8(0)), (.addresses([]), 0), (.noSuchName, 3), (.serverFailure, 2),
        ] {
            let decoded = try #require(DecodedResponse(TunnelDNS.response(to: q, answer: answer), questionLength: n))
            #expect(decoded.id == 0x2A8F && decoded.rcode == rcode && decoded.answers == 0 && decoded.questions == 1)
            #expect(decoded.flags & 0xFFF0 == 0x8180)
        }
        let noRD = try question(hexBytes("0001 0000 0001 0000 0000 0000 01 61 00 0001 0001"))
        #expect(TunnelDNS.response(to: noRD, answer: .noData)[2...3] == [0x80, 0x80])
    }

    @Test("Many addresses are cut to what fits in 512 bytes, for a short name and the longest")
    func fitsIn512() throws {
        let many = (0..<100).map { [10, 1, 0, UInt8($0)] }
        let short = try question(DNSQueries.exampleA)
        let shortResponse = TunnelDNS.response(to: short, answer: .addresses(many))
        #expect(shortResponse.count <= 512 && shortResponse.count > 512 - 16)
        #expect(DecodedResponse(shortResponse, questionLength: short.wire.count)?.answers == (512 - 12 - 17) / 16)
        // 255 bytes of name: three 63-byte labels, one 61-byte label, the root.
        var name: [UInt8] = []
        for length in [63, 63, 63, 61] { name += [UInt8(length)] + [UInt8](repeating: 0x61, count: length) }
        name.append(0)
        #expect(name.count == 255)
        let long = try question(hexBytes("0002 0100 0001 0000 0000 0000") + name + [0, 1, 0, 1])
        let longResponse = TunnelDNS.response(to: long, answer: .addresses(many))
        #expect(longResponse.count <= 512)
        #expect(DecodedResponse(longResponse, questionLength: 259)?.answers == 15)
        // One byte more is refused.
        var tooLong = name
        tooLong.insert(0x61, at: 193)
        tooLong[192] = 62
        #expect(refusal(hexBytes("0002 0100 0001 0000 0000 0000") + tooLong + [0, 1, 0, 1])?.reason == .nameTooLong)
    }

    @Test("Refusals and their replies: none for responses and short datagrams; NOTIMP; FORMERR")
    func refusals() throws {
        let base = DNSQueries.exampleA
        func with(_ changes: [Int: UInt8]) -> [UInt8] {
            var bytes = base
            for (at, value) in changes { bytes[at] = value }
            return bytes
        }
        // A response (QR = 1) and fewer than 12 bytes: nothing is sent.
        let response = try #require(refusal(with([2: 0x81, 3: 0x80])))
        #expect(response.reason == .notAQuery && TunnelDNS.response(to: response) == nil)
        #expect(refusal(Array(base.prefix(11)))?.reason == .tooShort)
        #expect(TunnelDNS.response(to: try #require(refusal(Array(base.prefix(11))))) == nil)
        // NOTIFY (opcode 4), header only, opcode echoed: 2a8f a184 (QR, opcode 4 (0x20), RD; RA, NOTIMP 4).
        let notify = try #require(refusal(with([2: 0x21])))
        #expect(notify.reason == .opcode && notify.responseCode == .notImplemented)
        #expect(TunnelDNS.response(to: notify) == hexBytes("2a8f a184 0000 0000 0000 0000"))
        // FORMERR, header only: two questions, an answer record, a pointer, a reserved label type, truncation.
        let cases: [([UInt8], DNSRefusal.Reason)] = [
            (with([5: 2]), .questionCount), (with([5: 0]), .questionCount), (with([7: 1]), .recordsInQuery),
            (with([9: 1]), .recordsInQuery), (with([12: 0xC0, 13: 0x0C]), .compressionPointer),
            (with([20: 0xC0]), .compressionPointer), (with([12: 0x47]), .badLabel), (with([20: 0x83]), .badLabel),
            (with([20: 0x3F]), .truncated),
        ]
        for (bytes, reason) in cases {
            let refused = try #require(refusal(bytes), "\(reason)")
            #expect(refused.reason == reason && refused.responseCode == .formatError)
            #expect(TunnelDNS.response(to: refused) == hexBytes("2a8f 8181 0000 0000 0000 0000"))
        }
        // Class CH (version.bind style) and a zone transfer: NOTIMP with the question echoed.
        let chaos = try #require(refusal(with([base.count - 1: 3])))
        #expect(chaos.reason == .questionClass)
        #expect(TunnelDNS.response(to: chaos) == hexBytes("2a8f 8184 0001 0000 0000 0000") + chaos.question)
        #expect(chaos.question == Array(with([base.count - 1: 3])[12...]))
        let axfr = try #require(refusal(with([base.count - 3: 252])))
        #expect(axfr.reason == .zoneTransfer && TunnelDNS.response(to: axfr)?[3] == 0x84)
    }

    @Test("Every truncation of every query is refused without a trap; random damage never traps")
    func hostileInput() {
        for query in [DNSQueries.exampleA, DNSQueries.appleAAAA, DNSQueries.cdnHTTPS] {
            for length in 0..<query.count {
                let reason = refusal(Array(query.prefix(length)))?.reason
                #expect(reason == (length < 12 ? .tooShort : .truncated), "length \(length)")
            }
            // Sliced from the middle of a larger buffer, as a UDP payload is.
            let framed = [9, 9, 9] + query + [9]
            #expect(
                (try? TunnelDNS.parseQuery(framed[3..<(3 + query.count)]).get())
                    == (try? TunnelDNS.parseQuery(query[...]).get()))
        }
        // EDNS: a cut in the additional section is not read, so it is taken; any cut before it is refused.
        let edns = DNSQueries.exampleAWithEDNS
        for length in 12..<edns.count {
            let taken = (try? TunnelDNS.parseQuery(edns.prefix(length)).get()) != nil
            #expect(taken == (length >= 29), "length \(length)")
        }
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<20_000 {
            var bytes = DNSQueries.exampleAWithEDNS
            for _ in 0..<Int.random(in: 1...8, using: &generator) {
                bytes[Int.random(in: 0..<bytes.count, using: &generator)] = UInt8.random(in: 0...255, using: &generator)
            }
            let cut = Array(bytes.prefix(Int.random(in: 0...bytes.count, using: &generator)))
            switch TunnelDNS.parseQuery(cut[...]) {
            case .success(let q):
                let reply = TunnelDNS.response(to: q, answer: .addresses([[1, 2, 3, 4]]))
                #expect(reply.count <= 512 && reply[0...1] == cut[0...1])
                _ = (q.name, q.hostName, TunnelDNS.action(for: q))
            case .failure(let refused):
                if let reply = TunnelDNS.response(to: refused) { #expect(reply.count <= 12 + 259) }
            }
        }
    }

    @Test("A DNS answer wrapped by udpPacket: from the proxy's port 53 to the device's port, parsed back whole")
    func answerInAPacket() throws {
        let proxy: [UInt8] = [198, 19, 0, 1], device: [UInt8] = [198, 19, 0, 2]
        let q = try question(DNSQueries.exampleA)
        let answer = TunnelDNS.response(to: q, answer: .addresses([[93, 184, 215, 14], [93, 184, 215, 15]]))
        let packet = TunnelPacket.udpPacket(
            from: proxy, fromPort: TunnelDNS.port, to: device, toPort: 53000, payload: answer, identification: 9)
        guard case .success(.ipv4(let header, let segment)) = TunnelPacket.parse(packet) else {
            Issue.record("the reply does not parse")
            return
        }
        let datagram = try UDPDatagram.parse(header, segment: segment).get()
        #expect(datagram.sourcePort == 53 && datagram.destinationPort == 53000 && datagram.destination == device)
        let decoded = try #require(DecodedResponse(Array(datagram.payload), questionLength: q.wire.count))
        #expect(decoded.id == q.id && decoded.records.map { $0.address } == [[93, 184, 215, 14], [93, 184, 215, 15]])
    }
}
