import ArgumentParser
import ProxyCore

/// `atsproxy run`'s options about apps that pin: `--no-auto-passthrough`.
struct PinningOptions: ParsableArguments {
    @Flag(
        name: .customLong("no-auto-passthrough"),
        help: ArgumentHelp(
            "Keep intercepting a host the client refuses the proxy's certificate for. By default, after "
                + "\(AutoPassthroughLedger.defaultThreshold) refusals in a row of one host by a client that trusts "
                + "the proxy for other hosts (an app that pins it in code), that host is tunnelled for the rest of "
                + "the run, with a notice."))
    var noAutoPassthrough = false

    /// The store sessions share, nil when turned off.
    func autoPassthroughStore() -> AutoPassthroughStore? {
        noAutoPassthrough ? nil : AutoPassthroughStore()
    }
}
