import ATSPolicy
import Foundation
import ProxyTrace
import RuleStage
import Testing
import Throttle

@testable import ProxyCore

/// `--throttle` values as the rule options an `InterceptScene` takes.
func throttleOptions(_ values: String...) -> [(option: String, value: String)] {
    values.map { ("--throttle", $0) }
}

/// A rule book from `--throttle` values, as `run` builds it.
func throttleBook(_ values: String...) throws -> RuleBook {
    RuleBook(optionRules: try InterceptScene.loadRules(values.map { ("--throttle", $0) }))
}

/// `.throttle` with this profile; `shared`: for the whole proxy (the rule's link) or this connection's own.
func throttles(_ profile: LinkProfile, shared: Bool) -> Expect {
    Expect(kind: .one { sent in
        guard case .throttle(let order) = sent.command else { return false }
        return order.profile == profile && (order.sharedLink != nil) == shared
    }, description: "throttle(\(profile.name), \(shared ? "whole proxy" : "this connection"))")
}

/// An exchange whose record carries exactly these rule summaries.
func exchangeRuled(_ url: String, _ summaries: [String]) -> LogMatch {
    .exchange("\(url) ruled \(summaries)") { $0.url == url && $0.rules.map(\.summary) == summaries }
}

@Suite("Playbooks: --throttle, decided by the session, applied by the adapter")
struct ThrottlePlaybooks {
    @Test("--throttle 3G: the connection is throttled on the whole proxy's link before its upstream is contacted, and every exchange of it says so")
    func wholeProxyCleartext() throws {
        let env = try SessionHarness.environment(exceptionAllowingHTTP: "media.test", rules: try throttleBook("3G"))
        let pb = Playbook(env)
        pb >> .clientBytes(bytes("GET http://media.test/a HTTP/1.1\r\nHost: media.test\r\n\r\n"))
        pb << .startTimer(.requestHead)
        pb << throttles(.threeG, shared: true)
        pb << .connectUpstream(address: "media.test", port: 80)
        pb >> .upstreamConnected
        pb << .sendToUpstream(.prefix("GET /a HTTP/1.1\r\n"))
        pb << .startTimer(.response)
        pb >> .upstreamBytes(bytes("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"))
        pb << .sendToClient("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        pb << .log(exchangeRuled("http://media.test/a", ["[--throttle #1] throttle: 3G (whole proxy)"]))
        // The next request on the connection: no second throttle, the same rule on its record.
        pb >> .clientBytes(bytes("GET http://media.test/b HTTP/1.1\r\nHost: media.test\r\n\r\n"))
        pb << .sendToUpstream(.prefix("GET /b HTTP/1.1\r\n"))
        pb << .startTimer(.response)
        pb >> .upstreamBytes(bytes("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"))
        pb << .sendToClient("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        pb << .log(exchangeRuled("http://media.test/b", ["[--throttle #1] throttle: 3G (whole proxy)"]))
        pb.check()
    }

    @Test("Two connections under --throttle 3G share one link: the rule's own buckets")
    func oneLinkForTheProxy() throws {
        let env = try SessionHarness.environment(exceptionAllowingHTTP: "media.test", rules: try throttleBook("3G"))
        var orders: [ThrottleOrder] = []
        for id in 1...2 {
            let session = ProxySession(id: UInt64(id), environment: env, now: { 0 })
            let commands = session.handle(.clientBytes(bytes("GET http://media.test/ HTTP/1.1\r\nHost: media.test\r\n\r\n")))
            for case .throttle(let order) in commands { orders.append(order) }
        }
        #expect(orders.count == 2)
        #expect(orders.count == 2 && orders[0] == orders[1], "the same shared buckets")
        #expect(orders.first?.sharedLink?.downlink != nil)
    }

    @Test("A custom profile for one host: that host's connection is throttled on a link of its own; another host's is not, and its record names no rule")
    func perHost() throws {
        let rules = try throttleBook("down=1Mbit,latency=50ms@media.test")
        let env = try SessionHarness.environment(mode: .off, rules: rules)
        let custom = try LinkProfile(parsing: "down=1Mbit,latency=50ms")
        let pb = Playbook(env)
        pb >> .clientBytes(bytes("GET http://media.test/a HTTP/1.1\r\nHost: media.test\r\n\r\n"))
        pb << .startTimer(.requestHead)
        pb << throttles(custom, shared: false)
        pb << .connectUpstream(address: "media.test", port: 80)
        pb >> .upstreamConnected
        pb << .sendToUpstream(.prefix("GET /a HTTP/1.1\r\n"))
        pb << .startTimer(.response)
        pb >> .upstreamBytes(bytes("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"))
        pb << .sendToClient("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        pb << .log(exchangeRuled(
            "http://media.test/a",
            ["[--throttle #1] throttle: custom: down 1 Mbit/s, 50 ms; up unlimited, 50 ms"]))
        pb.check()

        let other = Playbook(env)
        other >> .clientBytes(bytes("GET http://other.test/a HTTP/1.1\r\nHost: other.test\r\n\r\n"))
        other << .startTimer(.requestHead)
        other << .connectUpstream(address: "other.test", port: 80)
        other >> .upstreamConnected
        other << .sendToUpstream(.prefix("GET /a HTTP/1.1\r\n"))
        other << .startTimer(.response)
        other >> .upstreamBytes(bytes("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"))
        other << .sendToClient(.prefix("HTTP/1.1 200 OK\r\n"))
        other << .log(exchangeRuled("http://other.test/a", []))
        other.check()
    }

    @Test("An intercepted connection is throttled by its SNI's host pattern, before the upstream is contacted")
    func interceptedBySNI() throws {
        let scene = try InterceptScene(rules: throttleOptions("Edge@other.test", "LTE@*.good.test"))
        let pb = Playbook(scene.env, client: try scene.client(), origin: try scene.origin(), now: scene.now)
        pb >> .clientBytes(scene.connect)
        pb << .startTimer(.requestHead)
        pb << .sendToClient("HTTP/1.1 200 Connection established\r\n\r\n")
        pb << .startTimer(.clientHello)
        pb >> .clientFlight
        pb << throttles(.lte, shared: false)
        pb << .connectUpstream(address: "127.0.0.1", port: 9443)
        pb >> .upstreamConnected
        pb << .startTimer(.upstreamHandshake)
        pb << .sendToUpstream(.tlsRecords)
        pb.completesHandshakes()
        pb >> .client(sends: "GET / HTTP/1.1\r\nHost: good.test\r\n\r\n")
        pb << .sendToUpstream(.tls("GET / HTTP/1.1\r\nHost: good.test\r\n\r\n"))
        pb << .startTimer(.response)
        pb >> .origin(sends: "HTTP/1.1 204 No Content\r\n\r\n")
        pb << .sendToClient(.tls(.prefix("HTTP/1.1 204 No Content\r\n")))
        pb << .log(exchangeRuled("https://good.test/", ["[--throttle #2] throttle: LTE"]))
        pb.check()
    }

    @Test("No rules: no throttle, and a 100% Loss profile says the app will time out")
    func totalLossNotice() throws {
        let env = try SessionHarness.environment(exceptionAllowingHTTP: "media.test", rules: try throttleBook("100% Loss"))
        let session = ProxySession(id: 1, environment: env, now: { 0 })
        let commands = session.handle(.clientBytes(bytes("GET http://media.test/ HTTP/1.1\r\nHost: media.test\r\n\r\n")))
        #expect(commands.contains { if case .throttle(let o) = $0 { o.profile.dropsEverything } else { false } })
        #expect(commands.contains { if case .log(.notice(let n, _)) = $0 { n.contains("nothing passes") } else { false } })

        let plain = try SessionHarness.environment(exceptionAllowingHTTP: "media.test")
        let unruled = ProxySession(id: 2, environment: plain, now: { 0 })
        let none = unruled.handle(.clientBytes(bytes("GET http://media.test/ HTTP/1.1\r\nHost: media.test\r\n\r\n")))
        #expect(!none.contains { if case .throttle = $0 { true } else { false } })
    }
}
