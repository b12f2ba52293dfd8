/// The onboarding site's HTML: short pages for a phone's screen, self-contained (inline style, no scripts, no
/// external resources; the Content-Security-Policy makes that a rule the browser enforces).
enum OnboardingPage {
    /// Sent with every page: nothing may load from elsewhere but the trust badge (an `<object>`, whose fallback text
    /// shows when it does not load), which must come from the https:// name to prove anything.
    static let securityHeaders: [OnboardingResponse.Field] = [
        .init(
            "Content-Security-Policy",
            "default-src 'none'; style-src 'unsafe-inline'; object-src https://\(OnboardingSite.hostName)"),
        .init("X-Content-Type-Options", "nosniff"),
    ]

    /// `showsPolicy`: false for a request without the proxy's credentials (the policy's path names a file on the
    /// operator's machine, and a device needs only the certificate and the steps; nor are WireGuard configurations,
    /// which hold private keys, shown then). `wireGuard`: WireGuard mode's section, beside the Wi-Fi proxy steps.
    static func render(
        certificate: OnboardingCertificate, settings: OnboardingSettings, showsPolicy: Bool = true,
        wireGuard: OnboardingWireGuard? = nil
    ) -> String {
        let stem = OnboardingSite.fileStem
        let proxy = settings.proxyAddress.map { "<code>\(escape($0))</code>" } ?? "this computer's address and port"
        let simulatorProxy = settings.proxyAddress.map(escape) ?? "HOST:PORT"
        let link = "<a href=\"\(OnboardingSite.url)\">\(OnboardingSite.url)</a>"
        let policy = showsPolicy ? escape(settings.policy) : "shown through the proxy, with its credentials: \(link)"
        let wireGuardHTML = wireGuard.map { wireGuardSection($0, showsConfig: showsPolicy) } ?? ""
        let simulatorWireGuard = wireGuard == nil ? "" : """
            <p class="small">The WireGuard app does not run in the simulator, which uses the Mac's network: use the \
            Mac's proxy settings as above (apps that ignore them are seen only from a device with WireGuard).</p>

            """
        return document(title: "ATSProxy: set up this device", body: """
            <h1>ATSProxy</h1>
            <p class="lead">Set up this device so that ATSProxy can show the app's traffic and judge it by the app's \
            App Transport Security policy.</p>

            <section class="check">
            <h2>Trust check</h2>
            <object class="badge" data="\(OnboardingSite.trustCheckURL).svg" type="image/svg+xml" width="300" \
            height="44"><p class="not-yet">✗ Not trusted yet, or this device does not use the proxy.</p></object>
            <p><a class="button secondary" href="\(OnboardingSite.trustCheckURL)">Open the trust check</a></p>
            <p class="small">That https:// page loads only on a device that uses the proxy and trusts its CA.</p>
            </section>

            <h2>1. Download the CA</h2>
            <p><a class="button" href="/\(stem).mobileconfig">iOS profile (.mobileconfig)</a></p>
            <p><a class="button secondary" href="/\(stem).cer">Certificate (.cer, DER)</a> \
            <a class="button secondary" href="/\(stem).pem">Certificate (.pem)</a></p>

            <h2>2. iPhone or iPad\(wireGuard == nil ? "" : ": Wi-Fi proxy")</h2>
            <ol>
            <li>Settings › Wi-Fi › the (i) next to the network › Configure Proxy › Manual: server and port \(proxy).</li>
            <li>Open this page in <b>Safari</b> and tap <b>iOS profile</b>; allow the download.</li>
            <li>Settings › General › VPN &amp; Device Management › <b>\(escape(certificate.name))</b> › Install.</li>
            <li>Settings › General › About › <b>Certificate Trust Settings</b>: turn on full trust for \
            <b>\(escape(certificate.name))</b>. Without this step apps still refuse the proxy's certificates.</li>
            <li>Come back here: the trust check above turns green.</li>
            </ol>
            \(wireGuardHTML)
            <h2>3. Simulator</h2>
            <p>The simulator uses the Mac's proxy settings (System Settings › Network › Details › Proxies: web and \
            secure web proxy \(escape(simulatorProxy))). On the Mac:</p>
            <pre>curl -o \(stem).pem http://\(escape(simulatorProxy))/\(stem).pem
            xcrun simctl keychain booted add-root-cert \(stem).pem</pre>
            <p class="small">Or, where ATSProxy runs: <code>atsproxy ca export --out \(stem).pem</code>.</p>
            \(simulatorWireGuard)
            <h2>This proxy</h2>
            <dl>
            <dt>Policy</dt><dd>\(policy)</dd>
            <dt>Simulates</dt><dd>\(escape(settings.iosProfile))</dd>
            <dt>ATS</dt><dd>\(escape(settings.atsMode))</dd>
            <dt>CA</dt><dd>\(escape(certificate.name))</dd>
            <dt>SHA-256</dt><dd class="fingerprint">\(escape(certificate.sha256Fingerprint))</dd>
            </dl>
            <p class="small">Apple's own services (Apple Account sign-in, iCloud, push, the App Store) are tunnelled \
            without interception, as they pin their certificates.</p>
            """)
    }

    static func trustCheck(secure: Bool, certificate: OnboardingCertificate) -> String {
        if secure {
            return document(title: "ATSProxy: trusted", body: """
                <h1 class="ok">✓ Trusted</h1>
                <p class="lead">This device opened an https:// page with a certificate from \
                <b>\(escape(certificate.name))</b>: it trusts the proxy's CA.</p>
                <p><a class="button secondary" href="\(OnboardingSite.url)">Back to the set-up page</a></p>
                """)
        }
        return document(title: "ATSProxy: trust check", body: """
            <h1>Trust check</h1>
            <p class="lead">This is the plain http:// address. Open the https:// one: it loads only when this device \
            trusts the proxy's CA.</p>
            <p><a class="button" href="\(OnboardingSite.trustCheckURL)">\(OnboardingSite.trustCheckURL)</a></p>
            """)
    }

    /// A small green badge for the set-up page's live check (shown only when its https:// load succeeds).
    static func trustBadge(secure: Bool) -> String {
        guard secure else { return "" }
        return """
            <svg xmlns="http://www.w3.org/2000/svg" width="300" height="44" viewBox="0 0 300 44">\
            <rect width="300" height="44" rx="8" fill="#1a7f37"/>\
            <text x="150" y="28" font-family="-apple-system, Helvetica, Arial, sans-serif" font-size="17" \
            fill="#fff" text-anchor="middle">✓ This device trusts the CA</text></svg>
            """
    }

    static func pointer(from product: String) -> String {
        document(title: "ATSProxy", body: """
            <h1>This is ATSProxy</h1>
            <p class="lead">This device goes through ATSProxy, not \(escape(product)). ATSProxy's set-up page (its CA, \
            the iOS steps and a trust check) is at:</p>
            <p><a class="button" href="\(OnboardingSite.url)">\(OnboardingSite.url)</a></p>
            """)
    }

    static func notFound(path: String) -> String {
        document(title: "ATSProxy: not found", body: """
            <h1>Not found</h1>
            <p class="lead">ATSProxy's set-up site has no page \(escape(path)).</p>
            <p><a class="button" href="\(OnboardingSite.url)">Set-up page</a></p>
            """)
    }

    static func document(title: String, body: String) -> String {
        """
        <!DOCTYPE html>
        <html lang="en"><head><meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <title>\(escape(title))</title>
        <style>
        body{font:16px/1.45 -apple-system,system-ui,Helvetica,Arial,sans-serif;margin:0 auto;max-width:34em;\
        padding:16px 18px 40px;color:#1d1d1f;background:#fff}
        h1{font-size:1.6em;margin:.2em 0 .3em}h2{font-size:1.15em;margin:1.4em 0 .4em}
        .lead{color:#3a3a3c}.small{font-size:.85em;color:#6e6e73}
        .ok{color:#1a7f37}
        .check{background:#f5f5f7;border-radius:12px;padding:4px 14px 6px}
        .badge{display:block;max-width:100%;margin:.6em 0}.not-yet{color:#b3261e;font-weight:600;margin:0}
        a.button{display:inline-block;background:#0071e3;color:#fff;text-decoration:none;border-radius:10px;\
        padding:10px 14px;margin:2px 0;font-weight:600}
        a.secondary{background:#e8e8ed;color:#0066cc}
        ol{padding-left:1.3em}li{margin:.35em 0}
        pre{background:#f5f5f7;border-radius:8px;padding:10px;overflow-x:auto;font-size:.8em;white-space:pre-wrap;\
        word-break:break-all}
        code{font-size:.9em}
        dl{display:grid;grid-template-columns:auto 1fr;gap:4px 12px;margin:0}dt{color:#6e6e73}dd{margin:0}
        .qr svg{display:block;width:264px;max-width:100%;height:auto;margin:.6em 0}
        .fingerprint{font-family:ui-monospace,Menlo,monospace;font-size:.72em;word-break:break-all}
        @media (prefers-color-scheme: dark){body{background:#000;color:#f5f5f7}.lead{color:#d1d1d6}\
        .check,pre{background:#1c1c1e}a.secondary{background:#2c2c2e;color:#4da3ff}}
        </style></head>
        <body>
        \(body)
        </body></html>

        """
    }

    /// Text safe inside HTML elements and double-quoted attributes.
    static func escape(_ text: String) -> String {
        var out = ""
        out.reserveCapacity(text.utf8.count)
        for c in text {
            switch c {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&#39;"
            default: out.append(c)
            }
        }
        return out
    }
}
