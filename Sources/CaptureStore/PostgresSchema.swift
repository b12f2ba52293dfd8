import Foundation

/// The team store's tables in PostgreSQL (`--capture postgresql://…`): the capture file's tables (`CaptureSchema`),
/// column for column (the exchanges' from their one declaration, `ExchangeField`), so that a capture's rows move
/// between the two as they are (`PostgresCopy`), plus what a shared store needs: each run's label, host name,
/// listen address, policy and iOS profile in columns of their own, and ids that several proxies take at once
/// without reading each other's rows (sequences: no read-modify-write, no conflicts).
///
/// Migrations: `atsproxy_schema` lists the steps applied, each with the version that applied it and whether it
/// breaks older writers. A proxy applies the steps it knows and the store lacks, in one transaction under an
/// advisory lock (two proxies starting at once apply them once). A store with steps this build does not know is
/// used all the same when every such step says older writers may go on (an added index, an added nullable column),
/// and refused otherwise: proxies of several versions share one store. Steps are never edited once released.
enum PostgresSchema {
    /// The advisory lock that serialises migrations ("ATSC").
    static let migrationLock = 0x4154_5343

    struct Step {
        let name: String
        /// Whether a writer that does not know this step must stop writing (a column it would leave empty that
        /// readers need, a changed meaning). False for additions older writers can ignore.
        let breaksOlder: Bool
        let sql: String
    }

    /// Every step, in order.
    static let steps: [Step] = [
        Step(name: "1 tables", breaksOlder: false, sql: """
            -- One proxy run. Several proxies write at once: ids come from the sequence.
            CREATE TABLE runs (
                id BIGSERIAL PRIMARY KEY,
                started DOUBLE PRECISION NOT NULL,       -- Unix seconds
                ended DOUBLE PRECISION,                  -- NULL while running, or when the proxy was killed
                atsproxy_version TEXT NOT NULL,
                body_limit BIGINT NOT NULL,
                settings TEXT NOT NULL,                  -- JSON pairs, as in a capture file
                label TEXT,                              -- --run-label: a device, a tester, a CI job
                host_name TEXT NOT NULL,
                listen_address TEXT NOT NULL,
                policy TEXT NOT NULL,
                ios_profile TEXT NOT NULL
            );
            CREATE TABLE connections (
                run_id BIGINT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
                connection_id BIGINT NOT NULL,
                client_address TEXT,
                client_tls_version TEXT,
                client_tls_suite TEXT,
                client_alpn TEXT,
                client_sni TEXT,
                client_resumed BIGINT,
                first_seen DOUBLE PRECISION NOT NULL,
                PRIMARY KEY (run_id, connection_id)
            );
            CREATE TABLE decisions (
                id BIGSERIAL PRIMARY KEY,
                decided_by TEXT NOT NULL,
                key_path TEXT NOT NULL,
                reason TEXT NOT NULL,
                notes TEXT NOT NULL,
                violations TEXT NOT NULL
            );
            CREATE TABLE handshakes (
                id BIGSERIAL PRIMARY KEY,
                version TEXT,
                cipher_suite TEXT,
                failure TEXT,
                facts TEXT NOT NULL
            );
            -- Ids from exchange_ids, taken a batch at a time by each writer: every exchange's id is unique across
            -- proxies, and close to the order exchanges ended.
            CREATE SEQUENCE exchange_ids;
            CREATE TABLE exchanges (
                id BIGINT PRIMARY KEY,
                run_id BIGINT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
                decision_id BIGINT REFERENCES decisions(id),
                handshake_id BIGINT REFERENCES handshakes(id),
            \(ExchangeField.tableLines(postgres: true, last: true))
            );
            CREATE TABLE exchange_bodies (
                id BIGINT PRIMARY KEY,                   -- exchange id * 2 + (0 request, 1 response)
                bytes BYTEA NOT NULL,
                size BIGINT NOT NULL,
                truncated BIGINT NOT NULL
            );
            CREATE TABLE trace_chunks (
                id BIGSERIAL PRIMARY KEY,
                run_id BIGINT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
                connection_id BIGINT,
                first_time DOUBLE PRECISION NOT NULL,
                last_time DOUBLE PRECISION NOT NULL,
                records TEXT NOT NULL
            );
            """),
        Step(name: "2 indexes", breaksOlder: false, sql: """
            -- A run's exchanges (report and har of one run, prune), a host's newest first, the few problems.
            CREATE INDEX exchanges_by_run ON exchanges(run_id, id);
            CREATE INDEX exchanges_by_host ON exchanges(host, id);
            -- Word for word the condition a filter carries (`CaptureCondition.problemsSQL`), as in a capture file.
            CREATE INDEX exchanges_problems ON exchanges(id)
                WHERE (outcome IN ('blocked', 'violation', 'failed') OR status >= 400 OR interruption IS NOT NULL);
            CREATE INDEX trace_chunks_by_connection ON trace_chunks(run_id, connection_id, id);
            CREATE INDEX runs_by_label ON runs(label, id);
            CREATE INDEX runs_by_started ON runs(started);
            """),
        // A nullable column older writers leave NULL (their COPY names its columns): they go on writing.
        Step(name: addedColumnSteps[.rules]!, breaksOlder: false, sql: ExchangeField.rules.addColumnSQL(postgres: true)),
        Step(
            name: addedColumnSteps[.replayOf]!, breaksOlder: false,
            sql: ExchangeField.replayOf.addColumnSQL(postgres: true)),
    ]

    /// The step that adds each column of `ExchangeField.addedLater`: a reader of a store that lacks the step (no
    /// proxy of this build has written to it yet) reads the column as NULL.
    static let addedColumnSteps: [ExchangeField: String] = [.rules: "3 applied rules", .replayOf: "4 replay of"]

    /// The tables a reader copies into a capture file (`PostgresCopy`), with their columns and each column's kind,
    /// in an order that satisfies the file's references.
    static let copiedTables: [(name: String, columns: [(String, ColumnKind)])] = [
        ("runs", [("id", .integer), ("started", .real), ("ended", .real), ("atsproxy_version", .text),
                  ("body_limit", .integer), ("settings", .text)]),
        ("connections", [("run_id", .integer), ("connection_id", .integer), ("client_address", .text),
                         ("client_tls_version", .text), ("client_tls_suite", .text), ("client_alpn", .text),
                         ("client_sni", .text), ("client_resumed", .integer), ("first_seen", .real)]),
        ("decisions", [("id", .integer), ("decided_by", .text), ("key_path", .text), ("reason", .text),
                       ("notes", .text), ("violations", .text)]),
        ("handshakes", [("id", .integer), ("version", .text), ("cipher_suite", .text), ("failure", .text),
                        ("facts", .text)]),
        ("exchanges", [("id", .integer), ("run_id", .integer)] + exchangeColumns),
        ("exchange_bodies", [("id", .integer), ("bytes", .blob), ("size", .integer), ("truncated", .integer)]),
        ("trace_chunks", [("id", .integer), ("run_id", .integer), ("connection_id", .integer), ("first_time", .real),
                          ("last_time", .real), ("records", .text)]),
    ]

    /// The exchange columns after `id` and `run_id`, in the order of the writer's COPY: the references the writer
    /// binds, then the values of an exchange frame in their order (`ExchangeField`).
    static let exchangeColumns: [(String, ColumnKind)] =
        [("decision_id", .integer), ("handshake_id", .integer)]
        + ExchangeField.allCases.map { field in
            let column = field.column
            let kind: ColumnKind = switch column.kind {
            case .integer: .integer
            case .real: .real
            case .text: .text
            }
            return (column.name, kind)
        }

    enum ColumnKind {
        case integer, real, text, blob
    }

    /// Brings the store at `connection` to this build's schema (or to its first `upTo` steps, for tests of a
    /// migration). Returns the steps the store has that this build does not know (none break it: those refuse).
    @discardableResult
    static func migrate(_ connection: PostgresConnection, version: String, upTo: Int? = nil) throws(PostgresError)
        -> [String]
    {
        try connection.execute("BEGIN")
        do throws(PostgresError) {
            try connection.execute("SELECT pg_advisory_xact_lock(\(migrationLock))")
            try connection.execute("""
                CREATE TABLE IF NOT EXISTS atsproxy_schema (
                    step TEXT PRIMARY KEY,
                    applied DOUBLE PRECISION NOT NULL,
                    atsproxy_version TEXT NOT NULL,
                    breaks_older BOOLEAN NOT NULL
                )
                """)
            let applied = try connection.execute("SELECT step, breaks_older FROM atsproxy_schema").rows
            let known = Set(steps.map(\.name))
            let unknown = applied.filter { !known.contains($0[0] ?? "") }
            if let breaking = unknown.first(where: { $0[1] == "t" }) {
                throw PostgresError(
                    message: "written by a newer atsproxy (team store schema step \(breaking[0] ?? "") is unknown to "
                        + "this build and changes what older ones may write); use that version or newer",
                    sqlState: nil, connectionLost: false)
            }
            let have = Set(applied.compactMap { $0[0] })
            for step in steps.prefix(upTo ?? steps.count) where !have.contains(step.name) {
                try connection.execute(step.sql)
                try connection.execute(
                    "INSERT INTO atsproxy_schema (step, applied, atsproxy_version, breaks_older) VALUES ($1, $2, $3, $4)",
                    [.text(step.name), PostgresValue(Date().timeIntervalSince1970), .text(version),
                     .text(step.breaksOlder ? "t" : "f")])
            }
            try connection.execute("COMMIT")
            return unknown.compactMap { $0[0] }
        } catch {
            connection.rollback()
            throw error
        }
    }
}
