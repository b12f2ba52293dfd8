import Foundation
import Testing

/// What `urlsession-probe` reported for one GET.
struct URLSessionResult {
    var report: [String: Any]
    var body: URL

    var status: Int? { report["status"] as? Int }
    func header(_ name: String) -> String? { (report["headers"] as? [String: String])?[name.lowercased()] }
    var errorCode: Int? { (report["error"] as? [String: Any])?["code"] as? Int }
    var errorDescription: String { ((report["error"] as? [String: Any])?["description"] as? String) ?? "" }
}

/// Runs Foundation's URLSession (`urlsession-probe`) with `environment` (its proxy variables), trusting only the
/// proxy's CA. URLSession on Linux reads trust from the system bundle alone (libcurl's compiled-in
/// /etc/ssl/certs/ca-certificates.crt; no variable changes it), so the probe runs in a private mount namespace where
/// that file is the proxy's CA: what a user does with `update-ca-certificates`, without touching this machine's.
func urlSession(_ e2e: E2E, _ url: String, environment: [String: String], in folder: URL) async throws
    -> URLSessionResult
{
    let probe = e2e.packageRoot.appendingPathComponent(".build/debug/urlsession-probe").path
    let body = folder.appendingPathComponent("urlsession-\(UUID().uuidString.prefix(8)).body")
    let bundle = "/etc/ssl/certs/ca-certificates.crt"
    // -r maps the caller to root inside a new user namespace, so the bind mount needs no privilege outside it.
    let r = try await runProcess(
        "/usr/bin/unshare",
        ["-rm", "/bin/sh", "-c", "mount --bind \"$1\" \(bundle) && shift && exec \"$@\"", "probe-sandbox",
         e2e.proxyCA, probe, url, body.path],
        environment: environment.merging(["NO_PROXY": "", "no_proxy": ""]) { mine, _ in mine }, in: folder,
        timeout: .seconds(90))
    guard r.status == 0, let line = r.stdout.split(separator: "\n").last,
        let report = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
    else {
        throw HarnessError("urlsession-probe (in unshare -rm) exited \(r.status): \(r.stdout)\n\(r.stderr)")
    }
    return URLSessionResult(report: report, body: body)
}

@Suite("Swift's URLSession on Linux through the proxy")
struct URLSessionTests {
    @Test("HTTPS_PROXY and the proxy's CA in the system bundle: an intercepted 200, byte-exact")
    func intercepted() async throws {
        let stage = try await Stage()
        let r = try await urlSession(
            stage.e2e, "https://\(Stage.httpsHost)/bytes/300000", environment: ["HTTPS_PROXY": stage.proxy.url],
            in: stage.folder)
        #expect(r.status == 200, "\(r.report)")
        let announced = try #require(r.header("X-Body-SHA256"), "\(r.report)")
        #expect(try await sha256(of: r.body, in: stage.folder) == announced)
        // The exchange went through the proxy (its console line), not around it.
        _ = try await stage.proxy.process.waitForOutput { $0.contains("good.test/bytes/300000") ? true : nil }
    }

    @Test("http_proxy and a cleartext load ATS refuses: 403 with -1022")
    func cleartextBlocked() async throws {
        let stage = try await Stage()
        // good.test has no exception for cleartext under config/media-server.plist.
        let r = try await urlSession(
            stage.e2e, "http://\(Stage.httpsHost)/bytes/10", environment: ["http_proxy": stage.proxy.url],
            in: stage.folder)
        #expect(r.status == 403, "\(r.report)")
        #expect(r.header("X-ATS-Error") == "-1022 NSURLErrorAppTransportSecurityRequiresSecureConnection")
    }

    @Test("A TLS 1.0-only origin: --block http gives URLSession a 502 with -1200 and -9836; --block tls fails the task")
    func tls10Blocked() async throws {
        let e2e = try E2E.shared()
        let folder = try e2e.folder()
        let origin = try await Origin(e2e, tls: "tls10", tls10: true, in: folder)
        defer { withExtendedLifetime(origin) {} }  // the origin stops when released
        let http = try await Proxy(e2e, origin.map("tls10.test") + ["--block", "http"], in: folder)
        let answered = try await urlSession(
            e2e, "https://tls10.test/", environment: ["HTTPS_PROXY": http.url], in: folder)
        #expect(answered.status == 502, "\(answered.report)")
        #expect(answered.header("X-ATS-Error") == "-1200 NSURLErrorSecureConnectionFailed")
        #expect(answered.header("X-ATS-SSL-Error") == "-9836 errSSLPeerProtocolVersion")

        let tls = try await Proxy(e2e, origin.map("tls10.test") + ["--block", "tls"], in: folder)
        let failed = try await urlSession(e2e, "https://tls10.test/", environment: ["HTTPS_PROXY": tls.url], in: folder)
        #expect(failed.status == nil, "\(failed.report)")
        #expect(failed.errorDescription.contains("alert protocol version"), "\(failed.report)")
    }
}
