import CSQLite
#if canImport(Glibc)
import Glibc
#endif

/// A thin wrapper over SQLite's C API: one connection, prepared statements, typed
/// errors naming the call. Not thread-safe: each connection belongs to one thread
/// (the library opens one for the control thread and one for the scanner; SQLite's
/// WAL mode lets them read and write at once).
final class SQLiteDatabase {
    struct Error: Swift.Error, CustomStringConvertible {
        var code: Int32
        var message: String
        var description: String { message }
    }

    private(set) var handle: OpaquePointer?
    let path: String

    init(path: String) throws(Error) {
        self.path = path
        let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX
        // 0600, like the state file: the index lists what the user has and where.
        // (SQLite creates with 0644 less the umask; its -wal/-shm files copy the mode.)
        let old = umask(0o077)
        let rc = sqlite3_open_v2(path, &handle, flags, nil)
        umask(old)
        chmod(path, 0o600)
        guard rc == SQLITE_OK else {
            let message = handle.map { String(cString: sqlite3_errmsg($0)) } ?? "out of memory"
            sqlite3_close(handle)
            handle = nil
            throw Error(code: rc, message: "\(path): sqlite3_open_v2() failed: \(message)")
        }
        sqlite3_busy_timeout(handle, 5000)
        // A small page cache (256 KiB, not SQLite's 2 MiB): the indexes do the work,
        // and the daemon's private memory stays small whatever the library's size.
        sqlite3_exec(handle, "PRAGMA cache_size = -256", nil, nil, nil)
    }

    // Statements hold their connection, so none is alive here; close_v2 all the same:
    // sqlite3_close fails while one is, and leaves the connection open for ever (two
    // descriptors and a page cache per library scan, until 2026-11-28).
    deinit { sqlite3_close_v2(handle) }

    /// Runs one or more statements without results.
    func execute(_ sql: String) throws(Error) {
        var err: UnsafeMutablePointer<CChar>?
        let rc = sqlite3_exec(handle, sql, nil, nil, &err)
        guard rc == SQLITE_OK else {
            let message = err.map { String(cString: $0) } ?? "error \(rc)"
            sqlite3_free(err)
            throw Error(code: rc, message: "\(path): sqlite3_exec(\(sql.prefix(60))…) failed: \(message)")
        }
    }

    func prepare(_ sql: String) throws(Error) -> Statement {
        var stmt: OpaquePointer?
        let rc = sqlite3_prepare_v2(handle, sql, -1, &stmt, nil)
        guard rc == SQLITE_OK, let s = stmt else {
            throw Error(code: rc, message: "\(path): sqlite3_prepare_v2(\(sql.prefix(60))…) failed: \(lastMessage)")
        }
        return Statement(s, db: self)
    }

    var lastMessage: String { String(cString: sqlite3_errmsg(handle)) }
    var changes: Int { Int(sqlite3_changes(handle)) }

    /// A prepared statement: bind, step, read columns, reset for the next use.
    final class Statement {
        let stmt: OpaquePointer
        /// Held: a statement keeps its connection open until it is finalized (a
        /// scanner's connection went before its statements and was never closed).
        let db: SQLiteDatabase

        init(_ stmt: OpaquePointer, db: SQLiteDatabase) {
            self.stmt = stmt
            self.db = db
        }
        deinit { sqlite3_finalize(stmt) }

        enum Value {
            case null, int(Int64), double(Double), text(String)
        }

        /// Resets and binds `values` to ?1, ?2, ….
        @discardableResult
        func bind(_ values: [Value]) -> Statement {
            sqlite3_reset(stmt)
            sqlite3_clear_bindings(stmt)
            for (i, v) in values.enumerated() {
                let n = Int32(i + 1)
                switch v {
                case .null: sqlite3_bind_null(stmt, n)
                case .int(let x): sqlite3_bind_int64(stmt, n, x)
                case .double(let x): sqlite3_bind_double(stmt, n, x)
                case .text(let s): _ = csqlite_bind_text(stmt, n, s, -1)
                }
            }
            return self
        }

        /// Advances to the next row: true while there is one.
        func step() throws(Error) -> Bool {
            let rc = sqlite3_step(stmt)
            if rc == SQLITE_ROW { return true }
            if rc == SQLITE_DONE { return false }
            throw Error(code: rc, message: "\(db.path): sqlite3_step() failed: \(db.lastMessage)")
        }

        /// Steps to the end (a statement without results).
        func run(_ values: [Value] = []) throws(Error) {
            bind(values)
            while try step() {}
        }

        func int(_ column: Int32) -> Int64? {
            sqlite3_column_type(stmt, column) == SQLITE_NULL ? nil : sqlite3_column_int64(stmt, column)
        }
        func double(_ column: Int32) -> Double? {
            sqlite3_column_type(stmt, column) == SQLITE_NULL ? nil : sqlite3_column_double(stmt, column)
        }
        func text(_ column: Int32) -> String? {
            guard let p = sqlite3_column_text(stmt, column) else { return nil }
            return String(cString: p)
        }
    }
}

extension SQLiteDatabase.Statement.Value {
    init(_ s: String?) { self = s.map { .text($0) } ?? .null }
    init(_ i: Int?) { self = i.map { .int(Int64($0)) } ?? .null }
    init(_ d: Double?) { self = d.map { .double($0) } ?? .null }
}
