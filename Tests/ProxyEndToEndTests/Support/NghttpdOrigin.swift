import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A folder of random files for an h2 origin to serve, made with `head -c N /dev/urandom` (one shell run).
struct Htdocs {
    let folder: URL

    /// Makes `files` (name → size in bytes) under `parent/htdocs`.
    init(in parent: URL, files: [String: Int]) async throws {
        folder = parent.appendingPathComponent("htdocs-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let script = files.map { "head -c \($0.value) /dev/urandom > '\($0.key)'" }.joined(separator: "\n")
        let r = try await runProcess("/bin/sh", ["-c", "set -e\n" + script], in: folder, timeout: .seconds(60))
        guard r.status == 0 else { throw HarnessError("making htdocs failed: \(r.stderr)") }
    }

    func path(_ name: String) -> String { folder.appendingPathComponent(name).path }

    /// True when `file` holds exactly the bytes of the served file `name`.
    func same(_ name: String, as file: URL) -> Bool {
        FileManager.default.contentsEqual(atPath: path(name), andPath: file.path)
    }
}

/// `nghttpd` (nghttp2's HTTP/2-only server, ALPN h2) serving `htdocs` over TLS on 127.0.0.1 with a test
/// certificate. Stopped by SIGKILL on its pid: started from Foundation.Process it does not act on SIGTERM.
final class NghttpdOrigin: Sendable {
    let process: TestProcess
    let port: Int

    /// `arguments`: extra nghttpd options (e.g. `-m 5`, `--echo-upload`).
    init(_ e2e: E2E, certificate: String, htdocs: Htdocs, arguments: [String] = [], in folder: URL) async throws {
        let (cert, key) = e2e.cert(certificate)
        // Tests run in parallel, so a "free" port can be taken by another test's server between the probe and
        // nghttpd's bind. Then this nghttpd exits at once while the port still accepts (the other server): the
        // origin is only ours if our process is still running once the port answers. Retry on a new port (bounded).
        var attempt = 0
        while true {
            attempt += 1
            let candidate = try freeLoopbackPort()
            let started = try TestProcess(
                "/usr/sbin/nghttpd",
                arguments + ["-a", "127.0.0.1", "-d", htdocs.folder.path, String(candidate), key, cert], in: folder,
                name: "nghttpd-\(certificate)")
            // nghttpd prints nothing when it is ready: poll its port (bounded).
            let deadline = ContinuousClock.now + .seconds(10)
            while !loopbackAccepts(candidate), started.isRunning, ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(20))
            }
            try await Task.sleep(for: .milliseconds(100))
            if started.isRunning && loopbackAccepts(candidate) {
                port = candidate
                process = started
                return
            }
            started.stop()
            guard attempt < 5 else {
                throw HarnessError("nghttpd did not listen on a free port after 5 tries: \(started.stderr)")
            }
        }
    }

    deinit { stop() }

    func stop() { process.stop() }

    /// A `--map` argument sending `host` here.
    func map(_ host: String) -> [String] { ["--map", "\(host)=127.0.0.1:\(port)"] }
}

/// True when a TCP connection to 127.0.0.1:`port` succeeds.
func loopbackAccepts(_ port: Int) -> Bool {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { return false }
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = UInt16(port).bigEndian
    return withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
        }
    } == 0
}

/// One curl run that also keeps what `-w` printed (one line per transfer with --parallel).
struct CurlRun {
    var status: Int32
    var writeOut: [String]
    var stderr: String
}

/// Runs curl through `proxy`, trusting its CA, with `arguments` (bounded by `--max-time` and a process timeout).
func curlThrough(_ e2e: E2E, _ proxy: Proxy, _ arguments: [String], in folder: URL, maxTime: Int = 60)
    async throws -> CurlRun
{
    let r = try await runProcess(
        "/usr/bin/curl",
        ["-sS", "--max-time", String(maxTime), "-x", proxy.url, "--cacert", e2e.proxyCA] + arguments,
        in: folder, timeout: .seconds(maxTime + 10))
    return CurlRun(status: r.status, writeOut: r.stdout.split(separator: "\n").map(String.init), stderr: r.stderr)
}
