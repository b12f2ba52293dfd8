import ProxyEventLoop

/// The connections of one event loop and their share of the run's requests.
///
/// It keeps `connections` connections open, hands out requests one at a time (`claimRequest`) until its share has
/// been sent, replaces every connection that fails, and finishes, aborting whatever is still open, once its share of
/// responses has completed, after more than `maxErrors` failures, or when `stop()` is called at the deadline.
final class LoadWorker: @unchecked Sendable {
    // @unchecked Sendable: every property is touched only on `loop`'s thread; other threads merely pass the worker to
    // `loop.execute` (to start it, and to stop it at the deadline).

    /// What one worker is asked to do.
    struct Assignment: Sendable {
        var destination: SocketAddress
        var recipe: ConnectionRecipe
        var connections: Int
        var requests: Int
        var maxErrors: Int
    }

    let loop: EventLoop
    private let assignment: Assignment
    private let onFinish: @Sendable (LoadTally) -> Void
    private var tally = LoadTally()
    /// Requests sent and not given back: completed ones plus those in flight.
    private var claimed = 0
    private var open: [ConnectionID: Connection] = [:]
    /// Set once the worker has reported; late events from its connections are ignored.
    private(set) var isFinished = false
    /// A connection that never completed a response is replaced after this pause, so that a refused port or a
    /// broken handshake does not become a busy loop of reconnects.
    private static let retryPause: Duration = .milliseconds(100)

    init(loop: EventLoop, assignment: Assignment, onFinish: @escaping @Sendable (LoadTally) -> Void) {
        self.loop = loop
        self.assignment = assignment
        self.onFinish = onFinish
    }

    /// Opens the connections. Loop thread only.
    func start() {
        loop.preconditionInEventLoop()
        if assignment.requests == 0 {
            finish()
            return
        }
        for _ in 0..<assignment.connections { openConnection() }
    }

    /// Finishes now with what has been counted (the run's deadline passed). Loop thread only.
    func stop() {
        finish()
    }

    /// Takes one request of the share; false when all of them are sent or done.
    func claimRequest() -> Bool {
        guard !isFinished, claimed < assignment.requests else { return false }
        claimed += 1
        return true
    }

    func responseCompleted(_ response: CompletedResponse, latency: UInt64) {
        guard !isFinished else { return }
        tally.record(response, latency: latency)
        if tally.requests >= assignment.requests { finish() }
    }

    /// A connection ended with `failure`; its request in flight, if any, goes back to the pool for another
    /// connection to send, and a replacement is opened.
    func connectionEnded(
        _ connection: Connection, failure: LoadFailure, hadRequestInFlight: Bool, completedAny: Bool
    ) {
        open[connection.id] = nil
        guard !isFinished else { return }
        if hadRequestInFlight { claimed -= 1 }
        tally.record(failure)
        if tally.errors > assignment.maxErrors {
            finish()
        } else if completedAny {
            openConnection()
        } else {
            loop.scheduleTimer(after: Self.retryPause) { [self] in openConnection() }
        }
    }

    private func openConnection() {
        guard !isFinished else { return }
        tally.connectionsOpened += 1
        let handler = LoadConnectionHandler(worker: self, machine: LoadConnection(recipe: assignment.recipe))
        let connection = loop.connect(to: assignment.destination, handler: handler)
        if !connection.isClosed { open[connection.id] = connection }
    }

    private func finish() {
        guard !isFinished else { return }
        isFinished = true
        tally.finishedAt = monotonicNanoseconds()
        for connection in open.values { connection.abort() }
        open.removeAll()
        onFinish(tally)
    }
}
