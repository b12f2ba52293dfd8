import Foundation
import Testing

@testable import ProxyTrace

@Suite("Exchange kinds")
struct ExchangeKindTests {
    private static func record(_ kind: ExchangeKind) -> ExchangeSummary {
        ExchangeSummary(
            method: "CONNECT", url: "https://pinned.test", status: nil, kind: kind, outcome: .notEvaluated, errors: [],
            requestBytes: 517, responseBytes: 4096, durationMilliseconds: 250)
    }

    @Test("A tunnel and a refused handshake show TUNNEL and TLS where a version goes, on the console and in JSON")
    func labels() throws {
        for (kind, label) in [(ExchangeKind.tunnel, "TUNNEL"), (.refusedHandshake, "TLS")] {
            let e = Self.record(kind)
            #expect(e.consoleLine(colour: false).hasPrefix("CONNECT https://pinned.test --- \(label) ATS n/a"))
            let json = try JSONSerialization.jsonObject(with: JSONEncoder().encode(e)) as? [String: Any]
            #expect(json?["httpVersion"] as? String == label)
            #expect(json?["kind"] == nil, "the JSON event's fields are unchanged")
        }
    }

    @Test("A record read back from its JSON or a stored row keeps its kind; a request's version text is no kind")
    func readBack() throws {
        for kind in [ExchangeKind.tunnel, .refusedHandshake] {
            let decoded = try JSONDecoder().decode(ExchangeSummary.self, from: JSONEncoder().encode(Self.record(kind)))
            #expect(decoded.kind == kind)
            #expect(decoded == Self.record(kind))
        }
        #expect(ExchangeKind.recorded(method: "CONNECT", version: "TUNNEL") == .tunnel)
        #expect(ExchangeKind.recorded(method: "CONNECT", version: "TLS") == .refusedHandshake)
        // Only a CONNECT stands for a tunnel or a handshake: a request's own version text is never taken for one.
        #expect(ExchangeKind.recorded(method: "GET", version: "TUNNEL") == .http)
        #expect(ExchangeKind.recorded(method: "CONNECT", version: "HTTP/1.1") == .http)
        let request = ExchangeSummary(
            method: "GET", url: "https://a.test/", status: 200, httpVersion: "HTTP/1.1", outcome: .allowed, errors: [],
            requestBytes: 0, responseBytes: 0, durationMilliseconds: 1)
        #expect(request.kind == .http)
    }
}
