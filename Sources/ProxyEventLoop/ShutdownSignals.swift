import CLinuxShims
import Dispatch
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Observes SIGINT, SIGTERM and SIGHUP (or other signals) and calls `onSignal` on a Dispatch queue. SIGHUP is among
/// them because a closed terminal sends it: its default action would end the process without flushing its logs.
///
/// A signal handler writes the signal's number to a pipe, and a thread reads it. Dispatch signal sources were used
/// before, but they arm themselves asynchronously after `resume()` while the default action has to be ignored first:
/// a SIGTERM sent in between (a script stopping the proxy as soon as its banner was out) was lost, and the proxy kept
/// running (7 of 30 in a loop that did exactly that). `sigaction` is in effect when it returns, so every signal sent
/// after `init` returns is delivered.
///
/// The library never exits the process: the CLI decides, typically by calling
/// `EventLoopGroup.shutdownGracefully(timeout:)` from `onSignal` and returning from `main` afterwards. One instance
/// at a time (a precondition): the handler reports to a single process-wide pipe.
public final class ShutdownSignals: Sendable {
    private let signals: [Int32]
    private let active: Locked<Bool>

    /// Starts observing: the signals' default actions are replaced until `cancel()`. If the pipe cannot be made
    /// (no descriptors left), the default actions stay, and a signal ends the process as it would without this.
    public init(
        signals: [Int32] = [SIGINT, SIGTERM, SIGHUP], queue: DispatchQueue = .global(),
        onSignal: @escaping @Sendable (Int32) -> Void
    ) {
        self.signals = signals
        guard let pipe = SignalPipe.shared else {
            active = Locked(false)
            return
        }
        pipe.receiver.withLock { receiver in
            precondition(receiver == nil, "only one ShutdownSignals may be active at a time")
            receiver = SignalPipe.Receiver(queue: queue, onSignal: onSignal)
        }
        active = Locked(true)
        for signal in signals { _ = clinux_report_signal_to_pipe(signal, pipe.writeFD) }
    }

    /// Stops observing and restores the signals' default actions.
    public func cancel() {
        let wasActive = active.withLock { active in
            defer { active = false }
            return active
        }
        guard wasActive else { return }
        for signal in signals { clinux_default_signal(signal) }
        SignalPipe.shared?.receiver.withLock { $0 = nil }
    }

    deinit {
        cancel()
    }
}

/// The process's one signal pipe and the thread that reads it. Made on first use and never closed: a handler that
/// has read the descriptor may still be about to write to it, and a closed number could by then belong to another
/// file. Signals that arrive while no `ShutdownSignals` is active are read and dropped.
private final class SignalPipe: Sendable {
    struct Receiver {
        let queue: DispatchQueue
        let onSignal: @Sendable (Int32) -> Void
    }

    static let shared = SignalPipe()

    let writeFD: Int32
    let receiver = Locked<Receiver?>(nil)

    private init?() {
        var ends: [Int32] = [-1, -1]
        guard clinux_signal_pipe(&ends) == 0 else { return nil }
        let readFD = ends[0]
        writeFD = ends[1]
        let reader = Thread { [receiver] in
            var number: UInt8 = 0
            while true {
                let n = read(readFD, &number, 1)
                if n == 1 {
                    guard let current = receiver.withLock({ $0 }) else { continue }
                    let signal = Int32(number)
                    current.queue.async { current.onSignal(signal) }
                } else if n < 0 && errno == EINTR {
                    continue
                } else {
                    return  // cannot happen while the write end stays open
                }
            }
        }
        reader.name = "atsproxy-signals"
        reader.start()
    }
}
