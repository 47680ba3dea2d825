import APNs
import PostgresNIO
import Settings
import Support

/// A database operation that failed, with PostgreSQL's own message when the server sent one.
public struct DatabaseError: PushChatError {
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private let name: String
        private init(_ name: String) { self.name = name }
        /// A migration file could not be read, parsed or applied.
        public static let migrationFailed = Code("migrationFailed")
        /// The migrations folder holds files that do not follow `NNN_name.sql`.
        public static let badMigrationFile = Code("badMigrationFile")
        /// A query failed or the server could not be reached.
        public static let queryFailed = Code("queryFailed")
        public var description: String { name }
    }

    public let code: Code
    /// What was being done, e.g. `applying migrations/001_initial_schema.sql`.
    public let context: String
    /// The underlying reason, from PostgreSQL when available.
    public let reason: String

    public init(code: Code, context: String, reason: String) {
        self.code = code
        self.context = context
        self.reason = reason
    }

    /// Wraps any error thrown by PostgresNIO.
    public init(code: Code = .queryFailed, context: String, underlying error: any Error) {
        self.init(code: code, context: context, reason: Self.describe(error))
    }

    public var description: String { "\(context): \(reason)" }

    /// PostgreSQL refused to wait longer for a lock (SQLSTATE 55P03, `lock_timeout`).
    public var isLockTimeout: Bool { reason.contains("[SQLSTATE 55P03]") }

    /// PostgreSQL's message and SQLSTATE for server errors; the connection problem otherwise.
    public static func describe(_ error: any Error) -> String {
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
}
