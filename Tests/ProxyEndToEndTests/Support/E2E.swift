import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// What every end-to-end test shares, made once per test process: a temp folder, the built binary, the scripts,
/// the test PKI (openssl CLI) and one proxy CA directory (so each proxy start does not generate a CA).
final class E2E: Sendable {
    let root: URL
    let binary: String
    let packageRoot: URL
    let pki: URL
    let caDir: URL
    let origin: String
    let client: String

    /// The proxy's CA certificate, which clients trust.
    var proxyCA: String { caDir.appendingPathComponent("atsproxy-ca.pem").path }
    /// The test CA that signed the origins' certificates (given to the proxy with --trust-ca).
    var testCA: String { pki.appendingPathComponent("ca.pem").path }
    func cert(_ name: String) -> (cert: String, key: String) {
        (pki.appendingPathComponent("\(name).pem").path, pki.appendingPathComponent("\(name).key").path)
    }

    nonisolated(unsafe) private static var made: Result<E2E, any Error>?
    private static let lock = NSLock()

    /// The shared fixture; the first caller builds it (the others wait).
    static func shared() throws -> E2E {
        lock.lock()
        defer { lock.unlock() }
        if let made { return try made.get() }
        let result = Result { try E2E() }
        made = result
        return try result.get()
    }

    private init() throws {
        packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent()
        binary = packageRoot.appendingPathComponent(".build/debug/atsproxy").path
        guard FileManager.default.isExecutableFile(atPath: binary) else {
            throw HarnessError("\(binary) is missing: run `swift build` first")
        }
        root = FileManager.default.temporaryDirectory.appendingPathComponent("atsproxy-e2e-\(UUID().uuidString)")
        pki = root.appendingPathComponent("pki")
        caDir = root.appendingPathComponent("proxy-ca")
        try FileManager.default.createDirectory(at: pki, withIntermediateDirectories: true)
        E2E.cleanupPath = root.path
        atexit { if let path = E2E.cleanupPath { try? FileManager.default.removeItem(atPath: path) } }
        origin = originScript
        client = clientScript
        let p = try TestProcess("/bin/sh", [pkiScript], in: pki, name: "pki.sh")
        let deadline = ContinuousClock.now + .seconds(120)
        while p.isRunning, ContinuousClock.now < deadline { usleep(20_000) }
        p.stop()
        guard p.process.terminationStatus == 0, p.stdout.contains("ok") else {
            throw HarnessError("making the test PKI failed: \(p.stderr)")
        }
        // One proxy run creates the CA that every later proxy loads.
        let first = try TestProcess(
            binary, ["run", "--listen", "127.0.0.1:0", "--ca-dir", caDir.path, "--threads", "1"], in: root,
            name: "atsproxy-ca")
        let caDeadline = ContinuousClock.now + .seconds(30)
        while !first.stdout.contains("listening"), first.isRunning, ContinuousClock.now < caDeadline { usleep(20_000) }
        first.stop()
        guard FileManager.default.fileExists(atPath: caDir.appendingPathComponent("atsproxy-ca.pem").path) else {
            throw HarnessError("the first proxy run did not create its CA: \(first.stderr)")
        }
    }

    nonisolated(unsafe) static var cleanupPath: String?

    /// A fresh folder for one test's files.
    func folder() throws -> URL {
        let url = root.appendingPathComponent("t-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }
}

/// A running `atsproxy run` on 127.0.0.1 (port 0, read back from its banner).
final class Proxy: Sendable {
    let process: TestProcess
    let port: Int
    var url: String { "http://127.0.0.1:\(port)" }
    var address: String { "127.0.0.1:\(port)" }

    /// Starts the proxy with the shared CA, the test CA trusted upstream, and `arguments`.
    init(_ e2e: E2E, _ arguments: [String], environment: [String: String] = [:], in folder: URL) async throws {
        let args = ["run", "--listen", "127.0.0.1:0", "--ca-dir", e2e.caDir.path, "--trust-ca", e2e.testCA] + arguments
        process = try TestProcess(e2e.binary, args, environment: environment, in: folder, name: "atsproxy")
        port = try await process.waitForOutput { text -> Int? in
            guard let line = text.split(separator: "\n").first(where: { $0.contains("ATSProxy listening on 127.0.0.1:") }),
                let portText = line.split(separator: ":").last?.split(separator: " ").first
            else { return nil }
            return Int(portText)
        }
    }

    /// Open file descriptors and resident memory (KiB) of the proxy, from /proc.
    func resources() throws -> (fds: Int, rssKiB: Int) {
        let fds = try FileManager.default.contentsOfDirectory(atPath: "/proc/\(process.pid)/fd").count
        let status = try String(contentsOfFile: "/proc/\(process.pid)/status", encoding: .utf8)
        let line = status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") } ?? ""
        let kib = Int(line.split(separator: " ").dropFirst().first ?? "") ?? -1
        return (fds, kib)
    }
}

/// A running Python test origin on 127.0.0.1.
final class Origin: Sendable {
    let process: TestProcess
    let port: Int

    /// `tls`: the name of a test certificate to serve (nil: plain HTTP). `tls10`: TLS 1.0 only. `tls12`: TLS 1.2 at
    /// most (its session is made inside the handshake, not by a ticket after it).
    init(_ e2e: E2E, tls: String? = nil, tls10: Bool = false, tls12: Bool = false, in folder: URL) async throws {
        var args = [e2e.origin]
        if let tls {
            let (cert, key) = e2e.cert(tls)
            args += ["--tls", cert, key] + (tls10 ? ["--tls10"] : []) + (tls12 ? ["--tls12"] : [])
        }
        process = try TestProcess("/usr/bin/python3", args, in: folder, name: "origin-\(tls ?? "plain")")
        port = try await process.waitForOutput { text in
            text.split(separator: "\n").first { $0.hasPrefix("PORT ") }.flatMap { Int($0.dropFirst(5)) }
        }
    }

    /// A `--map` argument sending `host` here.
    func map(_ host: String) -> [String] { ["--map", "\(host)=127.0.0.1:\(port)"] }
}

/// One curl run: exit status, response headers (the last response's), body file and stderr.
struct CurlResult {
    var exit: Int32
    var headerText: String
    var body: URL
    var stderr: String
    /// What curl printed for `-w`, a line per transfer.
    var writeOut: [String] = []

    /// Status code of the final response, if any.
    var status: Int? {
        let lines = headerText.split(separator: "\r\n").filter { $0.hasPrefix("HTTP/") }
        return lines.last.flatMap { $0.split(separator: " ").dropFirst().first.flatMap { Int($0) } }
    }

    /// The first value of `name` in the final response.
    func header(_ name: String) -> String? {
        let blocks = headerText.components(separatedBy: "\r\n\r\n").filter { !$0.isEmpty }
        guard let last = blocks.last else { return nil }
        for line in last.split(separator: "\r\n") {
            guard let colon = line.firstIndex(of: ":") else { continue }
            if line[..<colon].lowercased() == name.lowercased() {
                return line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            }
        }
        return nil
    }

    var bodyText: String { (try? String(contentsOf: body, encoding: .utf8)) ?? "" }
}

/// Runs curl (bounded by --max-time) with `arguments`, writing headers and body into `folder`.
func curl(_ arguments: [String], environment: [String: String] = [:], in folder: URL) async throws -> CurlResult {
    let tag = UUID().uuidString.prefix(8)
    let headers = folder.appendingPathComponent("curl-\(tag).headers")
    let body = folder.appendingPathComponent("curl-\(tag).body")
    let r = try await runProcess(
        "/usr/bin/curl",
        ["-sS", "--max-time", "60", "-D", headers.path, "-o", body.path] + arguments,
        environment: environment, in: folder, timeout: .seconds(70))
    let headerText = (try? String(contentsOf: headers, encoding: .utf8)) ?? ""
    return CurlResult(
        exit: r.status, headerText: headerText, body: body, stderr: r.stderr,
        writeOut: r.stdout.split(separator: "\n").map(String.init))
}

/// SHA-256 of a file, by the sha256sum CLI.
func sha256(of file: URL, in folder: URL) async throws -> String {
    let r = try await runProcess("/usr/bin/sha256sum", [file.path], in: folder)
    guard r.status == 0, let hex = r.stdout.split(separator: " ").first else {
        throw HarnessError("sha256sum \(file.path) failed: \(r.stderr)")
    }
    return String(hex)
}

/// Runs the Python test client against `proxy` and decodes its JSON line.
func pythonClient(_ e2e: E2E, _ proxy: Proxy, _ arguments: [String], in folder: URL, timeout: Duration = .seconds(120))
    async throws -> [String: Any]
{
    let r = try await runProcess(
        "/usr/bin/python3", [e2e.client, String(proxy.port), e2e.proxyCA] + arguments, in: folder, timeout: timeout)
    guard r.status == 0, let line = r.stdout.split(separator: "\n").last,
        let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
    else { throw HarnessError("client.py \(arguments) failed (\(r.status)): \(r.stdout)\n\(r.stderr.suffix(3000))") }
    return object
}
