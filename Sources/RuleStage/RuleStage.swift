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

/// The rules in force, shared by every session: the CLI options' rules and the rules file's, each switchable on and
/// off (the web view). Replacing the file's rules (a reload) or switching one makes a new snapshot and a new
/// generation, which sessions pick up at their next point.
public final class RuleBook: Sendable {
    private struct State {
        var optionRules: [LoadedRule]
        var fileRules: [LoadedRule]
        var disabled: Set<String>
        var snapshot: RuleSnapshot
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
        state.withLock { s in (s.optionRules + s.fileRules).map { ($0, !s.disabled.contains($0.rule.id)) } }
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
            found = (s.optionRules + s.fileRules).contains { $0.rule.id == id }
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
                rules: (s.optionRules + s.fileRules).filter { !s.disabled.contains($0.rule.id) },
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
