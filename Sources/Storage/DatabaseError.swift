import APNs
import PostgresNIO
import Settings
import Support

/// A database operation that failed, with PostgreSQL's own message when the server sent one.
package struct DatabaseError: PushChatError {
    package struct Code: Hashable, Sendable, CustomStringConvertible {
        private let name: String
        private init(_ name: String) { self.name = name }
        /// A migration file could not be read, parsed or applied.
        package static let migrationFailed = Code("migrationFailed")
        /// The migrations folder holds files that do not follow `NNN_name.sql`.
        package static let badMigrationFile = Code("badMigrationFile")
        /// A query failed or the server could not be reached.
        package static let queryFailed = Code("queryFailed")
        /// Nothing reached the server: the database is down, or no connection came in time.
        package static let unavailable = Code("unavailable")
        /// The statement was sent and the server never answered: it may or may not have been carried out.
        package static let outcomeUnknown = Code("outcomeUnknown")
        package var description: String { name }
    }

    package let code: Code
    /// What was being done, e.g. `applying migrations/001_initial_schema.sql`.
    package let context: String
    /// The underlying reason, from PostgreSQL when available.
    package let reason: String
    /// PostgreSQL's SQLSTATE when the server answered with an error (e.g. `55P03`).
    package let sqlState: String?

    package init(code: Code, context: String, reason: String, sqlState: String? = nil) {
        self.code = code
        self.context = context
        self.reason = reason
        self.sqlState = sqlState
    }

    /// Wraps any error thrown by PostgresNIO.
    package init(code: Code = .queryFailed, context: String, underlying error: any Error) {
        self.init(code: code, context: context, reason: Self.describe(error), sqlState: Self.sqlState(of: error))
    }

    package var description: String { "\(context): \(reason)" }

    /// PostgreSQL refused to wait longer for a lock (SQLSTATE 55P03, `lock_timeout`).
    package var isLockTimeout: Bool { sqlState == "55P03" }

    /// The SQLSTATE PostgreSQL answered `error` with, if it did.
    package static func sqlState(of error: any Error) -> String? {
        if let error = error as? DatabaseError { return error.sqlState }
        return (error as? PSQLError)?.serverInfo?[.sqlState]
    }

    /// PostgreSQL's message and SQLSTATE for server errors; the connection problem otherwise.
    package static func describe(_ error: any Error) -> String {
        if let error = error as? DatabaseError { return error.reason }
        guard let error = error as? PSQLError else { return String(describing: error) }
        if let info = error.serverInfo, let message = info[.message] {
            var text = message
            if let detail = info[.detail] { text += " (\(detail))" }
            if let state = info[.sqlState] { text += " [SQLSTATE \(state)]" }
            return text
        }
        if let underlying = error.underlying { return "\(error.code): \(underlying)" }
        return "\(error.code)"
    }

    /// Whether `error`, thrown by a store's write, leaves the database as it was: nothing reached the server, or the
    /// server refused or cancelled the statement (a statement that fails commits nothing), or the connection was lost
    /// before an answer (PostgreSQL rolls back a transaction whose client is gone before its commit). Only an
    /// `outcomeUnknown` may have written: a fan-out budget is refunded for everything else.
    package static func wroteNothing(_ error: any Error) -> Bool { !outcomeIsUnknown(error) }

    /// Whether `error` says the server took the statement and never answered: it may have been carried out (see
    /// ``wroteNothing(_:)``), and the caller is told so rather than that nothing happened.
    package static func outcomeIsUnknown(_ error: any Error) -> Bool {
        (error as? DatabaseError)?.code == .outcomeUnknown
    }

    /// Whether the database was not there to ask (answered 503 with `Retry-After`), as opposed to a refusal or an
    /// error of the statement itself.
    /// The SQLSTATEs after which nothing was written and a retry may succeed: query_canceled (statement_timeout),
    /// lock_not_available (lock_timeout), admin_shutdown, crash_shutdown, cannot_connect_now, and
    /// read_only_sql_transaction (the host became a standby; with several hosts, the probe finds the primary).
    static let unavailableStates: Set<String> = ["57014", "55P03", "57P01", "57P02", "57P03", "25006"]

    package static func isUnavailable(_ error: any Error) -> Bool {
        if let error = error as? DatabaseError {
            return error.code == .unavailable || error.code == .outcomeUnknown || error.sqlState.map(unavailableStates.contains) == true
        }
        guard let error = error as? PSQLError else { return false }
        if let state = error.serverInfo?[.sqlState] { return unavailableStates.contains(state) }
        // The connection went (the database stopped or the pool closed): unavailable. A decoding failure or a bad
        // statement is our error: 500.
        return [.serverClosedConnection, .clientClosedConnection, .connectionError, .uncleanShutdown, .poolClosed].contains(error.code)
    }
}
