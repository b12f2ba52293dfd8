import Testing

@testable import ProxyTrace

@Suite("Proxy credentials")
struct ProxyCredentialsTests {
    @Test("Basic credentials need both a user name and a password, and the error never repeats the value",
          arguments: [(":pass", "user name"), ("user:", "password"), (":", "user name")])
    func emptyCredentials(_ row: (text: String, empty: String)) {
        #expect {
            try ProxyCredentials(parsing: row.text)
        } throws: { error in
            (error as? ProxyCredentialsError)?.description == "--auth expects USER:PASSWORD; the \(row.empty) is empty"
        }
    }

    @Test("Basic proxy credentials are checked exactly; a refusal says whether they were missing or wrong")
    func credentials() throws {
        let c = try ProxyCredentials(parsing: "qa:s3cret")
        #expect(c.refusal(ofProxyAuthorization: "Basic cWE6czNjcmV0") == nil)
        #expect(c.refusal(ofProxyAuthorization: "basic  cWE6czNjcmV0 ") == nil)
        #expect(c.refusal(ofProxyAuthorization: "Basic cWE6czNjcmVU") == .wrong)
        #expect(c.refusal(ofProxyAuthorization: "Bearer cWE6czNjcmV0") == .wrong)
        #expect(c.refusal(ofProxyAuthorization: "Basic !!!") == .wrong)
        #expect(c.refusal(ofProxyAuthorization: nil) == .missing)
        #expect(c.refusal(ofProxyAuthorization: " ") == .missing)
        // Shorter, longer and empty guesses are refused after the same walk over the secret.
        for guess in ["", "qa:s3cre", "qa:s3cret!", "qa:s3cret" + String(repeating: "x", count: 100)] {
            #expect(!ProxyCredentials.constantTimeEqual(Array(guess.utf8), Array("qa:s3cret".utf8)), "\(guess)")
        }
        #expect(ProxyCredentials.constantTimeEqual(Array("qa:s3cret".utf8), Array("qa:s3cret".utf8)))
    }
}
