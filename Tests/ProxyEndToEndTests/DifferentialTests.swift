import Foundation
import Testing

/// The same client, direct and through the proxy, on each protocol path: what an app compares (status, its own
/// headers byte for byte, body; a WebSocket's opening and its echo) must not differ. Proxy-added and hop-by-hop
/// fields are not compared (the client reports only the origin's own fields). Cases: a plain GET; header values
/// that are not UTF-8 both ways; a POST body (its SHA-256 as the origin got it); a WebSocket (HTTP/1.1 Upgrade, or
/// RFC 8441 extended CONNECT on HTTP/2); a response without a length that the origin ends with a reset, which
/// must reach the client cut (a reset, RST_STREAM), never complete (close_notify, END_STREAM); on HTTP/2, an
/// `:authority` with a `host` naming another host, which the origin refuses as malformed and so must every path;
/// a complete early answer (413 and its body) to a 1 MiB upload still being sent, which an h2 origin follows with
/// RST_STREAM(NO_ERROR) and an HTTP/1.1 origin with its connection's end (RFC 9113 §8.1), four times as losing it
/// is a race; on HTTP/2 clients, a response whose header section is over the proxy's 64 KiB limit next to another
/// on the same connection, which must still be answered as direct; on HTTP/1.1 clients, an HTTP/1.0 request the
/// origin answers chunked, which must read as the same bytes and end by the connection's close.
/// Two cases differ from direct on purpose and are asserted for what they are: the oversized response becomes 502,
/// and the fields named in an HTTP/1.1 `Connection` (X-Private, both ways) do not pass the proxy (RFC 9110 §7.6.1).
@Suite("Differential: direct and through the proxy, h1→h1, h1→h2, h2→h1, h2→h2")
struct DifferentialTests {
    /// One origin process speaking `alpns` with the good.test certificate.
    final class DiffOrigin: Sendable {
        let process: TestProcess
        let port: Int
        init(_ e2e: E2E, script: String, alpns: String, in folder: URL) async throws {
            let (cert, key) = e2e.cert("good")
            process = try TestProcess(
                "/usr/bin/python3", [script, "origin", cert, key, alpns], in: folder, name: "diff-origin-" + alpns.replacingOccurrences(of: "/", with: ""))
            port = try await process.waitForOutput { text in
                text.split(separator: "\n").first { $0.hasPrefix("PORT ") }.flatMap { Int($0.dropFirst(5)) }
            }
        }
    }

    enum Path: String, CaseIterable, CustomTestStringConvertible {
        case h1h1 = "h1→h1", h1h2 = "h1→h2", h2h1 = "h2→h1", h2h2 = "h2→h2"
        var testDescription: String { rawValue }
        var client: String { self == .h1h1 || self == .h1h2 ? "h1" : "h2" }
        var originALPN: String { self == .h1h1 || self == .h2h1 ? "http/1.1" : "h2,http/1.1" }
        /// An HTTP/1.1 client reaches an h2 upstream when the proxy offers h2 as URLSession does.
        var proxyArguments: [String] { self == .h1h2 ? ["--upstream-alpn", "ios"] : [] }
        /// The protocol the proxy's lines name for the upstream's plain exchanges.
        var upstreamVersion: String { self == .h1h2 || self == .h2h2 ? "HTTP/2.0" : "HTTP/1.1" }
    }

    private func runClient(
        _ e2e: E2E, script: String, port: Int, ca: String, proto: String, proxy: Int?, in folder: URL
    ) async throws -> [String: Any] {
        let r = try await runProcess(
            "/usr/bin/python3",
            [script, "client", "good.test", String(port), ca, proto] + (proxy.map { [String($0)] } ?? []),
            in: folder, timeout: .seconds(90))
        guard r.status == 0, let object = try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any]
        else { throw HarnessError("differential client failed (\(r.status)): \(r.stdout) \(r.stderr)") }
        return object
    }

    /// A case's result as sorted JSON text, for comparing and for failure messages.
    private func text(_ value: Any?) -> String {
        guard let value else { return "nil" }
        do {
            return String(decoding: try JSONSerialization.data(withJSONObject: value, options: [.sortedKeys, .fragmentsAllowed, .withoutEscapingSlashes]), as: UTF8.self)
        } catch {
            return "unencodable: \(error)"
        }
    }

    /// RFC 9110 §7.6.1: on HTTP/1.1 the fields `Connection` names go with it. The origin sends `Connection: x-private`
    /// and `X-Private: 1` (an h2 origin only `x-private`, an ordinary field there) and says in `X-Saw-Private` whether
    /// the request's X-Private, which an HTTP/1.1 client names in its own `Connection`, reached it.
    private func checkConnectionNamedFields(path: Path, direct: [String: Any], proxied: [String: Any]) throws {
        let d = try #require(direct["private"] as? [String: Any]), p = try #require(proxied["private"] as? [String: Any])
        #expect(text(p["status"]) == text(d["status"]) && text(p["body"]) == text(d["body"]), "direct \(text(d)), proxied \(text(p))")
        let directFields = try #require(d["fields"] as? [String: String]), fields = try #require(p["fields"] as? [String: String])
        let yes = "796573", no = "6e6f", one = "31"  // hex of "yes", "no", "1"
        if path.client == "h1" {
            #expect(directFields["x-saw-private"] == yes && fields["x-saw-private"] == no, "direct \(text(d)), proxied \(text(p))")
            #expect(directFields["x-private"] == one, "\(text(d))")
        }
        if path.originALPN == "http/1.1" {
            #expect(fields["x-private"] == nil, "X-Private, named in the origin's Connection, passed the proxy: \(text(p))")
        } else {
            #expect(fields["x-private"] == one, "an h2 origin's x-private is end to end: \(text(p))")
        }
    }

    @Test("The same answers direct and through the proxy", arguments: Path.allCases)
    func sameAnswers(path: Path) async throws {
        let e2e = try E2E.shared()
        let folder = try e2e.folder()
        let script = differentialScript
        // The reference: the client straight to an origin that speaks its protocol.
        let dual = try await DiffOrigin(e2e, script: script, alpns: "h2,http/1.1", in: folder)
        let direct = try await runClient(
            e2e, script: script, port: dual.port, ca: e2e.testCA, proto: path.client, proxy: nil, in: folder)
        let origin = path.originALPN == "http/1.1"
            ? try await DiffOrigin(e2e, script: script, alpns: "http/1.1", in: folder) : dual
        let proxy = try await Proxy(
            e2e, ["--map", "good.test=127.0.0.1:\(origin.port)"] + path.proxyArguments, in: folder)
        let proxied = try await runClient(
            e2e, script: script, port: origin.port, ca: e2e.proxyCA, proto: path.client, proxy: proxy.port, in: folder)
        for name in ["plain", "latin", "post", "websocket", "cut", "authority", "early", "other", "http10"] {
            #expect(text(proxied[name]) == text(direct[name]), "\(name): direct \(text(direct[name]))")
        }
        // The non-UTF-8 values really were there to be compared.
        #expect(text(direct["latin"]).contains("6e61ef766520636166e9"), "\(text(direct["latin"]))")
        #expect((direct["websocket"] as? [String: Any])?["opened"] as? Bool == true, "\(text(direct["websocket"]))")
        #expect(text(direct["post"]).contains("got 30720 bytes"), "\(text(direct["post"]))")
        #expect(text(direct["cut"]) == #"{"ending":"cut","status":200}"#, "\(text(direct["cut"]))")
        if path.client == "h2" {
            #expect(text(direct["authority"]) == #"{"ending":"cut","status":null}"#, "\(text(direct["authority"]))")
        }
        // The early answer arrived whole directly, each time.
        let early = #"{"body":"too large, answered early","ending":"complete","status":413}"#
        #expect(text(direct["early"]) == "[" + Array(repeating: early, count: 4).joined(separator: ",") + "]", "\(text(direct["early"]))")
        if path.client == "h2" {
            // Directly the large header section is accepted; through the proxy it is that stream's 502 alone.
            #expect(text(direct["bighead"]) == #"{"ending":"complete","status":200}"#, "\(text(direct["bighead"]))")
            #expect(text(proxied["bighead"]) == #"{"ending":"complete","status":502}"#, "\(text(proxied["bighead"]))")
            #expect(text(direct["other"]).contains("body of /plain"), "\(text(direct["other"]))")
        } else {
            // Chunked on the wire directly; through the proxy the same bytes, close-delimited, ending cleanly.
            #expect(direct["http10_chunked"] as? Bool == true && proxied["http10_chunked"] as? Bool == false,
                    "direct \(text(direct["http10_chunked"])), proxied \(text(proxied["http10_chunked"]))")
            #expect(text(direct["http10"]).contains(#""ending":"closed","status":200"#), "\(text(direct["http10"]))")
        }
        try checkConnectionNamedFields(path: path, direct: direct, proxied: proxied)
        // Each exchange has its line, the WebSocket's too.
        let version = path.upstreamVersion
        _ = try await proxy.process.waitForLine(startingWith: "GET https://good.test/latin 200 \(version) ATS ok")
        let ws = path.client == "h1" ? "GET https://good.test/ws 101 HTTP/1.1 ATS ok" : "GET https://good.test/ws 200 "
        _ = try await proxy.process.waitForLine(startingWith: ws)
    }
}
