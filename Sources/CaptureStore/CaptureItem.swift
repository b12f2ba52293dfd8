import ProxyTrace

/// One record for a capture: a finished exchange, or a CFNetwork-style trace record with the time it was made.
public enum CaptureItem: Sendable {
    case exchange(ExchangeSummary)
    case trace(DiagnosticsRecord, time: Double)
}

/// What a run records about itself in the capture (the `runs` row).
public struct CaptureRunInfo: Sendable, Equatable {
    /// Unix seconds.
    public var started: Double
    public var atsproxyVersion: String
    /// Bytes kept of each body (`--capture-bodies`).
    public var bodyLimit: Int
    /// The settings a reader needs to interpret the verdicts: policy source, iOS band, ATS mode, block style.
    public var settings: [String: String]

    public init(started: Double, atsproxyVersion: String, bodyLimit: Int, settings: [String: String]) {
        self.started = started
        self.atsproxyVersion = atsproxyVersion
        self.bodyLimit = bodyLimit
        self.settings = settings
    }
}
