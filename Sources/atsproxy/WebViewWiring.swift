import CaptureStore
import WebView

/// Features built in other modules that the web view serves once they are part of the build: one function each,
/// wired here (and nowhere else) so that `run --web` and `view` get them together. While one is nil its endpoint
/// answers 404 and the page hides its button (`/api/info`'s `features`).
enum WebViewWiring {
    static func extensions() -> WebViewExtensions {
        WebViewExtensions(reportFindings: reportFindings, harExport: harExport)
    }

    /// `atsproxy report`'s findings over the capture (missing and unused exceptions, the suggested minimal plist),
    /// for the Hosts tab and its plist download.
    static let reportFindings: (@Sendable (CaptureReader) throws -> WebReport)? = nil

    /// A HAR 1.2 file of the exchanges matching the list's filter, for its HAR download.
    static let harExport: (@Sendable (CaptureReader, CaptureFilter) throws -> [UInt8])? = nil
}
