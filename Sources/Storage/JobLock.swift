package import Logging
import PostgresNIO
package import Settings

/// One run of a scheduled job at a time, whichever machine starts it: every machine can schedule the feedback and
/// prune jobs (no machine whose loss stops them), and a run that finds another one under way does nothing.
///
/// A transaction-level advisory lock, held on a connection of its own for the whole run: through PgBouncer's
/// transaction pooling the open transaction keeps its server connection (a session-level lock could be left on a
/// server connection another client then uses). The transaction runs no query while it waits, so it holds no snapshot
/// back from vacuum; its `idle_in_transaction_session_timeout` is off, so a run longer than the database's setting
/// keeps its lock. A run whose lock connection is lost (the database restarted, failed over) has lost its lock too;
/// the jobs are idempotent, so a second run that starts then repeats nothing harmful.
package enum JobLock {
    /// The advisory lock space of PushChat's jobs (`pg_locks.classid`): 'PCHJ'.
    static let space: Int32 = 0x5043_484A

    /// Runs `body` holding the lock named `job`; nil, without running it, when another run holds it.
    package static func withLock<T: Sendable>(
        _ job: String,
        url: DatabaseURL,
        applicationName: String,
        logger: Logger,
        _ body: () async throws -> T
    ) async throws -> T? {
        try await Database.withConnection(url: url, applicationName: applicationName, logger: logger) { connection in
            try await connection.query("BEGIN", logger: logger)
            try await connection.query("SET LOCAL idle_in_transaction_session_timeout = 0", logger: logger)
            let rows = try await connection.query(
                "SELECT pg_try_advisory_xact_lock(\(space), hashtext(\(job)))",
                logger: logger
            )
            var acquired = false
            for try await held in rows.decode(Bool.self) { acquired = held }
            guard acquired else {
                try? await connection.query("ROLLBACK", logger: logger)
                return nil
            }
            do {
                let result = try await body()
                try? await connection.query("ROLLBACK", logger: logger)
                return result
            } catch {
                try? await connection.query("ROLLBACK", logger: logger)
                throw error
            }
        }
    }
}
