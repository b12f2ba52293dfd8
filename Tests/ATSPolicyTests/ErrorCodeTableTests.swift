import ATSPolicy
import Testing

/// The full §4.4 mapping: every violation kind on every profile, with whether the pair is marked inferred.
struct ErrorCodeRow: CustomTestStringConvertible, Sendable {
    let kind: ViolationKind
    let codes: [IOSProfile: (Int, Int?)]
    /// True when the reference has no direct source for the pair on some profile (a note must say so).
    let inferredSomewhere: Bool
    var testDescription: String { kind.rawValue }
}

private func all(_ url: Int, _ ssl: Int?) -> [IOSProfile: (Int, Int?)] {
    Dictionary(uniqueKeysWithValues: IOSProfile.allCases.map { ($0, (url, ssl)) })
}

let errorCodeRows: [ErrorCodeRow] = [
    ErrorCodeRow(kind: .cleartextNotAllowed, codes: all(-1022, nil), inferredSomewhere: false),  // §4.4 row 1
    ErrorCodeRow(
        kind: .tlsVersionTooLow,
        codes: [  // §4.4 row 2
            .ios9: (-1200, -9824), .ios10: (-1200, -9801), .ios14: (-1200, -9836), .ios17: (-1200, -9836),
            .ios26: (-1200, -9836),
        ], inferredSomewhere: true),
    ErrorCodeRow(kind: .tlsVersionRefusedByOS, codes: all(-1200, -9836), inferredSomewhere: true),  // §4.4 last row
    ErrorCodeRow(
        kind: .cipherSuiteNotAllowed,
        codes: [  // §4.4 row 3
            .ios9: (-1200, -9824), .ios10: (-1200, -9801), .ios14: (-1200, -9824), .ios17: (-1200, -9824),
            .ios26: (-1200, -9824),
        ], inferredSomewhere: true),
    ErrorCodeRow(
        kind: .weakSignatureHash,
        codes: [  // §4.4 rows 4–5
            .ios9: (-1200, -9802), .ios10: (-1200, -9802), .ios14: (-1202, -9802), .ios17: (-1202, -9802),
            .ios26: (-1202, -9802),
        ], inferredSomewhere: true),
    ErrorCodeRow(kind: .selfSigned, codes: all(-1202, -9813), inferredSomewhere: false),  // §4.4 row 6
    ErrorCodeRow(kind: .untrustedRoot, codes: all(-1202, -9813), inferredSomewhere: false),  // §4.4 row 6
    ErrorCodeRow(kind: .hostnameMismatch, codes: all(-1202, -9843), inferredSomewhere: true),  // §4.4 row 7
    ErrorCodeRow(kind: .expired, codes: all(-1202, -9814), inferredSomewhere: true),  // §4.4 row 8
    ErrorCodeRow(kind: .notYetValid, codes: all(-1202, -9815), inferredSomewhere: true),
    ErrorCodeRow(kind: .missingServerAuthEKU, codes: all(-1202, -9802), inferredSomewhere: true),  // §4.4 row 9
    ErrorCodeRow(kind: .validityTooLong, codes: all(-1202, -9802), inferredSomewhere: true),  // §4.4 row 9
    ErrorCodeRow(kind: .pinMismatch, codes: all(-1202, -9886), inferredSomewhere: true),  // §4.4 row 10
    ErrorCodeRow(kind: .notTLS, codes: all(-1200, -9800), inferredSomewhere: true),  // §4.1 errSSLProtocol
    ErrorCodeRow(kind: .connectionFailed, codes: all(-1200, -9806), inferredSomewhere: true),  // §4.1
    ErrorCodeRow(kind: .timedOut, codes: all(-1001, nil), inferredSomewhere: true),  // F1 NSURLErrorTimedOut
]

struct ErrorCodeTableTests {
    @Test("§4.4: codes per violation kind and profile; inferred pairs carry a note", arguments: errorCodeRows)
    func codes(_ row: ErrorCodeRow) {
        var noted = false
        for profile in IOSProfile.allCases {
            let m = row.kind.errorCodes(on: profile)
            let expected = row.codes[profile]
            #expect(m.urlError.code == expected?.0, "\(profile)")
            #expect(m.sslError?.code == expected?.1, "\(profile)")
            if m.note != nil { noted = true }
        }
        #expect(noted == row.inferredSomewhere)
    }

    @Test("every kind has a named URL error and, except -1022, timeouts and unreachable servers, a named SSL error")
    func namesKnown() {
        for kind in ViolationKind.allCases {
            for profile in IOSProfile.allCases {
                let m = kind.errorCodes(on: profile)
                #expect(!m.urlError.name.hasPrefix("NSURLError("), "\(kind)")
                if kind == .unreachable {
                    #expect(m.sslError == nil)
                } else if kind == .timedOut {
                    // A timeout is no TLS verdict: claiming an SSL code would invent a detail.
                    #expect(m.urlError.code == -1001 && m.sslError == nil)
                } else if kind != .cleartextNotAllowed {
                    #expect(m.sslError.map { !$0.name.hasPrefix("OSStatus(") } == true, "\(kind) on \(profile)")
                }
            }
        }
    }

    @Test("no combined fix when any violation has none")
    func combinedFixNeedsAllFixable() {
        let fixable = ATSViolation(
            kind: .tlsVersionTooLow, urlError: .secureConnectionFailed, sslError: nil,
            explanation: "", fix: .setKeys(domain: "a", keys: [FixKey(key: "K", value: yes)]))
        let hopeless = ATSViolation(
            kind: .hostnameMismatch, urlError: .serverCertificateUntrusted, sslError: nil,
            explanation: "", fix: .noExceptionCanHelp(reason: "r"))
        #expect(ATSVerdict.blocked([fixable]).combinedFix != nil)
        #expect(ATSVerdict.blocked([fixable, hopeless]).combinedFix == nil)
        #expect(ATSVerdict.allowed.combinedFix == nil)
    }
}
