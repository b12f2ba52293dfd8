import Foundation

/// The HTTP/2 scene: an nghttpd origin (h2 only) serving random files for `host`, and a proxy mapping it.
struct H2Stage {
    let e2e: E2E
    let folder: URL
    let htdocs: Htdocs
    let origin: NghttpdOrigin
    let proxy: Proxy
    let host: String

    /// `files`: name → size. `certificate`/`host`: the test certificate nghttpd serves and the host it is for.
    /// `originArguments`: extra nghttpd options.
    init(
        files: [String: Int], certificate: String = "good", host: String = "good.test", originArguments: [String] = [],
        _ extra: [String] = []
    ) async throws {
        e2e = try E2E.shared()
        folder = try e2e.folder()
        self.host = host
        htdocs = try await Htdocs(in: folder, files: files)
        origin = try await NghttpdOrigin(e2e, certificate: certificate, htdocs: htdocs, arguments: originArguments, in: folder)
        proxy = try await Proxy(e2e, origin.map(host) + extra, in: folder)
    }

    func url(_ name: String) -> String { "https://\(host)/\(name)" }

    /// curl through the proxy (see `curlThrough`).
    func curl(_ arguments: [String], maxTime: Int = 60) async throws -> CurlRun {
        try await curlThrough(e2e, proxy, arguments, in: folder, maxTime: maxTime)
    }

    /// curl through the proxy with its headers and body kept (see `curl(_:environment:in:)`).
    func curlResult(_ arguments: [String]) async throws -> CurlResult {
        try await ProxyEndToEndTests.curl(["-x", proxy.url, "--cacert", e2e.proxyCA] + arguments, in: folder)
    }

    /// A curl left running in the background (for load during another step); stopped when released.
    func backgroundCurl(_ arguments: [String], maxTime: Int = 30) throws -> TestProcess {
        try TestProcess(
            "/usr/bin/curl",
            ["-sS", "--max-time", String(maxTime), "-x", proxy.url, "--cacert", e2e.proxyCA] + arguments,
            in: folder, name: "curl-background")
    }

    /// Runs the raw h2 Python client (`h2ClientScript`) through the proxy to `host` in `mode`.
    func h2Client(_ mode: String, _ arguments: [String] = []) async throws -> [String: Any] {
        try await runH2Client(e2e, proxy, host: host, mode: mode, arguments, in: folder)
    }
}

/// Runs `h2ClientScript` through `proxy` and decodes its JSON line.
func runH2Client(
    _ e2e: E2E, _ proxy: Proxy, host: String, mode: String, _ arguments: [String] = [], in folder: URL
) async throws -> [String: Any] {
    let script = h2ClientScript
    let r = try await runProcess(
        "/usr/bin/python3", [script, String(proxy.port), e2e.proxyCA, host, mode] + arguments, in: folder, timeout: .seconds(30))
    guard r.status == 0, let line = r.stdout.split(separator: "\n").last,
        let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
    else { throw HarnessError("h2client.py \(mode) failed (\(r.status)): \(r.stdout)\n\(r.stderr.suffix(3000))") }
    return object
}
