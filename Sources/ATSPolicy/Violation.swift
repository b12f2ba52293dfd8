/// What went wrong, in ATS terms.
public enum ViolationKind: String, Sendable, Hashable, Codable, CaseIterable {
    case cleartextNotAllowed  // http:// to a host that needs TLS: -1022
    case tlsVersionTooLow
    case tlsVersionRefusedByOS  // iOS 26: TLS 1.0/1.1 refused even with an exception
    case cipherSuiteNotAllowed  // no forward secrecy, or a suite outside the offered list
    case noSharedCipherOrVersion  // the handshake failed and no probe explained it
    case weakKey
    case weakSignatureHash
    case untrustedRoot
    case selfSigned
    case hostnameMismatch
    case expired
    case notYetValid
    case invalidChain  // bad signature, broken or revoked chain
    case missingServerAuthEKU
    case validityTooLong
    case pinMismatch
    case certificateTransparencyMissing
    case notTLS
    case connectionFailed
    case timedOut  // connect + handshake took longer than the client waits: -1001
    /// The upstream could not be reached at all (no such host, refused, timed out): a network error the app gets
    /// too, whatever its policy. Not an ATS verdict; the error code says which (-1003, -1004, -1001).
    case unreachable
}

/// The narrowest plist change that would let a connection through, or a statement that none can.
public enum ExceptionFix: Sendable, Hashable {
    /// Set these keys on the exception entry for `domain` (created if missing).
    case setKeys(domain: String, keys: [FixKey])
    /// No Info.plist change can allow this (hostname mismatch, untrusted root, OS refusal): fix the server.
    case noExceptionCanHelp(reason: String)
}

/// One key/value of a suggested exception.
public struct FixKey: Sendable, Hashable, Codable {
    public var key: String
    public var value: PlistValue

    public init(key: String, value: PlistValue) {
        self.key = key
        self.value = value
    }
}

extension PlistValue: Codable {
    public init(from decoder: any Decoder) throws {
        let c = try decoder.singleValueContainer()
        if let b = try? c.decode(Bool.self) {
            self = .bool(b)
        } else if let i = try? c.decode(Int.self) {
            self = .integer(i)
        } else if let d = try? c.decode(Double.self) {
            self = .real(d)
        } else if let s = try? c.decode(String.self) {
            self = .string(s)
        } else if let a = try? c.decode([PlistValue].self) {
            self = .array(a)
        } else {
            let d = try c.decode([String: PlistValue].self)
            self = .dictionary(PlistDictionary(d.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }))
        }
    }

    /// JSON form for `--json` output: booleans, numbers, strings, arrays, objects; dates as seconds, data as
    /// byte arrays.
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        switch self {
        case .bool(let b): try c.encode(b)
        case .integer(let i): try c.encode(i)
        case .real(let d): try c.encode(d)
        case .string(let s): try c.encode(s)
        case .date(let t): try c.encode(t)
        case .data(let bytes): try c.encode(bytes)
        case .array(let a): try c.encode(a)
        case .dictionary(let d):
            try c.encode(Dictionary(d.entries.map { ($0.key, $0.value) }, uniquingKeysWith: { a, _ in a }))
        }
    }
}

/// One reason the app would refuse a connection, with the error it would see and the fix.
public struct ATSViolation: Sendable, Hashable, Codable {
    public var kind: ViolationKind
    /// The top-level error: NSURLErrorDomain code.
    public var urlError: URLErrorCode
    /// `_kCFStreamErrorCodeKey` in kCFStreamErrorDomainSSL; nil for -1022, which carries no SSL keys.
    public var sslError: SSLErrorCode?
    /// One line: what is wrong and what ATS wanted.
    public var explanation: String
    public var fix: ExceptionFix
    /// The certificate concerned (0 = leaf), for certificate violations.
    public var certificateIndex: Int?
    /// Where an error code or rule is inferred or unconfirmed: which reading was taken and its reference row.
    public var notes: [String]
    /// For a pre-connect block: the entry or key that decided the host needs TLS.
    public var decidedBy: PolicyDecision?

    public init(
        kind: ViolationKind, urlError: URLErrorCode, sslError: SSLErrorCode?, explanation: String, fix: ExceptionFix,
        certificateIndex: Int? = nil, notes: [String] = [], decidedBy: PolicyDecision? = nil
    ) {
        self.decidedBy = decidedBy
        self.kind = kind
        self.urlError = urlError
        self.sslError = sslError
        self.explanation = explanation
        self.fix = fix
        self.certificateIndex = certificateIndex
        self.notes = notes
    }
}
