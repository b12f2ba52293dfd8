/// Body bytes queued by the application for one stream, waiting for nghttp2's data provider to pull them.
///
/// Theory of operation: nghttp2 calls the data provider whenever flow control lets it send DATA on the stream.
/// The provider copies from this queue into nghttp2's frame buffer (so nghttp2 never holds a pointer into Swift
/// memory), reports DEFERRED when the queue is empty but the body is not finished, and reports EOF once `ended`
/// and drained. Appending bytes to a deferred stream resumes it with `nghttp2_session_resume_data`.
struct H2OutboundStream {
    private var storage: [UInt8] = []
    private var head = 0
    /// The application has said the body ends after the queued bytes.
    var ended = false
    /// Trailers to send after the body, if any.
    var trailers: [H2Header]?
    /// The provider returned DEFERRED and waits for `resume_data`.
    var deferred = false

    /// Bytes queued and not yet handed to nghttp2.
    var count: Int { storage.count - head }

    mutating func append(_ bytes: some Collection<UInt8>) {
        storage.append(contentsOf: bytes)
    }

    /// Copies up to `capacity` bytes into `destination` and drops them from the queue; returns how many.
    mutating func take(into destination: UnsafeMutableRawBufferPointer) -> Int {
        let n = min(destination.count, count)
        if n > 0 {
            storage.withUnsafeBytes { source in
                destination.copyMemory(from: UnsafeRawBufferPointer(rebasing: source[head..<(head + n)]))
            }
            head += n
        }
        // Compact once the consumed prefix dominates, so a long stream does not grow without bound.
        if head == storage.count {
            storage.removeAll(keepingCapacity: true)
            head = 0
        } else if head > 65_536 && head * 2 > storage.count {
            storage.removeFirst(head)
            head = 0
        }
        return n
    }
}
