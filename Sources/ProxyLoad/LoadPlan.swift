import ProxyEventLoop

/// A run as the command line describes it, checked and resolved: where every connection goes, what it says, and
/// how much work there is.
struct LoadPlan: Sendable {
    /// The TCP destination: the proxy, the `--connect-to` address, or the URL's own (literal) host.
    var destination: SocketAddress
    var recipe: ConnectionRecipe
    var connections: Int
    var requests: Int
    var threads: Int
    var timeout: Duration
    var maxErrors: Int

    init(
        url: String, proxy: String?, connectTo: String?, connections: Int, requests: Int, threads: Int,
        timeout: Duration, maxErrors: Int
    ) throws(LoadUsageError) {
        let target = try LoadTarget(url: url)
        if proxy != nil && connectTo != nil {
            throw LoadUsageError("--proxy and --connect-to exclude each other (a proxy decides where to connect)")
        }
        if let address = proxy ?? connectTo {
            let (host, port) = try LoadTarget.splitHostPort(address, what: proxy != nil ? "--proxy" : "--connect-to")
            destination = try Self.numericAddress(host, port)
        } else {
            destination = try Self.numericAddress(target.host, target.port)
        }
        recipe = try ConnectionRecipe(target: target, viaProxy: proxy != nil)
        self.connections = connections
        self.requests = requests
        self.threads = max(1, min(threads, connections))
        self.timeout = timeout
        self.maxErrors = maxErrors
    }

    /// Names are not resolved: a benchmark states its addresses, and resolution would be timed with the run.
    private static func numericAddress(_ host: String, _ port: UInt16) throws(LoadUsageError) -> SocketAddress {
        do {
            return try SocketAddress(numericHost: host, port: port)
        } catch {
            throw LoadUsageError(
                "\(host) is not an IP address; use one, or give the address with --connect-to or --proxy")
        }
    }

    /// Loop `index`'s part of the work: connections and requests split as evenly as the counts allow.
    func assignment(forLoop index: Int) -> LoadWorker.Assignment {
        func share(_ total: Int) -> Int { total / threads + (index < total % threads ? 1 : 0) }
        return LoadWorker.Assignment(
            destination: destination, recipe: recipe, connections: share(connections), requests: share(requests),
            maxErrors: maxErrors)
    }
}
