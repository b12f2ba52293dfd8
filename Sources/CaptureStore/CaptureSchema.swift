import GRDB

/// The capture file's tables, as GRDB migrations: each step is applied once, in order, and recorded in the file
/// (`grdb_migrations`), so a file written by this build opens in every later one (which applies the steps it
/// adds), and a file with a step this build does not know is from a newer atsproxy and is refused.
///
/// Steps are never edited once released: a change is a new step.
///
/// The queries the tables are shaped for: the live view and `show` list exchanges newest first (`ORDER BY id
/// DESC`: ids follow the order exchanges ended), filtered by host (indexed), by a problem verdict or status (a
/// partial index of the problems), or by anything else (scanned newest first: common values find a page at once); `report` groups by host and verdict and reads the TLS facts and decisions; one exchange is shown in
/// full with its bodies and its connection's trace.
enum CaptureSchema {
    /// `PRAGMA application_id`: marks the SQLite file as an ATSProxy capture ("ATSC").
    static let applicationID: Int32 = 0x4154_5343

    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration(Step.tables) { db in
            try db.execute(sql: "PRAGMA application_id = \(applicationID)")
            try db.execute(sql: """
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
                    connection_id INTEGER,
                    started REAL NOT NULL,
                    request_sent REAL,
                    first_response_byte REAL,
                    ended REAL NOT NULL,
                    method TEXT NOT NULL,
                    url TEXT NOT NULL,
                    host TEXT NOT NULL,                    -- lowercased, without port; '' when the URL has none
                    status INTEGER,
                    http_version TEXT NOT NULL,
                    outcome TEXT NOT NULL,                 -- allowed, blocked, violation, notEvaluated, failed
                    action TEXT,                           -- relayed, annotated, blockedHandshake, ... (ExchangeAction)
                    errors TEXT NOT NULL,                  -- the console's codes: -1200/-9836,-1202 ('' when none)
                    url_error INTEGER,                     -- the first error's codes: what the app's task fails with
                    ssl_error INTEGER,
                    request_bytes INTEGER NOT NULL,
                    response_bytes INTEGER NOT NULL,
                    duration_ms REAL NOT NULL,
                    interruption TEXT,
                    note TEXT,
                    decision_id INTEGER REFERENCES decisions(id),
                    handshake_id INTEGER REFERENCES handshakes(id),
                    upstream_tls_version TEXT,
                    upstream_tls_suite TEXT,
                    upstream_alpn TEXT,
                    upstream_sni TEXT,
                    upstream_resumed INTEGER,
                    -- Heads as HTTP/1 text (request or status line, then `Name: value` lines, CRLF-separated):
                    request_head TEXT,                     -- as the client sent it
                    forwarded_request_head TEXT,           -- as it went upstream, when different
                    response_head TEXT,                    -- as the upstream sent it
                    client_response_head TEXT              -- as the client got it, when different
                );
                -- Body bytes up to the run's body_limit, before any content decoding, and the real size.
                CREATE TABLE bodies (
                    exchange_id INTEGER NOT NULL REFERENCES exchanges(id) ON DELETE CASCADE,
                    direction TEXT NOT NULL CHECK (direction IN ('request', 'response')),
                    bytes BLOB NOT NULL,
                    size INTEGER NOT NULL,                 -- every byte that passed, kept or not
                    truncated INTEGER NOT NULL,            -- 1 when size > length(bytes)
                    PRIMARY KEY (exchange_id, direction)
                );
                -- CFNetwork-style trace records, filed by connection.
                CREATE TABLE trace_records (
                    id INTEGER PRIMARY KEY,
                    run_id INTEGER NOT NULL REFERENCES runs(id),
                    connection_id INTEGER,
                    time REAL NOT NULL,
                    level INTEGER NOT NULL,
                    title TEXT NOT NULL,
                    subject TEXT NOT NULL,
                    fields TEXT NOT NULL                   -- JSON array of [key, value]
                );
                """)
        }
        migrator.registerMigration(Step.queryIndexes) { db in
            // Newest first within each filter: (column, id) lets `WHERE column = ? ORDER BY id DESC LIMIT n`
            // read n index entries instead of the table. Text filters scan newest first and stop at the limit.
            try db.execute(sql: """
                CREATE INDEX exchanges_by_host ON exchanges(host, id);
                CREATE INDEX exchanges_by_outcome ON exchanges(outcome, id);
                CREATE INDEX exchanges_by_status ON exchanges(status, id);
                CREATE INDEX exchanges_by_method ON exchanges(method, id);
                CREATE INDEX exchanges_by_connection ON exchanges(run_id, connection_id);
                CREATE INDEX trace_by_connection ON trace_records(run_id, connection_id, id);
                """)
        }
        migrator.registerMigration(Step.upstreamAddress) { db in
            // Where the upstream connection went (HAR's serverIPAddress): per exchange, since a plain-HTTP client
            // connection reaches a new upstream for each host. NULL in rows written before this step.
            try db.execute(sql: "ALTER TABLE exchanges ADD COLUMN upstream_address TEXT")
        }
        migrator.registerMigration(Step.traceChunks) { db in
            // Trace records several to a row (`TraceChunk`): a row per record was most of a capture's cost (about
            // four per keep-alive request, each with its index entry). Runs written before this step keep their
            // records in `trace_records`, which stays and is read as before.
            try db.execute(sql: """
                -- CFNetwork-style trace records, a row per connection per written batch (a batch gathers up to
                -- 50 ms of traffic), in order: a connection's trace is its chunks by id. first_time and last_time let
                -- a reader pick the chunks of one exchange's time.
                CREATE TABLE trace_chunks (
                    id INTEGER PRIMARY KEY,
                    run_id INTEGER NOT NULL REFERENCES runs(id),
                    connection_id INTEGER,
                    first_time REAL NOT NULL,              -- Unix seconds of the first and last record
                    last_time REAL NOT NULL,
                    records TEXT NOT NULL                  -- JSON: [[time, level, title, subject, [key, value, ...]], ...]
                );
                CREATE INDEX trace_chunks_by_connection ON trace_chunks(run_id, connection_id, id);
                -- Nothing reads exchanges by connection (a connection's trace is read by its chunks), and every
                -- index is written with every exchange.
                DROP INDEX exchanges_by_connection;
                """)
        }
        migrator.registerMigration(Step.mirror) { db in
            // `--ats mirror`: what the device was shown and did on the exchange's connection (MirrorRecord as JSON),
            // for `report`'s agreement counts. NULL for every other exchange, and in rows written before this step.
            try db.execute(sql: "ALTER TABLE exchanges ADD COLUMN mirror TEXT")
        }
        migrator.registerMigration(Step.rebuiltTrace) { db in
            // Which of an exchange's own trace records (LoaderWhatToDo, Protocol Enqueue, Protocol Received, Did
            // Finish) the proxy left for the reader to rebuild from the row (`RebuiltTrace` bits), as it does when
            // the capture is the only consumer of traces; NULL when they are stored with the connection's records.
            try db.execute(sql: "ALTER TABLE exchanges ADD COLUMN rebuilt_trace INTEGER")
        }
        migrator.registerMigration(Step.noMethodIndex) { db in
            // Nearly every request is a GET: the method index selected little and cost every exchange an index entry.
            // A method term now scans newest first, as a text term does.
            try db.execute(sql: "DROP INDEX exchanges_by_method")
        }
        migrator.registerMigration(Step.problemsIndex) { db in
            // Nearly every exchange is allowed with a 2xx: the (outcome, id) and (status, id) indexes each cost every
            // exchange an entry to find the few that are not. One partial index holds just those (a filter for a
            // problem verdict or a status of 400 or more carries its condition, `CaptureCondition.problemsSQL`); a
            // filter for the common values walks the table newest first and finds a page at once.
            try db.execute(sql: """
                DROP INDEX exchanges_by_outcome;
                DROP INDEX exchanges_by_status;
                CREATE INDEX exchanges_problems ON exchanges(id) WHERE \(problems);
                -- Body bytes from this step on: a row per body keyed by the exchange's id × 2 (+ 1 for the response),
                -- which needs no index of its own (`bodies` keeps those of earlier runs).
                CREATE TABLE exchange_bodies (
                    id INTEGER PRIMARY KEY,                -- exchange id * 2 + (0 request, 1 response)
                    bytes BLOB NOT NULL,
                    size INTEGER NOT NULL,                 -- every byte that passed, kept or not
                    truncated INTEGER NOT NULL             -- 1 when size > length(bytes)
                );
                """)
        }
        return migrator
    }

    /// What makes an exchange a problem (the `problems` filter term, the partial index `exchanges_problems`):
    /// blocked, an ATS violation, a failed connect, a status of 400 or more, or cut off before its end. The
    /// filter's SQL must contain this text exactly for SQLite to use the index.
    static let problems = "(outcome IN ('blocked', 'violation', 'failed') OR status >= 400 OR interruption IS NOT NULL)"

    /// The migration steps' names, in order.
    enum Step {
        static let tables = "1 tables"
        static let queryIndexes = "2 query indexes"
        static let upstreamAddress = "3 upstream address"
        static let traceChunks = "4 trace chunks"
        static let mirror = "5 mirror"
        static let rebuiltTrace = "6 rebuilt trace"
        static let noMethodIndex = "7 no method index"
        static let problemsIndex = "8 problems index, exchange bodies"
    }
}
