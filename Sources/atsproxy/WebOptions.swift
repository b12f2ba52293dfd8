import ArgumentParser
import Foundation

/// `atsproxy run --web [ADDR:PORT]`: the live web view, on the proxy's own event loops.
struct WebOptions: ParsableArguments {
    @Option(
        name: .customLong("web"),
        help: ArgumentHelp(
            "Serve the live web view on ADDR:PORT (without a value, \(WebOptions.defaultAddress)). It reads the "
                + "capture: without --capture, a temporary one deleted at exit. A non-loopback address follows "
                + "--listen's rules (--allow-lan, and credentials or --allow-open-proxy); the view then asks for "
                + "the proxy's credentials.",
            valueName: "ADDR:PORT"))
    var web: String?

    static let defaultAddress = "127.0.0.1:8081"
    /// The value `--web` gets when it is given without an address (see `CaptureOptions.expandingBareOptions`).
    static let defaultMarker = "\u{1}default"

    /// The address to serve on, nil without `--web`.
    func address() throws -> (String, UInt16)? {
        guard let web else { return nil }
        return try Self.parse(web == Self.defaultMarker ? Self.defaultAddress : web)
    }

    /// `HOST:PORT`, `[v6]:PORT` or a bare port, with errors naming `--web`.
    static func parse(_ text: String) throws -> (String, UInt16) {
        do { return try RunCommand.parseListen(text) } catch let error as ValidationError {
            throw ValidationError(error.message.replacingOccurrences(of: "--listen", with: "--web"))
        }
    }

    /// Checks a web address against the same rules as the proxy's listener.
    static func checkExposure(host: String, allowLAN: Bool, hasCredentials: Bool, allowOpenProxy: Bool) throws {
        guard !RunCommand.isLoopback(host) else { return }
        if !allowLAN {
            throw ValidationError(
                "--web \(host) is not a loopback address: the view shows every captured header and body. "
                    + "Add --allow-lan (and --auth-file FILE with USER:PASSWORD) to serve it there.")
        }
        if !hasCredentials && !allowOpenProxy {
            throw ValidationError(
                "--web on \(host) without credentials shows the whole capture to everyone on the network. Give "
                    + "--auth-file FILE (or $\(ProxyCredentialSource.environmentVariable), or --auth) with "
                    + "USER:PASSWORD, or add --allow-open-proxy to serve it without.")
        }
    }
}
