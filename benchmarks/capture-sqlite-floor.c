// The floor under the capture writer: SQLite alone inserting rows shaped like a capture's (schema step 8's
// `exchanges` row with its host and problems indexes, a 1 KiB body in `exchange_bodies`), with the writer's settings
// (16 KiB pages, WAL, synchronous NORMAL, a checkpoint per 64 MiB of log, 16 MiB of cache, 1,600 rows per commit:
// 50 ms of keep-alive traffic). Prints the process's CPU (user + system, the kernel's file writes included) per row.
// No Swift, no proxy: what any design that keeps a SQLite row per exchange pays at least.
//
//   cc -O2 -o /tmp/capture-sqlite-floor benchmarks/capture-sqlite-floor.c -lsqlite3
//   /tmp/capture-sqlite-floor [VARIANT [ROWS [PATH]]]
//
// VARIANT: full (the capture's rows), no-body (the exchange row alone), no-heads (the four heads NULL),
// no-host-index, default-locking (SQLite's serialized mode and memory statistics, as before atsproxy configured
// them off: `SQLiteSetup`).
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

static double cpu_seconds(void) {
    struct rusage r;
    getrusage(RUSAGE_SELF, &r);
    return r.ru_utime.tv_sec + r.ru_utime.tv_usec / 1e6 + r.ru_stime.tv_sec + r.ru_stime.tv_usec / 1e6;
}

static void exec_or_die(sqlite3 *db, const char *sql) {
    char *error = NULL;
    if (sqlite3_exec(db, sql, NULL, NULL, &error) != SQLITE_OK) {
        fprintf(stderr, "%s: %s\n", sql, error);
        exit(1);
    }
}

int main(int argc, char **argv) {
    const char *variant = argc > 1 ? argv[1] : "full";
    int rows = argc > 2 ? atoi(argv[2]) : 200000;
    const char *path = argc > 3 ? argv[3] : "/tmp/capture-sqlite-floor.db";
    int body = strcmp(variant, "no-body") != 0, heads = strcmp(variant, "no-heads") != 0;
    int host_index = strcmp(variant, "no-host-index") != 0;
    if (strcmp(variant, "default-locking") != 0) {
        sqlite3_config(SQLITE_CONFIG_MULTITHREAD);
        sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
    }
    char side[1024];
    unlink(path);
    snprintf(side, sizeof side, "%s-wal", path);
    unlink(side);
    snprintf(side, sizeof side, "%s-shm", path);
    unlink(side);
    sqlite3 *db;
    if (sqlite3_open(path, &db) != SQLITE_OK) { fprintf(stderr, "cannot open %s\n", path); return 1; }
    exec_or_die(db, "PRAGMA page_size = 16384");
    exec_or_die(db, "PRAGMA journal_mode = WAL");
    exec_or_die(db, "PRAGMA synchronous = NORMAL");
    exec_or_die(db, "PRAGMA wal_autocheckpoint = 4096");
    exec_or_die(db, "PRAGMA cache_size = -16384");
    exec_or_die(db, "CREATE TABLE exchanges (id INTEGER PRIMARY KEY, run_id INTEGER NOT NULL, connection_id INTEGER, "
        "started REAL NOT NULL, request_sent REAL, first_response_byte REAL, ended REAL NOT NULL, method TEXT NOT NULL, "
        "url TEXT NOT NULL, host TEXT NOT NULL, status INTEGER, http_version TEXT NOT NULL, outcome TEXT NOT NULL, "
        "action TEXT, errors TEXT NOT NULL, url_error INTEGER, ssl_error INTEGER, request_bytes INTEGER NOT NULL, "
        "response_bytes INTEGER NOT NULL, duration_ms REAL NOT NULL, interruption TEXT, note TEXT, decision_id INTEGER, "
        "handshake_id INTEGER, upstream_tls_version TEXT, upstream_tls_suite TEXT, upstream_alpn TEXT, "
        "upstream_sni TEXT, upstream_resumed INTEGER, request_head TEXT, forwarded_request_head TEXT, "
        "response_head TEXT, client_response_head TEXT, upstream_address TEXT, mirror TEXT, rebuilt_trace INTEGER)");
    if (host_index) exec_or_die(db, "CREATE INDEX exchanges_by_host ON exchanges(host, id)");
    exec_or_die(db, "CREATE INDEX exchanges_problems ON exchanges(id) WHERE (outcome IN ('blocked', 'violation', "
        "'failed') OR status >= 400 OR interruption IS NOT NULL)");
    exec_or_die(db, "CREATE TABLE exchange_bodies (id INTEGER PRIMARY KEY, bytes BLOB NOT NULL, size INTEGER NOT NULL, "
        "truncated INTEGER NOT NULL)");
    sqlite3_stmt *exchange, *body_row;
    sqlite3_prepare_v2(db, "INSERT INTO exchanges (run_id, decision_id, handshake_id, connection_id, started, "
        "request_sent, first_response_byte, ended, method, url, host, status, http_version, outcome, action, errors, "
        "url_error, ssl_error, request_bytes, response_bytes, duration_ms, interruption, note, upstream_tls_version, "
        "upstream_tls_suite, upstream_alpn, upstream_sni, upstream_resumed, request_head, forwarded_request_head, "
        "response_head, client_response_head, upstream_address, mirror, rebuilt_trace) VALUES (?, ?, ?, ?, ?, ?, ?, "
        "?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", -1, &exchange, NULL);
    sqlite3_prepare_v2(db, "INSERT INTO exchange_bodies (id, bytes, size, truncated) VALUES (?, ?, ?, ?)", -1,
        &body_row, NULL);
    // The heads of proxybench's keep-alive exchange as the capture stores them: the forwarded request and the
    // client's response are NULL, as they are whenever the proxy passed the heads on unchanged.
    const char *request = "GET /1k HTTP/1.1\r\nHost: bench.test:57373\r\nUser-Agent: atsproxy-load\r\nAccept: */*";
    const char *response = "HTTP/1.1 200 OK\r\nServer: nginx/1.22.1\r\nDate: Fri, 27 Nov 2026 18:00:00 GMT\r\n"
        "Content-Type: text/plain\r\nContent-Length: 1024\r\nLast-Modified: Fri, 27 Nov 2026 17:00:00 "
        "GMT\r\nConnection: keep-alive\r\nETag: \"6b09cabf-400\"\r\nAccept-Ranges: bytes";
    unsigned char bytes[1024];
    for (int i = 0; i < 1024; i++) bytes[i] = (unsigned char)rand();
    const int batch = 1600;
    double start = cpu_seconds();
    for (int i = 0; i < rows; i++) {
        if (i % batch == 0) exec_or_die(db, "BEGIN");
        double t = 1.8e9 + i * 0.00003;
        int c = 1;
        sqlite3_bind_int64(exchange, c++, 1);
        sqlite3_bind_int64(exchange, c++, 1);
        sqlite3_bind_int64(exchange, c++, 1);
        sqlite3_bind_int64(exchange, c++, i % 32);
        for (int k = 0; k < 4; k++) sqlite3_bind_double(exchange, c++, t + k * 0.0001);
        sqlite3_bind_text(exchange, c++, "GET", -1, SQLITE_STATIC);
        sqlite3_bind_text(exchange, c++, "https://bench.test:57373/1k", -1, SQLITE_STATIC);
        sqlite3_bind_text(exchange, c++, "bench.test", -1, SQLITE_STATIC);
        sqlite3_bind_int(exchange, c++, 200);
        sqlite3_bind_text(exchange, c++, "HTTP/1.1", -1, SQLITE_STATIC);
        sqlite3_bind_text(exchange, c++, "allowed", -1, SQLITE_STATIC);
        sqlite3_bind_text(exchange, c++, "relayed", -1, SQLITE_STATIC);
        sqlite3_bind_text(exchange, c++, "", 0, SQLITE_STATIC);
        sqlite3_bind_null(exchange, c++);
        sqlite3_bind_null(exchange, c++);
        sqlite3_bind_int(exchange, c++, 70);
        sqlite3_bind_int(exchange, c++, 1260);
        sqlite3_bind_double(exchange, c++, 0.31);
        sqlite3_bind_null(exchange, c++);
        sqlite3_bind_null(exchange, c++);
        sqlite3_bind_text(exchange, c++, "TLSv1.3", -1, SQLITE_STATIC);
        sqlite3_bind_text(exchange, c++, "TLS_AES_128_GCM_SHA256", -1, SQLITE_STATIC);
        sqlite3_bind_text(exchange, c++, "http/1.1", -1, SQLITE_STATIC);
        sqlite3_bind_text(exchange, c++, "bench.test", -1, SQLITE_STATIC);
        sqlite3_bind_int(exchange, c++, 0);
        for (int k = 0; k < 4; k++) {
            if (heads && k % 2 == 0) sqlite3_bind_text(exchange, c++, k == 0 ? request : response, -1, SQLITE_STATIC);
            else sqlite3_bind_null(exchange, c++);
        }
        sqlite3_bind_text(exchange, c++, "127.0.0.1:44321", -1, SQLITE_STATIC);
        sqlite3_bind_null(exchange, c++);
        sqlite3_bind_int(exchange, c++, 15);
        if (sqlite3_step(exchange) != SQLITE_DONE) { fprintf(stderr, "%s\n", sqlite3_errmsg(db)); return 1; }
        sqlite3_reset(exchange);
        if (body) {
            bytes[i % 1024]++;  // no two bodies alike
            sqlite3_bind_int64(body_row, 1, sqlite3_last_insert_rowid(db) * 2 + 1);
            sqlite3_bind_blob(body_row, 2, bytes, sizeof bytes, SQLITE_STATIC);
            sqlite3_bind_int(body_row, 3, sizeof bytes);
            sqlite3_bind_int(body_row, 4, 0);
            if (sqlite3_step(body_row) != SQLITE_DONE) { fprintf(stderr, "%s\n", sqlite3_errmsg(db)); return 1; }
            sqlite3_reset(body_row);
        }
        if (i % batch == batch - 1) exec_or_die(db, "COMMIT");
    }
    if (rows % batch) exec_or_die(db, "COMMIT");
    printf("%s: %.2f us of CPU per row (%d rows)\n", variant, (cpu_seconds() - start) * 1e6 / rows, rows);
    sqlite3_finalize(exchange);
    sqlite3_finalize(body_row);
    sqlite3_close(db);
    unlink(path);
    snprintf(side, sizeof side, "%s-wal", path);
    unlink(side);
    snprintf(side, sizeof side, "%s-shm", path);
    unlink(side);
    return 0;
}
