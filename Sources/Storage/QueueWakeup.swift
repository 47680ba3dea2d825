import Logging
import PostgresNIO

/// Waking the push daemons after rows are queued, once the rows are committed (migrations/034).
///
/// A NOTIFY in the transaction that queues the rows (the insert trigger's) takes a lock PostgreSQL holds until that
/// commit is on disk, so every such transaction flushed the WAL alone, one after the other: at 300 chat messages a
/// second four to five of the API's statements waited for it at any moment, and behind a broadcast's expansion (a
/// flush of thousands of rows) all of them. A writer of the hot paths instead silences the trigger for its statement
/// (``silent``), and once PostgreSQL confirmed the commit, sends the NOTIFY on the same connection, before it gives
/// the connection back (``wake(from:on:prepared:logger:)``), in a transaction of its own that commits without waiting
/// for the disk (the lock then held for microseconds). Sent from another connection of the pool, a wakeup waited for
/// one behind a burst of requests, and chat's notifications came 10–20 ms later than the trigger's (field bench).
enum QueueWakeup {
    /// A FROM item that silences the insert trigger's NOTIFY for the statement's transaction.
    static let silent = "(SELECT set_config('pushchat.notify', 'after_commit', true)) AS notify_after_commit"

    /// The wakeup for rows queued from message id `$1` on: the payload the trigger would have sent.
    struct Statement: PostgresPreparedStatement {
        static let sql = """
            SELECT pg_notify('push_queue', $1) IS NULL FROM (SELECT set_config('synchronous_commit', 'off', true)) AS asynchronous_commit
            """
        typealias Row = Bool

        let lowest: Int64

        func makeBindings() throws -> PostgresBindings {
            var bindings = PostgresBindings(capacity: 1)
            bindings.append(String(lowest))
            return bindings
        }

        func decodeRow(_ row: PostgresRow) throws -> Bool { try row.decode(Bool.self) }
    }

    /// Wakes the daemons for committed rows from message id `lowest` on, on `connection` (`prepared`: not behind a
    /// transaction pooler, so the statement is prepared once per connection). Never throws: the rows are committed
    /// whatever happens here, and a wakeup that did not go out (the database away a moment) only leaves them to the
    /// daemons' next claim (another wakeup, the claim from the start they make after they reconnect, and at least
    /// once a minute).
    static func wake(from lowest: Int64, on connection: PostgresConnection, prepared: Bool, logger: Logger) async {
        let statement = Statement(lowest: lowest)
        do {
            if prepared {
                for try await _ in try await connection.execute(statement, logger: logger) {}
            } else {
                _ = try await connection.query(PostgresQuery(unsafeSQL: Statement.sql, binds: try statement.makeBindings()), logger: logger)
                    .collect()
            }
        } catch {
            logger.debug("The push daemons were not woken for message \(lowest) on: \(DatabaseError.describe(error))")
            // postgres-nio fails a statement whose preparation failed on that connection from then on.
            if prepared { try? await connection.close() }
        }
    }
}
