import RuleStage
import Testing
import TrafficRules

/// The rule book's runtime rules (the web view's): ahead of the others, switchable, removable, kept across reloads.
@Suite("Rule book: runtime rules")
struct RuleBookTests {
    static func load(_ text: String, path: String) throws -> [LoadedRule] {
        try RuleSet.parse(file: text, path: path).flatMap { RuleLoader.load($0, relativeTo: "/") }.get()
    }

    @Test("A runtime rule applies first, survives a reload of the file, switches off and is removed")
    func runtimeRules() throws {
        let book = RuleBook(
            optionRules: try Self.load("fault a.test=expired", path: "opt"),
            fileRules: try Self.load("fault b.test=reset", path: "rules.txt"), filePath: "rules.txt")
        let generation = book.generation
        let made = try #require(try Self.load("[web-1] fault c.test=timeout", path: "web view").first)
        #expect(book.addRuntimeRule(made))
        #expect(!book.addRuntimeRule(made), "an id already in the book is refused")
        #expect(book.generation > generation, "sessions pick the change up")
        #expect(book.snapshot().rules.map(\.id) == ["web-1", "opt:1", "rules.txt:1"])
        #expect(book.entries().map(\.origin) == [.runtime, .option, .file])

        book.replaceFileRules(try Self.load("fault d.test=reset", path: "rules.txt"))
        #expect(book.listing().map(\.rule.id) == ["web-1", "opt:1", "rules.txt:1"])
        #expect(book.listing().map { $0.rule.rule.text }.last == "fault d.test=reset")

        #expect(book.setEnabled("web-1", false))
        #expect(book.snapshot().rules.map(\.id) == ["opt:1", "rules.txt:1"])
        #expect(book.listing().first?.enabled == false)
        #expect(!book.removeRuntimeRule("opt:1"), "the options' rules are switched off, not removed")
        #expect(book.removeRuntimeRule("web-1"))
        #expect(book.listing().map(\.rule.id) == ["opt:1", "rules.txt:1"])
        // Made again under the same id, it starts switched on.
        #expect(book.addRuntimeRule(made))
        #expect(book.snapshot().rules.first?.id == "web-1")
    }

    @Test("An empty book (the web view's, with no rule given) has nothing at any point until a rule is made")
    func emptyBook() throws {
        let book = RuleBook()
        #expect(book.snapshot().isEmpty)
        #expect(book.addRuntimeRule(try #require(try Self.load("[web-1] throttle 3G@c.test", path: "web view").first)))
        #expect(book.snapshot().actsAtConnection)
    }
}
