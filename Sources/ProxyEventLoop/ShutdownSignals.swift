import CLinuxShims
import Dispatch
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Observes SIGINT/SIGTERM (or other signals) with Dispatch signal sources and calls `onSignal` on a Dispatch queue.
///
/// The library never exits the process: the CLI decides, typically by calling
/// `EventLoopGroup.shutdownGracefully(timeout:)` from `onSignal` and returning from `main` afterwards.
public final class ShutdownSignals: Sendable {
    private let sources: Mutex<[any DispatchSourceSignal]>
    private let signals: [Int32]

    /// Starts observing. The signals' default actions are disabled while this object is active.
    public init(
        signals: [Int32] = [SIGINT, SIGTERM], queue: DispatchQueue = .global(),
        onSignal: @escaping @Sendable (Int32) -> Void
    ) {
        self.signals = signals
        var made: [any DispatchSourceSignal] = []
        for signal in signals {
            // The default action would terminate the process before Dispatch sees the signal.
            clinux_ignore_signal(signal)
            let source = DispatchSource.makeSignalSource(signal: signal, queue: queue)
            source.setEventHandler { onSignal(signal) }
            source.resume()
            made.append(source)
        }
        sources = Mutex(made)
    }

    /// Stops observing and restores the signals' default actions.
    public func cancel() {
        let list = sources.withLock { list -> [any DispatchSourceSignal] in
            let current = list
            list = []
            return current
        }
        guard !list.isEmpty else { return }
        for source in list { source.cancel() }
        for signal in signals { clinux_default_signal(signal) }
    }

    deinit {
        cancel()
    }
}

extension EventLoop {
    /// Starts an outbound connection on this loop (numeric address; resolve names off-loop first). The outcome
    /// arrives at `handler` as `connectionOpened` or `connectionClosed(error:)` (ECONNREFUSED, ETIMEDOUT after
    /// `timeout`, …). Bytes written before it opens are sent once it does. Loop thread only.
    public func connect(
        to address: SocketAddress, timeout: Duration = .seconds(10), handler: any ConnectionHandler
    ) -> Connection {
        Connection.connect(to: address, on: self, timeout: timeout, handler: handler)
    }
}
