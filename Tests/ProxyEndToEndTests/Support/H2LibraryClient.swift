import Foundation

/// Runs `h2LibraryClientScript` through `proxy` and decodes its JSON line.
func runH2LibraryClient(
    _ e2e: E2E, _ proxy: Proxy, host: String, alpn: [String], mode: String, _ arguments: [String],
    extraHeaders: [[String]] = [], in folder: URL
) async throws -> [String: Any] {
    let script = h2LibraryClientScript
    let extra = String(decoding: try JSONSerialization.data(withJSONObject: extraHeaders), as: UTF8.self)
    let r = try await runProcess(
        "/usr/bin/python3", [script, String(proxy.port), e2e.proxyCA, host, alpn.joined(separator: ","), mode] + arguments,
        environment: ["H2_EXTRA_HEADERS": extra], in: folder, timeout: .seconds(60))
    guard r.status == 0, let line = r.stdout.split(separator: "\n").last,
        let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
    else { throw HarnessError("h2libclient.py \(mode) failed (\(r.status)): \(r.stdout)\n\(r.stderr.suffix(3000))") }
    return object
}
