package import Logging
import PostgresNIO
package import Settings
import Support

/// How this process's sessions reach PostgreSQL, found out on the first connection.
///
/// Directly, the timeouts travel as start-up parameters and the API's hot statements are prepared once per
/// connection. Behind a pooler in transaction mode (PgBouncer) neither works: PgBouncer refuses start-up parameters it
/// does not know (`unsupported startup parameter: statement_timeout`), or drops them silently when told to ignore
/// them, and it hands each transaction whatever server connection is free, where a statement prepared on another one
/// does not exist. A pooled session therefore sends only `application_name`, takes its timeouts from the database's
/// defaults (which `migrate` sets), runs every statement unnamed, and cannot `LISTEN`.
///
/// The marker `pushchat.direct` (a custom setting PostgreSQL accepts at start-up) tells the two apart: a pooler
/// refuses or drops it, PostgreSQL reports it back.
package struct DatabaseSession: Sendable, Equatable, CustomStringConvertible {
    package enum Route: String, Sendable {
        /// Straight to PostgreSQL: start-up parameters and prepared statements.
        case direct
        /// Through a transaction pooler: the database's defaults and unnamed statements.
        case pooled
    }

    package var route: Route
    /// The `statement_timeout` the server applies to this process's statements (zero: none).
    package var statementTimeout: Duration
    /// The `lock_timeout` the server applies (zero: none).
    package var lockTimeout: Duration

    package init(route: Route, statementTimeout: Duration, lockTimeout: Duration) {
        self.route = route
        self.statementTimeout = statementTimeout
        self.lockTimeout = lockTimeout
    }

    package var isPooled: Bool { route == .pooled }

    package var description: String {
        "\(route.rawValue) (statement_timeout \(Self.format(statementTimeout)), lock_timeout \(Self.format(lockTimeout)))"
    }

    static func format(_ duration: Duration) -> String { duration == .zero ? "none" : duration.formatted }

    /// The setting whose echo proves a direct connection.
    static let marker = "pushchat.direct"

    /// The start-up parameters of a session on `route`.
    static func parameters(_ url: DatabaseURL, route: Route, applicationName: String) -> [(String, String)] {
        guard route == .direct else { return [("application_name", applicationName)] }
        return [
            ("application_name", applicationName),
            ("statement_timeout", "\(url.statementTimeout.milliseconds)"),
            ("lock_timeout", "\(url.lockTimeout.milliseconds)"),
            (marker, "on"),
        ]
    }

    /// Connects once and finds the route: the marker echoed means direct; refused (`unsupported startup parameter`)
    /// or dropped means a pooler, whose timeouts are then read from the session.
    package static func detect(url: DatabaseURL, applicationName: String, logger: Logger) async throws -> DatabaseSession {
        try await detectChoosing(url: url, applicationName: applicationName, logger: logger).session
    }

    /// ``detect(url:applicationName:logger:)`` on the first of the URL's hosts that fits it (``Database``'s choice),
    /// with the URL of that host alone, for the pool.
    package static func detectChoosing(
        url: DatabaseURL,
        applicationName: String,
        logger: Logger
    ) async throws -> (
        session: DatabaseSession, url: DatabaseURL
    ) {
        do {
            return try await read(url: url, route: .direct, applicationName: applicationName, logger: logger)
        } catch let error as DatabaseError where error.reason.contains("unsupported startup parameter") {
            return try await read(url: url, route: .pooled, applicationName: applicationName, logger: logger)
        }
    }

    private static func read(
        url: DatabaseURL,
        route: Route,
        applicationName: String,
        logger: Logger
    ) async throws -> (
        session: DatabaseSession, url: DatabaseURL
    ) {
        try await Database.withChosenConnection(url: url, route: route, applicationName: applicationName, logger: logger) {
            connection,
            chosen in
            let rows = try await connection.query(
                """
                SELECT current_setting('pushchat.direct', true), current_setting('statement_timeout'),
                       current_setting('lock_timeout')
                """,
                logger: logger
            )
            for try await (marker, statement, lock) in rows.decode((String?, String, String).self) {
                let session = DatabaseSession(
                    route: marker == "on" ? .direct : .pooled,
                    statementTimeout: Self.parse(statement),
                    lockTimeout: Self.parse(lock)
                )
                return (session, chosen)
            }
            throw DatabaseError(code: .queryFailed, context: "reading the session's settings", reason: "no row")
        }
    }

    /// PostgreSQL's display of a duration setting (`0`, `250ms`, `30s`, `5min`, `1h`, `1d`) as a `Duration`.
    static func parse(_ text: String) -> Duration {
        let digits = text.prefix { $0.isNumber }
        guard let value = Int64(digits) else { return .zero }
        switch text.dropFirst(digits.count) {
        case "us": return .microseconds(value)
        case "s": return .seconds(value)
        case "min": return .seconds(value * 60)
        case "h": return .seconds(value * 3600)
        case "d": return .seconds(value * 86400)
        default: return .milliseconds(value)
        }
    }
}
