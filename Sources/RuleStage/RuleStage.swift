import FilterCore
import Synchronization
import TrafficRules

// Theory of operation
//
// The one rules stage every exchange passes through (issue 33). Rules are read once (`RuleLoader`: the parser's
// `RuleSet`, then each action compiled: regexes, files, throttle profiles), kept in a `RuleBook`, and looked at
// through an immutable `RuleSnapshot` at the fixed points of an exchange:
//
//   connection      before the upstream is contacted      → ConnectionRuling  (fault, block, throttle)
//   request head    the request head has arrived          → RequestRuling     (answer locally, block, new head)
//   request body    the request's body ended                → BodyEdits         (new head and body)
//   response head   the upstream's response head arrived   → ResponseRuling    (new head)
//   response body   the response's body ended               → BodyEdits         (new head and body)
//
// Each point is a pure function of what the exchange has shown so far and gives back what to do, and which rules
// acted (`AppliedRule`) so the record of the exchange says so. The proxy's layers call the points through the
// relays' decision seam (ProxyCore: `RequestDecision`, `ExchangeRelay.resolve`), so the four relays share this one
// stage and an exchange can be held between the point and its answer.
//
// No rules, no cost: a session asks the book's generation (one atomic load) and keeps its snapshot until the book
// changes (a rules file reloaded, a rule switched in the web view); a snapshot with nothing for a point answers nil
// at once.
//
// The body points need the whole body (a regex may span any two pieces, gzip's trailer is at the end): at the
// head, `RequestRuling.bodyEdits` (for the request) or `ResponseRules.bodyEdits` (for the response) says which body
// rules hold for it, and only then does the relay hold the head and body (ProxyCore's `HeldBody`) and ask
// `BodyEdits.apply` at the body's end.

/// The rules in force, shared by every session: the rules made while running (the web view's), the CLI options'
/// and the rules file's, each switchable on and off (the web view). Replacing the file's rules (a reload), adding or
/// removing a runtime rule, or switching one makes a new snapshot and a new generation, which sessions pick up at
/// their next point.
///
/// Runtime rules come first: one made from an exchange ("fail this host like…") is meant to win over the file's
/// and the options' rules for the same requests. A reload of the file leaves them as they are.
public final class RuleBook: Sendable {
    private struct State {
        var runtimeRules: [LoadedRule] = []
        var optionRules: [LoadedRule]
        var fileRules: [LoadedRule]
        var disabled: Set<String>
        var snapshot: RuleSnapshot

        /// Every rule, in the order they apply.
        var all: [LoadedRule] { runtimeRules + optionRules + fileRules }
    }

    /// Where a rule in the book came from.
    public enum Origin: String, Sendable {
        /// Made while running (`addRuntimeRule`: the web view).
        case runtime
        /// A CLI option (`--fault`, `--map-local`…).
        case option
        /// The rules file.
        case file
    }

    /// A rule in the book, whether it is switched on, and where it came from.
    public struct Entry: Sendable {
        public let rule: LoadedRule
        public let enabled: Bool
        public let origin: Origin

        public init(rule: LoadedRule, enabled: Bool, origin: Origin) {
            self.rule = rule
            self.enabled = enabled
            self.origin = origin
        }
    }

    private let state: Mutex<State>
    private let version = Atomic<Int>(1)

    /// The rules file these rules were read from, if any (for the web view and the reload's messages).
    public let filePath: String?

    public init(optionRules: [LoadedRule] = [], fileRules: [LoadedRule] = [], filePath: String? = nil) {
        self.filePath = filePath
        state = Mutex(
            State(
                optionRules: optionRules, fileRules: fileRules, disabled: [],
                snapshot: RuleSnapshot(rules: optionRules + fileRules, generation: 1)))
    }

    /// Changes each time the rules in force change; a session compares it with its snapshot's.
    public var generation: Int { version.load(ordering: .acquiring) }

    /// The rules in force now.
    public func snapshot() -> RuleSnapshot { state.withLock { $0.snapshot } }

    /// Every rule, in force or switched off, in the order they apply.
    public func listing() -> [(rule: LoadedRule, enabled: Bool)] {
        state.withLock { s in s.all.map { ($0, !s.disabled.contains($0.rule.id)) } }
    }

    /// Every rule with where it came from, in the order they apply.
    public func entries() -> [Entry] {
        state.withLock { s in
            s.runtimeRules.map { Entry(rule: $0, enabled: !s.disabled.contains($0.id), origin: .runtime) }
                + s.optionRules.map { Entry(rule: $0, enabled: !s.disabled.contains($0.id), origin: .option) }
                + s.fileRules.map { Entry(rule: $0, enabled: !s.disabled.contains($0.id), origin: .file) }
        }
    }

    /// Adds a rule made while running, ahead of the others, switched on; false (and nothing added) when a rule of
    /// that id is already in the book.
    @discardableResult
    public func addRuntimeRule(_ rule: LoadedRule) -> Bool {
        var added = false
        update { s in
            guard !s.all.contains(where: { $0.id == rule.id }) else { return }
            s.runtimeRules.insert(rule, at: 0)
            s.disabled.remove(rule.id)
            added = true
        }
        return added
    }

    /// Removes the runtime rule `id`; false when there is none (the options' and the file's rules stay: switch them
    /// off instead).
    @discardableResult
    public func removeRuntimeRule(_ id: String) -> Bool {
        var removed = false
        update { s in
            let before = s.runtimeRules.count
            s.runtimeRules.removeAll { $0.id == id }
            removed = s.runtimeRules.count != before
            if removed { s.disabled.remove(id) }
        }
        return removed
    }

    /// The rules file's rules, replaced whole (a reload). Switched-off rules stay off by id.
    public func replaceFileRules(_ rules: [LoadedRule]) {
        update { $0.fileRules = rules }
    }

    /// Switches the rule `id` on or off; false when there is no such rule.
    @discardableResult
    public func setEnabled(_ id: String, _ enabled: Bool) -> Bool {
        var found = false
        update { s in
            found = s.all.contains { $0.rule.id == id }
            if found {
                if enabled { s.disabled.remove(id) } else { s.disabled.insert(id) }
            }
        }
        return found
    }

    private func update(_ change: (inout State) -> Void) {
        state.withLock { s in
            change(&s)
            let generation = s.snapshot.generation + 1
            s.snapshot = RuleSnapshot(
                rules: s.all.filter { !s.disabled.contains($0.rule.id) },
                generation: generation)
            version.store(generation, ordering: .releasing)
        }
    }
}

/// The rules in force at one moment, sorted by the points where they act. Immutable: sessions keep one and ask it at
/// every point.
public struct RuleSnapshot: Sendable {
    public let generation: Int
    /// In the order written (options first, then the file).
    public let rules: [LoadedRule]
    let atConnection: [LoadedRule]
    let atRequestHead: [LoadedRule]
    let atResponseHead: [LoadedRule]
    /// Body rules for requests: the relays hold such a request's body whole (`RequestRuling.bodyEdits`).
    let atRequestBody: [LoadedRule]
    /// Body rules for responses: the relays hold such a response's body whole (`ResponseRules.bodyEdits`).
    let atResponseBody: [LoadedRule]

    public init(rules: [LoadedRule], generation: Int = 0) {
        self.generation = generation
        self.rules = rules
        atConnection = rules.filter { $0.rule.points.contains(.connection) }
        atRequestHead = rules.filter { $0.rule.points.contains(.requestHead) }
        atResponseHead = rules.filter { $0.rule.points.contains(.responseHead) }
        atRequestBody = rules.filter { $0.rule.points.contains(.requestBody) }
        atResponseBody = rules.filter { $0.rule.points.contains(.responseBody) }
    }

    public var isEmpty: Bool { rules.isEmpty }
    /// Whether any rule acts before the upstream is contacted.
    public var actsAtConnection: Bool { !atConnection.isEmpty }
}
