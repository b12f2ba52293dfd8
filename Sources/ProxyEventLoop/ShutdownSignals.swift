import CLinuxShims
import Dispatch
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Observes SIGINT/SIGTERM (or other signals) and calls `onSignal` on a Dispatch queue.
///
/// A signal handler writes the signal's number to a pipe, and a thread of this object's own reads it. Dispatch
/// signal sources were used before, but they arm themselves asynchronously after `resume()` while the default
/// action has to be ignored first: a SIGTERM sent in between (a script stopping the proxy as soon as its banner was
/// out) was lost, and the proxy kept running (7 of 30 in a loop that did exactly that). `sigaction` is in effect
/// when it returns, so every signal sent after `init` returns is delivered.
///
/// The library never exits the process: the CLI decides, typically by calling
/// `EventLoopGroup.shutdownGracefully(timeout:)` from `onSignal` and returning from `main` afterwards. One instance
/// at a time: the handler reports to a single process-wide pipe.
public final class ShutdownSignals: Sendable {
    private struct State {
        var writeFD: Int32
        var cancelled = false
    }
    private let state: Locked<State>
    private let signals: [Int32]

    /// Starts observing: the signals' default actions are replaced until `cancel()`. If the pipe cannot be made
    /// (no descriptors left), the default actions stay, and a signal ends the process as it would without this.
    public init(
        signals: [Int32] = [SIGINT, SIGTERM], queue: DispatchQueue = .global(),
        onSignal: @escaping @Sendable (Int32) -> Void
    ) {
        self.signals = signals
        var ends: [Int32] = [-1, -1]
        guard pipe(&ends) == 0 else {
            state = Locked(State(writeFD: -1, cancelled: true))
            return
        }
        let (readFD, writeFD) = (ends[0], ends[1])
        for fd in ends { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        // Non-blocking, so that the handler never waits on a full pipe (a byte already in it is notice enough).
        _ = fcntl(writeFD, F_SETFL, fcntl(writeFD, F_GETFL) | O_NONBLOCK)
        state = Locked(State(writeFD: writeFD))
        let reader = Thread {
            var number: UInt8 = 0
            while true {
                let n = read(readFD, &number, 1)
                if n == 1 {
                    let signal = Int32(number)
                    queue.async { onSignal(signal) }
                } else if n < 0 && errno == EINTR {
                    continue
                } else {
                    break  // EOF: cancel() closed the write end
                }
            }
            closeDescriptor(readFD)
        }
        reader.name = "atsproxy-signals"
        reader.start()
        for signal in signals { _ = clinux_report_signal_to_pipe(signal, writeFD) }
    }

    /// Stops observing and restores the signals' default actions.
    public func cancel() {
        let writeFD = state.withLock { state -> Int32 in
            guard !state.cancelled else { return -1 }
            state.cancelled = true
            return state.writeFD
        }
        guard writeFD >= 0 else { return }
        for signal in signals { clinux_default_signal(signal) }
        clinux_forget_signal_pipe()
        closeDescriptor(writeFD)  // the reader sees EOF and ends
    }

    deinit {
        cancel()
    }
}
