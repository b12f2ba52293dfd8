import ATSPolicy
import Foundation
import ProxyServer

extension RunCommand {
    /// The simulated band as the banner says it, naming the band a version between bands (`--ios 16`) was
    /// simulated with, as lint and explain do.
    func profileText(_ profile: IOSProfile) -> String {
        profile.rawValue == iosVersion ? "\(profile)" : "\(profile) behaviour band (for --ios \(iosVersion))"
    }

    /// What blocking means in this mode, after the banner's `ATS <mode>`.
    var blockingText: String {
        switch ats {
        case .enforce: " (block \(block.rawValue))"
        case .mirror:
            plist == nil
                ? " (the device's own ATS decides; nothing is blocked)"
                : " (two verdicts per connection: the policy's and the device's)"
        case .annotate, .off: ""
        }
    }

    /// The banner `run` prints once it listens: where, with what policy and CA, how to try it, where the capture,
    /// HAR and web view are, and how to set a device up.
    func banner(
        _ start: RunStart, _ policy: RunPolicy, _ authorities: RunAuthorities, _ listeners: RunListeners,
        outputs: RunOutputs, webLine: String
    ) -> String {
        let threads = start.threadCount
        let port = listeners.listener.port
        let bodies =
            captureOptions.bodyLimit == 0 ? "no bodies" : "bodies up to \(captureOptions.bodyLimit) bytes each"
        var captureLine =
            outputs.temporaryCapture != nil ? "" : outputs.capture.map { "\nCapture: \($0.path) (\(bodies))" } ?? ""
        if let har = captureOptions.har { captureLine += "\nHAR:     \(har) (written at exit, \(bodies))" }
        let caFile = start.caFile
        let regular = start.modes.regular != nil
        return """
            ATSProxy listening on \(listeners.shownHost):\(port) (\(threads) thread\(threads == 1 ? "" : "s"))
            Policy:  \(policy.source), \(profileText(start.profile)), ATS \(ats.rawValue)\(blockingText)
            CA:      \(caFile)\(authorities.created ? " (created now: trust it on the device or client)" : "")
            \(regular ? "Try:     curl -x \(listeners.proxyURL) --cacert \(caFile) https://example.com/"
                : TransparentListening.tryLine(caFile: caFile))\
            \(captureLine)\(webLine)\(listeners.transparentLine)\(listeners.wireguardLines)
            \(regular ? DeviceOptions.setUpLines(networkAddress: listeners.networkAddress, loopbackPort: Int(port))
                : TransparentListening.setUpLine)
            """
    }
}
