import ATSPolicy
import ATSReport
import ArgumentParser
import CaptureStore
import Dispatch
import Foundation
import PolicyLoader
import ProxyEventLoop
import WebView

/// `atsproxy view FILE`: the web view over a saved capture, without proxying. A capture that a running proxy is
/// still writing shows its new exchanges as they are committed.
struct ViewCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "view",
        abstract: "Browse a capture file in the web view, without running the proxy.",
        discussion: """
            Serves the same page and JSON API as `run --web` (docs/web.md) over FILE, read-only, until Ctrl-C.
            """)

    @Argument(help: "A capture file (run --capture), or a postgresql:// team store (followed by polling).")
    var file: String

    @OptionGroup var store: TeamStoreOptions

    @Option(
        help: "The app's ATS policy for the Hosts tab's report (as `report --plist`); without it, Apple's defaults.")
    var plist: String?

    @OptionGroup var readings: PolicyReadingOptions

    @Option(
        name: .customLong("web"),
        help: ArgumentHelp("Address and port to serve the page on.", valueName: "ADDR:PORT"))
    var web: String = WebOptions.defaultAddress

    @Flag(
        name: .customLong("allow-lan"),
        help: "Allow a non-loopback --web address; needs credentials or --allow-open-proxy.")
    var allowLAN = false

    @Flag(name: .customLong("allow-open-proxy"), help: "With --allow-lan, serve the capture without credentials.")
    var allowOpenProxy = false

    @Option(
        help: ArgumentHelp(
            "Require Authorization: Basic USER:PASSWORD (visible in ps: prefer --auth-file).",
            valueName: "USER:PASSWORD"))
    var auth: String?

    @Option(
        name: .customLong("auth-file"),
        help: ArgumentHelp("Read USER:PASSWORD from the first line of FILE.", valueName: "FILE"))
    var authFile: String?

    private var credentialSource: ProxyCredentialSource {
        ProxyCredentialSource(option: auth, file: authFile,
                              environment: ProcessInfo.processInfo.environment)
    }

    func validate() throws {
        let (host, _) = try WebOptions.parse(web == WebOptions.defaultMarker ? WebOptions.defaultAddress : web)
        try WebOptions.checkExposure(
            host: host, allowLAN: allowLAN, hasCredentials: try credentialSource.credentials() != nil,
            allowOpenProxy: allowOpenProxy)
    }

    func run() throws {
        let (host, port) = try WebOptions.parse(web == WebOptions.defaultMarker ? WebOptions.defaultAddress : web)
        let credentials = try credentialSource.credentials()
        let reader: CaptureReader
        let streamReader: CaptureReader
        let exportReader: CaptureReader
        let runs: [CapturedRun]
        try store.check(location: file, command: "view")
        // The team store: a capture file that follows it, polled every `PostgresMirror` interval.
        let mirror = try PostgresLocation(file).map { source in
            try startMirror(source, selection: store.selection(filter: CaptureFilter()))
        }
        let path = mirror?.path ?? file
        let shown = mirror?.source.redacted ?? file
        do {
            reader = try CaptureReader(path: path)
            streamReader = try CaptureReader(path: path)
            exportReader = try CaptureReader(path: path)
            runs = try reader.runs()
        } catch {
            throw failure("atsproxy view: error: \(error)", status: 2)
        }
        let settings = runs.last?.settings ?? [:]
        // The report judges against --plist (else Apple's defaults) on the iOS the capture was made with.
        var atsDictionary: PlistValue? = AppleDefaultPolicy.atsDictionary
        var policySource = AppleDefaultPolicy.source
        if let plist {
            do {
                let loaded = try PolicyLoader.load(path: plist)
                atsDictionary = loaded.atsDictionary
                policySource = loaded.sourceDescription
            } catch {
                throw failure("atsproxy view: error: \(error)", status: 2)
            }
        }
        let profile = settings["ios"].flatMap { Int($0) }.flatMap(IOSProfile.band(for:)) ?? IOSProfile.newest
        let reportPolicy = ReportPolicy(
            atsDictionary: atsDictionary, source: policySource, options: readings.policyOptions(profile: profile))
        let context = WebViewContext(
            proxyAddress: nil, proxyURL: settings["listen"].map { "http://\($0)" }, caPath: settings["ca"],
            policy: settings["policy"] ?? "unknown", iosProfile: settings["ios"].map { "iOS \($0)" } ?? "unknown",
            atsMode: settings["ats"] ?? "unknown", blockStyle: settings["ats"] == "enforce" ? settings["block"] : nil,
            capturePath: shown, captureIsTemporary: false, live: false,
            version: ATSProxyCommand.configuration.version, extensions: WebViewWiring.extensions(policy: reportPolicy))
        let group = try EventLoopGroup(loopCount: 1)
        let server = WebServer(
            router: WebRouter(
                reader: reader, streamReader: streamReader, exportReader: exportReader, context: context),
            feed: LiveFeed(), credentials: credentials)
        let listener: Listener
        do { listener = try server.listen(on: group, host: host, port: port) } catch {
            group.shutdownGracefully(timeout: .zero)
            throw failure("atsproxy view: error: --web: \(RunCommand.listenFailure(error, host: host, port: port))")
        }
        let done = DispatchSemaphore(value: 0)
        let signals = ShutdownSignals { _ in done.signal() }
        let shownHost = host.contains(":") ? "[\(host)]" : host
        let count: Int
        do { count = try reader.count() } catch { throw failure("atsproxy view: error: \(error)", status: 2) }
        FileHandle.standardOutput.write(Data("""
            ATSProxy view of \(shown) (\(count) exchange\(count == 1 ? "" : "s"), \(runs.count) \
            run\(runs.count == 1 ? "" : "s"))
            Web:     http://\(shownHost):\(listener.port)/

            """.utf8))
        if let mirror { Self.follow(mirror) }
        done.wait()
        signals.cancel()
        group.shutdownGracefully(timeout: .seconds(1))
    }

    /// Copies the selection of the store into a temporary capture file, with progress on a terminal.
    private func startMirror(_ source: PostgresLocation, selection: TeamStoreSelection) throws -> PostgresMirror {
        let mirror = PostgresMirror(source: source, selection: selection, path: try TemporaryCaptures.path(command: "view"))
        let progress = TerminalProgress(verb: "reading \(source.redacted)")
        defer { progress.finish() }
        do { try mirror.start(progress: progress.update) } catch {
            throw failure("atsproxy view: error: \(error)", status: 2)
        }
        return mirror
    }

    /// Polls the store every `pollInterval` seconds on a thread of its own until the process exits; an
    /// unreachable store is said once per outage, and the view goes on showing what it has.
    static func follow(_ mirror: PostgresMirror) {
        let thread = Thread {
            var failing = false
            while true {
                usleep(useconds_t(pollInterval * 1_000_000))
                do {
                    try mirror.poll()
                    if failing { FileHandle.standardError.write(Data("atsproxy view: the store answers again\n".utf8)) }
                    failing = false
                } catch {
                    if !failing {
                        FileHandle.standardError.write(Data(
                            "atsproxy view: \(error); showing what was read, trying again every \(Int(pollInterval)) s\n".utf8))
                    }
                    failing = true
                }
            }
        }
        thread.name = "atsproxy.view.poll"
        thread.start()
    }

    /// Seconds between two polls of the team store.
    static let pollInterval = 2.0
}
