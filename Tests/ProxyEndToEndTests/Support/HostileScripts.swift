import Foundation

/// Starts the hostile origin in `mode`, plain or with the test certificate `tls`.
func hostileOrigin(_ e2e: E2E, mode: String, tls: String? = nil, in folder: URL) async throws -> TestProcess {
    var args = [hostileOriginScript, mode]
    if let tls {
        let (cert, key) = e2e.cert(tls)
        args += ["--tls", cert, key]
    }
    return try TestProcess("/usr/bin/python3", args, in: folder, name: "hostile-\(mode)")
}

/// The port a hostile origin printed.
func port(of origin: TestProcess) async throws -> Int {
    try await origin.waitForOutput { text in
        text.split(separator: "\n").first { $0.hasPrefix("PORT ") }.flatMap { Int($0.dropFirst(5)) }
    }
}

/// Runs the slow client against `proxy` and decodes its JSON line.
func slowClient(_ proxy: Proxy, mode: String, host: String, in folder: URL) async throws -> [String: Any] {
    let r = try await runProcess(
        "/usr/bin/python3", [slowClientScript, String(proxy.port), mode, host], in: folder, timeout: .seconds(40))
    guard r.status == 0, let line = r.stdout.split(separator: "\n").last,
        let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
    else { throw HarnessError("slow-client.py \(mode) failed (\(r.status)): \(r.stdout)\n\(r.stderr.suffix(2000))") }
    return object
}
