import ProxyEventLoop

/// Binds one socket to its ``LoadConnection``: passes the socket's events in, writes what the state machine asks
/// for, times each request from its write to its response's end, and reports to the ``LoadWorker``.
final class LoadConnectionHandler: ConnectionHandler {
    // Strong: the loops' teardown still delivers `connectionClosed` after the run has let go of its workers. The
    // cycle through the worker's open connections ends when each connection closes and drops its handler.
    private let worker: LoadWorker
    private let machine: LoadConnection
    /// When the request in flight was written (monotonic nanoseconds).
    private var requestStart: UInt64 = 0
    private var requestInFlight = false
    private var completedAny = false
    /// Set once the worker has been told this connection ended.
    private var ended = false

    init(worker: LoadWorker, machine: LoadConnection) {
        self.worker = worker
        self.machine = machine
    }

    func connectionOpened(_ connection: Connection) {
        apply(machine.start(), on: connection)
    }

    func connection(_ connection: Connection, received bytes: UnsafeRawBufferPointer) {
        apply(machine.receive(bytes), on: connection)
    }

    func connectionReadEOF(_ connection: Connection) {
        apply(machine.receiveEOF(), on: connection)
    }

    func connectionShutdownRequested(_ connection: Connection) {
        connection.abort()
    }

    func connectionClosed(_ connection: Connection, error: IOError?) {
        guard !ended else { return }
        ended = true
        // Without an error the socket closed itself: the server's FIN after ours, which we never send first.
        worker.connectionEnded(
            connection, failure: error.map(LoadFailure.transport) ?? .closedByServer,
            hadRequestInFlight: requestInFlight, completedAny: completedAny)
    }

    private func apply(_ step: LoadStep, on connection: Connection) {
        if !step.output.isEmpty { connection.write(step.output) }
        if let response = step.completed {
            requestInFlight = false
            completedAny = true
            worker.responseCompleted(response, latency: monotonicNanoseconds() &- requestStart)
            if worker.isFinished { return }
        }
        if let failure = step.failure {
            ended = true
            connection.abort()
            worker.connectionEnded(
                connection, failure: failure, hadRequestInFlight: requestInFlight, completedAny: completedAny)
            return
        }
        if machine.isReady && worker.claimRequest() {
            let next = machine.sendRequest()
            requestInFlight = true
            requestStart = monotonicNanoseconds()
            apply(next, on: connection)
        }
    }
}
