/// One answer of the onboarding site: a status, a content type and a body, with the fields a phone's browser needs
/// to treat it right (a download's file name, no caching).
public struct OnboardingResponse: Sendable, Equatable {
    public var status: Int
    public var contentType: String
    public var body: [UInt8]
    /// Extra response fields beyond Content-Type and Content-Length.
    public var headers: [Field]

    public struct Field: Sendable, Equatable {
        public var name: String
        public var value: String
        public init(_ name: String, _ value: String) {
            self.name = name
            self.value = value
        }
    }

    public init(status: Int, contentType: String, body: [UInt8], headers: [Field] = []) {
        self.status = status
        self.contentType = contentType
        self.body = body
        // Every answer is the proxy's own and current: a device must not keep an old CA or an old trust check.
        self.headers = [Field("Cache-Control", "no-store")] + headers
    }

    /// The fields to send after the status line: Content-Type first, then the extra ones (no Content-Length: the
    /// framing layer adds it).
    public var fields: [(String, String)] {
        [("Content-Type", contentType)] + headers.map { ($0.name, $0.value) }
    }
}
