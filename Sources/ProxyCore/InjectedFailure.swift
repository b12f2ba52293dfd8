import ATSPolicy
import Foundation
import ProxyTrace
import TLSCore
import TrafficRules

// Theory of operation: a failure a connection-point rule injects (issue 33's `--fault HOST=KIND` and
// `--block-list HOST[=reset|refuse]`), as a plan for the client leg. No upstream is ever contacted: the device meets
// a flawed server or network made by the proxy, and its own TLS stack and URL loading fail as they would in
// production.
//
// - `offline`, `dns`, `block …=refuse`: the CONNECT is answered 502 (the proxy cannot make the device's own
//   resolver or radio fail; a proxied app gets a connection error, documented in docs/rules.md).
// - `reset`, `block …=reset`: the CONNECT gets its 200, then the connection is reset at the ClientHello (-1005).
// - `timeout`: the CONNECT gets its 200, then nothing: the ClientHello is never answered, until the client gives up
//   or the proxy's `--client-timeout` ends it (-1001).
// - the certificate and protocol kinds: the ClientHello is answered by a server made with mirror mode's machinery
//   (a `MirrorPlan` made on purpose: the leaf `LeafMinter` mints with the flaw, the version or suites offered), so
//   the client's own checks refuse it.

/// What the proxy does to a connection a fault or block rule matched (see the theory of operation above).
struct InjectedFailure {
    enum Plan: Equatable {
        /// Answer the CONNECT with this status instead of 200 (a proxy's way of saying the host cannot be reached).
        case answerConnect(status: Int)
        /// Reset the connection at the client's first bytes after the CONNECT's 200.
        case reset
        /// Never answer the client's first bytes.
        case silence
        /// Answer the ClientHello with a flawed server.
        case flawedServer(MirrorPlan)
    }

    let plan: Plan
    /// The fault's spelling (`expired`, `tls1.0`) or the block's (`block reset`), for the console.
    let label: String
    /// The error the app gets (its NSURLError and, for TLS failures, its SSL code), as the trace and the record
    /// name it.
    let errors: [ExchangeError]
    /// The rules that acted (the record's `rules`).
    let applied: [AppliedRule]
    /// When the connection met the rule (the session's clock): the record's duration runs from it.
    var started: Double = 0

    /// The flawed server the ClientHello is answered by, for the certificate and protocol kinds.
    var serverPlan: MirrorPlan? {
        if case .flawedServer(let plan) = plan { return plan }
        return nil
    }

    /// The failure for a fault kind at the connection point; nil for `status:NNN`, which acts on the request head.
    init?(fault: FaultKind, applied: [AppliedRule], profile: IOSProfile, now: Date) {
        // Whole days keep flawed leaves cacheable, as BlockPlan's.
        let day = Date(timeIntervalSince1970: (now.timeIntervalSince1970 / 86_400).rounded(.down) * 86_400)
        func leaf(_ options: LeafOptions, _ flaw: String) -> Plan {
            .flawedServer(MirrorPlan(injecting: nil, leaf: options, weaknesses: ["leaf \(flaw)"]))
        }
        func oldVersion(_ version: TLSVersion) -> Plan {
            // Only that version, with a CBC suite of its time and an RSA leaf, as a legacy server would offer.
            .flawedServer(MirrorPlan(
                injecting: .init(
                    minimumVersion: version, maximumVersion: version,
                    cipherSuite: "ECDHE-RSA-AES128-SHA:ECDHE-RSA-AES256-SHA:AES128-SHA"),
                leaf: .rsa, weaknesses: [version.plistName]))
        }
        let violation: ViolationKind?
        var network: Int?
        switch fault {
        case .expired: (plan, violation) = (leaf(.expired(now: day), "expired"), .expired)
        case .notYetValid: (plan, violation) = (leaf(.notYetValid(now: day), "not yet valid"), .notYetValid)
        case .wrongHost:
            (plan, violation) = (leaf(.wrongHost("wrong.host.invalid"), "names wrong.host.invalid"), .hostnameMismatch)
        case .selfSigned: (plan, violation) = (leaf(.selfSigned, "self-signed"), .selfSigned)
        case .untrustedRoot: (plan, violation) = (leaf(.untrusted, "from an untrusted root"), .untrustedRoot)
        case .sha1: (plan, violation) = (leaf(.sha1Signed, "SHA-1 signed"), .weakSignatureHash)
        case .rsa1024: (plan, violation) = (leaf(.weakRSA, "RSA-1024"), .weakKey)
        case .pinMismatch: (plan, violation) = (leaf(.freshlyKeyed, "with a key no app pins"), .pinMismatch)
        case .tls10: (plan, violation) = (oldVersion(.tls10), .tlsVersionTooLow)
        case .tls11: (plan, violation) = (oldVersion(.tls11), .tlsVersionTooLow)
        case .noForwardSecrecy:
            // Static RSA key exchange only (TLS 1.2, AEAD, so forward secrecy is the one flaw).
            plan = .flawedServer(MirrorPlan(
                injecting: .init(
                    minimumVersion: .tls12, maximumVersion: .tls12, cipherSuite: "AES128-GCM-SHA256:AES256-GCM-SHA384"),
                leaf: .rsa, weaknesses: ["static RSA key exchange"]))
            violation = .cipherSuiteNotAllowed
        case .reset: (plan, violation, network) = (.reset, nil, -1005)
        case .timeout: (plan, violation, network) = (.silence, nil, -1001)
        case .offline: (plan, violation, network) = (.answerConnect(status: 502), nil, -1009)
        case .dns: (plan, violation, network) = (.answerConnect(status: 502), nil, -1003)
        case .status: return nil
        }
        label = fault.description
        self.applied = applied
        if let violation {
            let mapping = violation.errorCodes(on: profile)
            errors = [ExchangeError(urlError: mapping.urlError, sslError: mapping.sslError)]
        } else {
            errors = network.map { [ExchangeError(urlError: URLErrorCode($0))] } ?? []
        }
    }

    /// The failure for a block rule at the connection point.
    init(block: BlockKind, applied: [AppliedRule]) {
        switch block {
        case .reset:
            plan = .reset
            errors = [ExchangeError(urlError: URLErrorCode(-1005))]
        case .refuse:
            plan = .answerConnect(status: 502)
            errors = [ExchangeError(urlError: .cannotConnectToHost)]
        }
        label = "block \(block.rawValue)"
        self.applied = applied
    }

    /// What the app would get, in the console's words: `-1202/-9814`.
    var codes: String { errors.map(\.shortCode).joined(separator: ",") }

    /// The record's note: the failure is the proxy's, never the server's.
    func note(_ what: String) -> String {
        "injected by a rule, not the server's: \(label): \(what)" + (codes.isEmpty ? "" : "; the app gets \(codes)")
    }

    /// The body of a CONNECT answered instead of tunnelled, naming the injected failure.
    func connectAnswerBody(host: String, port: Int) -> String {
        let what: String
        switch label {
        case "offline": what = "the device is offline (the app gets -1009 NSURLErrorNotConnectedToInternet)"
        case "dns": what = "\(host) does not resolve (the app gets -1003 NSURLErrorCannotFindHost)"
        default: what = "\(host):\(port) refuses connections (the app gets -1004 NSURLErrorCannotConnectToHost)"
        }
        let rules = applied.map(\.summary).joined(separator: "; ")
        return "ATSProxy: injected failure, not the server's: \(what). Rule: \(rules)\n"
    }
}

extension SessionContext {
    /// The failure the rules in force inject on a connection to `host:port`, if any (a throttle alone is no
    /// failure). Only asked when rules are loaded.
    func injectedFailure(host: String, port: Int) -> InjectedFailure? {
        guard let ruling = currentRules()?.atConnection(host: host, port: port) else { return nil }
        let applied = ruling.applied.filter { $0.action == "fault" || $0.action == "block" }
        if let fault = ruling.fault {
            return InjectedFailure(fault: fault, applied: applied, profile: env.policy.options.profile, now: clockDate)
        }
        if let block = ruling.block { return InjectedFailure(block: block, applied: applied) }
        return nil
    }
}
