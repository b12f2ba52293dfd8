// Theory of operation: the devices' DNS inside the tunnel. Their configuration names the proxy's tunnel address as
// DNS server, so every lookup an app makes arrives as a UDP datagram to that address, port 53. The queries are
// answered from the HOST's resolver (`getaddrinfo`, so /etc/hosts and resolv.conf apply, and a name the host
// resolves is the address the proxy connects to): the device sees the names as the proxy does. This file is sans-io
// and never resolves anything: it parses a query, decides what it needs, and builds the response; the caller does
// the lookup (off the loop) and sends the bytes back with `TunnelPacket.udpPacket`.
//
//     parseQuery(payload) ── failure ──▶ response(to: refusal): FORMERR or NOTIMP with the query's id, or nothing
//          │ success (one question, class IN)
//          ▼
//     action(for: question) ── .answer(a) ──────────────────────────────┐
//          │ .lookUp(hostName)                                           ▼
//          └─▶ caller: getaddrinfo(hostName, AF_INET) ─▶ DNSAnswer ─▶ response(to: question, answer:)
//
// What is answered:
// - A: looked up; the host's IPv4 addresses are answered with a TTL of 60 s (short, so a device follows changes of
//   the host's view). The caller maps `getaddrinfo`'s result to a `DNSAnswer`: addresses → A records; EAI_NONAME →
//   NXDOMAIN; resolved with IPv6 only (or EAI_NODATA / EAI_ADDRFAMILY) → NODATA; a temporary or other failure
//   (EAI_AGAIN, EAI_FAIL, …) → SERVFAIL, which a device retries and does not cache as a negative answer.
// - AAAA: NODATA at once. The tunnel gives devices an IPv4 address only, so an IPv6 answer would send them to
//   addresses they cannot reach (and Happy Eyeballs would wait on them).
// - HTTPS (65) and SVCB (64): NODATA at once. These records advertise h3 (ALPN) and would send apps straight to
//   QUIC, which the proxy refuses so that they use TCP where it sees them (docs/transparent.md); without them an app
//   starts on TCP.
// - Every other type (MX, TXT, SRV, PTR, CNAME, ANY, …): NODATA. The host's resolver interface only answers
//   addresses, and nothing the proxy intercepts depends on other types. The cost: apps that need SRV, TXT or MX
//   records (mail autodiscovery, SRV-located VoIP or chat servers) find none; a raw relay of those queries to the
//   host's resolv.conf servers is the fix if one is needed. Zone transfers (AXFR 252, IXFR 251) are the exception:
//   NOTIMP, since they are not queries an answer section can meet (and AXFR is not a UDP operation at all).
//
// Queries are untrusted input: every length is checked, nothing traps. A query has QR = 0, opcode QUERY, exactly
// one question (RFC 9619), no answer or authority records, a name made of plain labels (a compression pointer in a
// query's only name is refused: nothing precedes it to point at), ≤ 63 bytes a label and ≤ 255 on the wire, and
// class IN. The additional section is not read, so EDNS's OPT record (and anything else there) is tolerated and
// ignored: the responses carry no OPT, so they are plain RFC 1035 messages within 512 bytes, which every client
// takes. What is not answered at all: fewer than 12 bytes (no id to answer to), and responses (QR = 1: answering
// them could loop two responders, or reflect). Header-readable but bad queries get FORMERR, except an opcode other
// than QUERY or a class other than IN, which get NOTIMP (RFC 1035 §4.1.1: "does not support the requested kind of
// query"); those replies carry the header only (no question), but a class refusal echoes its question.
//
// Responses: the query's id, QR = 1, opcode 0, AA = 0, RD copied, RA = 1, the question echoed byte for byte (so a
// client's 0x20 case randomisation matches), then the answers, each naming the question by a compression pointer.
// NXDOMAIN and NODATA carry no SOA, so resolvers do not cache them (RFC 2308 §5): the next query asks again.
// Addresses are deduplicated (getaddrinfo lists each once per socket type), and as many as fit in 512 bytes are
// answered (15 for the longest name, far more than hosts have), without TC: TC asks for a retry over TCP, which the
// tunnel's address does not serve for DNS.

/// One DNS question from a device, parsed and checked by `TunnelDNS.parseQuery`.
public struct DNSQuestion: Equatable, Sendable {
    /// The query's id, echoed in the response.
    public let id: UInt16
    /// The query's RD bit, copied into the response.
    public let recursionDesired: Bool
    /// The name's labels as sent (case kept), without the empty root label.
    public let labels: [[UInt8]]
    /// QTYPE (1 A, 28 AAAA, 64 SVCB, 65 HTTPS, …).
    public let type: UInt16
    /// The question section as received (name, type, class): echoed verbatim in the response.
    public let wire: [UInt8]

    /// The name in presentation form (RFC 1035 §5.1): labels joined by dots, `.` and `\` escaped with a backslash,
    /// other bytes outside printable ASCII as `\DDD`; `.` for the root.
    public var name: String {
        guard !labels.isEmpty else { return "." }
        return labels.map { label in
            label.map { byte -> String in
                switch byte {
                case UInt8(ascii: "."), UInt8(ascii: "\\"): return "\\" + String(UnicodeScalar(byte))
                case 0x21...0x7E: return String(UnicodeScalar(byte))
                default:
                    let digits = String(byte)
                    return "\\" + String(repeating: "0", count: 3 - digits.count) + digits
                }
            }.joined()
        }.joined(separator: ".")
    }

    /// The name to give the host's resolver: the labels joined by dots, without a final dot (so the host's search
    /// domains apply to a one-label name, as they do to its own lookups). Nil when the name is the root or has a
    /// byte no host name has (anything but letters, digits, `-` and `_`): such a name is answered NXDOMAIN without
    /// a lookup, since `getaddrinfo` cannot be asked for it faithfully.
    public var hostName: String? {
        guard !labels.isEmpty else { return nil }
        for label in labels {
            for byte in label {
                switch byte {
                case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                    UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "_"):
                    continue
                default: return nil
                }
            }
        }
        return labels.map { String(decoding: $0, as: UTF8.self) }.joined(separator: ".")
    }
}

/// DNS response codes this responder sends (RFC 1035 §4.1.1).
public enum DNSResponseCode: UInt8, Sendable {
    case noError = 0, formatError = 1, serverFailure = 2, nameError = 3, notImplemented = 4
}

/// Why a datagram to port 53 was not taken as a query, and whether it is answered.
public struct DNSRefusal: Error, Equatable, Sendable {
    public enum Reason: String, Sendable {
        /// Fewer than 12 bytes: not answered (there is no id to answer to).
        case tooShort
        /// QR = 1, a response: not answered, ever.
        case notAQuery
        /// An opcode other than QUERY (0): NOTIMP.
        case opcode
        /// QDCOUNT other than 1: FORMERR.
        case questionCount
        /// ANCOUNT or NSCOUNT not 0: FORMERR.
        case recordsInQuery
        /// The question runs past the end of the datagram: FORMERR.
        case truncated
        /// A compression pointer in the question's name: FORMERR.
        case compressionPointer
        /// A label type other than a plain label (the reserved 01 and 10 prefixes): FORMERR.
        case badLabel
        /// A name over 255 bytes on the wire: FORMERR.
        case nameTooLong
        /// A zone transfer (AXFR, IXFR): NOTIMP.
        case zoneTransfer
        /// A class other than IN: NOTIMP.
        case questionClass
    }

    public let reason: Reason
    /// The query's id, when its header was read.
    public let id: UInt16?
    /// The query's RD bit (false when the header was not read).
    public let recursionDesired: Bool
    /// The query's opcode (0 when the header was not read).
    public let opcode: UInt8
    /// The question as received, echoed in a NOTIMP for its class or type; empty otherwise.
    public let question: [UInt8]

    /// The code a reply carries, or nil when the datagram gets no reply.
    public var responseCode: DNSResponseCode? {
        switch reason {
        case .tooShort, .notAQuery: nil
        case .opcode, .zoneTransfer, .questionClass: .notImplemented
        default: .formatError
        }
    }
}

/// The answer to an A question, from the caller's lookup, or decided at once by `TunnelDNS.action(for:)`.
public enum DNSAnswer: Equatable, Sendable {
    /// A records, TTL 60 (each address 4 bytes; others are skipped; an empty list is NODATA). From a lookup that
    /// found IPv4 addresses.
    case addresses([[UInt8]])
    /// NOERROR with no answer: the name exists but has no record of the type asked (a lookup that found IPv6
    /// addresses only, EAI_NODATA, EAI_ADDRFAMILY; and every type but A).
    case noData
    /// NXDOMAIN: the name does not exist (EAI_NONAME).
    case noSuchName
    /// SERVFAIL: the lookup failed otherwise (EAI_AGAIN, EAI_FAIL, EAI_SYSTEM, …); the device retries.
    case serverFailure
}

/// What a question needs.
public enum DNSAction: Equatable, Sendable {
    /// Resolve `hostName` for IPv4 with the host's resolver, then answer with `TunnelDNS.response(to:answer:)`.
    case lookUp(hostName: String)
    /// Answer at once with `TunnelDNS.response(to:answer:)`.
    case answer(DNSAnswer)
}

/// The tunnel's DNS responder: parse, decide, build (theory of operation above). Sans-io and stateless.
public enum TunnelDNS {
    /// The port devices send their queries to.
    public static let port: UInt16 = 53
    /// The TTL of A records.
    public static let answerTTL: UInt32 = 60
    /// The largest response built: RFC 1035's UDP limit, since the responses carry no EDNS OPT record.
    public static let maximumResponse = 512
    /// Record types this responder names.
    public static let typeA: UInt16 = 1, typeAAAA: UInt16 = 28, typeSVCB: UInt16 = 64, typeHTTPS: UInt16 = 65
    /// Class IN.
    public static let classIN: UInt16 = 1

    /// The one question of `payload` (a UDP datagram's payload), or why it is refused. Never traps.
    public static func parseQuery(_ payload: ArraySlice<UInt8>) -> Result<DNSQuestion, DNSRefusal> {
        let base = payload.startIndex
        guard payload.count >= 12 else {
            return .failure(DNSRefusal(reason: .tooShort, id: nil, recursionDesired: false, opcode: 0, question: []))
        }
        func word(_ offset: Int) -> UInt16 { UInt16(payload[base + offset]) << 8 | UInt16(payload[base + offset + 1]) }
        let id = word(0)
        let flags = word(2)
        let opcode = UInt8((flags >> 11) & 0x0F)
        let recursionDesired = flags & 0x0100 != 0
        func refuse(_ reason: DNSRefusal.Reason, question: [UInt8] = []) -> Result<DNSQuestion, DNSRefusal> {
            .failure(
                DNSRefusal(
                    reason: reason, id: id, recursionDesired: recursionDesired, opcode: opcode, question: question))
        }
        guard flags & 0x8000 == 0 else {
            return .failure(DNSRefusal(reason: .notAQuery, id: id, recursionDesired: false, opcode: 0, question: []))
        }
        guard opcode == 0 else { return refuse(.opcode) }
        guard word(4) == 1 else { return refuse(.questionCount) }
        guard word(6) == 0, word(8) == 0 else { return refuse(.recordsInQuery) }

        // The name: plain labels up to the root label, 255 bytes at most on the wire (RFC 1035 §2.3.4).
        var cursor = base + 12
        var labels: [[UInt8]] = []
        while true {
            guard cursor < payload.endIndex else { return refuse(.truncated) }
            let length = Int(payload[cursor])
            switch length & 0xC0 {
            case 0xC0: return refuse(.compressionPointer)
            case 0x40, 0x80: return refuse(.badLabel)
            default: break
            }
            guard cursor + 1 + length - (base + 12) <= 255 else { return refuse(.nameTooLong) }
            if length == 0 {
                cursor += 1
                break
            }
            guard length < payload.endIndex - cursor else { return refuse(.truncated) }
            labels.append(Array(payload[(cursor + 1)...(cursor + length)]))
            cursor += 1 + length
        }
        guard payload.endIndex - cursor >= 4 else { return refuse(.truncated) }
        let type = word(cursor - base)
        let questionClass = word(cursor + 2 - base)
        let wire = Array(payload[(base + 12)..<(cursor + 4)])
        guard questionClass == classIN else { return refuse(.questionClass, question: wire) }
        guard type != 251, type != 252 else { return refuse(.zoneTransfer, question: wire) }
        return .success(
            DNSQuestion(id: id, recursionDesired: recursionDesired, labels: labels, type: type, wire: wire))
    }

    /// What `question` needs: a lookup of its name for an A question, an answer at once for everything else.
    public static func action(for question: DNSQuestion) -> DNSAction {
        guard question.type == typeA else { return .answer(.noData) }
        if question.labels.isEmpty { return .answer(.noData) }
        guard let hostName = question.hostName else { return .answer(.noSuchName) }
        return .lookUp(hostName: hostName)
    }

    /// The response to `question`: its id, RD copied, RA set, the question echoed, and `answer` (A records with a
    /// TTL of `answerTTL`, deduplicated, as many as fit in `maximumResponse` bytes; or NODATA, NXDOMAIN, SERVFAIL).
    public static func response(to question: DNSQuestion, answer: DNSAnswer) -> [UInt8] {
        var addresses: [[UInt8]] = []
        let code: DNSResponseCode
        switch answer {
        case .addresses(let list):
            code = .noError
            let room = (maximumResponse - 12 - question.wire.count) / 16
            for address in list where address.count == 4 && !addresses.contains(address) && addresses.count < room {
                addresses.append(address)
            }
        case .noData: code = .noError
        case .noSuchName: code = .nameError
        case .serverFailure: code = .serverFailure
        }
        var message = header(
            id: question.id, opcode: 0, recursionDesired: question.recursionDesired, code: code, questions: 1,
            answers: addresses.count)
        message.reserveCapacity(12 + question.wire.count + 16 * addresses.count)
        message += question.wire
        for address in addresses {
            // The name as a pointer to the question's (offset 12), type A, class IN, the TTL, 4 bytes of data.
            message += [0xC0, 12, 0, 1, 0, 1]
            message += [
                UInt8(answerTTL >> 24), UInt8((answerTTL >> 16) & 0xFF), UInt8((answerTTL >> 8) & 0xFF),
                UInt8(answerTTL & 0xFF),
            ]
            message += [0, 4] + address
        }
        return message
    }

    /// The reply to a refused query: FORMERR or NOTIMP with its id (the question echoed only for a class or
    /// zone-transfer refusal), or nil when nothing is sent (shorter than a header, or a response).
    public static func response(to refusal: DNSRefusal) -> [UInt8]? {
        guard let code = refusal.responseCode, let id = refusal.id else { return nil }
        return header(
            id: id, opcode: refusal.opcode, recursionDesired: refusal.recursionDesired, code: code,
            questions: refusal.question.isEmpty ? 0 : 1, answers: 0) + refusal.question
    }

    /// A response header: QR set, `opcode` echoed, AA 0, TC 0, RD as given, RA set, `code`, no authority or
    /// additional records.
    static func header(
        id: UInt16, opcode: UInt8, recursionDesired: Bool, code: DNSResponseCode, questions: Int, answers: Int
    ) -> [UInt8] {
        let first = 0x80 | (opcode & 0x0F) << 3 | (recursionDesired ? 1 : 0)
        return [
            UInt8(id >> 8), UInt8(id & 0xFF), first, 0x80 | code.rawValue, 0, UInt8(questions), 0, UInt8(answers),
            0, 0, 0, 0,
        ]
    }
}
