import Dispatch
import Foundation
import Onboarding
import ProxyCore
import ProxyEventLoop
import ProxyServer
import Synchronization

/// The running proxy: its event loops, its listeners (the explicit proxy's and the transparent one) and the
/// signals that stop it. Made after everything it needs was opened; `waitForShutdown()` returns once a signal
/// has started the graceful shutdown.
struct RunListeners {
    let group: EventLoopGroup
    let listener: Listener
    /// The banner's line about the transparent listener (empty without transparent mode).
    let transparentLine: String
    /// The banner's lines about WireGuard mode, with the device's QR code (empty without it).
    let wireguardLines: String
    private let wireguard: WireGuardPort?
    /// The address a device on the network uses (the set-up page's), when the proxy listens on one.
    let networkAddress: String?
    /// The listening host as a URL shows it (`[::1]`).
    let shownHost: String
    /// The banner's proxy URL, with the user name of the credentials, never the password.
    let proxyURL: String
    private let done: DispatchSemaphore
    private let signals: ShutdownSignals

    init(
        _ command: RunCommand, _ start: RunStart, environment: ProxyEnvironment, onboarding: OnboardingSite,
        log: ProxyLogSink
    ) throws {
        HeapTuning.keepFreedMemoryForReuse()
        let group = try EventLoopGroup(
            configuration: .init(loopCount: start.threadCount, yieldsBeforeSleeping: command.yieldsBeforeSleep))
        self.group = group
        let server = ProxyServer(environment: environment, group: group, sink: log)
        let (host, port) = (start.host, start.port)
        do { listener = try server.listen(host: host, port: port, transparent: start.modes.regular == nil) } catch {
            throw failure("atsproxy run: error: \(RunCommand.listenFailure(error, host: host, port: port))")
        }
        transparentLine = try TransparentListening.start(start.modes, server: server, first: listener)
        let wireguard = try WireGuardListening.start(
            start.modes, server: server, onboarding: onboarding, caDirectory: command.caDir, log: log)
        (wireguardLines, self.wireguard) = (wireguard?.lines ?? "", wireguard?.running)
        // Before the banner: whoever reads it may stop the proxy at once, and that signal must find the handler.
        (done, signals) = Self.observeSignals(group: group, shutdownTimeout: command.shutdownTimeout)
        networkAddress = DeviceOptions.registerAddresses(site: onboarding, host: host, port: Int(listener.port))
        shownHost = host.contains(":") ? "[\(host)]" : host
        proxyURL = "http://\(RunCommand.proxyUserInfo(start.credentials))\(shownHost):\(listener.port)"
    }

    /// Waits for SIGINT, SIGTERM or SIGHUP, then stops observing them.
    func waitForShutdown() {
        done.wait()
        signals.cancel()
        if let summary = wireguard?.summary() { ProxyLogSink.writeToStandardError(summary) }
    }

    private static func observeSignals(group: EventLoopGroup, shutdownTimeout: Double)
        -> (DispatchSemaphore, ShutdownSignals)
    {
        let done = DispatchSemaphore(value: 0)
        let shutdownSeconds =
            shutdownTimeout == shutdownTimeout.rounded() ? String(Int(shutdownTimeout)) : String(shutdownTimeout)
        let signalsSeen = Atomic<Int>(0)
        // SIGINT, SIGTERM and SIGHUP: after a SIGHUP the terminal may be gone, so the messages must not trap.
        let signals = ShutdownSignals { _ in
            // Each signal runs here on its own: a second one comes while the first still waits for the exchanges.
            switch signalsSeen.wrappingAdd(1, ordering: .relaxed).newValue {
            case 1:
                ProxyLogSink.writeToStandardError(
                    "atsproxy: shutting down (in-flight exchanges get \(shutdownSeconds) s; "
                        + "Ctrl-C again to stop them now)\n")
                group.shutdownGracefully(timeout: .milliseconds(Int(shutdownTimeout * 1000)))
                done.signal()
            case 2:
                ProxyLogSink.writeToStandardError(
                    "atsproxy: stopping now: exchanges still in flight are cut off and logged as such\n")
                group.cutShutdownShort()
            default:
                // Something keeps the loops from stopping: leave without waiting (and without flushing).
                ProxyLogSink.writeToStandardError("atsproxy: exiting at once\n")
                _exit(130)
            }
        }
        return (done, signals)
    }
}
