import HTTP1Core
import Testing

/// The byte rules for field names and values, checked for every byte value at every position within an 8-byte word
/// (the parser checks values eight bytes at a time), and the name lookups that skip absent names without a scan.
@Suite("HTTP1Parser field byte rules and lookups")
struct HTTP1FieldRulesTests {
    /// A request whose one extra field is built from `name` and `value` bytes.
    private func request(name: [UInt8], value: [UInt8]) -> [UInt8] {
        bytes("GET / HTTP/1.1\r\nHost: x\r\n") + name + bytes(": ") + value + bytes("\r\n\r\n")
    }

    @Test("a value byte is refused exactly when it is a control other than HTAB, or DEL", arguments: 0..<12)
    func valueBytesAtEveryOffset(offset: Int) {
        for byte in UInt8.min...UInt8.max where byte != 0x0A && byte != 0x0D {
            // Surrounded by visible characters so that trimming never removes the byte under test.
            let before = [UInt8](repeating: UInt8(ascii: "a"), count: offset)
            let value = before + [byte] + [UInt8](repeating: UInt8(ascii: "z"), count: 9)
            let outcome = parse([request(name: bytes("X-Probe"), value: value)], role: .requests)
            let allowed = byte == 0x09 || (byte >= 0x20 && byte != 0x7F)
            #expect(
                (outcome.error == nil) == allowed && (allowed || outcome.error?.reason == .invalidHeaderValue),
                "byte 0x\(String(byte, radix: 16)) at offset \(offset): \(outcome)")
        }
    }

    @Test("a CR not followed by LF is refused anywhere in a value (RFC 9112 §2.2)", arguments: 0..<12)
    func loneCRInValue(offset: Int) {
        for tail in [bytes("z"), bytes(" "), bytes("zzzzzzzzz"), []] {
            let value = [UInt8](repeating: UInt8(ascii: "a"), count: offset) + [0x0D] + tail
            let outcome = parse([request(name: bytes("X-Probe"), value: value)], role: .requests)
            #expect(outcome.error?.reason == .invalidHeaderValue, "CR at \(offset) before \(tail): \(outcome)")
        }
    }

    @Test("values lose surrounding SP and HTAB, keep inner ones, and lines may end with LF alone")
    func valueWhitespaceAndLineEnds() throws {
        let cases: [(wire: String, value: String, canonical: Bool)] = [
            ("X-V: plain\r\n", "plain", true),
            ("X-V:   spaced out   \r\n", "spaced out", true),
            ("X-V:\t\ttabbed\tinside\t \r\n", "tabbed\tinside", true),
            ("X-V:\r\n", "", true),
            ("X-V:    \r\n", "", true),
            ("X-V: bare\n", "bare", false),
            ("X-V: a-value-longer-than-eight-bytes  \n", "a-value-longer-than-eight-bytes", false),
        ]
        for c in cases {
            var parser = HTTP1Parser(role: .requests)
            parser.receive(bytes("GET / HTTP/1.1\r\nHost: x\r\n" + c.wire + "X-After: 1\r\n\r\n"))
            guard case .requestHead(let head) = try parser.nextEvent() else {
                Issue.record("expected a request head for \(c.wire.debugDescription)")
                continue
            }
            #expect(head.headers.values(for: "x-v") == [c.value], "\(c.wire.debugDescription)")
            #expect(head.headers[first: "X-After"] == "1", "\(c.wire.debugDescription)")
            #expect((parser.lastHeadBytes != nil) == c.canonical, "\(c.wire.debugDescription)")
        }
    }

    @Test("a name byte is accepted exactly when it is a tchar (RFC 9110 §5.6.2)")
    func nameBytes() {
        let tchars = Set("!#$%&'*+-.^_`|~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz".utf8)
        // A colon ends the name and a line feed ends the line: both change the structure rather than the name.
        for byte in UInt8.min...UInt8.max where byte != UInt8(ascii: ":") && byte != 0x0A {
            for position in 0..<3 {
                var name = bytes("Ab")
                name.insert(byte, at: position)
                let outcome = parse([request(name: name, value: bytes("v"))], role: .requests)
                if tchars.contains(byte) {
                    #expect(outcome.error == nil, "byte 0x\(String(byte, radix: 16)) at \(position): \(outcome)")
                } else {
                    #expect(outcome.error != nil, "byte 0x\(String(byte, radix: 16)) at \(position) was accepted")
                }
            }
        }
    }

    @Test("lookups find a name in any case and nothing else, however many fields there are", arguments: [1, 8, 100])
    func lookupsAcrossManyFields(extraFields: Int) throws {
        var wire = "GET / HTTP/1.1\r\nhOsT: x\r\nCONTENT-length: 0\r\nconnection: Close\r\n"
        for i in 0..<extraFields { wire += "X-Field-\(i): \(i)\r\n" }
        var parser = HTTP1Parser(role: .requests)
        parser.receive(bytes(wire + "\r\n"))
        guard case .requestHead(let head) = try parser.nextEvent() else {
            Issue.record("expected a request head")
            return
        }
        #expect(head.headers.count(of: "Host") == 1)
        #expect(head.headers[first: "content-length"] == "0")
        #expect(head.headers.containsToken("close", for: "CONNECTION"))
        #expect(!head.keepAlive)
        for i in 0..<extraFields { #expect(head.headers.values(for: "x-field-\(i)") == ["\(i)"]) }
        // Same length, first and last byte as present names: they share a filter bit, and the scan must refuse them.
        #expect(!head.headers.contains(name: "Hxst"))
        #expect(!head.headers.contains(name: "Content-Lxngth"))
        #expect(!head.headers.contains(name: "Transfer-Encoding"))
        #expect(!head.headers.contains(name: ""))
        #expect(head.headers[first: "X-Field-\(extraFields)"] == nil)
    }
}
