internal import COpenSSL

// Client-side session resumption through a `TLSSessionCache`:
//
// 1. Before the first `handshake()`, `offerSession(from:key:)` attaches a copy of the newest cached session for the
//    key (`SSL_set_session`) and remembers the certificate facts stored with it.
// 2. OpenSSL hands every new session to the context's new-session callback (TLSContext.swift): a TLS ≤ 1.2 session
//    at the end of the handshake, TLS 1.3 tickets on a later read. The engine stores a copy under its key, with
//    the certificate facts of the handshake that established it: `recordPeerFacts(_:)` after a full handshake
//    (sessions that arrive before then wait), the offered session's facts after a resumed one.
// 3. A handshake that fails, or a fatal alert in either direction, drops every session of the key and stores none
//    from then on. (A fatal alert OpenSSL "sends" after the transport ended only reports the missing close_notify,
//    which says nothing about the session.)

/// One client engine's part in session resumption. Confined to the engine's thread, like the engine.
final class SessionResumption {
    let cache: TLSSessionCache
    let key: TLSSessionKey
    /// The session offered, with the facts it was stored with.
    private(set) var offered: TLSSessionCache.Stored?
    /// Whether the handshake resumed the offered session.
    private(set) var reused = false
    /// The facts new sessions are stored with; nil until known.
    private var peer: PeerCertificateFacts?
    /// Sessions that arrived before `peer` was known.
    private var pending: [TLSSession] = []
    private var invalidated = false

    init(cache: TLSSessionCache, key: TLSSessionKey, offered: TLSSessionCache.Stored?) {
        self.cache = cache
        self.key = key
        self.offered = offered
    }

    /// The new-session callback's hook: `session` belongs to OpenSSL, so a copy is kept.
    func received(_ session: OpaquePointer) {
        guard !invalidated, let copy = TLSSession.copy(of: session) else { return }
        if let peer {
            cache.store(copy, peer: peer, for: key)
        } else if pending.count < TLSSessionCache.sessionsPerKey {
            pending.append(copy)
        }
    }

    func handshakeCompleted(reused: Bool) {
        self.reused = reused
        if reused, let offered {
            record(offered.peer)
        } else if let offered, !offered.session.isSingleUse {
            // The server declined it (a restart, new ticket keys): it will not take it later either.
            cache.remove(offered.session, for: key)
        }
    }

    /// The certificate facts of this connection's full handshake.
    func record(_ facts: PeerCertificateFacts) {
        guard !invalidated, peer == nil else { return }
        peer = facts
        for session in pending { cache.store(session, peer: facts, for: key) }
        pending = []
    }

    func invalidate() {
        guard !invalidated else { return }
        invalidated = true
        pending = []
        cache.invalidate(key)
    }
}

extension TLSEngine {
    /// Client: offers the newest session `cache` holds for `key` and stores the sessions this connection produces
    /// under `key`. Call before the first `handshake()`; the context must have been made with
    /// `TLSConfiguration.sessionResumption`. Returns whether a session was offered (the server may still decline).
    @discardableResult
    public func offerSession(from cache: TLSSessionCache, key: TLSSessionKey) -> Bool {
        guard context.configuration.role == .client, context.configuration.sessionResumption, resumption == nil,
            SSL_in_before(ssl) == 1
        else { return false }
        var offered = cache.take(key)
        if let stored = offered {
            // SSL_set_session takes its own reference. A session that stays in the cache (TLS ≤ 1.2) is attached as a
            // copy, so the cached one stays private; a single-use one (a TLS 1.3 ticket) was taken out of the cache
            // and nothing else holds it, so it is attached as it is (a deep copy per resumed upstream connection
            // saved).
            OpenSSLError.clear()
            let copy = stored.session.isSingleUse ? stored.session : TLSSession.copy(of: stored.session.raw)
            let attached = copy.map { copy in withExtendedLifetime(copy) { SSL_set_session(ssl, copy.raw) == 1 } }
            if attached != true {
                ERR_clear_error()
                offered = nil
            }
        }
        resumption = SessionResumption(cache: cache, key: key, offered: offered)
        return offered != nil
    }

    /// True when the completed handshake resumed a session instead of making a full one (`SSL_session_reused`).
    public var sessionReused: Bool { SSL_session_reused(ssl) == 1 }

    /// Client: the certificate facts recorded when the session this handshake resumed was first established; nil
    /// unless the handshake resumed a session `offerSession(from:key:)` offered.
    public var resumedPeerFacts: PeerCertificateFacts? {
        guard let resumption, resumption.reused else { return nil }
        return resumption.offered?.peer
    }

    /// Client: the certificate facts of this connection's full handshake, which the sessions it produces are
    /// stored with. Without them no session of this connection is cached.
    public func recordPeerFacts(_ facts: PeerCertificateFacts) {
        resumption?.record(facts)
    }
}
