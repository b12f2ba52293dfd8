import HTTP1Core
import Testing
import TLSCore

@testable import atsproxy_load

/// A 1 KiB response with a Content-Length, as nginx sends a static file.
let contentLengthResponse =
    "HTTP/1.1 200 OK\r\nServer: nginx\r\nContent-Type: application/octet-stream\r\nContent-Length: 1024\r\n\r\n"
    + String(repeating: "x", count: 1024)
/// An 11-byte chunked response with a trailer.
let chunkedResponse =
    "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\nX-Trailer: 1\r\n\r\n"

@Suite("LoadConnection in memory")
struct LoadConnectionTests {
    @Test("Through a proxy: CONNECT, TLS with SNI after the 200, then keep-alive requests (Content-Length, chunked)")
    func connectTunnelThenKeepAlive() throws {
        let connection = LoadConnection(recipe: try recipe("https://bench.test:8443/1k", viaProxy: true))
        let origin = try InMemoryOrigin()
        let start = connection.start()
        #expect(start.outputText == "CONNECT bench.test:8443 HTTP/1.1\r\nHost: bench.test:8443\r\n\r\n")
        #expect(!connection.isReady)

        let answer = deliver("HTTP/1.1 200 Connection established\r\n\r\n", to: connection)
        #expect(answer.failure == nil)
        #expect(answer.output.first == 0x16, "a TLS handshake record (the ClientHello) follows the 200")
        #expect(connection.sendRequest().output.isEmpty, "no request before the handshake is done")
        try completeHandshake(connection, with: origin, clientBytes: answer.output)
        #expect(connection.isReady)
        #expect(origin.engine.serverName == "bench.test")
        #expect(origin.engine.negotiated?.alpn == "http/1.1")

        let first = connection.sendRequest()
        #expect(connection.isAwaitingResponse)
        _ = try origin.receive(first.output)
        let response = try origin.send(contentLengthResponse)
        // The response arrives in two reads; only the second completes it.
        let half = response.count / 2
        let early = deliver(Array(response[..<half]), to: connection)
        #expect(early.completed == nil)
        let rest = deliver(Array(response[half...]), to: connection)
        #expect(rest.completed == CompletedResponse(status: 200, bodyBytes: 1024))
        #expect(rest.failure == nil)
        #expect(connection.isReady)

        _ = try origin.receive(connection.sendRequest().output)
        let chunked = deliver(try origin.send(chunkedResponse), to: connection)
        #expect(chunked.completed == CompletedResponse(status: 200, bodyBytes: 11))
        #expect(chunked.failure == nil)

        #expect(origin.requests.count == 2, "both requests went over the same TLS session")
        #expect(origin.requests.allSatisfy { $0.method == "GET" && $0.target == "/1k" })
        #expect(origin.requests.first?.headers[first: "Host"] == "bench.test:8443")
    }

    @Test("A proxy that refuses the CONNECT fails the connection with its status")
    func connectRefused() throws {
        let connection = LoadConnection(recipe: try recipe("https://bench.test/", viaProxy: true))
        #expect(connection.start().outputText.hasPrefix("CONNECT bench.test:443 HTTP/1.1\r\n"))
        let step = deliver("HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n", to: connection)
        #expect(step.failure == .tunnelRefused(status: 403))
        #expect(step.output.isEmpty)
        #expect(!connection.isReady)
    }

    @Test("Direct https to an IP literal starts with the ClientHello and sends no SNI")
    func directTLSWithoutSNI() throws {
        let connection = LoadConnection(recipe: try recipe("https://127.0.0.1:8443/", viaProxy: false))
        let origin = try InMemoryOrigin()
        let start = connection.start()
        #expect(start.output.first == 0x16)
        try completeHandshake(connection, with: origin, clientBytes: start.output)
        #expect(connection.isReady)
        #expect(origin.engine.serverName == nil)
        _ = try origin.receive(connection.sendRequest().output)
        #expect(origin.requests.first?.headers[first: "Host"] == "127.0.0.1:8443")
    }

    @Test("Plain http through a proxy sends absolute-form requests; a response fed byte by byte completes once")
    func plainHTTPAbsoluteFormByteByByte() throws {
        let connection = LoadConnection(recipe: try recipe("http://example.test:8080/a?b=1", viaProxy: true))
        #expect(connection.start().output.isEmpty)
        #expect(connection.isReady)
        #expect(
            connection.sendRequest().outputText
                == "GET http://example.test:8080/a?b=1 HTTP/1.1\r\nHost: example.test:8080\r\n"
                + "User-Agent: atsproxy-load\r\nAccept: */*\r\n\r\n")
        var completed: [CompletedResponse] = []
        for byte in chunkedResponse.utf8 {
            let step = deliver([byte], to: connection)
            #expect(step.failure == nil)
            if let response = step.completed { completed.append(response) }
        }
        #expect(completed == [CompletedResponse(status: 200, bodyBytes: 11)])
        #expect(connection.isReady)
    }

    @Test("Direct plain http sends origin-form requests with the Host header")
    func plainHTTPDirect() throws {
        let connection = LoadConnection(recipe: try recipe("http://127.0.0.1/", viaProxy: false))
        _ = connection.start()
        #expect(connection.sendRequest().outputText.hasPrefix("GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n"))
    }

    @Test("Bytes from the server with no request outstanding fail the connection: nothing is pipelined")
    func unsolicitedBytes() throws {
        let connection = LoadConnection(recipe: try recipe("http://127.0.0.1/", viaProxy: false))
        _ = connection.start()
        _ = connection.sendRequest()
        let step = deliver(chunkedResponse + "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", to: connection)
        #expect(step.completed == CompletedResponse(status: 200, bodyBytes: 11), "the answered request still counts")
        guard case .http(let error) = step.failure else {
            Issue.record("expected an HTTP error, got \(String(describing: step.failure))")
            return
        }
        #expect(error.reason == .unexpectedData)
        #expect(!connection.isReady)
    }

    @Test("Connection: close ends keep-alive: the response counts, then the connection fails")
    func connectionClose() throws {
        let connection = LoadConnection(recipe: try recipe("http://127.0.0.1/", viaProxy: false))
        _ = connection.start()
        _ = connection.sendRequest()
        let step = deliver("HTTP/1.1 503 Busy\r\nConnection: close\r\nContent-Length: 2\r\n\r\nno", to: connection)
        #expect(step.completed == CompletedResponse(status: 503, bodyBytes: 2))
        #expect(step.failure == .notKeepAlive)
    }

    @Test("The server closing between responses is a failure, whether by close_notify or a bare EOF")
    func serverCloseBetweenResponses() throws {
        let connection = LoadConnection(recipe: try recipe("https://bench.test/", viaProxy: false))
        let origin = try InMemoryOrigin()
        try completeHandshake(connection, with: origin, clientBytes: connection.start().output)
        _ = try origin.receive(connection.sendRequest().output)
        #expect(deliver(try origin.send(contentLengthResponse), to: connection).completed != nil)
        let closed = deliver(origin.closeNotify(), to: connection)
        #expect(closed.failure == .closedByServer)
        #expect(connection.receiveEOF().failure == nil, "a failure is reported once")

        let plain = LoadConnection(recipe: try recipe("http://127.0.0.1/", viaProxy: false))
        _ = plain.start()
        #expect(plain.receiveEOF().failure == .closedByServer)
    }

    @Test("An EOF in the middle of a response fails the connection without completing it")
    func eofMidResponse() throws {
        let connection = LoadConnection(recipe: try recipe("http://127.0.0.1/", viaProxy: false))
        _ = connection.start()
        _ = connection.sendRequest()
        #expect(deliver("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", to: connection).completed == nil)
        let step = connection.receiveEOF()
        #expect(step.completed == nil)
        guard case .http(let error) = step.failure else {
            Issue.record("expected an HTTP error, got \(String(describing: step.failure))")
            return
        }
        #expect(error.reason == .incompleteMessage)
    }

    @Test("A response without framing ends at the EOF: it completes, then the connection is over")
    func closeDelimitedResponse() throws {
        let connection = LoadConnection(recipe: try recipe("http://127.0.0.1/", viaProxy: false))
        _ = connection.start()
        _ = connection.sendRequest()
        #expect(deliver("HTTP/1.1 200 OK\r\n\r\nabcdef", to: connection).completed == nil)
        let step = connection.receiveEOF()
        #expect(step.completed == CompletedResponse(status: 200, bodyBytes: 6))
        #expect(step.failure == .notKeepAlive)
    }
}
