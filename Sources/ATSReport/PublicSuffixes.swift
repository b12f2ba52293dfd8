/// Names under which anyone can register a site of their own, so an `NSExceptionDomains` entry on one with
/// `NSIncludesSubdomains = YES` relaxes ATS for every site registered there, not only the app's.
///
/// A small built-in list, deliberately not the whole Public Suffix List (which changes weekly and would need a
/// download or a copy to keep current; `report` uses no network): every top-level domain (a name of one label,
/// except `localhost` and `local`, which name this machine and its link), the second-level registries of the
/// largest country-code domains (`co.uk`, `com.au`, `co.jp`…), and the hosting platforms where an app's backend
/// often lives and every customer gets a subdomain (`github.io`, `herokuapp.com`, `appspot.com`…). A public suffix
/// not in the list is not flagged.
enum PublicSuffixes {
    static let multiLabel: Set<String> = [
        // Country-code registries (ICANN section of the Public Suffix List).
        "co.uk", "org.uk", "ac.uk", "gov.uk", "me.uk", "ltd.uk", "plc.uk", "net.uk", "sch.uk", "nhs.uk",
        "com.au", "net.au", "org.au", "edu.au", "gov.au", "id.au",
        "co.jp", "ne.jp", "or.jp", "ac.jp", "go.jp", "ad.jp", "ed.jp", "gr.jp", "lg.jp",
        "co.nz", "net.nz", "org.nz", "govt.nz", "ac.nz",
        "co.za", "org.za", "gov.za", "ac.za",
        "com.br", "net.br", "org.br", "gov.br", "edu.br",
        "com.cn", "net.cn", "org.cn", "gov.cn", "edu.cn",
        "com.tw", "net.tw", "org.tw", "edu.tw", "gov.tw",
        "com.hk", "net.hk", "org.hk", "edu.hk", "gov.hk",
        "com.sg", "net.sg", "org.sg", "edu.sg", "gov.sg",
        "com.mx", "org.mx", "gob.mx", "edu.mx", "com.ar", "com.tr", "gov.tr", "edu.tr",
        "co.in", "net.in", "org.in", "gov.in", "ac.in", "co.kr", "or.kr", "go.kr", "ac.kr",
        "co.il", "org.il", "ac.il", "gov.il", "com.my", "com.ph", "com.vn", "co.id", "or.id", "ac.id",
        "com.sa", "com.eg", "com.pk", "com.ng", "com.ua", "co.th", "in.th", "ac.th", "com.co", "com.pe",
        // Hosting platforms (the private section): each customer's site is a subdomain.
        "github.io", "gitlab.io", "herokuapp.com", "appspot.com", "cloudfront.net", "azurewebsites.net",
        "firebaseapp.com", "web.app", "netlify.app", "vercel.app", "pages.dev", "workers.dev", "blogspot.com",
        "ngrok.io", "s3.amazonaws.com",
    ]

    /// What `name` (lower case, no trailing dot) is, when it is a public suffix: "a top-level domain" or
    /// "a public suffix"; nil for a name a single owner controls (as far as the list knows).
    static func kind(of name: String) -> String? {
        let name = name.hasSuffix(".") ? String(name.dropLast()) : name
        if !name.contains(".") {
            return name.isEmpty || name == "localhost" || name == "local" ? nil : "a whole top-level domain"
        }
        return multiLabel.contains(name) ? "a public suffix" : nil
    }
}
