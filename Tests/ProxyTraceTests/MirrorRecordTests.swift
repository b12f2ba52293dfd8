import ATSPolicy
import Foundation
import ProxyTrace
import Testing

@Suite("MirrorRecord on the exchange record: console line and JSON")
struct MirrorRecordTests {
    static func exchange(_ mirror: MirrorRecord, outcome: ExchangeSummary.ATSOutcome = .notEvaluated)
        -> ExchangeSummary
    {
        var e = ExchangeSummary(
            method: "CONNECT", url: "https://old.test", status: nil, kind: .refusedHandshake, outcome: outcome,
            errors: outcome == .violation
                ? [ExchangeError(urlError: .secureConnectionFailed, sslError: .peerProtocolVersion)] : [],
            requestBytes: 0, responseBytes: 0, durationMilliseconds: 1.25)
        e.mirror = mirror
        return e
    }

    @Test("Without a plist the mirror text takes the ATS column; with one it follows the simulated verdict")
    func consoleLine() {
        let refused = MirrorRecord(
            version: "TLSv1.0", weaknesses: ["CBC"], notReproduced: [], deviceAccepted: false,
            refusal: "protocol_version", refusalStep: "after the server's hello")
        #expect(Self.exchange(refused).consoleLine(colour: false)
            == "CONNECT https://old.test --- TLS MIRROR TLSv1.0, CBC → device refused (protocol_version) 0 B 1.2 ms")
        let disagreeing = MirrorRecord(
            version: "TLSv1.0", weaknesses: [], notReproduced: ["Certificate Transparency (exempt)"],
            deviceAccepted: true, deviceVersion: "TLSv1.0", simulated: "blocked -1200/-9836 (old)",
            disagreement: "simulated: blocked; device: accepted TLSv1.0")
        #expect(Self.exchange(disagreeing, outcome: .violation).consoleLine(colour: false)
            == "CONNECT https://old.test --- TLS ATS VIOLATION -1200/-9836 MIRROR TLSv1.0 → device accepted TLSv1.0 "
                + "0 B 1.2 ms [not reproduced: Certificate Transparency (exempt)] [DISAGREEMENT simulated: blocked; "
                + "device: accepted TLSv1.0]")
    }

    @Test("JSON: the record is an object `mirror`, absent when there is none; it decodes back equal")
    func json() throws {
        let record = MirrorRecord(
            version: "TLSv1.2", weaknesses: ["static RSA key exchange"], notReproduced: [], deviceAccepted: true,
            deviceVersion: "TLSv1.2", deviceCipherSuite: "TLS_RSA_WITH_AES_128_GCM_SHA256")
        let data = try JSONEncoder().encode(Self.exchange(record))
        let object = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        let mirror = try #require(object["mirror"] as? [String: Any])
        #expect(mirror["deviceCipherSuite"] as? String == "TLS_RSA_WITH_AES_128_GCM_SHA256")
        #expect(mirror["refusal"] == nil)
        #expect(try JSONDecoder().decode(ExchangeSummary.self, from: data).mirror == record)
        var plain = Self.exchange(record)
        plain.mirror = nil
        let plainObject = try JSONSerialization.jsonObject(with: try JSONEncoder().encode(plain)) as? [String: Any]
        #expect(plainObject?["mirror"] == nil)
    }
}
