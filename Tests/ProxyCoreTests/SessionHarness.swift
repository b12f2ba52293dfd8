import ATSPolicy
import Foundation
import HTTP1Core
import ProxyTrace
import RuleStage
import TLSCore

import Onboarding
import ProxyServer
@testable import ProxyCore

/// Builds environments for socket-free session tests: a fresh in-memory CA, no system roots.
enum SessionHarness {
    static func environment(
        mode: ATSMode = .enforce, block: BlockStyle = .tls, exceptionAllowingHTTP: String? = nil,
        credentials: ProxyCredentials? = nil, mappings: [HostMapping] = [], passthrough: [String] = [],
        upstreamALPN: UpstreamALPN = .mirror, diagnosticsLevel: Int = 0, jsonEvents: Bool = false,
        timeouts: ProxyEnvironment.Timeouts = .init(), trustingOwnCA: Bool = false,
        onboarding: OnboardingSite? = nil, appleHosts: AppleHosts? = .builtIn, rules: RuleBook? = nil
    ) throws -> ProxyEnvironment {
        var ats = PlistDictionary()
        if let host = exceptionAllowingHTTP {
            let entry = PlistValue.dictionary(PlistDictionary([(key: "NSExceptionAllowsInsecureHTTPLoads", value: .bool(true))]))
            ats = PlistDictionary([(key: "NSExceptionDomains", value: .dictionary(PlistDictionary([(key: host, value: entry)])))])
        }
        let authority = try CertificateAuthority.create(commonName: "ProxyCoreTests CA")
        return ProxyEnvironment(
            policy: ATSPolicy(atsDictionary: .dictionary(ats)), mode: mode, blockStyle: block, mappings: mappings,
            passthrough: try passthrough.map { try HostPattern(parsing: $0, option: "--passthrough") },
            credentials: credentials,
            minter: LeafMinter(authority: authority),
            // Trusting its own CA makes origins minted by `env.minter` trusted upstreams, as real ones would be.
            factsCollector: HandshakeFactsCollector(trust: try TrustEvaluator(
                useSystemRoots: false, userRoots: trustingOwnCA ? [authority.certificate] : [])),
            diagnosticsLevel: diagnosticsLevel, jsonEvents: jsonEvents, timeouts: timeouts,
            upstreamALPN: upstreamALPN, localSite: onboarding.map(OnboardingLocalSite.init), appleHosts: appleHosts,
            rules: rules)
    }

    /// A fixed clock for sessions: durations are zero, and it is the time of this test run, for the session judges
    /// certificates at its clock's time and the tests' certificates are minted at the wall clock's.
    static let fixedNow = Date().timeIntervalSince1970

    static func session(_ env: ProxyEnvironment) -> ProxySession {
        ProxySession(id: 1, environment: env, now: { fixedNow })
    }
}

extension [ProxyCommand] {
    /// Everything sent to the client, concatenated.
    var toClient: [UInt8] {
        flatMap { (c: ProxyCommand) -> [UInt8] in if case .sendToClient(let b) = c { b } else { [] } }
    }
    var toUpstream: [UInt8] {
        flatMap { (c: ProxyCommand) -> [UInt8] in if case .sendToUpstream(let b) = c { b } else { [] } }
    }
    var clientText: String { String(decoding: toClient, as: UTF8.self) }
    var upstreamText: String { String(decoding: toUpstream, as: UTF8.self) }
    var connects: [(String, Int)] {
        compactMap { (c: ProxyCommand) -> (String, Int)? in
            if case .connectUpstream(let a, let p) = c { (a, p) } else { nil }
        }
    }
    var closesClient: Bool { contains(.closeClient) || contains(.resetClient) }
    var notices: [String] {
        compactMap { (c: ProxyCommand) -> String? in if case .log(.notice(let text, _)) = c { text } else { nil } }
    }
    var exchanges: [ExchangeSummary] {
        compactMap { (c: ProxyCommand) -> ExchangeSummary? in if case .log(.exchange(let e)) = c { e } else { nil } }
    }
    var events: [TraceEvent] {
        compactMap { (c: ProxyCommand) -> TraceEvent? in if case .log(.event(let e)) = c { e } else { nil } }
    }
    var records: [DiagnosticsRecord] {
        compactMap { (c: ProxyCommand) -> DiagnosticsRecord? in
            if case .log(.diagnostics(let r)) = c { r } else { nil }
        }
    }
}

/// Bytes of a text, for feeding a session.
func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }
