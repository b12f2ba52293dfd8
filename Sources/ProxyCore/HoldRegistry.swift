import Foundation
import HTTP1Core
import Synchronization

// Theory of operation (issue 34: breakpoints)
//
// A breakpoint holds one exchange (its request before it goes upstream, or its response before it reaches the
// client) while a person looks at it. The session that holds it is sans-io and lives on its loop's thread; the
// person acts from another thread (the web view's routes, `atsproxy breakpoints`). The registry is where they
// meet, and the only shared state:
//
//   session  ──.hold(HeldExchange)──▶ adapter ──register(held, deliver:)──▶ registry ◀──list()/release()── web view
//   session ◀──.holdReleased(id, HoldRelease) (on its own loop, through `deliver`)── registry
//
// The adapter registers each held exchange with a `deliver` closure that hands the release to the session on its
// own loop; `release` calls it at most once and forgets the entry. A session that ends, or whose hold times out
// (`--breakpoint-timeout`), removes its entries (`remove`), so the list never shows an exchange nobody can release.
// Observers hear of every change (a hold, a release, a removal) to push it to open pages.

/// An exchange a breakpoint holds, as the web view and the command line see it.
public struct HeldExchange: Sendable, Equatable {
    /// Which message is held: the request (not sent upstream yet) or the response (not sent to the client yet).
    public enum Phase: String, Sendable, Equatable {
        case request, response
    }

    /// Unique in the proxy's run.
    public let id: UInt64
    /// The client connection's id (the capture's `connection`).
    public let connectionID: UInt64
    public let phase: Phase
    /// The request's absolute URL.
    public let url: String
    public let request: HTTPRequestHead
    /// The request body held with it (the whole body, up to the hold's limit), when the phase is `request`.
    public let requestBody: [UInt8]
    /// The response and its body, when the phase is `response`.
    public let response: HTTPResponseHead?
    public let responseBody: [UInt8]
    /// The breakpoint rule that held it.
    public let breakpoint: String
    /// When it was held, and when it goes on unchanged (`--breakpoint-timeout`), in seconds since 1970.
    public let heldAt: Double
    public let deadline: Double

    public init(
        id: UInt64, connectionID: UInt64, phase: Phase, url: String, request: HTTPRequestHead,
        requestBody: [UInt8] = [], response: HTTPResponseHead? = nil, responseBody: [UInt8] = [],
        breakpoint: String, heldAt: Double, deadline: Double
    ) {
        self.id = id
        self.connectionID = connectionID
        self.phase = phase
        self.url = url
        self.request = request
        self.requestBody = requestBody
        self.response = response
        self.responseBody = responseBody
        self.breakpoint = breakpoint
        self.heldAt = heldAt
        self.deadline = deadline
    }
}

/// What a person decides for a held exchange.
public enum HoldRelease: Sendable, Equatable {
    /// Go on: as held when every part is nil, else with the edited parts (a request phase edits the request; a
    /// response phase edits the response).
    case execute(
        request: HTTPRequestHead? = nil, requestBody: [UInt8]? = nil, response: HTTPResponseHead? = nil,
        responseBody: [UInt8]? = nil)
    /// The app sees its connection fail (the client's connection is reset).
    case abort
    /// Answer the held request with this response instead of sending it upstream (request phase only).
    case answer(HTTPResponseHead, [UInt8])
}

/// The exchanges breakpoints hold now, shared by every loop and the web view. See the theory of operation above.
public final class HoldRegistry: Sendable {
    private struct Entry {
        var held: HeldExchange
        var deliver: @Sendable (HoldRelease) -> Void
    }

    private struct State {
        var entries: [UInt64: Entry] = [:]
        var observers: [UInt64: @Sendable () -> Void] = [:]
        var nextObserver: UInt64 = 0
    }

    private let state = Mutex(State())
    private let nextID = Atomic<UInt64>(1)

    public init() {}

    /// A fresh id for an exchange about to be held.
    public func makeID() -> UInt64 { nextID.wrappingAdd(1, ordering: .relaxed).oldValue }

    /// Every held exchange, oldest first.
    public func list() -> [HeldExchange] {
        state.withLock { $0.entries.values.map(\.held) }.sorted { $0.id < $1.id }
    }

    /// Releases `id` as decided; false when it is no longer held (released already, timed out, or its client
    /// went).
    @discardableResult
    public func release(_ id: UInt64, _ release: HoldRelease) -> Bool {
        let entry = state.withLock { $0.entries.removeValue(forKey: id) }
        guard let entry else { return false }
        entry.deliver(release)
        notify()
        return true
    }

    /// Calls `observer` (on any thread) after every change; keep the token to keep observing.
    public func observe(_ observer: @escaping @Sendable () -> Void) -> HoldObservation {
        let key = state.withLock { s in
            s.nextObserver += 1
            s.observers[s.nextObserver] = observer
            return s.nextObserver
        }
        return HoldObservation { [weak self] in
            _ = self?.state.withLock { $0.observers.removeValue(forKey: key) }
        }
    }

    /// The adapter's side: `held` waits for `release`, which hands the decision to `deliver` (once).
    public func register(_ held: HeldExchange, deliver: @escaping @Sendable (HoldRelease) -> Void) {
        state.withLock { $0.entries[held.id] = Entry(held: held, deliver: deliver) }
        notify()
    }

    /// The session went on without a release (its hold timed out, or its client went): the entry goes.
    public func remove(_ id: UInt64) {
        let removed = state.withLock { $0.entries.removeValue(forKey: id) != nil }
        if removed { notify() }
    }

    private func notify() {
        for observer in state.withLock({ Array($0.observers.values) }) { observer() }
    }
}

/// Ends an observation when released.
public final class HoldObservation: Sendable {
    private let end: @Sendable () -> Void

    init(_ end: @escaping @Sendable () -> Void) { self.end = end }

    deinit { end() }
}
