import ATSPolicy
import Foundation
import Onboarding
import ProxyCore
import ProxyServer
import TLSCore

extension RunCommand {
    /// What every session of the run shares: the policy, the mode, the minter, the trust store, the timeouts, what
    /// exchanges record; and the set-up site the proxy serves to devices.
    func environment(_ start: RunStart, _ policy: RunPolicy, _ authorities: RunAuthorities, _ outputs: RunOutputs)
        throws -> (ProxyEnvironment, OnboardingSite)
    {
        let onboarding = DeviceOptions.onboardingSite(
            authority: authorities.authority, policy: policy.source, profile: profileText(start.profile),
            ats: ats.rawValue + blockingText)
        let capturing = outputs.capture != nil
        let environment = ProxyEnvironment(
            policy: policy.policy, mode: ats.mode, blockStyle: block.style,
            mappings: try HostMapping.parsingAll(map),
            passthrough: try HostPattern.parsingAll(passthrough, option: "--passthrough"),
            credentials: start.credentials,
            minter: LeafMinter(authority: authorities.authority, untrustedAuthority: authorities.neverTrusted),
            factsCollector: HandshakeFactsCollector(
                trust: try TrustEvaluator(useSystemRoots: true, userRoots: policy.extraRoots)),
            // A capture keeps the trace records, so sessions make them (level 1 at least); stderr shows them only
            // at the --diagnostics level (StandardErrorSink filters by it).
            diagnosticsLevel: capturing ? max(start.level, 1) : start.level, jsonEvents: logJSON != nil,
            timeouts: .init(
                handshake: .milliseconds(Int(handshakeTimeout * 1000)),
                client: .milliseconds(Int(clientTimeout * 1000)),
                response: .milliseconds(Int(responseTimeout * 1000))),
            upstreamALPN: upstreamALPN,
            upstreamResumption: upstreamResumption, insecureUpstream: insecureUpstream,
            recording: Self.recording(captureBodyLimit: capturing ? captureOptions.bodyLimit : nil, level: start.level),
            localSite: OnboardingLocalSite(onboarding), appleHosts: deviceOptions.appleHosts,
            autoPassthrough: pinning.autoPassthroughStore(), mirrorComparesPolicy: ats == .mirror && plist != nil,
            rules: try ruleOptions.ruleBook(webView: webOptions.web != nil),
            breakpointTimeout: try ruleOptions.breakpointHoldLimit())
        return (environment, onboarding)
    }
}
