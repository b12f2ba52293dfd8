internal import CNghttp2
import HTTP1Core

/// Runs `body` with an `nghttp2_nv` array describing `headers`.
///
/// All names and values live in one temporary byte buffer for the duration of the call. nghttp2 copies them
/// during `nghttp2_submit_*` because no NO_COPY flag is set (house-style §5.3 item 11), so no pointer outlives
/// the closure.
func withNVArray<R>(_ headers: [H2Header], _ body: (UnsafeMutablePointer<nghttp2_nv>?, Int) -> R) -> R {
    var bytes: [UInt8] = []
    var spans: [(name: Range<Int>, value: Range<Int>)] = []
    spans.reserveCapacity(headers.count)
    for header in headers {
        let nameStart = bytes.count
        bytes.append(contentsOf: header.name.utf8)
        let valueStart = bytes.count
        // Values are bytes: a non-UTF-8 value goes out as it came in (FieldBytes).
        FieldBytes.append(header.value, to: &bytes)
        spans.append((nameStart..<valueStart, valueStart..<bytes.count))
    }
    // A zero-length buffer may have a nil base; keep one spare byte so every pointer is valid.
    bytes.append(0)
    return bytes.withUnsafeMutableBufferPointer { buffer in
        guard let base = buffer.baseAddress else { return body(nil, 0) }
        var nva = spans.map { span in
            nghttp2_nv(
                name: base + span.name.lowerBound, value: base + span.value.lowerBound,
                namelen: span.name.count, valuelen: span.value.count, flags: UInt8(NGHTTP2_NV_FLAG_NONE.rawValue))
        }
        return nva.withUnsafeMutableBufferPointer { nvBuffer in body(nvBuffer.baseAddress, nvBuffer.count) }
    }
}
