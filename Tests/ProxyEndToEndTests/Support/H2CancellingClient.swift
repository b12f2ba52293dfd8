import Foundation

/// Runs `h2CancellingClientScript` through `proxy` and decodes its JSON line.
func runH2CancellingClient(
    _ e2e: E2E, _ proxy: Proxy, host: String, path: String, count: Int, batch: Int, in folder: URL
) async throws -> [String: Any] {
    let script = h2CancellingClientScript
    let r = try await runProcess(
        "/usr/bin/python3", [script, String(proxy.port), e2e.proxyCA, host, path, String(count), String(batch)],
        in: folder, timeout: .seconds(120))
    guard r.status == 0, let line = r.stdout.split(separator: "\n").last,
        let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
    else { throw HarnessError("h2cancelclient.py failed (\(r.status)): \(r.stdout)\n\(r.stderr.suffix(3000))") }
    return object
}
