import HTTP1Core
import ProxyTrace

// `--auth`: Basic proxy credentials, checked on the first request of every connection (FrontLayer) and on each
// later request of a plain-HTTP connection (PlainLayer): they belong to each request (RFC 9110 §11.7.1).

extension SessionContext {
    static let authChallenge = ("Proxy-Authenticate", "Basic realm=\"atsproxy\"")
    static let authRequiredBody = "ATSProxy: proxy credentials required\n"

    /// Why `head` lacks the `--auth` credentials, or nil when it has them (or none are required).
    /// A transparent connection owes none: it never saw a proxy (SessionContext+Transparent).
    func authFailureReason(_ head: HTTPRequestHead) -> ProxyAuthFailure.Reason? {
        guard transparentDestination == nil else { return nil }
        return env.credentials?.refusal(ofProxyAuthorization: head.headers[first: "Proxy-Authorization"])
    }

    /// A 407 for a later request on a plain-HTTP connection that lacks the credentials; the connection stays open,
    /// so the client can send the request again with them.
    func authRefusal(_ head: HTTPRequestHead) -> RequestDecision? {
        guard let reason = authFailureReason(head) else { return nil }
        let url = Redaction.url(head.target)
        logAuthFailure(ProxyAuthFailure(reason: reason, method: head.method, target: url, client: clientAddress))
        return .answer(
            head: HTTPResponseHead(
                status: 407, reason: "Proxy Authentication Required",
                headers: [("Content-Type", "text/plain"), Self.authChallenge]),
            body: Array(Self.authRequiredBody.utf8), url: url, outcome: .notEvaluated, codes: [])
    }
}
