import Foundation
import HTTP2Core
import ProxyTrace
import RuleStage
import TLSCore
import Testing
import TrafficRules

@testable import ProxyCore

/// The applied rules of a logged exchange, as `id action point` lines.
private func marks(_ e: ExchangeSummary) -> [String] { e.rules.map { "\($0.id) \($0.action) \($0.point)" } }

@Suite("Playbooks: the rules stage at the request and response heads, on every relay")
struct RulePlaybooks {
    static let get = "GET /v1/user HTTP/1.1\r\nHost: good.test\r\n\r\n"

    @Test("Map local (h1): the request is answered from the file, the origin is never asked, the record names the rule")
    func mapLocal() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("rules-\(UUID())").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try Data("{\"user\":\"mock\"}".utf8).write(to: URL(fileURLWithPath: directory + "/user.json"))
        let scene = try InterceptScene(rules: [("--map-local", "|good\\.test/v1/user|\(directory)/user.json")])
        let pb = Playbook(scene.env, client: try scene.client(), origin: try scene.origin(), now: scene.now)
        pb.connects(scene)
        pb.completesHandshakes()
        pb >> .client(sends: Self.get)
        pb << .sendToClient(.tls(.containing([
            "HTTP/1.1 200 OK\r\n", "Content-Type: application/json\r\n", "\r\n\r\n{\"user\":\"mock\"}",
        ])))
        pb << .log(.exchange("served from user.json by --map-local #1") { e in
            e.url == "https://good.test/v1/user" && e.status == 200 && marks(e) == ["--map-local #1 map-local request-head"]
                && e.consoleLine(colour: false).contains("RULE [--map-local #1] map-local: served ")
        })
        pb.check()
    }

    @Test("Modify headers (h1): the request goes up changed, the response comes back changed, a status: rule only on a 404")
    func modifyHeaders() throws {
        let scene = try InterceptScene(rules: [
            ("--modify-headers", "/X-Debug/1"), ("--modify-headers", "/User-Agent/"),
            ("--modify-headers", "/status:404/Retry-After/30"),
        ])
        let pb = Playbook(scene.env, client: try scene.client(), origin: try scene.origin(), now: scene.now)
        pb.connects(scene)
        pb.completesHandshakes()
        pb >> .client(sends: "GET /a HTTP/1.1\r\nHost: good.test\r\nUser-Agent: app/1\r\n\r\n")
        pb << .sendToUpstream(.tls("GET /a HTTP/1.1\r\nHost: good.test\r\nX-Debug: 1\r\n\r\n"))
        pb << .startTimer(.response)
        pb >> .origin(sends: "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        pb << .sendToClient(.tls(.containing(["HTTP/1.1 200 OK\r\n", "X-Debug: 1\r\n", "\r\n\r\nok"],
                                              excluding: ["Retry-After"])))
        pb << .log(.exchange("both header rules, on both heads") { e in
            marks(e) == ["--modify-headers #1 modify-headers request-head, response-head",
                         "--modify-headers #2 modify-headers request-head, response-head"]
        })
        pb >> .client(sends: "GET /b HTTP/1.1\r\nHost: good.test\r\n\r\n")
        pb << .sendToUpstream(.tls("GET /b HTTP/1.1\r\nHost: good.test\r\nX-Debug: 1\r\n\r\n"))
        pb << .startTimer(.response)
        pb >> .origin(sends: "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
        pb << .sendToClient(.tls(.containing(["HTTP/1.1 404 Not Found\r\n", "X-Debug: 1\r\n", "Retry-After: 30\r\n"])))
        pb << .log(.exchange("the status rule too") { e in
            marks(e).last == "--modify-headers #3 modify-headers response-head"
        })
        pb.check()
    }

    @Test("An answer rule and a blocked URL (h1): 503 without the origin; then the connection is reset")
    func answerAndBlock() throws {
        let scene = try InterceptScene(rules: [
            ("--answer", "|text:/health|503|Retry-After: 30|down"), ("--block-list", "|text:/tracking"),
        ])
        let pb = Playbook(scene.env, client: try scene.client(), origin: try scene.origin(), now: scene.now)
        pb.connects(scene)
        pb.completesHandshakes()
        pb >> .client(sends: "GET /health HTTP/1.1\r\nHost: good.test\r\n\r\n")
        pb << .sendToClient(.tls(.containing(["HTTP/1.1 503 Service Unavailable\r\n", "Retry-After: 30\r\n", "\r\n\r\ndown"])))
        pb << .log(.exchange("answered by --answer #1") { e in e.status == 503 && marks(e) == ["--answer #1 answer request-head"] })
        pb >> .client(sends: "GET /tracking/pixel HTTP/1.1\r\nHost: good.test\r\n\r\n")
        pb << .log(.exchange("blocked by --block-list #1") { e in
            e.status == nil && e.interruption?.contains("blocked by a rule") == true
                && marks(e) == ["--block-list #1 block request-head"]
        })
        pb << .resetClient
        pb << .closeUpstream
        pb.check()
    }
}

@Suite("Playbooks: the rules stage on the HTTP/2 paths (h2→h1 lanes, h1→h2, h2→h2)")
struct RuleH2Playbooks {
    static func rules() -> [(option: String, value: String)] {
        [
            ("--answer", "|text:/mock|200|Content-Type: application/json|{\"mock\":true}"),
            ("--modify-headers", "/X-Debug/1"),
        ]
    }

    @Test("h2 client, HTTP/1.1 origin: one stream answered locally, the next sent up and answered with the header")
    func h2ToH1() throws {
        let scene = try InterceptScene(rules: Self.rules())
        let pb = Playbook(scene.env, client: try scene.client(alpn: ["h2"]), origin: try scene.origin(),
                          now: scene.now)
        pb.connects(scene)
        pb.completesHandshakes()
        pb << .sendToClient(.tls(.h2("SETTINGS, WINDOW_UPDATE 0")))
        let client = try H2Peer(.client)
        try client.get("/mock")
        try client.get("/real")
        pb >> .clientSends(client.output())
        pb << .sendToClient(.tls(.h2("SETTINGS ACK")))
        pb << .sendToClient(.tls(.h2("HEADERS 1, DATA 1 END_STREAM")))
        pb << .log(.exchange("the mocked stream") { e in
            e.url == "https://good.test/mock" && e.status == 200
                && e.rules.map(\.action) == ["modify-headers", "answer"]
        })
        pb << .sendToUpstream(.tls("GET /real HTTP/1.1\r\nhost: good.test\r\nX-Debug: 1\r\n\r\n"))
        pb << .startTimer(.streamDeadlines)
        pb >> .origin(sends: "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nb")
        pb << .sendToClient(.tls(.h2("HEADERS 3, DATA 3 END_STREAM")))
        pb << .log(.exchange("GET", "https://good.test/real", status: 200, .allowed, codes: nil))
        pb.check()
        try client.receive(from: pb.client)
        #expect(client.messages[1]?.bodyText == "{\"mock\":true}")
        #expect(client.messages[1]?.fields.first(named: "content-type") == "application/json")
        #expect(client.messages[3]?.fields.first(named: "x-debug") == "1")
    }

    @Test("HTTP/1.1 client, h2 origin: the request goes up with the header, the response comes back with it")
    func h1ToH2() throws {
        // `--upstream-alpn ios` offers the origin h2 whatever the client spoke, as URLSession does.
        let scene = try InterceptScene(upstreamALPN: .ios, rules: Self.rules())
        let pb = Playbook(scene.env, client: try scene.client(), origin: try scene.origin(alpn: ["h2"]),
                          now: scene.now)
        pb.connects(scene)
        pb.completesHandshakes()
        pb << .sendToUpstream(.tls(.h2("preface, SETTINGS")))
        pb >> .client(sends: "GET /real HTTP/1.1\r\nHost: good.test\r\n\r\n")
        pb << .sendToUpstream(.tls(.h2("HEADERS 1 END_STREAM")))
        let origin = try H2Peer(.server)
        try origin.receive(from: pb.origin)
        #expect(origin.messages[1]?.fields.first(named: "x-debug") == "1")
        try origin.respond(1, body: "ok")
        pb >> .originSends(origin.output())
        pb << .sendToUpstream(.tls(.h2("SETTINGS ACK")))
        pb << .sendToClient(.tls(.containing(["HTTP/1.1 200 OK\r\n", "X-Debug: 1\r\n", "\r\n\r\nok"])))
        pb << .log(.exchange("the header rule on both heads") { e in
            e.status == 200 && e.rules.map(\.point) == ["request-head, response-head"]
        })
        pb.check()
    }

    @Test("h2 client, h2 origin: a mocked stream and a changed one")
    func h2ToH2() throws {
        let scene = try InterceptScene(rules: Self.rules())
        let pb = Playbook(scene.env, client: try scene.client(alpn: ["h2"]), origin: try scene.origin(alpn: ["h2"]),
                          now: scene.now)
        pb.connects(scene)
        pb.completesHandshakes()
        pb << .sendToUpstream(.tls(.h2("preface, SETTINGS, WINDOW_UPDATE 0")))
        pb << .sendToClient(.tls(.h2("SETTINGS, WINDOW_UPDATE 0")))
        let client = try H2Peer(.client)
        try client.get("/mock")
        try client.get("/real")
        pb >> .clientSends(client.output())
        pb << .sendToClient(.tls(.h2("SETTINGS ACK")))
        pb << .sendToClient(.tls(.h2("HEADERS 1, DATA 1 END_STREAM")))
        pb << .log(.exchange("the mocked stream") { e in
            e.url == "https://good.test/mock" && e.rules.map(\.action) == ["modify-headers", "answer"]
        })
        pb << .sendToUpstream(.tls(.h2("HEADERS 1 END_STREAM")))
        pb << .startTimer(.streamDeadlines)
        let origin = try H2Peer(.server)
        try origin.receive(from: pb.origin)
        #expect(origin.messages[1]?.path == "/real", "only the real stream reaches the origin")
        #expect(origin.messages[1]?.fields.first(named: "x-debug") == "1")
        try origin.respond(1, body: "ok")
        pb >> .originSends(origin.output())
        pb << .sendToUpstream(.tls(.h2("SETTINGS ACK")))
        pb << .sendToClient(.tls(.h2("HEADERS 3, DATA 3 END_STREAM")))
        pb << .log(.exchange("the changed stream") { e in
            e.url == "https://good.test/real" && e.status == 200 && e.rules.map(\.point) == ["request-head, response-head"]
        })
        pb.check()
        try client.receive(from: pb.client)
        #expect(client.messages[1]?.bodyText == "{\"mock\":true}")
        #expect(client.messages[3]?.fields.first(named: "x-debug") == "1")
    }
}
