/// What the proxy never prints: the proxy's own credentials and passwords in URLs. Applied where values enter
/// records (console lines, traces, JSON events, notices), so every sink gets the redacted form.
public enum Redaction {
    /// Stands in for a secret.
    public static let mask = "[redacted]"

    /// `url` with its userinfo (`user:password@`) replaced by the mask: `http://[redacted]@host/`. Other text is
    /// returned as it is.
    public static func url(_ url: String) -> String {
        // The scheme is letters, digits, + - . (RFC 3986 §3.1) and ends at the first "://".
        guard let colon = url.firstIndex(of: ":"), url[colon...].hasPrefix("://") else { return url }
        let authorityStart = url.index(colon, offsetBy: 3)
        let authorityEnd = url[authorityStart...].firstIndex(where: { $0 == "/" || $0 == "?" || $0 == "#" })
            ?? url.endIndex
        guard let at = url[authorityStart..<authorityEnd].lastIndex(of: "@") else { return url }
        return String(url[..<authorityStart]) + mask + String(url[at...])
    }

    /// A header field's value as it may be printed: `Proxy-Authorization` keeps its scheme and loses its
    /// credentials (`Basic [redacted]`); other fields are the app's own traffic and are shown as they are.
    public static func headerValue(name: String, value: String) -> String {
        guard name.lowercased() == "proxy-authorization" else { return value }
        let scheme = value.split(separator: " ", maxSplits: 1).first.map(String.init) ?? ""
        return scheme.isEmpty || scheme.count == value.count ? mask : "\(scheme) \(mask)"
    }
}
