/// What one worker (one event loop) counted during a run; the run adds the workers' tallies up.
struct LoadTally: Sendable {
    /// Responses read to their end, whatever their status.
    var requests = 0
    /// Connections that failed or that the server closed (each replaced unless the run was over).
    var errors = 0
    /// TCP connections started, replacements included.
    var connectionsOpened = 0
    /// Body bytes of the completed responses.
    var bodyBytes = 0
    var latency = LatencyHistogram()
    /// Responses per status code, indexed by the code (a fixed array: no hashing per request).
    private var statusCounts = [Int](repeating: 0, count: 1000)
    /// Errors by description, at most `maxErrorKinds` different ones (the rest count as "other").
    private(set) var errorKinds: [String: Int] = [:]
    private static let maxErrorKinds = 8
    /// When the worker finished (monotonic nanoseconds): its last response, the deadline, or too many errors.
    var finishedAt: UInt64 = 0

    mutating func record(_ response: CompletedResponse, latency nanoseconds: UInt64) {
        requests += 1
        bodyBytes += response.bodyBytes
        latency.record(nanoseconds)
        if statusCounts.indices.contains(response.status) { statusCounts[response.status] += 1 }
    }

    mutating func record(_ failure: LoadFailure) {
        errors += 1
        let kind = failure.description
        if errorKinds[kind] != nil || errorKinds.count < Self.maxErrorKinds {
            errorKinds[kind, default: 0] += 1
        } else {
            errorKinds["other", default: 0] += 1
        }
    }

    /// The status codes seen, with their counts, in code order.
    var statusCodes: [(code: Int, count: Int)] {
        statusCounts.indices.filter { statusCounts[$0] > 0 }.map { ($0, statusCounts[$0]) }
    }

    mutating func merge(_ other: LoadTally) {
        requests += other.requests
        errors += other.errors
        connectionsOpened += other.connectionsOpened
        bodyBytes += other.bodyBytes
        latency.merge(other.latency)
        for i in statusCounts.indices { statusCounts[i] += other.statusCounts[i] }
        for (kind, n) in other.errorKinds { errorKinds[kind, default: 0] += n }
        finishedAt = max(finishedAt, other.finishedAt)
    }
}
