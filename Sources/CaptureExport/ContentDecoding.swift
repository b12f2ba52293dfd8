import Foundation
import ZIPFoundation

/// Undoes a response's `Content-Encoding` for HAR's `content.text`, which the spec wants decoded. Captures keep
/// bodies as they passed (gzip stays gzip); `gzip` and `deflate` (zlib-wrapped, as RFC 9110 defines it) are inflated
/// here with zlib, through ZIPFoundation's raw-deflate decoder. Anything else (`br`, a cut body, damaged data, a
/// result past `limit`) is not decoded, and the caller says so.
enum ContentDecoding {
    /// Decoded bodies larger than this are not decoded (a compression bomb would otherwise fill memory).
    static let limit = 64 << 20

    struct TooLarge: Error {}

    /// The decoded bytes, or nil when `coding` is not one this knows or the data does not decode whole: a body is
    /// decoded only when its trailer's checksum (and, for gzip, its length) matches, so a damaged or cut body is
    /// never passed off as complete.
    static func decode(_ bytes: [UInt8], coding: String) -> [UInt8]? {
        switch coding.lowercased() {
        case "gzip", "x-gzip":
            guard let payload = gzipPayload(bytes) else { return nil }
            let crc = littleEndian(bytes[(bytes.count - 8)...])
            let size = littleEndian(bytes[(bytes.count - 4)...])
            guard let (output, outputCRC) = inflate(payload), outputCRC == crc,
                UInt32(truncatingIfNeeded: output.count) == size
            else { return nil }
            return output
        case "deflate":
            // RFC 9110's deflate is the zlib format: a 2-byte header, the deflate stream, an Adler-32 of the output.
            let n = bytes.count
            guard n >= 6, bytes[0] & 0x0F == 8, (UInt16(bytes[0]) << 8 | UInt16(bytes[1])) % 31 == 0,
                bytes[1] & 0x20 == 0  // no preset dictionary
            else { return nil }
            let adler = bytes[(n - 4)...].reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
            guard let (output, _) = inflate(bytes[2..<(n - 4)]), adler32(output) == adler else { return nil }
            return output
        default:
            return nil
        }
    }

    /// Raw deflate, inflated; nil on an error or past `limit`. Returns the output's CRC-32 too.
    private static func inflate(_ raw: ArraySlice<UInt8>) -> ([UInt8], UInt32)? {
        let input = Data(raw)
        var output = Data()
        do {
            let crc = try Data.decompress(
                size: Int64(input.count), bufferSize: 64 * 1024, skipCRC32: false,
                provider: { position, size in
                    input.subdata(in: Int(position)..<min(input.count, Int(position) + size))
                },
                consumer: { chunk in
                    output.append(chunk)
                    if output.count > limit { throw TooLarge() }
                })
            return (Array(output), crc)
        } catch {
            return nil
        }
    }

    /// The four bytes from the start of `bytes`, least significant first.
    private static func littleEndian(_ bytes: ArraySlice<UInt8>) -> UInt32 {
        bytes.prefix(4).reversed().reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
    }

    static func adler32(_ bytes: [UInt8]) -> UInt32 {
        var a: UInt32 = 1
        var b: UInt32 = 0
        for byte in bytes {
            a = (a + UInt32(byte)) % 65521
            b = (b + a) % 65521
        }
        return b << 16 | a
    }

    /// The deflate stream inside a gzip member (RFC 1952), after its header; nil when the header is not gzip's.
    static func gzipPayload(_ bytes: [UInt8]) -> ArraySlice<UInt8>? {
        guard bytes.count >= 18, bytes[0] == 0x1F, bytes[1] == 0x8B, bytes[2] == 8 else { return nil }
        let flags = bytes[3]
        var i = 10
        if flags & 0x04 != 0 {  // FEXTRA
            guard i + 2 <= bytes.count else { return nil }
            i += 2 + (Int(bytes[i]) | (Int(bytes[i + 1]) << 8))
        }
        for flag: UInt8 in [0x08, 0x10] where flags & flag != 0 {  // FNAME, FCOMMENT: zero-terminated
            while i < bytes.count, bytes[i] != 0 { i += 1 }
            i += 1
        }
        if flags & 0x02 != 0 { i += 2 }  // FHCRC
        // The member ends with CRC32 and ISIZE (8 bytes).
        guard i < bytes.count - 8 else { return nil }
        return bytes[i..<(bytes.count - 8)]
    }
}
