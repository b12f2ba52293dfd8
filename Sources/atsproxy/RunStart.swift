import ATSPolicy
import ArgumentParser
import Foundation
import ProxyCore
import ProxyEventLoop
import ProxyTrace
import TLSCore

/// What `run` settles from its options before it opens anything: where it listens first, who may use it, the
/// simulated iOS band, the loop count and the diagnostics level. Warnings about them are written here.
struct RunStart {
    let modes: ProxyListeners
    /// The first listener: the explicit proxy's, else the transparent one (the other is opened after it).
    let host: String
    let port: UInt16
    let credentials: ProxyCredentials?
    let profile: IOSProfile
    let threadCount: Int
    let level: Int
    /// The CA certificate's path, as the banner and the web view show it.
    let caFile: String
    let webAddress: (String, UInt16)?

    init(_ command: RunCommand, modes: ProxyListeners) throws {
        self.modes = modes
        guard let (host, port) = modes.regular ?? modes.transparent else { throw ExitCode.validationFailure }
        (self.host, self.port) = (host, port)
        credentials = try command.credentialSource.credentials()
        if modes.regular != nil && !RunCommand.isLoopback(host) && credentials == nil {
            FileHandle.standardError.write(Data(
                "atsproxy: warning: listening on \(host) without proxy credentials (--allow-open-proxy)\n".utf8))
        }
        guard let profile = IOSProfile.band(for: command.iosVersion) else { throw ExitCode.validationFailure }
        self.profile = profile
        threadCount = command.threads ?? min(EventLoopGroup.coreCount, RunCommand.maxThreads)
        let (level, levelWarning) = RunCommand.diagnosticsLevel(
            option: command.diagnostics, environment: ProcessInfo.processInfo.environment["CFNETWORK_DIAGNOSTICS"])
        if let levelWarning {
            FileHandle.standardError.write(Data("atsproxy: warning: \(levelWarning)\n".utf8))
        }
        self.level = level
        caFile = URL(fileURLWithPath: command.caDir).appendingPathComponent(CertificateAuthority.certificateFileName)
            .path
        webAddress = try command.webOptions.address()
    }
}
