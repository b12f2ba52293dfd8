import ArgumentParser
import Foundation

/// `atsproxy-load`: a lean keep-alive HTTP/1.1 load client for benchmarks.
@main
struct LoadCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "atsproxy-load",
        abstract: "A keep-alive HTTP/1.1 load client: a fixed set of connections on one event loop.",
        discussion: """
            Opens exactly -c connections and keeps them for the whole run, sends -n GET requests in all with one \
            outstanding per connection (closed loop), and reads every response (Content-Length or chunked) to its \
            end before the next request on that connection. A connection that fails or that the server closes \
            counts as an error and is replaced, so "connections opened" shows whether the run churned. With \
            --proxy, https goes through a CONNECT tunnel and http is sent in absolute form. Certificates are not \
            verified. Exits non-zero when the run did not complete (deadline, too many errors).
            """)

    @Option(help: "The URL to fetch: http://HOST[:PORT]/PATH or https://… (HOST an IP address unless --proxy or --connect-to).")
    var url: String

    @Option(name: [.customShort("c"), .customLong("connections")], help: "Connections kept open for the run.")
    var connections = 32

    @Option(name: [.customShort("n"), .customLong("requests")], help: "Requests (completed responses) in all.")
    var requests = 1000

    @Option(help: "Forward proxy ADDRESS:PORT (CONNECT for https, absolute-form requests for http).")
    var proxy: String?

    @Option(name: .customLong("connect-to"), help: "Connect to ADDRESS:PORT instead of the URL's host (SNI and Host stay the URL's).")
    var connectTo: String?

    @Option(help: "Event-loop threads; connections and requests are split between them.")
    var threads = 1

    @Option(help: "Seconds before the run stops with what it has (and exits non-zero).")
    var timeout: Double = 300

    @Option(name: .customLong("max-errors"), help: "Stop (non-zero exit) after more connection errors than this, per thread.")
    var maxErrors = 1000

    @Flag(help: "Print one JSON object on standard output (the summary goes to standard error).")
    var json = false

    func validate() throws {
        guard connections >= 1 else { throw ValidationError("-c must be at least 1") }
        guard requests >= 0 else { throw ValidationError("-n must not be negative") }
        guard threads >= 1 else { throw ValidationError("--threads must be at least 1") }
        guard timeout > 0, timeout.isFinite else { throw ValidationError("--timeout must be a positive number") }
        guard maxErrors >= 0 else { throw ValidationError("--max-errors must not be negative") }
    }

    func run() throws {
        let report: LoadReport
        do {
            let plan = try LoadPlan(
                url: url, proxy: proxy, connectTo: connectTo, connections: connections, requests: requests,
                threads: threads, timeout: .milliseconds(Int64(timeout * 1000)), maxErrors: maxErrors)
            report = try LoadRun.run(plan)
        } catch {
            throw ValidationError(error.description)
        }
        if json {
            print(try report.json())
            FileHandle.standardError.write(Data((report.summary + "\n").utf8))
        } else {
            print(report.summary)
        }
        if !report.isComplete { throw ExitCode.failure }
    }
}
