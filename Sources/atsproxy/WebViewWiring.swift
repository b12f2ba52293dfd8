import ATSReport
import CaptureExport
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

    /// A HAR 1.2 file of the exchanges matching the list's filter (what `atsproxy har --filter` writes), for its HAR
    /// download. The answer is built in memory, so it is bounded: past `harLimit` bytes the download fails with a
    /// message pointing at `atsproxy har`, which streams to a file.
    static let harExport: (@Sendable (CaptureReader, CaptureFilter) throws -> [UInt8])? = { reader, filter in
        var bytes: [UInt8] = []
        let document = HARDocument(creatorVersion: ATSProxyCommand.configuration.version, filter: filter)
        try document.write(from: reader) { piece in
            bytes += piece.utf8
            if bytes.count > harLimit { throw HARTooLarge() }
        }
        return bytes
    }

    static let harLimit = 256 << 20

    struct HARTooLarge: Error, CustomStringConvertible {
        var description: String {
            "the HAR of these exchanges is over \(harLimit >> 20) MiB: narrow the filter, or write it with "
                + "atsproxy har CAPTURE -o FILE"
        }
    }
}
