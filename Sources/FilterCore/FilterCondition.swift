import ProxyTrace

/// One condition on an exchange, or a combination of them: what a filter expression parses to
/// (`FilterCondition(parsing:)`). CaptureStore compiles it to SQL over a capture (where `host` reads its
/// `(host, id)` index newest first; problem verdicts, statuses of 400 and more and `problems` read the partial index
/// of problems); `matches(_:)` evaluates it on a live exchange's `ExchangeFacts`.
public indirect enum FilterCondition: Sendable, Equatable {
    /// The host, or with a leading dot a domain and every name below it. Case-insensitive.
    case host(String)
    case outcome(ExchangeSummary.ATSOutcome)
    case status(ClosedRange<Int>)
    /// No response status: tunnels, blocked handshakes, failed connects, cut-off exchanges.
    case noStatus
    /// The request method, as sent (`POST`).
    case method(String)
    /// Text the URL contains (case-insensitive for ASCII).
    case text(String)
    /// An error code among the exchange's errors: an NSURLError code (`-1200`) or an SSL code (`-9836`).
    case code(Int)
    case run(Int64)
    /// Something went wrong: blocked, an ATS violation, a failed connect, a status of 400 or more, or an
    /// exchange cut off before its end.
    case problems
    case not(FilterCondition)
    case all([FilterCondition])
    case any([FilterCondition])

    /// The same condition with every negation pushed down to a term (De Morgan's laws; `not not x` is `x`) and
    /// each AND or OR inside one of its own kind merged into it. Its SQL nests only as deep as `and` and `or`
    /// alternate: SQLite's parser refuses an expression nested much past 30 levels ("parser stack overflow"), which
    /// 45 negations in a row reached. It matches the same exchanges: the SQL treats NULL as false throughout (a
    /// negation is `IS NOT 1`), so the two-valued laws hold.
    public var normalized: FilterCondition { normalized(negated: false) }

    private func normalized(negated: Bool) -> FilterCondition {
        switch self {
        case .not(let inner):
            return inner.normalized(negated: !negated)
        case .all(let terms):
            let parts = terms.map { $0.normalized(negated: negated) }
            return negated ? Self.any(merging: parts) : Self.all(merging: parts)
        case .any(let terms):
            let parts = terms.map { $0.normalized(negated: negated) }
            return negated ? Self.all(merging: parts) : Self.any(merging: parts)
        default:
            return negated ? .not(self) : self
        }
    }

    private static func all(merging parts: [FilterCondition]) -> FilterCondition {
        .all(parts.flatMap { part -> [FilterCondition] in if case .all(let terms) = part { terms } else { [part] } })
    }

    private static func any(merging parts: [FilterCondition]) -> FilterCondition {
        .any(parts.flatMap { part -> [FilterCondition] in if case .any(let terms) = part { terms } else { [part] } })
    }
}
