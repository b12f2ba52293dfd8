import FilterCore
import Testing

@testable import TrafficRules

private func rule(_ keyword: String, _ argument: String) throws(RuleError) -> Rule {
    try RuleParser.parse(keyword: keyword, argument: argument, source: .option("--" + keyword, index: 1))
}

private func failure(_ keyword: String, _ argument: String) -> RuleError? {
    do {
        _ = try rule(keyword, argument)
        return nil
    } catch {
        return error
    }
}

private func line(_ text: String) throws(RuleError) -> Rule? {
    try RuleSet.parse(line: text, source: .file(path: "r.txt", line: 7))
}

@Suite("Rule parser: mitmproxy-style specs")
struct SpecTests {
    @Test("map-local: two clauses have no filter; three have one; extra separators belong to the path")
    func mapLocal() throws {
        let plain = try rule("map-local", "/example\\.test/mocks")
        #expect(plain.filter == nil)
        // mitmproxy's reading: past two clauses the first is a filter, and a bare regex is no filter of ours.
        #expect(failure("map-local", "/example\\.test/v1/x/tmp/mocks")?.message.hasPrefix("in the filter:") == true)
        let two = try rule("map-local", "|^https://a\\.test/v1/|/srv/mocks")
        #expect(two.action == .mapLocal(urlRegex: "^https://a\\.test/v1/", path: "/srv/mocks"))
        #expect(two.points == [.requestHead])
        let three = try rule("map-local", "|host:a.test|/v1/users$|mocks/users.json|x")
        #expect(three.filter == .host("a.test"))
        #expect(three.action == .mapLocal(urlRegex: "/v1/users$", path: "mocks/users.json|x"))
    }

    @Test("Any punctuation separates; letters, digits, spaces and quotes do not")
    func separators() throws {
        #expect(try rule("modify-headers", ":X-A:1").action == .modifyHeaders(name: "X-A", value: .literal("1")))
        #expect(try rule("modify-headers", "#X-A#1").action == .modifyHeaders(name: "X-A", value: .literal("1")))
        #expect(failure("modify-headers", "aX-AaB")?.message.contains("separator") == true)
        #expect(failure("modify-headers", " X-A 1")?.column == 1)
    }

    @Test("modify-headers: empty value deletes, @ reads a file, a filter on a response field acts on responses")
    func modifyHeaders() throws {
        let delete = try rule("modify-headers", "/Cache-Control/")
        #expect(delete.action == .modifyHeaders(name: "Cache-Control", value: nil))
        #expect(delete.points == [.requestHead, .responseHead])
        #expect(try rule("modify-headers", "/X-Token/@token.txt").action == .modifyHeaders(name: "X-Token", value: .file("token.txt")))
        #expect(try rule("modify-headers", "/status:5xx/Retry-After/30").points == [.responseHead])
        #expect(try rule("modify-headers", "/host:a.test/X/1").points == [.requestHead, .responseHead])
        #expect(try rule("modify-headers:response", "/X/1").points == [.responseHead])
        #expect(try rule("modify-headers:request", "/X/1").points == [.requestHead])
        let bad = failure("modify-headers", "/Bad Name/1")
        #expect(bad?.column == 5)
        #expect(failure("modify-headers", "/X/a\nb")?.message.contains("line break") == true)
        #expect(failure("modify-headers", "/only")?.message.contains("found 1") == true)
    }

    @Test("breakpoint: both heads without a prefix, one with request:/response: or a response field; * for all")
    func breakpoint() throws {
        let both = try rule("breakpoint", "text:/held")
        #expect(both.action == .breakpoint)
        #expect(both.filter == .text("/held"))
        #expect(both.points == [.requestHead, .responseHead])
        #expect(try rule("breakpoint", "request:host:a.test").points == [.requestHead])
        #expect(try rule("breakpoint", "response:host:a.test").points == [.responseHead])
        #expect(try rule("breakpoint:request", "host:a.test").points == [.requestHead])
        #expect(try rule("breakpoint", "status:5xx").points == [.responseHead])
        let all = try rule("breakpoint", "*")
        #expect(all.filter == nil && all.points == [.requestHead, .responseHead])
        let e = failure("breakpoint", "request:status:500")
        #expect(e?.column == 9)
        #expect(e?.message.contains("status: is known only from the response point on") == true)
        #expect(failure("breakpoint", "request:")?.message.contains("expected a filter") == true)
        #expect(failure("breakpoint:request", "response:*")?.message.contains("given twice") == true)
        // Written back as read.
        for text in ["breakpoint text:/held", "breakpoint request:host:a.test", "breakpoint response:host:a.test",
                     "breakpoint status:5xx", "breakpoint *"] {
            let read = try line(text)
            #expect(read?.text == text)
        }
    }

    @Test("A filter on a field the point cannot know is refused where it is written")
    func unknownAtPoint() throws {
        let e = failure("modify-headers:request", "/host:a.test status:404/X/1")
        #expect(e?.column == 14)
        #expect(e?.message.contains("status: is known only from the response point on") == true)
        #expect(failure("map-local", "/verdict:ok/x/y")?.message.contains("verdict:") == true)
        #expect(failure("answer", "/problems/503/x")?.message.contains("problems") == true)
        #expect(failure("map-local", "/run:2/x/y")?.message.contains("not known on a live exchange") == true)
        #expect(failure("fault", "/method:GET/expired")?.message.contains("connection point") == true)
    }

    @Test("A filter's syntax error points into the argument")
    func filterSyntax() throws {
        let e = failure("map-local", "/host:a.test hots:x/r/p")
        #expect(e?.column == 14)
        #expect(e?.message.contains("unknown key \"hots\"") == true)
    }

    @Test("modify-body: the regex must compile; the replacement may be empty or @file")
    func modifyBody() throws {
        let r = try rule("modify-body", "/\"debug\": *false/\"debug\": true")
        #expect(r.action == .modifyBody(regex: "\"debug\": *false", replacement: .literal("\"debug\": true")))
        #expect(r.points == [.requestBody, .responseBody])
        #expect(try rule("modify-body", "/x/").action == .modifyBody(regex: "x", replacement: .literal("")))
        #expect(try rule("modify-body", "/x/@r.json").action == .modifyBody(regex: "x", replacement: .file("r.json")))
        #expect(failure("modify-body", "/(unclosed/x")?.column == 2)
        #expect(failure("modify-body", "//x")?.message.contains("expected a regex") == true)
    }

    @Test("answer: status, headers, body; the filter optional")
    func answer() throws {
        let r = try rule("answer", "|text:/health|503|Retry-After: 30|Content-Type:text/plain|down")
        #expect(r.filter == .text("/health"))
        #expect(
            r.action
                == .answer(
                    status: 503,
                    headers: [RuleHeader(name: "Retry-After", value: "30"), RuleHeader(name: "Content-Type", value: "text/plain")],
                    body: .literal("down")))
        #expect(try rule("answer", "/204/").action == .answer(status: 204, headers: [], body: .literal("")))
        #expect(try rule("answer", "/200/@mock.json").action == .answer(status: 200, headers: [], body: .file("mock.json")))
        #expect(failure("answer", "/200")?.message.contains("expected a body") == true)
        #expect(failure("answer", "/host:a.test/999/x")?.message.contains("status from 100 to 599") == true)
        #expect(failure("answer", "/200/no colon/x")?.message.contains("NAME: VALUE") == true)
    }
}

@Suite("Rule parser: fault, block, throttle")
struct TargetTests {
    @Test("fault: every KIND, case-insensitive; status:NNN answers the request")
    func faultKinds() throws {
        let spellings = [
            "expired", "not-yet-valid", "wrong-host", "self-signed", "untrusted-root", "sha1", "rsa1024", "tls1.0",
            "tls1.1", "no-forward-secrecy", "pin-mismatch", "reset", "timeout", "offline", "dns",
        ]
        for spelling in spellings {
            let r = try rule("fault", "*.api.test=" + spelling.uppercased())
            #expect(r.action == .fault(FaultKind(spelling: spelling)!))
            #expect(r.points == [.connection])
            #expect(r.filter == .host(".api.test"))
            #expect("\(FaultKind(spelling: spelling)!)" == spelling)
        }
        let status = try rule("fault", "api.test=status:503")
        #expect(status.action == .fault(.status(503)))
        #expect(status.points == [.requestHead])
        #expect(failure("fault", "api.test=status:99")?.column == 10)
        #expect(failure("fault", "api.test")?.message.contains("=KIND") == true)
        #expect(try rule("fault", "*=offline").filter == nil)
        #expect(try rule("fault", "|host:.api.test|timeout").action == .fault(.timeout))
    }

    @Test("Host patterns: *, exact, *.domain; a * elsewhere is refused")
    func hostPatterns() throws {
        #expect(try rule("block", "ads.test").filter == .host("ads.test"))
        #expect(try rule("block", "*.ads.test").filter == .host(".ads.test"))
        #expect(try rule("block", "ADS.test=refuse").action == .block(.refuse))
        #expect(try rule("block", "ads.test").action == .block(.reset))
        #expect(failure("block", "a*.test")?.column == 2)
        #expect(failure("block", "ads.test=drop")?.message.contains("reset or refuse") == true)
        #expect(failure("block", "a..test") != nil)
    }

    @Test("block with a filter: before the upstream when it reads only the host, else at the request")
    func blockPoints() throws {
        #expect(try rule("block", "/host:a.test/").points == [.connection])
        #expect(try rule("block", "/method:DELETE/refuse").points == [.requestHead])
        #expect(failure("block", "/status:500/")?.message.contains("response point") == true)
    }

    @Test("throttle: a profile by name, or custom figures, optionally for a host pattern")
    func throttle() throws {
        let lte = try rule("throttle", "LTE")
        #expect(lte.action == .throttle(.profile("LTE")))
        #expect(lte.filter == nil)
        #expect(lte.points == [.connection])
        let vbn = try rule("throttle", "Very Bad Network@*.cdn.test")
        #expect(vbn.action == .throttle(.profile("Very Bad Network")))
        #expect(vbn.filter == .host(".cdn.test"))
        let custom = try rule("throttle", "down=780kbit, up=330kbit,latency=100ms,loss=1%")
        #expect(
            custom.action
                == .throttle(.custom([("down", "780kbit"), ("up", "330kbit"), ("latency", "100ms"), ("loss", "1%")])))
        #expect(failure("throttle", "down=1,speed=2")?.column == 8)
        #expect(failure("throttle", "down=1,down=2")?.message.contains("twice") == true)
        #expect(failure("throttle", "down=")?.message.contains("expected a value") == true)
        #expect(failure("throttle", "@a.test")?.message.contains("expected a profile") == true)
        // Found by fuzz-rules: `3G@x@*` would be written back as `3G@x`, a profile for host x.
        #expect(failure("throttle", "3G@x@*")?.message.contains("second @") == true)
        // Found by fuzz-rules: a combining mark after the keyword's space fused with it into one character.
        #expect(failure("throttle", "\u{301}LTE")?.message.contains("letter or digit") == true)
        #expect(failure("map-local", "\u{301}x\u{301}y")?.message.contains("separator") == true)
    }
}

@Suite("Rules files and options")
struct RuleSetTests {
    @Test("Lines: comments, blanks, names, spaces around, CRLF; unknown keywords and qualifiers refused")
    func lines() throws {
        #expect(try line("   # a comment") == nil)
        #expect(try line("") == nil)
        #expect(try line("  \t ") == nil)
        let named = try line("  [mock.login_1]   answer /200/ok   ")
        #expect(named?.name == "mock.login_1")
        #expect(named?.id == "mock.login_1")
        #expect(named?.action == .answer(status: 200, headers: [], body: .literal("ok")))
        let e = #expect(throws: RuleError.self) { try line("  map-locale /a/b") }
        #expect(e?.column == 3)
        #expect(e?.description.hasPrefix("r.txt:7:3: unknown rule \"map-locale\"") == true)
        #expect(throws: RuleError.self) { try line("answer:response /200/x") }
        #expect(throws: RuleError.self) { try line("modify-body:later /x/y") }
        #expect(throws: RuleError.self) { try line("[bad name] block a.test") }
        #expect(throws: RuleError.self) { try line("[open block a.test") }
        #expect(throws: RuleError.self) { try line("[named]") }
    }

    @Test("A file with a bad line yields every error and no rules")
    func allOrNothing() throws {
        let text = "block a.test\r\nfault b.test=nope\r\n# ok\r\nthrottle 3G\r\nmap-local /x\r\n"
        guard case .failure(let error) = RuleSet.parse(file: text, path: "team.rules") else {
            Issue.record("a bad file was accepted")
            return
        }
        #expect(error.errors.map(\.source) == [.file(path: "team.rules", line: 2), .file(path: "team.rules", line: 5)])
        #expect(error.errors[0].column == 14)
        let good = try RuleSet.parse(file: "block a.test\r\nthrottle 3G\n", path: "team.rules").get()
        #expect(good.rules.map(\.source) == [.file(path: "team.rules", line: 1), .file(path: "team.rules", line: 2)])
    }

    @Test("A value ending in spaces: kept from an option, not from a file line (found by fuzz-rules)")
    func trailingSpaces() throws {
        let option = try RuleParser.parse(option: "--map-local", index: 1, value: "/n/n] fau*. ")
        #expect(option.action == .mapLocal(urlRegex: "n", path: "n] fau*. "))
        #expect(try line(option.text)?.action == .mapLocal(urlRegex: "n", path: "n] fau*."))
    }

    @Test("Names are unique in a set")
    func duplicateNames() throws {
        guard case .failure(let error) = RuleSet.parse(file: "[a] block x.test\n[a] block y.test\n", path: "f") else {
            Issue.record("a duplicate name was accepted")
            return
        }
        #expect(error.errors.first?.description == "f:2:1: the name [a] is taken by f:1")
    }

    @Test("Options: the same syntax, numbered per option, all or nothing")
    func options() throws {
        let set = try RuleSet.parse(options: [
            ("--fault", "a.test=expired"), ("--map-local", "/x/y"), ("--fault", "b.test=tls1.0"),
        ]).get()
        #expect(set.rules.map(\.id) == ["--fault #1", "--map-local #1", "--fault #2"])
        guard case .failure(let error) = RuleSet.parse(options: [("--throttle", "3G"), ("--fault", "b.test")]) else {
            Issue.record("a bad option was accepted")
            return
        }
        #expect(error.description.hasPrefix("--fault #1, column 7: expected =KIND"))
    }

    @Test("A rule written back reads as the same rule; the separator avoids every clause")
    func normalizedText() throws {
        let lines = [
            "[n] map-local |host:a.test method:post|^https://a\\.test/v1/|mocks/",
            "modify-headers /X-A/", "modify-headers:request /X-A/1", "modify-headers:response /X-A/1",
            "modify-headers /status:5xx/X/1", "modify-headers:response /host:a.test/X/1",
            "modify-body ~a/b|x~c", "answer |text:/h|503|Retry-After: 3|x/y", "fault *.a.test=not-yet-valid",
            "fault /method:GET/status:418", "block a.test=refuse", "block *", "block /host:\"a=b\"/",
            "throttle Edge@a.test", "throttle down=1,loss=2", "fault *=dns",
        ]
        for text in lines {
            let parsed = try #require(try line(text))
            let again = try #require(try line(parsed.text), "\(text) → \(parsed.text)")
            #expect(again.filter == parsed.filter && again.action == parsed.action && again.points == parsed.points, "\(text) → \(parsed.text)")
            #expect(again.name == parsed.name)
        }
        #expect(try line("modify-body ~a/b|x~c")?.text == "modify-body !a/b|x!c")
        #expect(try line("block *.ads.test")?.text == "block *.ads.test")
    }
}
