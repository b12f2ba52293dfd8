import Onboarding
import ProxyCore

/// The set-up site as the sessions' local site (ProxyCore's `LocalSite`): ProxyCore does not import Onboarding.
/// The run command and the session tests both wrap the site with it.
public final class OnboardingLocalSite: LocalSite {
    public let site: OnboardingSite

    public init(_ site: OnboardingSite) {
        self.site = site
    }

    public var hostName: String { OnboardingSite.hostName }

    public var tunnelRefusal: String {
        "ATSProxy: \(OnboardingSite.hostName) is the proxy's set-up site: open \(OnboardingSite.url) as a plain proxy "
            + "request, or \(OnboardingSite.trustCheckURL) through CONNECT\n"
    }

    public func answers(host: String, port: Int) -> Bool { site.role(ofHost: host, port: port) != nil }

    public func answer(host: String?, port: Int, path: String, secure: Bool, credentialed: Bool) -> LocalAnswer {
        let role = host.flatMap { site.role(ofHost: $0, port: port) } ?? .site
        let response = site.respond(role: role, path: path, secure: secure, credentialed: credentialed)
        return LocalAnswer(status: response.status, fields: response.fields, body: response.body)
    }
}
