import ATSPolicy
import ProxyTrace
import Testing

@testable import ProxyCore

private let tooOld = ATSViolation(
    kind: .tlsVersionTooLow, urlError: .secureConnectionFailed, sslError: nil, explanation: "TLS 1.0",
    fix: .noExceptionCanHelp(reason: "test"))
private let unreachable = ATSViolation(
    kind: .unreachable, urlError: .cannotConnectToHost, sslError: nil, explanation: "refused",
    fix: .noExceptionCanHelp(reason: "test"))

@Suite("VerdictAction: the one mapping from a verdict to relaying or blocking")
struct VerdictActionTests {
    @Test("Nothing found: relayed, allowed and annotated only when the policy judged it")
    func noViolation() {
        #expect(VerdictAction(for: Verdict(source: .policy, violations: []), mode: .enforce, blockStyle: .tls)
            == .relay(outcome: .allowed, annotate: false))
        #expect(VerdictAction(for: Verdict(source: .policy, violations: []), mode: .annotate, blockStyle: .tls)
            == .relay(outcome: .allowed, annotate: true))
        #expect(VerdictAction(for: Verdict(source: .notEvaluated, violations: []), mode: .off, blockStyle: .tls)
            == .relay(outcome: .notEvaluated, annotate: false))
        #expect(VerdictAction(for: Verdict(source: .notATS, violations: []), mode: .off, blockStyle: .tls)
            == .relay(outcome: .notEvaluated, annotate: false))
    }

    @Test("A violation: blocked with the block style in enforce, relayed annotated in annotate unless nothing can be")
    func violation() {
        let relayable = Verdict(source: .policy, violations: [tooOld])
        let failedHandshake = Verdict(source: .policy, violations: [tooOld], relayable: false)
        #expect(VerdictAction(for: relayable, mode: .enforce, blockStyle: .tls)
            == .block(outcome: .blocked, style: .tls))
        #expect(VerdictAction(for: relayable, mode: .enforce, blockStyle: .http)
            == .block(outcome: .blocked, style: .http))
        #expect(VerdictAction(for: relayable, mode: .annotate, blockStyle: .tls)
            == .relay(outcome: .violation, annotate: true))
        #expect(VerdictAction(for: failedHandshake, mode: .annotate, blockStyle: .tls)
            == .block(outcome: .blocked, style: .http))
        #expect(VerdictAction(for: failedHandshake, mode: .enforce, blockStyle: .tls)
            == .block(outcome: .blocked, style: .tls))
    }

    @Test("No ATS verdict (unreachable, untrusted under --ats off): failed, answered over HTTP when nothing is there")
    func notATS() {
        let gone = Verdict(source: .notATS, violations: [unreachable], relayable: false)
        for mode in [ATSMode.enforce, .annotate, .off] {
            #expect(VerdictAction(for: gone, mode: mode, blockStyle: .tls, toleratesUntrusted: true)
                == .block(outcome: .failed, style: .http))
        }
        let untrusted = Verdict(source: .notATS, violations: [tooOld])
        #expect(VerdictAction(for: untrusted, mode: .off, blockStyle: .tls) == .block(outcome: .failed, style: .tls))
        #expect(VerdictAction(for: untrusted, mode: .off, blockStyle: .tls, toleratesUntrusted: true)
            == .relay(outcome: .notEvaluated, annotate: false))
    }
}

extension VerdictActionTests {
    @Test("--ats mirror: a violation is relayed without X-ATS-* headers (the device decides); nothing to relay is answered")
    func mirror() {
        let relayable = Verdict(source: .policy, violations: [tooOld])
        #expect(VerdictAction(for: relayable, mode: .mirror, blockStyle: .tls)
            == .relay(outcome: .violation, annotate: false))
        #expect(VerdictAction(for: Verdict(source: .policy, violations: []), mode: .mirror, blockStyle: .tls)
            == .relay(outcome: .allowed, annotate: false))
        #expect(VerdictAction(for: Verdict(source: .policy, violations: [tooOld], relayable: false), mode: .mirror,
            blockStyle: .tls) == .block(outcome: .blocked, style: .http))
    }
}

@Suite("MirrorTally: the summary at exit")
struct MirrorTallyTests {
    @Test("Counts by kind, in name order; agreements only when a plist was compared")
    func summary() {
        let tally = MirrorTally()
        #expect(tally.summary(compared: true) == nil)
        tally.count(kind: "tlsVersionTooLow", deviceAccepted: true, agreed: false)
        tally.count(kind: "tlsVersionTooLow", deviceAccepted: false, agreed: true)
        tally.count(kind: "expired", deviceAccepted: false, agreed: true)
        #expect(tally.summary(compared: true) == """
            atsproxy: mirror summary: 3 connections, the device accepted 1, refused 2; 2 agreed with the simulation, \
            1 disagreed
              expired: accepted 0, refused 1; agreed 1, disagreed 0
              tlsVersionTooLow: accepted 1, refused 1; agreed 1, disagreed 1

            """)
        let plain = MirrorTally()
        plain.count(kind: "none", deviceAccepted: true, agreed: nil)
        #expect(plain.summary(compared: false) == """
            atsproxy: mirror summary: 1 connection, the device accepted 1, refused 0
              none: accepted 1, refused 0

            """)
    }
}
