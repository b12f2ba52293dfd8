import HTTP1Core
import Testing

@testable import TrafficActions

/// Modify headers as mitmproxy users expect it: set, delete with an empty value, several values, any case.
@Suite struct HeaderModificationTests {
    let request = HTTPRequestHead(
        method: "GET", target: "/", headers: [("Host", "a.example"), ("User-Agent", "App/1"), ("Accept", "*/*")])

    func set(_ name: String, _ value: String, _ direction: HeaderModification.Direction = .both) throws
        -> HeaderModification
    {
        try HeaderModification(name: name, value: value, direction: direction)
    }

    @Test func aValueReplacesTheFieldWhateverItsCase() throws {
        let change = HeaderModification.apply([try set("user-agent", "Test/2")], to: request)
        #expect(change.changed.headers.values(for: "User-Agent") == ["Test/2"])
        #expect(change.original.headers.values(for: "User-Agent") == ["App/1"])
        #expect(change.isChanged)
    }

    @Test func anEmptyValueDeletesTheField() throws {
        let change = HeaderModification.apply([try set("ACCEPT", "")], to: request)
        #expect(!change.changed.headers.contains(name: "Accept"))
        #expect(change.changed.headers.count == 2)
    }

    @Test func severalRulesForOneNameGiveSeveralFieldsInRuleOrder() throws {
        let response = HTTPResponseHead(status: 200, headers: [("Set-Cookie", "a=1"), ("Content-Length", "0")])
        let change = HeaderModification.apply(
            [try set("Set-Cookie", "b=2"), try set("set-cookie", "c=3")], to: response)
        #expect(change.changed.headers.values(for: "Set-Cookie") == ["b=2", "c=3"])
        #expect(change.changed.headers[first: "Content-Length"] == "0")
    }

    @Test func aNewFieldIsAdded() throws {
        let change = HeaderModification.apply([try set("X-Debug", "1")], to: request)
        #expect(change.changed.headers.fields.last == .init(name: "X-Debug", value: "1"))
    }

    @Test func theDirectionLimitsWhichMessagesChange() throws {
        let onlyResponses = try set("Accept", "", .responses)
        #expect(!HeaderModification.apply([onlyResponses], to: request).isChanged)
        let response = HTTPResponseHead(status: 200, headers: [("Accept", "x")])
        #expect(!HeaderModification.apply([onlyResponses], to: response).changed.headers.contains(name: "Accept"))
        #expect(!HeaderModification.apply([try set("Accept", "", .requests)], to: response).isChanged)
    }

    @Test func framingAndHopByHopFieldsAreRefusedWhenTheRuleLoads() {
        for name in [
            "Content-Length", "transfer-encoding", "Connection", "Keep-Alive", "Upgrade", "TE", "Trailer",
            "Proxy-Connection", ":authority", "bad name", "",
        ] {
            #expect(throws: RuleActionError.self, "\(name)") { try HeaderModification(name: name, value: "x") }
        }
        #expect(throws: RuleActionError.self) { try HeaderModification(name: "X-A", value: "1\r\nX-B: 2") }
    }
}
