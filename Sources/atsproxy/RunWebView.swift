import ATSReport
import CaptureStore
import Foundation
import ProxyCore
import ProxyEventLoop
import WebView

/// `run --web`: the web view of the run's capture, served on the proxy's event loops with the live feed.
enum RunWebView {
    /// Opens the web view (nothing without `--web`) and returns the banner's line for it. Its readers are handed to
    /// `outputs`, which closes them before the capture.
    static func open(
        _ command: RunCommand, _ start: RunStart, _ policy: RunPolicy, _ listeners: RunListeners,
        environment: ProxyEnvironment, outputs: RunOutputs
    ) throws -> String {
        guard let webAddress = start.webAddress, let capture = outputs.capture, let feed = outputs.feed else {
            return ""
        }
        var context = WebViewContext(
            proxyAddress: listeners.networkAddress ?? "\(listeners.shownHost):\(listeners.listener.port)",
            proxyURL: listeners.proxyURL, caPath: start.caFile, policy: policy.source,
            iosProfile: command.profileText(start.profile), atsMode: command.ats.rawValue,
            blockStyle: command.ats == .enforce ? command.block.rawValue : nil, capturePath: capture.path,
            captureIsTemporary: outputs.temporaryCapture != nil, live: true,
            version: ATSProxyCommand.configuration.version,
            extensions: WebViewWiring.extensions(
                policy: ReportPolicy(
                    atsDictionary: policy.atsDictionary, source: policy.source,
                    options: command.readings.policyOptions(profile: start.profile))))
        // The Rules panel: `--web` always makes a rule book (RuleOptions.ruleBook). Bodies mapped from the view go to
        // a folder of the proxy's own beside its CA (made private to the user: bodies may hold secrets).
        if let book = environment.rules {
            context.extensions.rules = WebViewRules.control(
                book: book,
                mapLocalDirectory: URL(fileURLWithPath: command.caDir).appendingPathComponent("map-local").path)
        }
        // Held exchanges (breakpoints): listed and released from the page, pushed to it as they change.
        context.extensions.holds = environment.holds
        context.extensions.replay = replayClient(start, listeners)
        if start.modes.transparent != nil || start.modes.wireguard != nil {
            context.extensions.quicAttemptsRefused = { [environment] in environment.quicRefusals.count }
        }
        let web: Listener
        do {
            let reader = try CaptureReader(path: capture.path)
            let streamReader = try CaptureReader(path: capture.path)
            let exportReader = try CaptureReader(path: capture.path)
            outputs.webReaders = [reader, streamReader, exportReader]
            let server = WebServer(
                router: WebRouter(
                    reader: reader, streamReader: streamReader, exportReader: exportReader, context: context),
                feed: feed, credentials: start.credentials)
            web = try server.listen(on: listeners.group, host: webAddress.0, port: webAddress.1)
        } catch let error as IOError {
            throw failure(
                "atsproxy run: error: --web: \(RunCommand.listenFailure(error, host: webAddress.0, port: webAddress.1))")
        } catch {
            throw failure("atsproxy run: error: --web: \(error)")
        }
        let webHost = webAddress.0.contains(":") ? "[\(webAddress.0)]" : webAddress.0
        let kept = outputs.temporaryCapture != nil
            ? " (a temporary capture, deleted at exit; --capture FILE keeps it)" : ""
        return "\nWeb:     http://\(webHost):\(web.port)/\(kept)"
    }

    /// Replay and compose: the proxy as its own client on its explicit-proxy listener (none in a transparent-only
    /// run). A wildcard or loopback listener is reached on 127.0.0.1, where the proxy reads the replay marker; a
    /// listener on one LAN address is reached there, and its replays are then not marked (docs/web.md).
    static func replayClient(_ start: RunStart, _ listeners: RunListeners) -> ReplayClient? {
        guard let (host, _) = start.modes.regular else { return nil }
        let connectHost = host == "0.0.0.0" || host == "::" || host.isEmpty ? "127.0.0.1" : host
        let authorization = start.credentials.map {
            "Basic " + Data("\($0.user):\($0.password)".utf8).base64EncodedString()
        }
        return ReplayClient(
            proxyHost: connectHost, proxyPort: Int(listeners.listener.port),
            caPEM: try? String(contentsOfFile: start.caFile, encoding: .utf8), proxyAuthorization: authorization)
    }
}
