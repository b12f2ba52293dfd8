import Dispatch
import ProxyCore
import ProxyEventLoop
import ProxyTrace

/// The web view's server: listens on the proxy's own event loops and answers with `WebRouter`, over the
/// project's HTTP/1.1 core. The router's calls read SQLite, so they run on worker queues of their own, never on a
/// loop thread: one for the page's requests, one for the streams' looks, and one for the routes that read the whole
/// capture (`WebRouter.runsLong`: the report, HAR export), each with its own connection to the file, so a HAR export
/// of several seconds holds up neither the list nor `/api/info`. Their answers go back to the connection's loop to
/// be written.
///
/// Access: with `credentials`, every request needs them in `Authorization: Basic` (a browser asks once and then
/// sends them on every request, the stream included). On a loopback address the `Host` field must name a loopback
/// host too: a web page elsewhere that rebinds its own name to 127.0.0.1 (DNS rebinding) cannot read the API.
public final class WebServer: Sendable {
    public let router: WebRouter
    public let feed: LiveFeed
    let credentials: ProxyCredentials?
    let worker = DispatchQueue(label: "atsproxy.web", qos: .userInitiated)
    /// The streams' looks for new rows, on the router's `streamReader`.
    let streamWorker = DispatchQueue(label: "atsproxy.web.stream", qos: .userInitiated)
    /// The report and HAR export, on the router's `exportReader`.
    let exportWorker = DispatchQueue(label: "atsproxy.web.export", qos: .utility)

    /// Keeps the streams told of the held exchanges' changes while the server lives.
    private let holdObservation: HoldObservation?

    public init(router: WebRouter, feed: LiveFeed, credentials: ProxyCredentials?) {
        self.router = router
        self.feed = feed
        self.credentials = credentials
        holdObservation = router.context.extensions.holds?.observe { [feed] in feed.holdsChanged() }
    }

    /// Listens on `host:port` (port 0 picks a free one: `Listener.port`).
    public func listen(on group: EventLoopGroup, host: String, port: UInt16) throws(IOError) -> Listener {
        let loopbackOnly = (try SocketAddress(numericHost: host, port: port)).isLoopback
        return try group.listen(host: host, port: port) { [self] loop in
            WebConnection(server: self, loop: loop, loopbackOnly: loopbackOnly)
        }
    }

    /// Whether a `Host` field value names this machine's loopback (`127.0.0.1:8081`, `localhost`, `[::1]:8081`).
    static func isLoopbackHost(_ value: String) -> Bool {
        var host = Substring(value.lowercased())
        if host.hasPrefix("[") {
            guard let close = host.firstIndex(of: "]") else { return false }
            host = host[host.index(after: host.startIndex)..<close]
            return host == "::1"
        }
        if let colon = host.lastIndex(of: ":") { host = host[..<colon] }
        if host == "localhost" { return true }
        let octets = host.split(separator: ".", omittingEmptySubsequences: false)
        return octets.count == 4 && octets[0] == "127" && octets.allSatisfy { UInt8($0) != nil }
    }
}
