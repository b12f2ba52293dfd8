// sqlite3_config is variadic, which Swift cannot call: these wrappers take its fixed arguments. Prefix: csqlite_.
#pragma once
#include <sqlite3.h>

/// SQLite's process-wide set-up for connections that are each used by one thread at a time (GRDB serialises every
/// connection on its own queue): no mutex around each API call (SQLITE_CONFIG_MULTITHREAD), and no global lock
/// around each allocation for memory statistics nobody reads (SQLITE_CONFIG_MEMSTATUS off). Must run before SQLite
/// is initialised (its first connection): returns SQLITE_OK, or SQLITE_MISUSE when it came too late and changed
/// nothing.
static inline int csqlite_configure_single_thread_connections(void) {
    int rc = sqlite3_config(SQLITE_CONFIG_MULTITHREAD);
    if (rc != SQLITE_OK) return rc;
    return sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
}
