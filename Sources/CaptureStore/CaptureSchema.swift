import GRDB

/// The capture file's tables, as GRDB migrations: each step is applied once, in order, and recorded in the file
/// (`grdb_migrations`), so a file written by this build opens in every later one (which applies the steps it
/// adds), and a file with a step this build does not know is from a newer atsproxy and is refused.
///
/// Steps are never edited once released: a change is a new step. Before the first release the steps of the
/// development builds ("1 tables" to "8 problems index, exchange bodies") were folded into step 1; a file made by
/// one of those builds is refused as such (`CaptureFileError.Problem.preRelease`), never changed.
///
/// The queries the tables are shaped for: the live view and `show` list exchanges newest first (`ORDER BY id
/// DESC`: ids follow the order exchanges ended), filtered by host (indexed), by a problem verdict or status (a
/// partial index of the problems), or by anything else (scanned newest first: common values find a page at once);
/// `report` groups by host and verdict and reads the TLS facts and decisions; one exchange is shown in full with
/// its bodies and its connection's trace.
enum CaptureSchema {
    /// `PRAGMA application_id`: marks the SQLite file as an ATSProxy capture ("ATSC").
    static let applicationID: Int32 = 0x4154_5343

    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration(Step.tables) { db in
            try db.execute(sql: "PRAGMA application_id = \(applicationID)")
            try db.execute(sql: tables)
        }
        migrator.registerMigration(Step.appliedRules) { db in
            try db.execute(sql: ExchangeField.rules.addColumnSQL(postgres: false))
        }
        migrator.registerMigration(Step.replayOf) { db in
            try db.execute(sql: ExchangeField.replayOf.addColumnSQL(postgres: false))
        }
        return migrator
    }

    /// Step 1. The `exchanges` columns come from their one declaration, `ExchangeField`.
    static let tables = """
                -- One proxy run (atsproxy run --capture): a file may hold several, appended.
                CREATE TABLE runs (
                    id INTEGER PRIMARY KEY,
                    started REAL NOT NULL,                 -- Unix seconds
                    ended REAL,                            -- nil while running, or when the proxy was killed
                    atsproxy_version TEXT NOT NULL,
                    body_limit INTEGER NOT NULL,           -- bytes kept of each body (0: none)
                    settings TEXT NOT NULL                 -- JSON object: policy, iOS band, ATS mode, block style
                );
                -- One client connection (the trace's Connection ID, per run) and its client-side TLS.
                CREATE TABLE connections (
                    run_id INTEGER NOT NULL REFERENCES runs(id),
                    connection_id INTEGER NOT NULL,
                    client_address TEXT,
                    client_tls_version TEXT,
                    client_tls_suite TEXT,
                    client_alpn TEXT,
                    client_sni TEXT,
                    client_resumed INTEGER,
                    first_seen REAL NOT NULL,
                    PRIMARY KEY (run_id, connection_id)
                );
                -- ATS decisions, each stored once: the entry that decided and the violations with codes and fixes.
                CREATE TABLE decisions (
                    id INTEGER PRIMARY KEY,
                    decided_by TEXT NOT NULL,              -- the plist key path as shown, '' for ATS defaults
                    key_path TEXT NOT NULL,                -- the same as a JSON array of keys
                    reason TEXT NOT NULL,
                    notes TEXT NOT NULL,                   -- JSON array of strings
                    violations TEXT NOT NULL               -- JSON array of ATSViolation (kind, codes, explanation, fix)
                );
                -- Upstream TLS handshakes as the policy judged them, each stored once (chain, trust, capabilities).
                CREATE TABLE handshakes (
                    id INTEGER PRIMARY KEY,
                    version TEXT,
                    cipher_suite TEXT,
                    failure TEXT,
                    facts TEXT NOT NULL                    -- JSON of HandshakeFacts
                );
                -- Every exchange, in the order it ended.
                CREATE TABLE exchanges (
                    id INTEGER PRIMARY KEY,
                    run_id INTEGER NOT NULL REFERENCES runs(id),
                    decision_id INTEGER REFERENCES decisions(id),
                    handshake_id INTEGER REFERENCES handshakes(id),
                \(ExchangeField.tableLines(postgres: false, last: true))
                );
                -- Body bytes up to the run's body_limit, before any content decoding: a row per body keyed by the
                -- exchange's id × 2 (+ 1 for the response), which needs no index of its own.
                CREATE TABLE exchange_bodies (
                    id INTEGER PRIMARY KEY,                -- exchange id * 2 + (0 request, 1 response)
                    bytes BLOB NOT NULL,
                    size INTEGER NOT NULL,                 -- every byte that passed, kept or not
                    truncated INTEGER NOT NULL             -- 1 when size > length(bytes)
                );
                -- CFNetwork-style trace records, a row per connection per written batch (a batch gathers up to
                -- 50 ms of traffic), in order: a connection's trace is its chunks by id (`TraceChunk`). first_time and
                -- last_time let a reader pick the chunks of one exchange's time.
                CREATE TABLE trace_chunks (
                    id INTEGER PRIMARY KEY,
                    run_id INTEGER NOT NULL REFERENCES runs(id),
                    connection_id INTEGER,
                    first_time REAL NOT NULL,              -- Unix seconds of the first and last record
                    last_time REAL NOT NULL,
                    records TEXT NOT NULL                  -- JSON: [[time, level, title, subject, [key, value, ...]], ...]
                );
                -- Newest first within a host: `WHERE host = ? ORDER BY id DESC LIMIT n` reads n index entries.
                -- Every index costs each exchange an entry, so there is no other: nearly every request is a GET and
                -- nearly every exchange allowed with a 2xx, and other filters walk the table newest first.
                CREATE INDEX exchanges_by_host ON exchanges(host, id);
                -- The few problems (blocked, a violation, a failed connect, a status of 400 or more, cut off). A
                -- filter carries this condition word for word for SQLite to use the index
                -- (`CaptureCondition.problemsSQL`, which a test holds to this text).
                CREATE INDEX exchanges_problems ON exchanges(id)
                    WHERE (outcome IN ('blocked', 'violation', 'failed') OR status >= 400 OR interruption IS NOT NULL);
                CREATE INDEX trace_chunks_by_connection ON trace_chunks(run_id, connection_id, id);
                """

    /// The migration steps' names, in order.
    enum Step {
        static let tables = "v1 tables"
        /// The rules that acted on each exchange (issue 33): `exchanges.rules`. A file without it reads as one
        /// whose exchanges no rule touched; a run appending to it adds the column first.
        static let appliedRules = "v2 applied rules"
        /// The exchange a replay resends (issue 34): `exchanges.replay_of`. A file without it has no replays.
        static let replayOf = "v3 replay of"
    }

    /// The steps of the development builds before the first release, folded into step 1. A file that has any of
    /// them was made by such a build.
    static let preReleaseSteps: Set<String> = [
        "1 tables", "2 query indexes", "3 upstream address", "4 trace chunks", "5 mirror", "6 rebuilt trace",
        "7 no method index", "8 problems index, exchange bodies",
    ]
}
