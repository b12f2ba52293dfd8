import ATSReport
import CaptureStore
import WebView

/// Features built in other modules that the web view serves: one function each, wired here (and nowhere else) so
/// that `run --web` and `view` get them together. While one is nil its endpoint answers 404 and the page hides its
/// button (`/api/info`'s `features`).
enum WebViewWiring {
    static func extensions(policy: ReportPolicy) -> WebViewExtensions {
        WebViewExtensions(reportFindings: reportFindings(policy: policy), harExport: harExport)
    }

    /// `atsproxy report` over the capture against `policy` (missing and unused exceptions, the suggested minimal
    /// plist), for the Hosts tab and its plist download. It reads every observed origin of the capture: the page
    /// asks for it when the tab opens or on "Refresh", not on every new exchange.
    static func reportFindings(policy: ReportPolicy) -> @Sendable (CaptureReader) throws -> WebReport {
        { reader in
            let log = try ObservationLog(reading: reader)
            let report = PolicyReport(observations: log.observations, policy: policy)
            return WebReport(
                findingsJSON: Array(try report.renderJSON().utf8), readable: report.renderMarkdown(),
                suggestedPlist: report.suggestion.plistDocument)
        }
    }

    /// A HAR 1.2 file of the exchanges matching the list's filter, for its HAR download (not wired yet: the HAR
    /// writer is not on main).
    static let harExport: (@Sendable (CaptureReader, CaptureFilter) throws -> [UInt8])? = nil
}
