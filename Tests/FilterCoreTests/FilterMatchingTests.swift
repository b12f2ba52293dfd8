import FilterCore
import ProxyTrace
import Testing

private func condition(_ text: String) throws -> FilterCondition { try FilterCondition(parsing: text) }

/// A request to api.example.com, and what its response point adds.
private let request = ExchangeFacts(
    point: .request, host: "API.Example.com", port: 443, method: "POST", url: "https://api.example.com/v1/Login?x=1",
    path: "/v1/Login?x=1", requestHeaders: [("Content-Type", "application/json")])
private func response(
    status: Int? = 200, outcome: ExchangeSummary.ATSOutcome = .allowed, codes: [Int] = [], interrupted: Bool = false
) -> ExchangeFacts {
    var facts = request
    facts.point = .response
    facts.status = status
    facts.outcome = outcome
    facts.errorCodes = codes
    facts.interrupted = interrupted
    return facts
}

@Suite("Filter matching on live exchanges")
struct FilterMatchingTests {
    @Test("host: exact, a domain and below, case-insensitive; not a suffix of another name")
    func host() throws {
        #expect(try condition("host:api.example.com").matches(request))
        #expect(try condition("host:API.EXAMPLE.COM").matches(request))
        #expect(try condition("host:.example.com").matches(request))
        #expect(try condition("host:*.example.com").matches(request))
        #expect(try condition("host:*.api.example.com").matches(request))
        #expect(try !condition("host:example.com").matches(request))
        var other = request
        other.host = "badexample.com"
        #expect(try !condition("host:.example.com").matches(other))
    }

    @Test("method: as sent; text: the URL, ASCII case-insensitive")
    func methodAndText() throws {
        #expect(try condition("method:post").matches(request))
        #expect(try !condition("method:GET").matches(request))
        #expect(try condition("text:/v1/login").matches(request))
        #expect(try condition("text:LOGIN?X=1").matches(request))
        #expect(try !condition("text:logout").matches(request))
        var noURL = request
        noURL.url = nil
        #expect(try !condition("text:login").matches(noURL))
    }

    @Test("status: a code, a class, a range, none")
    func status() throws {
        #expect(try condition("status:404").matches(response(status: 404)))
        #expect(try condition("status:4xx").matches(response(status: 418)))
        #expect(try !condition("status:4xx").matches(response(status: 500)))
        #expect(try condition("status:500-503").matches(response(status: 503)))
        #expect(try condition("status:none").matches(response(status: nil)))
        #expect(try !condition("status:none").matches(response(status: 200)))
        // Two-valued, as the SQL: no status fails status:4xx and meets its negation.
        #expect(try !condition("status:4xx").matches(response(status: nil)))
        #expect(try condition("not status:4xx").matches(response(status: nil)))
    }

    @Test("verdict:, code:, problems")
    func verdictCodeProblems() throws {
        #expect(try condition("verdict:ok").matches(response()))
        #expect(try condition("verdict:violation").matches(response(outcome: .violation)))
        #expect(try !condition("verdict:blocked").matches(response()))
        #expect(try condition("code:-1200").matches(response(codes: [-1200, -9836])))
        #expect(try condition("code:-9836").matches(response(codes: [-1200, -9836])))
        #expect(try !condition("code:-1022").matches(response(codes: [-1200])))
        #expect(try condition("problems").matches(response(outcome: .blocked)))
        #expect(try condition("problems").matches(response(outcome: .failed)))
        #expect(try condition("problems").matches(response(status: 500)))
        #expect(try condition("problems").matches(response(interrupted: true)))
        #expect(try !condition("problems").matches(response()))
        #expect(try !condition("problems").matches(request))
    }

    @Test("run: is a capture's field: never on a live exchange")
    func run() throws {
        #expect(try !condition("run:1").matches(response()))
        #expect(try condition("run:1").earliestPoint == nil)
    }

    @Test("not, juxtaposition, or, parentheses")
    func combinations() throws {
        #expect(try condition("host:api.example.com method:POST").matches(request))
        #expect(try !condition("host:api.example.com method:GET").matches(request))
        #expect(try condition("method:GET or text:login").matches(request))
        #expect(try condition("-method:GET").matches(request))
        #expect(try condition("not (method:GET or host:other.test)").matches(request))
        #expect(try !condition("not (method:POST or host:other.test)").matches(request))
    }

    @Test("Each key's earliest point; unknownKeys names what a point cannot know")
    func points() throws {
        #expect(try condition("host:a.test").earliestPoint == .connection)
        #expect(try condition("host:a.test method:GET").earliestPoint == .request)
        #expect(try condition("text:x or status:5xx").earliestPoint == .response)
        #expect(try condition("problems").earliestPoint == .response)
        #expect(try condition("host:a.test -status:404 code:-1200").unknownKeys(at: .request) == ["status", "code"])
        #expect(try condition("method:GET").unknownKeys(at: .connection) == ["method"])
        #expect(try condition("verdict:ok").unknownKeys(at: .response) == [])
        #expect(try condition("run:3").unknownKeys(at: .response) == ["run"])
    }

    @Test("Written back in the language, a condition parses to itself")
    func roundTrip() throws {
        let expressions = [
            "host:*.Example.com status:4xx -verdict:ok method:POST text:login", "problems or (status:none code:-1200)",
            "text:\"two words (x)\" text:\"a \\\"quote\\\" and \\\\\"", "not (host:a.test or (method:GET run:2))",
            "status:500-503 status:404 status:100-199 verdict:n/a verdict:failed", "not not -text:x",
            "((host:a.test))",
        ]
        for expression in expressions {
            let parsed = try condition(expression)
            #expect(try condition(parsed.description) == parsed, "\(expression) → \(parsed.description)")
        }
        #expect(try condition("status:4xx method:get").description == "status:4xx method:GET")
    }
}

@Suite("Filters decided early: what the request already rules out")
struct FilterMayMatchTests {
    private func condition(_ text: String) throws -> FilterCondition { try FilterCondition(parsing: text) }

    @Test("At the request point a response key is unknown; a request key that fails decides")
    func requestPoint() throws {
        let facts = ExchangeFacts(point: .request, host: "api.test", port: 443, method: "GET", url: "https://api.test/a")
        #expect(try condition("status:5xx").mayMatch(facts))
        #expect(try !condition("host:other.test status:5xx").mayMatch(facts))
        #expect(try condition("host:api.test status:5xx").mayMatch(facts))
        #expect(try condition("host:other.test or status:5xx").mayMatch(facts))
        #expect(try !condition("not host:api.test").mayMatch(facts))
        #expect(try condition("not status:5xx").mayMatch(facts))
        #expect(try !condition("method:POST problems").mayMatch(facts))
    }
}
