import ATSPolicy
import CaptureStore
import ProxyTrace

// ATSProxy's own facts in a HAR entry, in underscore-prefixed fields as the HAR spec allows: `_ats` (the verdict,
// the app's error codes, the deciding plist entry and each violation with its fix), `_tls` (both legs and the
// upstream's chain) and `_atsproxy` (the exchange's place in the capture, what the proxy did, the legs' heads where
// the proxy changed them).
extension HAREntry {
    static func ats(_ e: ExchangeSummary) -> HARValue {
        var ats = HARObject()
        ats.add("verdict", e.outcome.rawValue)
        if let first = e.errors.first {
            ats.add("urlError", code(first.urlError.code, first.urlError.name))
            ats.add("sslError", first.sslError.map { code($0.code, $0.name) })
        }
        if let decision = e.connection?.decision {
            ats.add("decidedBy", decision.keyPath.isEmpty ? "ATS defaults" : decision.keyPathString)
            ats.add("keyPath", .array(decision.keyPath.map(HARValue.string)))
            ats.add("reason", decision.reason)
            if !decision.notes.isEmpty { ats.add("notes", .array(decision.notes.map(HARValue.string))) }
        }
        let violations = e.connection?.violations ?? []
        ats.add("violations", .array(violations.map { v in
            var o = HARObject()
            o.add("kind", v.kind.rawValue)
            o.add("explanation", v.explanation)
            o.add("fix", v.fix.summary)
            o.add("fixPlist", v.fix.plistSnippet)
            o.add("urlError", code(v.urlError.code, v.urlError.name))
            o.add("sslError", v.sslError.map { code($0.code, $0.name) })
            return o.value
        }))
        return ats.value
    }

    /// One rule that acted, for `_atsproxyRules`.
    static func rule(_ rule: AppliedRule) -> HARValue {
        var o = HARObject()
        o.add("id", rule.id)
        o.add("action", rule.action)
        o.add("point", rule.point)
        o.add("note", rule.note)
        return o.value
    }

    static func code(_ code: Int, _ name: String) -> HARValue {
        .object([HARMember("code", .int(code)), HARMember("name", .string(name))])
    }

    static func tls(_ connection: ConnectionRecord?) -> HARValue? {
        guard let connection, connection.clientTLS != nil || connection.upstreamTLS != nil
            || connection.upstreamHandshake != nil
        else { return nil }
        var tls = HARObject()
        tls.add("client", connection.clientTLS.map { leg($0).value })
        if connection.upstreamTLS != nil || connection.upstreamHandshake != nil {
            var upstream = HARObject()
            if let facts = connection.upstreamTLS { upstream.members = leg(facts).members }
            if let facts = connection.upstreamHandshake {
                if connection.upstreamTLS == nil {
                    upstream.add("version", facts.version?.plistName)
                    upstream.add("cipherSuite", facts.cipherSuiteName)
                    upstream.add("alpn", facts.alpn)
                }
                upstream.add("keyExchangeGroup", facts.keyExchangeGroup)
                upstream.add("failure", facts.failure.map { String(describing: $0) })
                upstream.add("trust", String(describing: facts.trust))
                upstream.add("hostnameMatches", facts.hostnameMatches)
                upstream.add("chain", .array(facts.chain.map(certificate)))
            }
            tls.add("upstream", upstream.value)
        }
        return tls.value
    }

    static func leg(_ facts: TLSLegFacts) -> HARObject {
        var leg = HARObject()
        leg.add("version", facts.version)
        leg.add("cipherSuite", facts.cipherSuite)
        leg.add("alpn", facts.alpn)
        leg.add("serverName", facts.serverName)
        leg.add("resumed", facts.resumed)
        return leg
    }

    static func certificate(_ c: CertificateFacts) -> HARValue {
        var o = HARObject()
        o.add("subject", c.subject)
        o.add("issuer", c.issuer)
        o.add("key", c.keyType.rawValue + " " + String(c.keyBits) + (c.curve.map { " " + $0 } ?? ""))
        o.add("signatureHash", c.signatureHash.rawValue)
        o.add("notBefore", HARDate.iso8601(c.notBefore.timeIntervalSince1970))
        o.add("notAfter", HARDate.iso8601(c.notAfter.timeIntervalSince1970))
        if c.isSelfSigned { o.add("selfSigned", true) }
        if c.isCA { o.add("ca", true) }
        o.add("sha256", c.sha256Fingerprint)
        return o.value
    }

    static func atsproxy(_ exchange: CapturedExchange, kind: Kind) -> HARValue {
        let e = exchange.record
        var o = HARObject()
        o.add("id", Int(exchange.id))
        o.add("run", Int(exchange.runID))
        o.add("kind", kind.rawValue)
        o.add("action", e.action?.rawValue)
        o.add("recordedVersion", e.httpVersion)
        if absoluteURL(e.url, kind: kind) != e.url, kind == .exchange { o.add("recordedURL", e.url) }
        if kind != .exchange {
            o.add("bytesFromClient", e.requestBytes)
            o.add("bytesToClient", e.responseBytes)
        }
        o.add("interruption", e.interruption)
        if let client = e.connection?.clientAddress { o.add("clientAddress", client) }
        if let upstream = e.connection?.upstreamAddress { o.add("upstreamAddress", upstream) }
        if let detail = e.detail, detail.clientResponse != nil, let original = detail.response {
            var head = HARObject()
            head.add("status", original.status)
            head.add("statusText", original.reason)
            head.add("headers", .array(visibleFields(original.headers).map(nameValue)))
            o.add("upstreamResponse", head.value)
        }
        if let detail = e.detail, let forwarded = detail.forwardedRequest {
            var head = HARObject()
            head.add("method", forwarded.method)
            head.add("target", forwarded.target)
            head.add("httpVersion", httpVersion(forwarded.version.description))
            head.add("headers", .array(visibleFields(forwarded.headers).map(nameValue)))
            o.add("forwardedRequest", head.value)
        }
        return o.value
    }
}
