import Foundation
import TestSupport

#if canImport(Glibc)
    import Glibc
#endif

/// A PostgreSQL cluster of Debian's `postgresql` package in a temporary folder, for one test: `initdb`, then the
/// server on a free port of 127.0.0.1 (and a unix socket in the folder), stopped by `pg_ctl stop` (or its pid) when
/// the test lets go of it, also after a failure. Run as root, the cluster belongs to the `postgres` system user
/// (initdb refuses root) through `runuser`. Every wait is bounded.
final class ThrowawayPostgres {
    static let bin = "/usr/lib/postgresql/15/bin"
    let folder: URL
    let data: URL
    let port: Int
    /// The store's URI for atsproxy (the `atsproxy` superuser, trusted on loopback: no password).
    var uri: String { "postgresql://atsproxy@127.0.0.1:\(port)/atsproxy" }

    /// The cluster's folder is made under /tmp itself, not the tests' scratch folder: the `postgres` user must reach
    /// it whatever the umask made of the folders above, and the server's unix socket path must stay short.
    init() throws {
        var template = Array("/tmp/atsproxy-pg-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw PostgresTestError("mkdtemp: \(errno)") }
        folder = URL(fileURLWithPath: String(cString: made))
        data = folder.appendingPathComponent("data")
        port = try Self.freePort()
        if getuid() == 0 {
            let chown = try runCommand("/bin/chown", ["postgres:postgres", folder.path], limit: 10)
            guard chown.status == 0 else { throw PostgresTestError("chown: \(chown.stderrText)") }
        }
        let initdb = try asOwner(
            "\(Self.bin)/initdb", ["-D", data.path, "-A", "trust", "-U", "atsproxy", "--no-sync", "-E", "UTF8"],
            limit: 60)
        guard initdb.status == 0 else { throw PostgresTestError("initdb: \(initdb.stderrText)") }
        let conf = """

            listen_addresses = '127.0.0.1'
            port = \(port)
            unix_socket_directories = '\(folder.path)'
            fsync = off
            max_connections = 40
            shared_buffers = 32MB

            """
        let handle = try FileHandle(forWritingTo: data.appendingPathComponent("postgresql.conf"))
        try handle.seekToEnd()
        try handle.write(contentsOf: Data(conf.utf8))
        try handle.close()
        try start()
        let created = try psql("CREATE DATABASE atsproxy", database: "postgres")
        guard created.status == 0 else { throw PostgresTestError("createdb: \(created.stderrText)") }
    }

    deinit {
        stop()
        do { try FileManager.default.removeItem(at: folder) } catch {
            // Left in /tmp, named as ours; the test's own outcome does not depend on it.
            FileHandle.standardError.write(Data("ThrowawayPostgres: cannot remove \(folder.path): \(error)\n".utf8))
        }
    }

    /// Starts the server and waits (at most 30 s) until it accepts connections. pg_ctl runs under a Python parent
    /// that closes every descriptor past stderr for it: the server it starts keeps the descriptors it was given,
    /// and one Foundation's Process watches (or a pipe) would make the finished pg_ctl look alive for ever.
    func start() throws {
        let detached = "import subprocess, sys; sys.exit(subprocess.call(sys.argv[1:], close_fds=True, "
            + "stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))"
        var command = ["\(Self.bin)/pg_ctl", "start", "-D", data.path, "-w", "-t", "30", "-l",
                       folder.appendingPathComponent("log").path]
        if getuid() == 0 { command = ["/usr/sbin/runuser", "-u", "postgres", "--"] + command }
        let started = try runCommand("/usr/bin/python3", ["-c", detached] + command, limit: 40)
        guard started.status == 0 else {
            throw PostgresTestError("pg_ctl start failed (\(started.status)): \(log)")
        }
    }

    /// Stops the server (fast: open sessions are ended, as when an administrator restarts it); killed by pid when
    /// pg_ctl cannot.
    func stop() {
        let pidFile = data.appendingPathComponent("postmaster.pid")
        let text: String
        do { text = try String(contentsOf: pidFile, encoding: .utf8) } catch {
            return  // no postmaster.pid: the server is not running
        }
        do {
            let stopped = try asOwner("\(Self.bin)/pg_ctl", ["stop", "-D", data.path, "-m", "fast", "-w", "-t", "20"],
                                      limit: 30)
            if stopped.status == 0 { return }
        } catch {
            // pg_ctl could not be run: the pid below ends the server.
        }
        if let pid = text.split(separator: "\n").first.flatMap({ Int32($0) }) { kill(pid, SIGKILL) }
    }

    var log: String {
        do { return try String(contentsOf: folder.appendingPathComponent("log"), encoding: .utf8) } catch {
            return "(no server log: \(error))"
        }
    }

    /// Runs SQL with psql in the store's database; `-At`: unaligned rows, no headers.
    func psql(_ sql: String, database: String = "atsproxy") throws -> CommandResult {
        try runCommand(
            "/usr/bin/psql", ["-X", "-At", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1", "-p", String(port), "-U",
                              "atsproxy", "-d", database, "-c", sql], limit: 30)
    }

    /// One value of a query.
    func value(_ sql: String) throws -> String {
        let result = try psql(sql)
        guard result.status == 0 else { throw PostgresTestError("psql \(sql): \(result.stderrText)") }
        return result.stdoutText.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    private func asOwner(_ tool: String, _ arguments: [String], limit: Double) throws -> CommandResult {
        if getuid() == 0 {
            return try runCommand("/usr/sbin/runuser", ["-u", "postgres", "--", tool] + arguments, limit: limit)
        }
        return try runCommand(tool, arguments, limit: limit)
    }

    /// A port nothing listens on now (the kernel's pick for port 0).
    static func freePort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw PostgresTestError("socket: \(errno)") }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
                bind(fd, pointer, length) == 0 && getsockname(fd, pointer, &length) == 0
            }
        }
        guard bound else { throw PostgresTestError("bind: \(errno)") }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}

struct PostgresTestError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
