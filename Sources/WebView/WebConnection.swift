// Theory of operation
//
// 1. One WebConnection per accepted socket, confined to its loop. Bytes go into an HTTP1Parser (requests role);
//    a complete request (head and end) is checked (credentials, Host) and handed to the router on one of the
//    server's worker queues (the report and HAR export on their own, so other connections are answered meanwhile).
//    Meanwhile the parser stays paused, so pipelined requests wait their turn; the answer comes back
//    to the loop with `EventLoop.execute`, is written, and the parser moves on to the next request.
// 2. A stream request (`/api/stream`) turns the connection into a Server-Sent Events stream for good: the head is
//    written without a length (the stream ends when the connection does), the connection subscribes to the
//    server's `LiveFeed`, and from then on it only writes events. It asks for rows after its cursor when the feed
//    wakes it and once a second on its own, one query at a time (a wake-up during a query asks for another after).
// 3. A slow page never holds anything up: while the socket's write buffer is above its high-water mark the stream
//    reads nothing, and when it drains it reads what is new; more than a batch behind, it sends `resync` and skips
//    to the newest exchange, and the page reloads its newest page from the API. Memory per stream is bounded by
//    the write buffer.
//    The held exchanges (breakpoints) change rarely and must show at once: each change sends `event: held` to
//    every stream (one owed event while a page is not reading), and the page reads `/api/held`.
// 4. A malformed request is answered 400 and the connection closed; a request without keep-alive is closed after
//    its answer. A request's body is kept only for a POST (the rules API's JSON), up to `WebRequest.bodyLimit`: a
//    larger one is answered 413 and the connection closed; other methods' bodies are read and dropped.

import CaptureStore
import Foundation
import HTTP1Core
import ProxyEventLoop

final class WebConnection: ConnectionHandler {
    let loop: EventLoop
    private let server: WebServer
    private let loopbackOnly: Bool
    private var connection: Connection?
    private var parser = HTTP1Parser(role: .requests)
    private var head: HTTPRequestHead?
    private var body: [UInt8] = []
    /// A request is with the router; the parser waits.
    private var answering = false
    private var stream: StreamState?

    private struct StreamState {
        var filter: CaptureFilter
        /// The newest exchange sent (or skipped on a resync).
        var after: Int64
        var querying = false
        var askAgain = false
        /// A look was skipped because the page was not reading.
        var behind = false
        /// The held exchanges changed while the page was not reading: `event: held` is owed.
        var heldOwed = false
        var lastWrite = MonotonicTime.now
    }

    static let tick: Duration = .seconds(1)
    static let keepAliveComment: Duration = .seconds(15)
    static let idleTimeout: Duration = .seconds(120)
    static let maximumBuffered = 1 << 20

    init(server: WebServer, loop: EventLoop, loopbackOnly: Bool) {
        self.server = server
        self.loop = loop
        self.loopbackOnly = loopbackOnly
    }

    func connectionOpened(_ connection: Connection) {
        self.connection = connection
        connection.setIdleTimeout(Self.idleTimeout)
    }

    func connection(_ connection: Connection, received bytes: UnsafeRawBufferPointer) {
        // A stream takes no more requests; whatever the page sends is ignored.
        guard stream == nil else { return }
        parser.receive(bytes)
        // A client that keeps sending while its request is answered waits: what it sent is bounded.
        if answering, parser.bufferedByteCount > Self.maximumBuffered { connection.pauseReading() }
        readRequests()
    }

    func connectionReadEOF(_ connection: Connection) {
        guard stream == nil else {
            connection.close()
            return
        }
        parser.receiveEOF()
        readRequests()
    }

    func connection(_ connection: Connection, writabilityChanged writable: Bool) {
        if writable, stream?.heldOwed == true { heldChanged() }
        if writable, stream?.behind == true {
            stream?.behind = false
            lookForNews()
        }
    }

    func connection(_ connection: Connection, timerFired timer: TimerID) {
        guard let state = stream else { return }
        if MonotonicTime.now - state.lastWrite >= Self.keepAliveComment { send(Array(": keep-alive\n\n".utf8)) }
        lookForNews()
        _ = connection.startTimer(after: Self.tick)
    }

    func connectionClosed(_ connection: Connection, error: IOError?) {
        if stream != nil { server.feed.unsubscribe(self) }
        stream = nil
        self.connection = nil
    }

    // MARK: - Requests

    private func readRequests() {
        guard let connection, !answering, stream == nil else { return }
        while true {
            let event: HTTP1Event
            do { event = try parser.nextEvent() } catch {
                write(.problem(error.suggestedStatus, "malformed request: \(error)"), headOnly: false, keepAlive: false)
                return
            }
            switch event {
            case .requestHead(let head):
                self.head = head
                body.removeAll()
            case .body(let bytes):
                // Only a POST's body is kept (GET and HEAD bodies are read and dropped).
                guard head?.method == "POST" else { continue }
                guard body.count + bytes.count <= WebRequest.bodyLimit else {
                    write(.problem(413, "the request body is over \(WebRequest.bodyLimit) bytes"), headOnly: false,
                          keepAlive: false)
                    return
                }
                body += bytes
            case .end:
                guard let head else { return }
                answer(head, body: body)
                body = []
                return
            case .needMoreData, .paused: return
            case .connectionClosed, .switchedProtocols:
                connection.close()
                return
            case .responseHead: return
            }
        }
    }

    private func answer(_ head: HTTPRequestHead, body: [UInt8]) {
        let keepAlive = head.keepAlive
        let headOnly = head.method == "HEAD"
        if let credentials = server.credentials,
            credentials.refusal(ofProxyAuthorization: head.headers[first: "Authorization"]) != nil
        {
            var response = WebResponse.problem(401, "the web view needs the proxy's credentials")
            response.headers.add(
                name: "WWW-Authenticate", value: "Basic realm=\"ATSProxy web view\", charset=\"UTF-8\"")
            write(response, headOnly: headOnly, keepAlive: keepAlive)
            return
        }
        if loopbackOnly, let host = head.headers[first: "Host"], !WebServer.isLoopbackHost(host) {
            let message = "this web view answers only to a loopback host name (127.0.0.1, localhost), not \(host)"
            write(.problem(421, message), headOnly: headOnly, keepAlive: false)
            return
        }
        guard var parsed = WebRequest(head: head) else {
            write(.problem(400, "the request target must be a path (/api/…), in UTF-8"), headOnly: headOnly,
                  keepAlive: keepAlive)
            return
        }
        parsed.body = body
        let request = parsed
        answering = true
        let router = server.router
        let bound = LoopBound(self)
        let worker = WebRouter.runsLong(request) ? server.exportWorker : server.worker
        worker.async { [loop] in
            let route = router.route(request)
            loop.execute { bound.value.routed(route, headOnly: headOnly, keepAlive: keepAlive) }
        }
    }

    private func routed(_ route: WebRoute, headOnly: Bool, keepAlive: Bool) {
        answering = false
        switch route {
        case .respond(let response): write(response, headOnly: headOnly, keepAlive: keepAlive)
        case .stream(let filter, let after): startStream(filter: filter, after: after)
        }
    }

    private func write(_ response: WebResponse, headOnly: Bool, keepAlive: Bool) {
        guard let connection else { return }
        connection.write(response.serialized(headOnly: headOnly, keepAlive: keepAlive))
        guard keepAlive else {
            connection.close()
            return
        }
        do { try parser.startNextMessage() } catch {
            connection.close()
            return
        }
        if connection.isReadingPaused { connection.resumeReading() }
        readRequests()
    }

    // MARK: - Stream

    private func startStream(filter: CaptureFilter, after: Int64) {
        guard let connection else { return }
        stream = StreamState(filter: filter, after: after)
        let head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream; charset=utf-8\r\nCache-Control: no-store\r\n"
            + "X-Content-Type-Options: nosniff\r\nCross-Origin-Resource-Policy: same-origin\r\n\r\n"
        // `retry`: how long the page's EventSource waits before it reconnects after the proxy went away.
        send(Array((head + "retry: 3000\n\nevent: hello\ndata: {\"after\":\(after)}\n\n").utf8))
        // A stream is quiet between events by design; its keep-alive comments are what the idle timeout sees.
        connection.setIdleTimeout(nil)
        server.feed.subscribe(self)
        _ = connection.startTimer(after: Self.tick)
        lookForNews()
    }

    /// The held exchanges changed (on this loop): the page reads them again. Owed while the page is not reading,
    /// and sent once however many changes came meanwhile.
    func heldChanged() {
        guard stream != nil, let connection else { return }
        guard connection.isWritable else {
            stream?.heldOwed = true
            return
        }
        stream?.heldOwed = false
        send(Array("event: held\ndata: {}\n\n".utf8))
    }

    /// The feed's wake-up (on this loop).
    func streamMayHaveNews() {
        lookForNews()
    }

    private func lookForNews() {
        guard var state = stream, let connection else { return }
        defer { stream = state }
        if state.querying {
            state.askAgain = true
            return
        }
        guard connection.isWritable else {
            state.behind = true
            return
        }
        state.querying = true
        let router = server.router
        let bound = LoopBound(self)
        let (filter, after) = (state.filter, state.after)
        server.streamWorker.async { [loop] in
            let update: StreamUpdate
            do { update = try router.streamUpdate(filter: filter, after: after) } catch {
                // The capture could not be read this time (a write in progress that SQLite refused to share, a
                // full disk): the next look tries again.
                update = .nothing
            }
            loop.execute { bound.value.deliver(update) }
        }
    }

    private func deliver(_ update: StreamUpdate) {
        guard stream != nil else { return }
        stream?.querying = false
        switch update {
        case .nothing: break
        case .rows(let json, let last):
            send(Array("event: exchanges\ndata: ".utf8) + json + Array("\n\n".utf8))
            stream?.after = last
        case .resync(let latest):
            send(Array("event: resync\ndata: {\"latest\":\(latest)}\n\n".utf8))
            stream?.after = latest
        }
        if stream?.askAgain == true {
            stream?.askAgain = false
            lookForNews()
        }
    }

    private func send(_ bytes: [UInt8]) {
        connection?.write(bytes)
        stream?.lastWrite = MonotonicTime.now
    }
}

/// Monotonic seconds, for the stream's keep-alive comments.
enum MonotonicTime {
    static var now: Duration {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return .seconds(ts.tv_sec) + .nanoseconds(ts.tv_nsec)
    }
}
