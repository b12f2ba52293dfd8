// A Swift client for the end-to-end tests: one GET with Foundation's URLSession, which on Linux is libcurl under
// FoundationNetworking. It takes its proxy from the environment (`HTTPS_PROXY`, `http_proxy`) and trusts only the
// system's CA bundle, as an app's test suite on Linux would.
//
// Usage: urlsession-probe URL BODY_FILE
// Prints one JSON object: {"status", "headers"} for a response (its body written to BODY_FILE), or
// {"error": {"domain", "code", "description"}} when the task failed.
//
// It uses a completion handler, whose error is an NSError already: with the Foundation of Swift 6.3 on Linux, the
// async `data(from:)` throws a `URLError`, and bridging that to NSError (`catch let error as NSError`) after a
// failed handshake through the proxy never returned.
import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The task's result, written by the completion handler before it signals and read after the wait.
final class Outcome: @unchecked Sendable {
    var report: [String: Any] = [:]
}

let arguments = CommandLine.arguments
guard arguments.count == 3, let url = URL(string: arguments[1]) else {
    FileHandle.standardError.write(Data("usage: urlsession-probe URL BODY_FILE\n".utf8))
    exit(2)
}
let bodyFile = URL(fileURLWithPath: arguments[2])
let configuration = URLSessionConfiguration.ephemeral
configuration.timeoutIntervalForRequest = 60
let session = URLSession(configuration: configuration)
let outcome = Outcome()
let done = DispatchSemaphore(value: 0)
session.dataTask(with: url) { data, response, error in
    defer { done.signal() }
    if let error = error as NSError? {
        outcome.report["error"] = [
            "domain": error.domain, "code": error.code, "description": error.localizedDescription,
        ]
        return
    }
    do {
        try (data ?? Data()).write(to: bodyFile)
    } catch {
        outcome.report["error"] = ["domain": "probe", "code": 0, "description": "cannot write the body: \(error)"]
        return
    }
    if let http = response as? HTTPURLResponse {
        outcome.report["status"] = http.statusCode
        var headers: [String: String] = [:]
        for (name, value) in http.allHeaderFields { headers["\(name)".lowercased()] = "\(value)" }
        outcome.report["headers"] = headers
    }
}.resume()
done.wait()
do {
    let json = try JSONSerialization.data(withJSONObject: outcome.report, options: [.sortedKeys])
    FileHandle.standardOutput.write(json + Data("\n".utf8))
} catch {
    FileHandle.standardError.write(Data("urlsession-probe: cannot encode the report: \(error)\n".utf8))
    exit(1)
}
