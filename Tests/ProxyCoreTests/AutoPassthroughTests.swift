import ProxyCore
import Testing

@Suite("Auto-passthrough decisions")
struct AutoPassthroughTests {
    @Test("A host refused three times in a row while another is trusted is tunnelled, once")
    func pinnedHostTunnelled() {
        var ledger = AutoPassthroughLedger()
        ledger.accepted(host: "cdn.example.com")
        ledger.accepted(host: "www.example.com")
        #expect(ledger.refused(host: "api.example.com") == .nothing)
        #expect(ledger.refused(host: "api.example.com") == .nothing)
        #expect(ledger.refused(host: "api.example.com") == .tunnel(host: "api.example.com", refusals: 3, trustedHosts: 2))
        #expect(ledger.tunnelled == ["api.example.com"])
        // Told once: a later refusal (a connection already under way) decides nothing more.
        #expect(ledger.refused(host: "api.example.com") == .nothing)
    }

    @Test("An acceptance between refusals starts the count again")
    func acceptanceResets() {
        var ledger = AutoPassthroughLedger()
        ledger.accepted(host: "www.example.com")
        _ = ledger.refused(host: "api.example.com")
        _ = ledger.refused(host: "api.example.com")
        ledger.accepted(host: "api.example.com")
        #expect(ledger.refused(host: "api.example.com") == .nothing)
        #expect(ledger.refused(host: "api.example.com") == .nothing)
        #expect(ledger.tunnelled.isEmpty)
    }

    @Test("A client that trusts no host is told the CA is not trusted, once, and nothing is tunnelled")
    func noTrustIsNotPinning() {
        var ledger = AutoPassthroughLedger()
        #expect(ledger.refused(host: "a.example.com") == .nothing)
        #expect(ledger.refused(host: "b.example.com") == .nothing)
        #expect(ledger.refused(host: "a.example.com") == .caNotTrusted(refusals: 3, hosts: 2))
        for _ in 0..<10 { #expect(ledger.refused(host: "a.example.com") == .nothing) }
        #expect(ledger.tunnelled.isEmpty)
        // Refusals before the CA was trusted do not count towards pinning once it is.
        ledger.accepted(host: "b.example.com")
        #expect(ledger.refused(host: "a.example.com") == .nothing)
        #expect(ledger.tunnelled.isEmpty)
    }

    @Test("Trusting only the refused host itself is no evidence of pinning")
    func trustOfTheSameHostOnly() {
        var ledger = AutoPassthroughLedger()
        ledger.accepted(host: "api.example.com")
        for _ in 0..<3 { _ = ledger.refused(host: "api.example.com") }
        #expect(ledger.tunnelled.isEmpty)
    }

    @Test("The store keeps a ledger per client address")
    func storePerClient() {
        let store = AutoPassthroughStore(threshold: 2)
        store.accepted(client: "192.168.1.20", host: "www.example.com")
        store.accepted(client: "192.168.1.21", host: "www.example.com")
        #expect(!store.hasTunnelledHosts)
        _ = store.refused(client: "192.168.1.20", host: "api.example.com")
        let decision = store.refused(client: "192.168.1.20", host: "api.example.com")
        #expect(decision == .tunnel(host: "api.example.com", refusals: 2, trustedHosts: 1))
        #expect(store.isTunnelled(client: "192.168.1.20", host: "api.example.com"))
        #expect(!store.isTunnelled(client: "192.168.1.21", host: "api.example.com"))
    }
}
