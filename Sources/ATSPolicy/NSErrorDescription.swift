/// Renders the `NSError` an app's URLSession task would complete with, in Foundation's description format,
/// as `nscurl --verbose`, CFNetwork diagnostics and the proxy's `X-ATS-*` answers print it.
///
/// Shape (reference §4.3, obs I1, I2, P2): the top-level error is in `NSURLErrorDomain`; `NSUnderlyingError` is
/// the same code in `kCFErrorDomainCFNetwork`; TLS failures carry `_kCFStreamErrorDomainKey=3`
/// (kCFStreamErrorDomainSSL) and `_kCFStreamErrorCodeKey=<-98xx>`; -1022 carries no SSL keys; trust failures add
/// the recovery suggestion.
public struct NSErrorDescription: Sendable, Hashable {
    public var urlError: URLErrorCode
    public var sslError: SSLErrorCode?
    public var failingURL: String

    public init(urlError: URLErrorCode, sslError: SSLErrorCode?, failingURL: String) {
        self.urlError = urlError
        self.sslError = sslError
        self.failingURL = failingURL
    }

    public init(violation: ATSViolation, failingURL: String) {
        self.init(urlError: violation.urlError, sslError: violation.sslError, failingURL: failingURL)
    }

    private var isTrustFailure: Bool { (-1206 ... -1201).contains(urlError.code) }

    /// The CFNetwork-level underlying error: `Error Domain=kCFErrorDomainCFNetwork Code=… "(null)" UserInfo={…}`.
    public var underlyingDescription: String {
        var info: [String] = []
        if let ssl = sslError {
            info.append("_kCFStreamPropertySSLClientCertificateState=0")
            info.append("_kCFNetworkCFStreamSSLErrorOriginalValue=\(ssl.code)")
            info.append("_kCFStreamErrorDomainKey=3")
            info.append("_kCFStreamErrorCodeKey=\(ssl.code)")
        }
        let userInfo = info.isEmpty ? "" : " UserInfo={\(info.joined(separator: ", "))}"
        return "Error Domain=kCFErrorDomainCFNetwork Code=\(urlError.code) \"(null)\"\(userInfo)"
    }

    /// The full top-level description, on one line.
    public var description: String {
        var info: [String] = []
        if isTrustFailure { info.append("NSLocalizedRecoverySuggestion=Would you like to connect to the server anyway?") }
        if let ssl = sslError {
            info.append("_kCFStreamErrorDomainKey=3")
            info.append("_kCFStreamErrorCodeKey=\(ssl.code)")
        }
        info.append("NSUnderlyingError=0x0 {\(underlyingDescription)}")
        info.append("NSErrorFailingURLStringKey=\(failingURL)")
        info.append("NSErrorFailingURLKey=\(failingURL)")
        info.append("NSLocalizedDescription=\(urlError.localizedDescription)")
        return "Error Domain=NSURLErrorDomain Code=\(urlError.code) \"\(urlError.localizedDescription)\" "
            + "UserInfo={\(info.joined(separator: ", "))}"
    }
}
