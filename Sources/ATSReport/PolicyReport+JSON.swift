import ATSPolicy
import Foundation

extension PolicyReport {
    /// Pretty, key-sorted JSON of the whole report, the suggestion's fragment included as `suggestion.plist`.
    public func renderJSON() throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        return String(decoding: try encoder.encode(JSONShape(self)), as: UTF8.self)
    }
}

/// The JSON document: the report's fields, the verdict and the suggestion's fragment.
private struct JSONShape: Encodable {
    let report: PolicyReport
    init(_ report: PolicyReport) { self.report = report }

    enum CodingKeys: String, CodingKey {
        case profile, policySource, notes, exchangeCount, hosts, missingExceptions, findings, suggestion
        case policyDiagnostics, fits, verdict, mirror
    }

    struct Suggestion: Encodable {
        let value: SuggestedPolicy
        enum CodingKeys: String, CodingKey { case entries, unfixable, checks, verified, plist }
        func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(value.entries, forKey: .entries)
            try c.encode(value.unfixable, forKey: .unfixable)
            try c.encode(value.checks, forKey: .checks)
            try c.encode(value.verified, forKey: .verified)
            try c.encode(value.plistFragment(), forKey: .plist)
        }
    }

    func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(report.profile.rawValue, forKey: .profile)
        try c.encode(report.policySource, forKey: .policySource)
        try c.encode(report.notes, forKey: .notes)
        try c.encode(report.exchangeCount, forKey: .exchangeCount)
        try c.encode(report.hosts, forKey: .hosts)
        try c.encode(report.missingExceptions, forKey: .missingExceptions)
        try c.encode(report.findings, forKey: .findings)
        try c.encode(Suggestion(value: report.suggestion), forKey: .suggestion)
        try c.encode(report.policyDiagnostics, forKey: .policyDiagnostics)
        try c.encode(report.fits, forKey: .fits)
        try c.encode(report.verdictLine, forKey: .verdict)
        try c.encodeIfPresent(report.mirror, forKey: .mirror)
    }
}
