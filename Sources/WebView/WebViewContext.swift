import CaptureStore
import ProxyCore

/// What the page's header shows and what "copy as curl" needs: where the proxy listens, its policy and profile,
/// the capture it reads. For `atsproxy view`, the proxy fields come from the capture's run (they may be absent).
public struct WebViewContext: Sendable {
    /// `127.0.0.1:8080`, nil when unknown (a capture made by an older build, viewed later).
    public var proxyAddress: String?
    /// The URL for `curl -x`: `http://user:PASSWORD@127.0.0.1:8080` (the user name, never the password).
    public var proxyURL: String?
    /// The proxy's CA certificate (for `--cacert`).
    public var caPath: String?
    public var policy: String
    /// `iOS 26`, or the band used for the version asked for.
    public var iosProfile: String
    /// `enforce`, `annotate`, `off`.
    public var atsMode: String
    /// `tls` or `http` with `enforce`.
    public var blockStyle: String?
    public var capturePath: String
    /// The capture is a temporary file, deleted when the proxy exits (`--web` without `--capture`).
    public var captureIsTemporary: Bool
    /// Whether a proxy is writing the capture now (`run --web`), rather than a saved file being browsed.
    public var live: Bool
    public var version: String
    public var extensions: WebViewExtensions

    public init(
        proxyAddress: String?, proxyURL: String?, caPath: String?, policy: String, iosProfile: String,
        atsMode: String, blockStyle: String?, capturePath: String, captureIsTemporary: Bool, live: Bool,
        version: String, extensions: WebViewExtensions = WebViewExtensions()
    ) {
        self.proxyAddress = proxyAddress
        self.proxyURL = proxyURL
        self.caPath = caPath
        self.policy = policy
        self.iosProfile = iosProfile
        self.atsMode = atsMode
        self.blockStyle = blockStyle
        self.capturePath = capturePath
        self.captureIsTemporary = captureIsTemporary
        self.live = live
        self.version = version
        self.extensions = extensions
    }
}

/// The session's findings as `atsproxy report` gives them, for the summary tab.
public struct WebReport: Sendable {
    /// The findings as JSON (what `atsproxy report --format json` prints), for scripts.
    public var findingsJSON: [UInt8]
    /// The same as readable text (the report's Markdown), which the page shows.
    public var readable: String
    /// The suggested minimal `NSAppTransportSecurity` dictionary, as a whole plist document.
    public var suggestedPlist: String

    public init(findingsJSON: [UInt8], readable: String, suggestedPlist: String) {
        self.findingsJSON = findingsJSON
        self.readable = readable
        self.suggestedPlist = suggestedPlist
    }
}

/// Features built elsewhere that the view serves when they are wired in: one function each. Unset, their
/// endpoints answer `404` with a message and `/api/info` says they are off, so the page hides their buttons.
public struct WebViewExtensions: Sendable {
    /// The report over the whole capture (`/api/report`, `/api/report/plist`).
    public var reportFindings: (@Sendable (CaptureReader) throws -> WebReport)?
    /// A HAR 1.2 file of the exchanges matching the filter (`/api/har`).
    public var harExport: (@Sendable (CaptureReader, CaptureFilter) throws -> [UInt8])?
    /// `--mode transparent` or `wireguard`: the QUIC attempts refused so far (`/api/info`'s `quicAttemptsRefused`).
    public var quicAttemptsRefused: (@Sendable () -> Int)?
    /// `run --web`: the rules in force, listed, switched and made from exchanges (`/api/rules`).
    public var rules: WebRuleControl?
    /// `run --web`: the exchanges breakpoints hold, listed and released from the page (`/api/held`), and pushed to
    /// open pages on every change.
    public var holds: HoldRegistry?
    /// `run --web`: the proxy as its own client, for replay and compose (`POST /api/replay`).
    public var replay: ReplayClient?

    public init(
        reportFindings: (@Sendable (CaptureReader) throws -> WebReport)? = nil,
        harExport: (@Sendable (CaptureReader, CaptureFilter) throws -> [UInt8])? = nil
    ) {
        self.reportFindings = reportFindings
        self.harExport = harExport
    }
}
