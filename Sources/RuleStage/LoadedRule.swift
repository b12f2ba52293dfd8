import Foundation
import HTTP1Core
import Throttle
import TrafficActions
import TrafficRules

/// A rule ready to act: the rule as written and its action compiled (regexes, header checks, `@FILE` values read,
/// the throttle's profile).
public struct LoadedRule: Sendable {
    public let rule: Rule
    let action: LoadedAction

    /// The rule's id (its name, else its source).
    public var id: String { rule.id }
}

enum LoadedAction: Sendable {
    case mapLocal(MapLocalRule)
    case modifyHeaders(HeaderModification)
    case modifyBody(BodyModification)
    case answer(CannedAnswer)
    case block(BlockKind)
    case fault(FaultKind)
    /// The profile, and the link every connection it covers shares when the rule names no host (the whole proxy).
    case throttle(LinkProfile, SharedLink?)
    case breakpoint
}

/// Reads a rule set's actions: all or nothing, as the parser reads the rules, every error named by its rule.
public enum RuleLoader {
    /// The rules of `set`, compiled. Relative paths (map local, `@FILE`, answer files) are relative to
    /// `directory`: the rules file's folder, or the working directory for options; `~/` is the home folder.
    public static func load(_ set: RuleSet, relativeTo directory: String, files: some FileReading = POSIXFileReader())
        -> Result<[LoadedRule], RuleSetError>
    {
        var loaded: [LoadedRule] = []
        var errors: [RuleError] = []
        for rule in set.rules {
            do throws(RuleActionError) {
                loaded.append(LoadedRule(rule: rule, action: try compile(rule, directory: directory, files: files)))
            } catch {
                errors.append(RuleError(source: rule.source, column: 1, message: error.message))
            }
        }
        return errors.isEmpty ? .success(loaded) : .failure(RuleSetError(errors: errors))
    }

    static func compile(_ rule: Rule, directory: String, files: some FileReading) throws(RuleActionError)
        -> LoadedAction
    {
        switch rule.action {
        case .mapLocal(let regex, let path):
            return .mapLocal(try MapLocalRule(urlPattern: regex, localPath: resolve(path, in: directory)))
        case .modifyHeaders(let name, let value):
            let text = try value.map { v throws(RuleActionError) in try read(v, directory: directory, files: files) }
            return .modifyHeaders(
                try HeaderModification(name: name, value: text ?? "", direction: direction(rule.points)))
        case .modifyBody(let regex, let replacement):
            return .modifyBody(
                try BodyModification(
                    pattern: regex, replacement: try read(replacement, directory: directory, files: files)))
        case .answer(let status, let headers, let body):
            let answerBody: CannedAnswer.Body
            switch body {
            case .literal(let text): answerBody = .text(text)
            case .file(let path): answerBody = .file(resolve(path, in: directory))
            }
            return .answer(
                try CannedAnswer(
                    status: status, headers: HTTPHeaders(headers.map { ($0.name, $0.value) }), body: answerBody))
        case .block(let kind):
            return .block(kind)
        case .fault(let kind):
            return .fault(kind)
        case .breakpoint:
            return .breakpoint
        case .throttle(let reference):
            do {
                let profile = try LinkProfile(parsing: reference.description)
                // `--throttle 3G` (no host, or `*`): the whole device is on one 3G link, as under NLC, so every
                // connection draws from this rule's buckets. With a host pattern, each connection has its own.
                return .throttle(profile, rule.filter == nil ? SharedLink(profile: profile) : nil)
            } catch {
                throw RuleActionError(error.description)
            }
        }
    }

    /// Which heads a header rule changes, from the points the parser gave it.
    static func direction(_ points: [RulePoint]) -> HeaderModification.Direction {
        let request = points.contains(.requestHead) || points.contains(.requestBody)
        let response = points.contains(.responseHead) || points.contains(.responseBody)
        return request && response ? .both : response ? .responses : .requests
    }

    /// `@FILE`'s contents (one trailing line break dropped, as an editor leaves one), or the literal text.
    static func read(_ text: RuleText, directory: String, files: some FileReading) throws(RuleActionError) -> String {
        switch text {
        case .literal(let value):
            return value
        case .file(let path):
            let full = resolve(path, in: directory)
            guard let info = files.info(full), info.isRegularFile, info.size <= 1 << 20,
                let bytes = files.read(full, offset: 0, count: info.size)
            else { throw RuleActionError("cannot read \(full) (a file of at most 1 MiB)") }
            var value = String(decoding: bytes, as: UTF8.self)
            if value.hasSuffix("\r\n") { value.removeLast() } else if value.hasSuffix("\n") { value.removeLast() }
            return value
        }
    }

    /// An absolute path as it is, `~/…` in the home folder, anything else inside `directory`.
    static func resolve(_ path: String, in directory: String) -> String {
        if path.hasPrefix("/") { return path }
        if path == "~" || path.hasPrefix("~/") {
            return (ProcessInfo.processInfo.environment["HOME"] ?? "/") + path.dropFirst()
        }
        return directory.hasSuffix("/") ? directory + path : directory + "/" + path
    }
}
