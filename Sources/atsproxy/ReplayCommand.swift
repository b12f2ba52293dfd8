import ArgumentParser
import CaptureStore
import Foundation
import ProxyTrace
import WebView

/// `atsproxy replay CAPTURE ID [--proxy URL] [--header 'Name: value'] [--method M] [--url U] [--data BODY]`: sends a
/// captured exchange's request again through a running proxy (issue 34), as captured or edited, so it meets the
/// proxy's rules, the ATS verdict and the capture as the app's request did; the new row names the original
/// (`replayOf`). Prints the answer's status line and the new row's id when the capture has it.
///
/// Exit status: 0 answered (whatever the status), 1 no such exchange or no answer, 2 an unreadable capture or a
/// request that cannot be made.
struct ReplayCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "replay",
        abstract: "Send a captured exchange's request again through a running proxy, as captured or edited.",
        discussion: """
            The request goes to the proxy's listener as a device's would (CONNECT and TLS trusting the proxy's CA \
            for https, absolute-form for http), marked with X-ATSProxy-Replay-Of: ID, which the proxy takes off and \
            records: the new exchange is a row of the proxy's capture linked to the original ("replay of #ID"). \
            --proxy defaults to the address the capture's run listened on, when that had a fixed port; the proxy \
            must listen on loopback for the replay to be marked. --header replaces every field of that name (an \
            empty value removes it). Exit status: 0 answered, 1 no such exchange or no answer, 2 an unreadable \
            capture or a request that cannot be made.
            """)

    @Argument(help: "The capture file the exchange is in (the running proxy's --capture, to see the new row).")
    var capture: String

    @Argument(help: "The exchange to send again (the number `atsproxy show` starts a line with).")
    var exchangeID: Int64

    @Option(help: "The running proxy, http://HOST:PORT (default: the address the capture's run listened on).")
    var proxy: String?

    @Option(name: .customLong("header"), help: "'Name: value' replaces that field (repeatable; 'Name:' removes it).")
    var headers: [String] = []

    @Option(help: "Send with this method instead.")
    var method: String?

    @Option(help: "Send to this absolute URL instead.")
    var url: String?

    @Option(name: .customLong("data"), help: "Send this body instead (text).")
    var data: String?

    @Option(name: .customLong("cacert"), help: "The proxy's CA certificate (default: the one the capture's run used).")
    var caFile: String?

    @Option(help: "Seconds for the whole exchange (default 30).")
    var timeout: Double = 30

    func validate() throws {
        if timeout <= 0 || timeout > 3600 { throw ValidationError("--timeout must be between 0 and 3600 seconds") }
        for header in headers where !header.contains(":") {
            throw ValidationError("--header takes 'Name: value' (got '\(header)')")
        }
    }

    func run() throws {
        let reader = try openCapture(capture, command: "replay")
        let exchange: CapturedExchange
        let run: CapturedRun?
        do {
            guard let found = try reader.exchange(id: exchangeID) else {
                throw failure("atsproxy replay: no exchange \(exchangeID) in \(capture)")
            }
            exchange = try reader.withBodies(found)
            run = try reader.runs().first { $0.id == found.runID }
        } catch let error as CaptureFileError {
            throw failure("atsproxy replay: error: \(error.description)", status: 2)
        }
        var request: ReplayRequest
        switch ReplayRequest.captured(exchange, body: data.map { Array($0.utf8) }) {
        case .failure(let error): throw failure("atsproxy replay: \(error.message)", status: 2)
        case .success(let captured): request = captured
        }
        if let method { request.method = method }
        if let url { request.url = url }
        for header in headers {
            let colon = header.firstIndex(of: ":")!
            let name = header[..<colon].trimmingCharacters(in: .whitespaces)
            let value = header[header.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            request.headers.removeAll { $0.0.lowercased() == name.lowercased() }
            if !value.isEmpty { request.headers.append((name, value)) }
        }
        let (host, port, authorization) = try proxyAddress(run)
        let caPath = caFile ?? run?.settings["ca"]
        let caPEM = caPath.flatMap { try? String(contentsOfFile: $0, encoding: .utf8) }
        if caPEM == nil, request.url.lowercased().hasPrefix("https://") {
            throw failure("atsproxy replay: give the proxy's CA certificate (--cacert): the capture names none readable",
                status: 2)
        }
        let before = (try? reader.latestID()) ?? 0
        let client = ReplayClient(
            proxyHost: host, proxyPort: port, caPEM: caPEM, proxyAuthorization: authorization, timeout: timeout)
        let answer: ReplayAnswer
        do { answer = try client.send(request) } catch {
            throw failure("atsproxy replay: \(error.message)")
        }
        print("\(answer.status)\(answer.reason.isEmpty ? "" : " " + answer.reason) (\(answer.bodySize) bytes) from \(request.method) \(request.url)")
        // The proxy commits its capture in batches: look for the new row a few seconds, bounded.
        for _ in 0..<60 {
            if let made = try? reader.replay(of: exchangeID, after: before) {
                print("new exchange \(made) (replay of #\(exchangeID))")
                return
            }
            usleep(50_000)
        }
        print("the new exchange is not in \(capture) (is it the running proxy's capture, listening on loopback?)")
    }

    /// `--proxy`, else the run's `listen` setting when its port is fixed; the user and password of the URL become
    /// `Proxy-Authorization`.
    private func proxyAddress(_ run: CapturedRun?) throws -> (String, Int, String?) {
        if let proxy {
            guard let parsed = URLComponents(string: proxy.contains("://") ? proxy : "http://" + proxy),
                let host = parsed.host, let port = parsed.port
            else { throw failure("atsproxy replay: --proxy takes http://HOST:PORT (got \(proxy))", status: 2) }
            let authorization = parsed.user.map { user in
                "Basic " + Data("\(user):\(parsed.password ?? "")".utf8).base64EncodedString()
            }
            return (host, port, authorization)
        }
        if let listen = run?.settings["listen"], let colon = listen.lastIndex(of: ":"),
            let port = Int(listen[listen.index(after: colon)...]), port != 0
        {
            var host = String(listen[..<colon])
            if host == "0.0.0.0" || host == "::" || host == "[::]" || host.isEmpty { host = "127.0.0.1" }
            if host.hasPrefix("[") { host = String(host.dropFirst().dropLast()) }
            return (host, port, nil)
        }
        throw failure(
            "atsproxy replay: give the running proxy's address (--proxy http://127.0.0.1:PORT): the capture's run "
                + "did not listen on a fixed port", status: 2)
    }
}
