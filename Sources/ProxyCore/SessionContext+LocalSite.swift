import HTTP1Core
import HTTP2Core
import ProxyTrace
import TLSCore

// Theory of operation: the set-up site (a LocalSite, filled in by the run command with the Onboarding module's site)
// answered by the session itself, never by an upstream, through the layers' local-answer paths.
//
// - Through the proxy over plain HTTP (`GET http://atsproxy.invalid/…`, the proxy's own address, or another
//   proxy's onboarding name): the plain layer's decision is the site's answer, before any ATS verdict.
// - Directly (`GET /…` in origin form to the proxy's port, as a phone opens `http://PROXY:PORT/` before it is set
//   up): the front answers the site's pages and closes, with `--auth` also without credentials (leaving out the
//   policy's path); other origin-form requests keep their 400, or their 407 without credentials.
// - Over TLS (`CONNECT atsproxy.invalid:443`): no upstream is connected; the client's handshake is answered with a
//   leaf from the proxy's CA and each request with the site's page, so that `/trust-check` loads only on a client
//   that trusts the CA.
// Every answer is an exchange line with no ATS outcome, recorded with the action `proxySite`: the site is the
// proxy's, not the app's traffic, and the report and the web view's hosts leave it out.

extension SessionContext {
    /// The site's answer as a relay decision (plain and intercepted requests). `host`: the name asked for through
    /// the proxy (nil: the site itself).
    func localSiteDecision(
        _ site: any LocalSite, host: String?, port: Int, head: HTTPRequestHead, path: String, url: String, secure: Bool
    ) -> RequestDecision {
        let response: LocalAnswer
        if head.method == "GET" || head.method == "HEAD" {
            response = site.answer(host: host, port: port, path: path, secure: secure, credentialed: true)
        } else {
            // The site takes no uploads.
            response = LocalAnswer(
                status: 405,
                fields: [("Content-Type", "text/plain; charset=utf-8"), ("Cache-Control", "no-store"), ("Allow", "GET, HEAD")],
                body: Array("ATSProxy: the set-up site answers GET only\n".utf8))
        }
        return .answer(
            head: HTTPResponseHead(
                status: response.status, reason: H2HeaderTranslation.reasonPhrase(response.status),
                headers: HTTPHeaders(response.fields)),
            body: response.body, url: url, outcome: .notEvaluated, codes: [])
    }

    /// A direct origin-form request for one of the site's pages (`http://PROXY:PORT/`): answered, and the connection
    /// closed (a browser opens another for the next page). Returns false for requests the site does not serve, which
    /// keep the front's 400 (or, without credentials, the front's 407). `credentialed`: false when the proxy requires
    /// credentials and the request came without them (the page then leaves out the policy's path).
    func answerLocalSiteDirectly(_ head: HTTPRequestHead, path: String, _ f: FrontLayer, credentialed: Bool = true)
        -> Bool
    {
        guard let site = env.localSite, head.method == "GET" || head.method == "HEAD" else { return false }
        let response = site.answer(host: nil, port: 0, path: path, secure: false, credentialed: credentialed)
        // Only the site's own pages: a stray origin-form request (a client that does not know it talks to a
        // proxy) is better told so than shown a 404 page.
        guard response.status == 200 else { return false }
        var request = head
        request.headers.replaceOrAdd(name: "Connection", value: "close")
        let answer: HTTP1LocalAnswer
        do {
            answer = try HTTP1LocalAnswer(
                response: HTTPResponseHead(
                    status: response.status, reason: H2HeaderTranslation.reasonPhrase(response.status),
                    headers: HTTPHeaders(response.fields)),
                body: response.body, request: request)
        } catch {
            f.refuse(self, status: 500, body: "ATSProxy: cannot frame the set-up page: \(error)\n", head: head)
            return true
        }
        let host = head.headers[first: "Host"] ?? "proxy"
        recordExchange(ExchangeSummary(
            method: head.method, url: "http://\(host)\(Redaction.url(path))", status: response.status,
            httpVersion: "HTTP/1.1", outcome: .notEvaluated, errors: [], requestBytes: f.bytes.count,
            responseBytes: answer.bodyCount,
            durationMilliseconds: f.started.map { max(0, (now() - $0) * 1000) } ?? 0,
            note: "ATSProxy's set-up page"), proxySite: true)
        commands.append(.sendToClient(answer.bytes))
        closeAll()
        return true
    }

    /// Plaintext inside a CONNECT to the site's name (`curl -p http://atsproxy.invalid/`): the name has no upstream
    /// to tunnel to (and is never looked up), so the client is told where the site is and the connection closed.
    /// Returns false when the host is not the site's.
    func refuseLocalSiteTunnel(host: String) -> Bool {
        guard let site = env.localSite, host == site.hostName else { return false }
        commands.append(.sendToClient(HTTP1LocalAnswer.closing(status: 400, text: site.tunnelRefusal)))
        closeAll()
        return true
    }

    /// A CONNECT to the site's name: TLS answered with the proxy's own leaf, no upstream. Returns false when the
    /// host is not the site's.
    func startLocalSiteTLS(host: String, port: Int, hello: ClientHello, helloBytes: [UInt8]) -> Bool {
        guard let site = env.localSite, host == site.hostName else { return false }
        let i = InterceptLayer(
            host: host, port: port, hello: hello, helloBytes: helloBytes, requirements: nil,
            decision: .init(keyPath: [], reason: "ATSProxy's set-up site"), started: now())
        i.localSite = site
        phase = .intercepting(i)
        i.startClientHandshake(self, leaf: .standard)
        return true
    }
}
