import ATSPolicy
import Foundation
import RuleStage
import TLSCore

@testable import ProxyCore

/// The parts of an intercepted connection's playbook: an environment whose `--map` sends `host` to 127.0.0.1:9443
/// (with the given `--ats`, `--block` and `--upstream-alpn`) and whose trust store holds only its own CA (so origins
/// minted by `env.minter` are trusted), a client that verifies the proxy's certificates against that CA as an app
/// does, and origins serving a leaf with a chosen flaw.
struct InterceptScene {
    let env: ProxyEnvironment
    let host: String
    /// The clock the playbooks run at: the real time, so the leaves minted with OpenSSL's clock (which the trust
    /// evaluation and the client's verification read) and the session's clock agree.
    let now: Double

    init(host: String = "good.test", mode: ATSMode = .enforce, block: BlockStyle = .tls,
         options: PolicyOptions = .init(), diagnosticsLevel: Int = 0, upstreamALPN: UpstreamALPN = .mirror,
         rules: RuleBook? = nil)
        throws
    {
        let authority = try CertificateAuthority.create(commonName: "Playbook CA")
        self.host = host
        now = Date().timeIntervalSince1970.rounded(.down)
        env = ProxyEnvironment(
            policy: ATSPolicy(atsDictionary: .dictionary(PlistDictionary()), options: options), mode: mode,
            blockStyle: block, mappings: [try HostMapping(parsing: "\(host)=127.0.0.1:9443")], passthrough: [],
            credentials: nil, minter: LeafMinter(authority: authority),
            factsCollector: HandshakeFactsCollector(
                trust: try TrustEvaluator(useSystemRoots: false, userRoots: [authority.certificate])),
            diagnosticsLevel: diagnosticsLevel, jsonEvents: false, upstreamALPN: upstreamALPN, rules: rules)
    }

    /// The CONNECT a client sends first.
    var connect: [UInt8] { Array("CONNECT \(host):443 HTTP/1.1\r\nHost: \(host):443\r\n\r\n".utf8) }

    /// A client that trusts the proxy's CA and fails its handshake on a certificate that does not verify (chain,
    /// dates, OpenSSL's default security level: SHA-1 and RSA-1024 fail, as with curl). It checks no host name: like
    /// curl, which checks it after the handshake, a playbook checks the served leaf's names itself.
    func client(alpn: [String] = ["http/1.1"]) throws -> TLSEngine {
        var configuration = TLSConfiguration.client(alpn: alpn)
        configuration.verifyPeer = true
        configuration.additionalTrustRoots = [env.minter.authority.certificate]
        return try TLSEngine(context: try TLSContext(configuration), serverName: host)
    }

    /// A client that accepts any certificate (curl -k).
    func insecureClient(alpn: [String] = ["http/1.1"]) throws -> TLSEngine {
        try TLSEngine(context: try TLSContext(.client(alpn: alpn)), serverName: host)
    }

    /// Makes an origin for `host` serving a leaf minted with `leaf` (from the scene's CA unless the options say
    /// otherwise), speaking only TLS 1.0 when `tls10`.
    func origin(leaf: LeafOptions = .standard, tls10: Bool = false, alpn: [String] = ["http/1.1"])
        throws -> () throws -> TLSEngine
    {
        let identity = try env.minter.identity(for: host, options: leaf, now: Date(timeIntervalSince1970: now))
        var configuration = TLSConfiguration.server(identity: identity, alpn: alpn)
        // OpenSSL's default security level would refuse to serve SHA-1, RSA-1024 and TLS 1.0.
        configuration.securityLevel = 0
        if tls10 {
            configuration.minimumVersion = .tls10
            configuration.maximumVersion = .tls10
            configuration.cipherList = "ALL"
        }
        let context = try TLSContext(configuration)
        return { try TLSEngine(context: context) }
    }
}

extension InterceptScene {
    /// An origin factory whose n-th connection is made by `makers[n]` (the last one makes every later connection):
    /// a retried upstream connection can meet a server set up differently.
    static func sequence(_ makers: [() throws -> TLSEngine]) -> () throws -> TLSEngine {
        final class Count { var made = 0 }
        let count = Count()
        return {
            defer { count.made += 1 }
            return try makers[min(count.made, makers.count - 1)]()
        }
    }
}
