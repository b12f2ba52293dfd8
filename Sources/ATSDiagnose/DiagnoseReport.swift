import ATSPolicy
import Foundation

/// The result of one matrix row.
public struct DiagnoseCaseResult: Sendable, Hashable, Codable {
    public var testCase: DiagnoseCase
    public var passed: Bool
    /// The `NSError` description a URLSession task would complete with (nil on PASS).
    public var error: String?
    public var violations: [ATSViolation]
    /// What the handshake of this row negotiated or how it failed.
    public var facts: HandshakeFacts
}

/// What `--plist` says about the app's own policy for this URL.
public struct AppPolicyResult: Sendable, Hashable, Codable {
    /// Where the policy came from (file path and form), as the loader describes it.
    public var source: String
    public var allowed: Bool
    /// Which plist entry decided, and why.
    public var decidedBy: String
    public var error: String?
    public var violations: [ATSViolation]
}

/// The advice after the matrix.
public enum Recommendation: Sendable, Hashable, Codable {
    /// The default connection passes: the app needs no exception for this host.
    case noExceptionNeeded
    /// The narrowest row that passes; `fix` holds the keys and `plistSnippet` the ready-to-paste XML.
    case exception(testName: String, fix: ExceptionFix, plistSnippet: String, pasteInside: String)
    /// Only `NSAllowsArbitraryLoads` passes: a global opt-out, not recommended.
    case onlyArbitraryLoads
    /// No row passes: fix the server.
    case noExceptionCanHelp(reason: String)
}

/// Everything `atsproxy diagnose` found for one URL.
public struct DiagnoseReport: Sendable, Hashable, Codable {
    public var url: String
    public var host: String
    public var port: Int
    public var profile: IOSProfile
    /// Matrix results grouped by section, in nscurl's order.
    public var sections: [[DiagnoseCaseResult]]
    /// What the server supports, from the permissive probes.
    public var capabilities: ServerCapabilities?
    /// What the simulated iOS offers and requires on the default connection, in one line.
    public var defaultOffer: String?
    /// Whether ATS's checks (TLS minimum, forward secrecy, ATS certificate minimums) apply to the default
    /// connection; false for hosts ATS exempts, such as loopback addresses, where only default trust judges.
    public var atsApplies: Bool?
    /// Why ATS does or does not apply to the host (the policy engine's decision).
    public var atsDecision: String?
    public var recommendation: Recommendation
    public var appPolicy: AppPolicyResult?
    /// Choices made where ATS behaviour is unconfirmed, and other remarks.
    public var notes: [String]

    /// The "ATS Default Connection" row.
    public var defaultResult: DiagnoseCaseResult? { sections.first?.first }

    /// True when the default connection passes (the exit status is 0 only then).
    public var defaultPasses: Bool { defaultResult?.passed ?? false }

    /// Pretty JSON, keys sorted, dates ISO 8601.
    public func renderJSON() throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .iso8601
        return String(decoding: try encoder.encode(self), as: UTF8.self)
    }
}
