import HTTP1Core
import Testing

@Suite("Header values are bytes")
struct FieldBytesTests {
    @Test("Any byte string survives the String round trip; UTF-8 values are plain Strings",
          arguments: [
            [UInt8]("plain ascii".utf8), [UInt8]("caf\u{E9} \u{1F600}".utf8), [0x63, 0x61, 0x66, 0xE9],
            [0xFF, 0xFE, 0x80, 0x20, 0xC3], [0xF4, 0x8F, 0xBF, 0xBF, 0xE9], Array(0x80...0xFF),
          ])
    func roundTrip(bytes: [UInt8]) {
        let s = FieldBytes.string(bytes)
        #expect(FieldBytes.bytes(s) == bytes)
        if let utf8 = String(validating: bytes, as: UTF8.self) { #expect(s == utf8) }
    }

    @Test("A Latin-1 value is shown as Latin-1")
    func display() {
        #expect(FieldBytes.display(FieldBytes.string([0x63, 0x61, 0x66, 0xE9])) == "caf\u{E9}")
        #expect(FieldBytes.display("caf\u{E9}") == "caf\u{E9}")
    }
}
