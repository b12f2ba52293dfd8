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
