internal import COpenSSL
import Foundation

/// What decides a client's ClientHello and the identity it checks, so two connections with the same key may share
/// sessions: the host whose certificate is judged, the SNI sent, the address and port actually connected (a
/// `--map` target differs from the name), the ALPN offer, and the context's profile (versions, suites, groups,
/// security level: a session made under one requirement profile is never offered under another).
public struct TLSSessionKey: Hashable, Sendable {
    public var host: String
    public var serverName: String?
    public var address: String
    public var port: Int
    public var alpn: [String]
    /// `TLSContext.sessionProfile` of the context the engine was made from.
    var profile: String

    public init(context: TLSContext, host: String, serverName: String?, address: String, port: Int, alpn: [String]) {
        self.host = host
        self.serverName = serverName
        self.address = address
        self.port = port
        self.alpn = alpn
        self.profile = context.sessionProfile
    }
}

/// Owns one reference to an `SSL_SESSION`.
///
/// `@unchecked Sendable`: a session in the cache is never attached to a connection (only copies are, see
/// `TLSSessionCache`), so nothing mutates it; OpenSSL's reference counting is atomic.
final class TLSSession: @unchecked Sendable {
    let raw: OpaquePointer

    private init(taking raw: OpaquePointer) { self.raw = raw }

    deinit { SSL_SESSION_free(raw) }

    /// A private copy of `session` (nil when out of memory).
    static func copy(of session: OpaquePointer) -> TLSSession? {
        SSL_SESSION_dup(session).map(TLSSession.init(taking:))
    }

    /// TLS 1.3 tickets are used once (RFC 8446 §C.4); TLS ≤ 1.2 sessions may be offered again.
    var isSingleUse: Bool { SSL_SESSION_get_protocol_version(raw) == TLS1_3_VERSION }

    var isResumable: Bool { SSL_SESSION_is_resumable(raw) == 1 }

    /// Seconds the session may be offered: a TLS 1.3 ticket's lifetime hint, or OpenSSL's default for TLS ≤ 1.2.
    var timeout: TimeInterval { TimeInterval(SSL_SESSION_get_timeout(raw)) }
}

/// Client-side TLS sessions, shared by every event-loop thread, each kept with the certificate facts of the full
/// handshake that produced it (a resumed handshake carries no certificate, so it is judged on those).
///
/// Bounded: at most `capacity` keys, the least recently used dropped first, and at most `sessionsPerKey` sessions
/// per key, the oldest dropped first. A session is offered for at most `maximumLifetime` seconds and never past
/// its own timeout. TLS 1.3 sessions are taken out when offered (a ticket is used once); servers send new tickets on
/// every connection, resumed ones included. Any handshake failure or fatal alert on a connection drops every
/// session of its key (`invalidate`).
///
/// Ownership: the cache holds private copies (`SSL_SESSION_dup`) and offers copies of the sessions it keeps. OpenSSL
/// marks the session attached to a connection unresumable when the connection ends without close_notify (and the
/// proxy closes upstream connections without it, as most clients do), which would otherwise spoil the cached one.
/// A single-use session leaves the cache when it is offered, so it is attached as it is.
public final class TLSSessionCache: Sendable {
    /// Keys kept at most by default: one per origin, connect address, ALPN offer and requirement profile.
    public static let defaultCapacity = 1_024
    /// Ten minutes: long enough that an app's next request to an origin resumes (iOS resumes sessions to origins it
    /// talked to recently), short enough that a changed server certificate is seen within minutes.
    public static let defaultMaximumLifetime: TimeInterval = 600
    /// Enough single-use tickets for as many connections to one origin opened at once as a browser opens (6), and
    /// some: with 4, a benchmark's 8 concurrent clients made one upstream handshake in seven a full one. A full
    /// cache holds 8,192 sessions; the sessions of one full handshake share its certificates and facts.
    public static let sessionsPerKey = 8

    /// One cached session and the facts it resumes with.
    struct Stored: Sendable {
        let session: TLSSession
        let peer: PeerCertificateFacts
        let expires: Date
    }

    private struct Entry {
        var sessions: [Stored]
        var lastUse: UInt64
    }

    private struct State {
        var entries: [TLSSessionKey: Entry] = [:]
        var useCounter: UInt64 = 0
    }

    public let capacity: Int
    public let maximumLifetime: TimeInterval
    private let clock: @Sendable () -> Date
    private let state = LockedState(State())

    /// - Parameter clock: the current time (tests pass their own).
    public init(
        capacity: Int = TLSSessionCache.defaultCapacity,
        maximumLifetime: TimeInterval = TLSSessionCache.defaultMaximumLifetime,
        clock: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.capacity = max(1, capacity)
        self.maximumLifetime = maximumLifetime
        self.clock = clock
    }

    /// Keys with at least one session.
    public var keyCount: Int { state.withLock { $0.entries.count } }

    /// Sessions held for `key`, expired ones included until the next lookup drops them.
    public func sessionCount(for key: TLSSessionKey) -> Int {
        state.withLock { $0.entries[key]?.sessions.count ?? 0 }
    }

    /// Drops every session of `key`.
    public func invalidate(_ key: TLSSessionKey) {
        let dropped = state.withLock { $0.entries.removeValue(forKey: key) }
        withExtendedLifetime(dropped) {}  // SSL_SESSION_free outside the lock
    }

    /// The newest usable session for `key`, taken out when it is single-use; nil when there is none.
    func take(_ key: TLSSessionKey) -> Stored? {
        let now = clock()
        let (chosen, dropped) = state.withLock { state -> (Stored?, [Stored]) in
            guard var entry = state.entries.removeValue(forKey: key) else { return (nil, []) }
            let dropped = entry.sessions.filter { $0.expires <= now || !$0.session.isResumable }
            entry.sessions.removeAll { $0.expires <= now || !$0.session.isResumable }
            guard let newest = entry.sessions.last else { return (nil, dropped) }
            if newest.session.isSingleUse { entry.sessions.removeLast() }
            state.useCounter += 1
            entry.lastUse = state.useCounter
            if !entry.sessions.isEmpty { state.entries[key] = entry }
            return (newest, dropped)
        }
        withExtendedLifetime(dropped) {}
        return chosen
    }

    /// Keeps `session` (a private copy) for `key` with the facts it resumes with.
    func store(_ session: TLSSession, peer: PeerCertificateFacts, for key: TLSSessionKey) {
        let lifetime = min(maximumLifetime, session.timeout)
        guard lifetime > 0 else { return }
        let stored = Stored(session: session, peer: peer, expires: clock().addingTimeInterval(lifetime))
        let dropped = state.withLock { state -> [Stored] in
            state.useCounter += 1
            if var entry = state.entries.removeValue(forKey: key) {
                entry.sessions.append(stored)
                let dropped = entry.sessions.count > TLSSessionCache.sessionsPerKey ? [entry.sessions.removeFirst()] : []
                entry.lastUse = state.useCounter
                state.entries[key] = entry
                return dropped
            }
            var dropped: [Stored] = []
            // A linear scan, only when a new key meets a full cache: cheaper than keeping an order on every use.
            if state.entries.count >= capacity,
                let oldest = state.entries.min(by: { $0.value.lastUse < $1.value.lastUse })?.key
            {
                dropped = state.entries.removeValue(forKey: oldest)?.sessions ?? []
            }
            state.entries[key] = Entry(sessions: [stored], lastUse: state.useCounter)
            return dropped
        }
        withExtendedLifetime(dropped) {}
    }

    /// Drops `session` (compared by identity) from `key`'s sessions.
    func remove(_ session: TLSSession, for key: TLSSessionKey) {
        let dropped = state.withLock { state -> [Stored] in
            guard var entry = state.entries.removeValue(forKey: key) else { return [] }
            let dropped = entry.sessions.filter { $0.session === session }
            entry.sessions.removeAll { $0.session === session }
            if !entry.sessions.isEmpty { state.entries[key] = entry }
            return dropped
        }
        withExtendedLifetime(dropped) {}
    }
}
