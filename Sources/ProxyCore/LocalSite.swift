// Theory of operation: a site the proxy answers itself, never connecting upstream (the set-up site). ProxyCore
// knows it only through this protocol, so that the session's layers answer it as they answer any other local
// request (an ATSAnswer, a 407, a 400): a relay decision, or a closing answer from the front. The run command fills
// the environment with the Onboarding module's site; tests may fill it with their own.
//
// - Plain HTTP through the proxy to one of the site's names (`answers(host:port:)`): PlainLayer's decision.
// - Origin form straight to the proxy's port: FrontLayer answers the site's pages (status 200 only) and closes.
// - A CONNECT to `hostName`: intercepted with no upstream; every request inside is answered by the site.

/// A site answered by the proxy itself, with no upstream.
public protocol LocalSite: AnyObject, Sendable {
    /// The reserved name the site answers on through a CONNECT (never looked up).
    var hostName: String { get }
    /// Told to a client that sends plaintext inside a CONNECT to `hostName`, which has no upstream to tunnel to.
    var tunnelRefusal: String { get }
    /// Whether a plain-HTTP request to `host:port` (a lowercase name) is for the site.
    func answers(host: String, port: Int) -> Bool
    /// The site's answer to GET `path`. `host`: the name asked for through the proxy (nil: the site itself, asked
    /// directly or over TLS). `secure`: the request came over TLS with the proxy's leaf. `credentialed`: false when
    /// the proxy requires credentials and the request came without them.
    func answer(host: String?, port: Int, path: String, secure: Bool, credentialed: Bool) -> LocalAnswer
}

/// A response the proxy makes itself.
public struct LocalAnswer: Sendable {
    public var status: Int
    /// The fields after the status line (no Content-Length: the framing adds it).
    public var fields: [(String, String)]
    public var body: [UInt8]

    public init(status: Int, fields: [(String, String)], body: [UInt8]) {
        self.status = status
        self.fields = fields
        self.body = body
    }
}
