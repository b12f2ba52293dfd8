import HTTP1Core
import HTTP2Core

extension HTTPRequestHead {
    /// The HTTP/1.1 view of an HTTP/2 request's header list, which is what the policy decision and the traces read.
    init(h2Request fields: [H2Header]) throws(H2TranslationError) {
        let h1 = try H2HeaderTranslation.h1Request(from: fields)
        self.init(
            method: h1.method, target: h1.target, version: .http1_1,
            headers: HTTPHeaders(h1.headers.map { ($0.name, $0.value) }))
    }
}

extension HTTPResponseHead {
    /// The HTTP/1.1 view of an HTTP/2 response's header list, for the exchange record; nil when it has no valid
    /// `:status`.
    init?(h2Response fields: [H2Header]) {
        let translated: H1ResponseHead
        do { translated = try H2HeaderTranslation.h1Response(from: fields) } catch { return nil }
        self.init(
            version: HTTPVersion(major: 2, minor: 0), status: translated.status, reason: translated.reason,
            headers: HTTPHeaders(translated.headers.map { ($0.name, $0.value) }))
    }
}
