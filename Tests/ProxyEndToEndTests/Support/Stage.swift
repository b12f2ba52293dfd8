import Foundation

/// The usual scene: an HTTPS origin for `good.test` (certificate from the test CA), a plain origin for
/// `media-server.example.com` (allowed over http:// by config/media-server.plist), and a proxy mapping both.
struct Stage {
    static let httpsHost = "good.test"
    static let plainHost = "media-server.example.com"

    let e2e: E2E
    let folder: URL
    let https: Origin
    let plain: Origin
    let proxy: Proxy

    init(_ extra: [String] = [], environment: [String: String] = [:]) async throws {
        e2e = try E2E.shared()
        folder = try e2e.folder()
        https = try await Origin(e2e, tls: "good", in: folder)
        plain = try await Origin(e2e, in: folder)
        let plist = e2e.packageRoot.appendingPathComponent("config/media-server.plist").path
        proxy = try await Proxy(
            e2e, ["--plist", plist] + https.map(Self.httpsHost) + plain.map(Self.plainHost) + extra,
            environment: environment, in: folder)
    }

    /// curl through the proxy, trusting only the proxy's CA.
    func curl(_ arguments: [String], environment: [String: String] = [:]) async throws -> CurlResult {
        try await ProxyEndToEndTests.curl(
            ["-x", proxy.url, "--cacert", e2e.proxyCA] + arguments, environment: environment, in: folder)
    }

    func python(_ arguments: [String], timeout: Duration = .seconds(120)) async throws -> [String: Any] {
        try await pythonClient(e2e, proxy, arguments, in: folder, timeout: timeout)
    }

    /// True when curl's body file has exactly the bytes the origin announced in X-Body-SHA256.
    func matchesAnnouncedChecksum(_ r: CurlResult) async throws -> Bool {
        guard let announced = r.header("X-Body-SHA256") else { return false }
        return try await sha256(of: r.body, in: folder) == announced
    }
}
