import ArgumentParser
import Dispatch
import Foundation
import RuleStage
import TrafficRules

/// `run`'s rules that change traffic (issue 33, docs/rules.md): the mitmproxy-named options and `--rules FILE`.
/// ArgumentParser keeps each option's uses in order but not their order across options, so options apply in the
/// order listed here (then the file's rules, in the file's order); a rules file says the order exactly.
struct RuleOptions: ParsableArguments {
    @Option(
        name: .customLong("rules"),
        help: ArgumentHelp(
            "A rules file (one rule a line, docs/rules.md), reloaded when it changes: a bad edit keeps the previous "
                + "rules and says why. Check one with `atsproxy rules FILE --check`.", valueName: "FILE"))
    var rulesFile: String?

    @Option(
        name: .customLong("map-local"),
        help: ArgumentHelp(
            "[/filter]/url-regex/file-or-directory (mitmproxy's syntax, any separator): answer matching requests "
                + "from a local file or directory. Repeatable.", valueName: "SPEC"))
    var mapLocal: [String] = []

    @Option(
        name: .customLong("answer"),
        help: ArgumentHelp(
            "[/filter]/STATUS[/Name: value…]/BODY: answer matching requests without contacting the server (BODY "
                + "may be @FILE). Repeatable.", valueName: "SPEC"))
    var answer: [String] = []

    @Option(
        name: .customLong("block-list"),
        help: ArgumentHelp(
            "HOST-PATTERN[=reset|refuse] or /FILTER[/KIND] (a rules file's `block`): the app sees its connection "
                + "fail. Repeatable.",
            valueName: "SPEC"))
    var block: [String] = []

    @Option(
        name: .customLong("fault"),
        help: ArgumentHelp(
            "HOST-PATTERN=KIND: make a healthy server fail as the app would see it fail (expired, not-yet-valid, "
                + "wrong-host, self-signed, untrusted-root, sha1, rsa1024, tls1.0, tls1.1, no-forward-secrecy, "
                + "pin-mismatch, reset, timeout, offline, dns, status:NNN). Repeatable.", valueName: "SPEC"))
    var fault: [String] = []

    @Option(
        name: .customLong("modify-headers"),
        help: ArgumentHelp(
            "[/filter]/name/value (mitmproxy's syntax): set a header on requests and responses; an empty value "
                + "deletes it. Repeatable.", valueName: "SPEC"))
    var modifyHeaders: [String] = []

    @Option(
        name: .customLong("modify-body"),
        help: ArgumentHelp(
            "[/filter]/regex/replacement (mitmproxy's syntax): rewrite decoded text bodies. Repeatable.",
            valueName: "SPEC"))
    var modifyBody: [String] = []

    @Option(
        name: .customLong("throttle"),
        help: ArgumentHelp(
            "PROFILE[@HOST-PATTERN]: a Network Link Conditioner profile (3G, DSL, Edge, LTE, \"Very Bad Network\", "
                + "\"High Latency DNS\", \"100% Loss\", Wi-Fi, \"Wi-Fi 802.11ac\") or down=…,up=…,latency=…,loss=…. "
                + "Repeatable.", valueName: "SPEC"))
    var throttle: [String] = []

    @Option(
        name: .customLong("breakpoint"),
        help: ArgumentHelp(
            "[request:|response:]FILTER (show --filter's language, or * for all): hold matching exchanges until "
                + "released in the web view (both the request and the response without a prefix; only requests are held in "
                + "this build, docs/rules.md). Repeatable.",
            valueName: "SPEC"))
    var breakpoint: [String] = []

    @Option(
        name: .customLong("breakpoint-timeout"),
        help: ArgumentHelp(
            "How long a breakpoint holds an exchange before it goes on unchanged, with a notice (URLSession's "
                + "default request timeout).", valueName: "SECONDS"))
    var breakpointTimeout: Double = 60

    /// The options as `(option, value)` pairs, in the order they apply.
    var optionPairs: [(option: String, value: String)] {
        mapLocal.map { ("--map-local", $0) } + answer.map { ("--answer", $0) } + block.map { ("--block-list", $0) }
            + fault.map { ("--fault", $0) } + modifyHeaders.map { ("--modify-headers", $0) }
            + modifyBody.map { ("--modify-body", $0) } + throttle.map { ("--throttle", $0) }
            + breakpoint.map { ("--breakpoint", $0) }
    }

    /// `--breakpoint-timeout` as a duration, refused when it is not a positive number of seconds.
    func breakpointHoldLimit() throws -> Duration {
        guard breakpointTimeout.isFinite, breakpointTimeout > 0, breakpointTimeout <= 86_400 else {
            throw ValidationError("--breakpoint-timeout: expected seconds, more than 0 and at most 86400")
        }
        return .milliseconds(Int((breakpointTimeout * 1000).rounded()))
    }

    /// The rule book for `run`, or nil when no rule is given and none can be added (no web view: the relaying path
    /// then pays nothing). With `webView` the book exists even empty, for the rules made from the web view. Every
    /// error in the options and the file is reported at once; nothing is applied half-way.
    func ruleBook(webView: Bool = false) throws -> RuleBook? {
        let pairs = optionPairs
        guard !pairs.isEmpty || rulesFile != nil || webView else { return nil }
        var messages: [String] = []
        var optionRules: [LoadedRule] = []
        switch RuleSet.parse(options: pairs).flatMap({
            RuleLoader.load($0, relativeTo: FileManager.default.currentDirectoryPath)
        }) {
        case .success(let loaded): optionRules = loaded
        case .failure(let error): messages.append(error.description)
        }
        var fileRules: [LoadedRule] = []
        if let rulesFile {
            switch Self.loadFile(rulesFile) {
            case .success(let loaded): fileRules = loaded
            case .failure(let error): messages.append(error.message)
            }
        }
        guard messages.isEmpty else {
            throw ValidationError(messages.joined(separator: "\n") + "\nno rules loaded")
        }
        return RuleBook(optionRules: optionRules, fileRules: fileRules, filePath: rulesFile)
    }

    struct FileError: Error {
        var message: String
    }

    /// A rules file read and its actions compiled, relative paths inside it taken from its folder.
    static func loadFile(_ path: String) -> Result<[LoadedRule], FileError> {
        let text: String
        do { text = try String(contentsOfFile: path, encoding: .utf8) } catch {
            return .failure(FileError(message: "\(path): cannot read the rules file: \(error.localizedDescription)"))
        }
        let directory = (path as NSString).deletingLastPathComponent
        let base = directory.isEmpty ? FileManager.default.currentDirectoryPath : directory
        return RuleSet.parse(file: text, path: path).flatMap { RuleLoader.load($0, relativeTo: base) }
            .mapError { FileError(message: $0.description) }
    }
}

/// Reloads a rules file when it changes (its size or modification time, looked at once a second): a good file
/// replaces the file's rules; a bad one keeps the previous rules and says why, with the line.
final class RulesFileWatcher {
    private let timer: DispatchSourceTimer

    init(book: RuleBook, path: String, report: @escaping @Sendable (String) -> Void) {
        let queue = DispatchQueue(label: "atsproxy.rules-reload")
        timer = DispatchSource.makeTimerSource(queue: queue)
        let stamp = Stamp(Self.stamp(path))
        timer.setEventHandler {
            let now = Self.stamp(path)
            guard now != stamp.value else { return }
            stamp.value = now
            switch RuleOptions.loadFile(path) {
            case .success(let rules):
                book.replaceFileRules(rules)
                report("\(path): reloaded, \(rules.count) rule\(rules.count == 1 ? "" : "s") in force")
            case .failure(let error):
                report("\(error.message)\n\(path): not reloaded; the previous rules stay in force")
            }
        }
        timer.schedule(deadline: .now() + 1, repeating: 1)
        timer.resume()
    }

    deinit { timer.cancel() }

    /// Touched only on the watcher's queue.
    private final class Stamp: @unchecked Sendable {
        var value: String?
        init(_ value: String?) { self.value = value }
    }

    private static func stamp(_ path: String) -> String? {
        guard let attributes = try? FileManager.default.attributesOfItem(atPath: path) else { return nil }
        let size = (attributes[.size] as? NSNumber)?.intValue ?? -1
        let modified = (attributes[.modificationDate] as? Date)?.timeIntervalSince1970 ?? 0
        return "\(size)-\(modified)"
    }
}
