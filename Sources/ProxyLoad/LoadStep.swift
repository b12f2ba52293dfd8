/// What one call into a ``LoadConnection`` asks of its driver, in this order: send `output`, record `completed`,
/// then, when `failure` is set, close the connection (it is unusable) and count the failure.
struct LoadStep {
    /// Bytes to write to the socket.
    var output: [UInt8] = []
    /// A response that has just been read to its end.
    var completed: CompletedResponse?
    /// Why the connection cannot carry another request.
    var failure: LoadFailure?

    /// Appends bytes to send (adopting the array when nothing is queued yet, so a request is not copied).
    mutating func send(_ bytes: [UInt8]) {
        if output.isEmpty {
            output = bytes
        } else {
            output.append(contentsOf: bytes)
        }
    }
}

/// A response read to its end: the final status and how many body bytes (de-chunked) it carried.
struct CompletedResponse: Equatable, Sendable {
    var status: Int
    var bodyBytes: Int
}
