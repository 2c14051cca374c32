// Shim for SQLite's C API (the music library's index).
//
// Why it exists: SQLITE_TRANSIENT is a macro casting -1 to a destructor pointer, which
// the Clang importer drops. Every symbol added here is prefixed `csqlite_`.
#ifndef CSQLITE_SHIM_H
#define CSQLITE_SHIM_H
#include <sqlite3.h>

/// Binds text that SQLite copies (SQLITE_TRANSIENT), so the Swift string may go away.
static inline int csqlite_bind_text(sqlite3_stmt *stmt, int index, const char *text, int bytes) {
    return sqlite3_bind_text(stmt, index, text, bytes, SQLITE_TRANSIENT);
}
#endif
