import Onboarding
import ProxyCore

/// The set-up site as the sessions' local site (ProxyCore's `LocalSite`): ProxyCore does not import Onboarding.
final class OnboardingLocalSite: LocalSite {
    let site: OnboardingSite

    init(_ site: OnboardingSite) {
        self.site = site
    }

    var hostName: String { OnboardingSite.hostName }

    var tunnelRefusal: String {
        "ATSProxy: \(OnboardingSite.hostName) is the proxy's set-up site: open \(OnboardingSite.url) as a plain proxy "
            + "request, or \(OnboardingSite.trustCheckURL) through CONNECT\n"
    }

    func answers(host: String, port: Int) -> Bool { site.role(ofHost: host, port: port) != nil }

    func answer(host: String?, port: Int, path: String, secure: Bool, credentialed: Bool) -> LocalAnswer {
        let role = host.flatMap { site.role(ofHost: $0, port: port) } ?? .site
        let response = site.respond(role: role, path: path, secure: secure, credentialed: credentialed)
        return LocalAnswer(status: response.status, fields: response.fields, body: response.body)
    }
}
