import ATSPolicy
import ATSReport
import CaptureExport
import CaptureStore
import Foundation
import FuzzCapture
import FuzzSupport
import HTTP1Core
import WebView

// Input: a control byte choosing the method, then a request target, as anyone who reaches the web view can send one
// (its HTTP/1 head is the http1 harness's). The router over a capture answers it: a target that is not one is
// refused before routing; everything else gets an answer below 500 (a 5xx would mean the router could not read the
// capture or build a report or HAR for some query, as SQL the filter language compiled badly did), and every 200
// whose type is JSON (lists, counts, one exchange, hosts, the report, HAR) parses as JSON.

private let router = WebRouter(
    reader: FuzzCapture.reader,
    context: WebViewContext(
        proxyAddress: "127.0.0.1:8080", proxyURL: "http://127.0.0.1:8080", caPath: "certs/atsproxy-ca.pem",
        policy: "Apple's defaults", iosProfile: "iOS 26", atsMode: "enforce", blockStyle: "tls",
        capturePath: FuzzCapture.path, captureIsTemporary: false, live: true, version: "fuzz",
        extensions: WebViewExtensions(
            reportFindings: { reader in
                // As `run --web` wires it (atsproxy's WebViewWiring), against Apple's defaults.
                let report = PolicyReport(
                    observations: try ObservationLog(reading: reader).observations,
                    policy: ReportPolicy(atsDictionary: nil, source: "Apple's defaults", options: PolicyOptions()))
                return WebReport(
                    findingsJSON: Array(try report.renderJSON().utf8), readable: report.renderMarkdown(),
                    suggestedPlist: report.suggestion.plistDocument)
            },
            harExport: { reader, filter in
                var bytes: [UInt8] = []
                try HARDocument(creatorVersion: "fuzz", filter: filter).write(from: reader) { bytes += $0.utf8 }
                return bytes
            })))

private let methods = ["GET", "HEAD", "POST", "DELETE"]

/// One input; see above.
func fuzzWebRouter(_ data: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    var input = FuzzInput(data, count)
    let method = methods[Int(input.control()) % methods.count]
    let target = String(decoding: input.payload, as: UTF8.self)
    guard let request = WebRequest(head: HTTPRequestHead(method: method, target: target)) else { return 0 }
    guard case .respond(let response) = router.route(request) else { return 0 }
    invariant(
        response.status < 500,
        "\(method) \(String(reflecting: target)) was answered \(response.status): \(String(decoding: response.body, as: UTF8.self))")
    if response.status == 200, method == "GET", response.headers[first: "content-type"]?.hasPrefix("application/json") == true {
        invariant(
            (try? JSONSerialization.jsonObject(with: Data(response.body), options: [.fragmentsAllowed])) != nil,
            "\(String(reflecting: target)): the JSON answer does not parse")
    }
    return 0
}
