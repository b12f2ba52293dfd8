import Inflate

/// Undoes a response's `Content-Encoding` for HAR's `content.text`, which the spec wants decoded. Captures keep
/// bodies as they passed (gzip stays gzip); `gzip` and `deflate` (zlib-wrapped, as RFC 9110 defines it) are inflated
/// here by the package's one bounded decompressor (`Inflate`), which returns a stream only when it decodes whole and
/// its checksum matches. Anything else (`br`, a cut body, damaged data, a result past `limit`) is not decoded, and
/// the caller says so.
public enum ContentDecoding {
    /// Decoded bodies larger than this are not decoded (a compression bomb would otherwise fill memory).
    static let limit = 64 << 20

    /// The decoded bytes, or nil when `coding` is not one this knows or the data does not decode whole.
    public static func decode(_ bytes: [UInt8], coding: String) -> [UInt8]? {
        let format: Inflate.Format
        switch coding.lowercased() {
        case "gzip", "x-gzip": format = .gzip
        case "deflate": format = .zlib
        default: return nil
        }
        do { return try Inflate.inflate(bytes, format: format, limit: limit) } catch {
            // Truncated, corrupt or too large: the body is left as it passed, and the entry says why.
            return nil
        }
    }
}
