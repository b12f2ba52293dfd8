import ArgumentParser
import Foundation
import RuleStage
import TrafficRules

/// `atsproxy rules FILE --check`: reads a rules file as the proxy will and lists its rules, or every error in it.
struct RulesCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "rules",
        abstract: "Check a rules file (map local, modify headers and bodies, answer, block, fault, throttle).",
        discussion: """
            Lists each rule on a line of its own, normalized: where it was written, the rule as the file would \
            spell it, and the points of an exchange where it acts. A file with any bad line yields no rules: \
            every error is printed with its file, line and column. The format is in docs/rules.md.

            Exit status: 0 when every rule reads, 1 when one does not, 2 when the file cannot be read.
            """)

    @Argument(help: "The rules file, e.g. rules.txt.")
    var file: String

    @Flag(name: .long, help: "Read the file and list its rules or its errors (the only action for now).")
    var check = false

    func validate() throws {
        guard check else { throw ValidationError("say --check: `atsproxy rules \(file) --check`") }
    }

    func run() throws {
        let text: String
        do {
            text = try String(contentsOfFile: file, encoding: .utf8)
        } catch {
            throw failure("atsproxy rules: cannot read \(file): \(error.localizedDescription)", status: 2)
        }
        // Read as `run --rules` reads it: the syntax, then each action (regexes, @FILE values, throttle profiles),
        // relative paths from the file's folder.
        let directory = (file as NSString).deletingLastPathComponent
        let base = directory.isEmpty ? FileManager.default.currentDirectoryPath : directory
        switch RuleSet.parse(file: text, path: file).flatMap({ set in
            RuleLoader.load(set, relativeTo: base).map { _ in set }
        }) {
        case .failure(let error):
            let count = error.errors.count
            throw failure(error.description + "\n\(file): \(count) error\(count == 1 ? "" : "s"); no rules loaded")
        case .success(let set):
            for rule in set.rules {
                print("\(rule.source)  \(rule.text)  (\(rule.points.map(\.description).joined(separator: ", ")))")
            }
            if set.rules.isEmpty { print("\(file): no rules") }
        }
    }
}
