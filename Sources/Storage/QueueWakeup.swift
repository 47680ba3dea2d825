package import Logging
import NIOConcurrencyHelpers
import PostgresNIO

/// Waking the push daemons after rows are queued, once the rows are committed (migrations/034).
///
/// A NOTIFY in the transaction that queues the rows (the insert trigger's) takes a lock PostgreSQL holds until that
/// commit is on disk, so every such transaction flushed the WAL alone, one after the other: at 300 chat messages a
/// second four to five of the API's statements waited for it at any moment, and behind a broadcast's expansion (a
/// flush of thousands of rows) all of them. A writer of the hot paths instead silences the trigger for its statement
/// (``silent``), and once PostgreSQL confirmed the commit, hands the lowest message id it queued to its process's
/// ``QueueWaker``, which sends the NOTIFY in a transaction of its own that commits without waiting for the disk (the
/// lock then held for microseconds), one for every wakeup that came while the last was under way.
package enum QueueWakeup {
    /// A FROM item that silences the insert trigger's NOTIFY for the statement's transaction.
    static let silent = "(SELECT set_config('pushchat.notify', 'after_commit', true)) AS notify_after_commit"

    /// The wakeup for rows queued from message id `lowest` on: the payload the trigger would have sent.
    static func statement(lowest: Int64) -> PostgresQuery {
        """
        SELECT pg_notify('push_queue', \(String(lowest))) FROM (SELECT set_config('synchronous_commit', 'off', true)) AS asynchronous_commit
        """
    }
}

/// A process's wakeups of the push daemons (``QueueWakeup``): a request hands over the lowest message id it queued and
/// goes on (its rows are committed: the wakeup is only a hint); one NOTIFY at a time goes out, with the lowest id of
/// every wakeup that came while the last was under way. Sent one per request, they cost the chat API a round trip and
/// a transaction each (a tenth of its rate in the field bench). Runs inside ``DatabaseClient/run()``.
package final class QueueWaker: Sendable {
    private let lowest = NIOLockedValueBox<Int64?>(nil)
    private let signals: AsyncStream<Void>
    private let signal: AsyncStream<Void>.Continuation

    init() {
        (signals, signal) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
    }

    /// Rows from message id `lowest` on are committed (nil: none were queued).
    package func rowsQueued(from id: Int64?) {
        guard let id else { return }
        lowest.withLockedValue { $0 = min($0 ?? id, id) }
        signal.yield()
    }

    /// Sends the wakeups on `database` until cancelled. One that fails (the database away a moment) is not repeated:
    /// the daemons claim from the start of the queue when they reconnect, and at least once a minute anyway.
    func run(on database: DatabaseClient, logger: Logger) async {
        for await _ in signals {
            guard let id = lowest.withLockedValue({ value in defer { value = nil }; return value }) else { continue }
            do {
                _ = try await database.query(QueueWakeup.statement(lowest: id), logger: logger)
            } catch {
                logger.debug("The push daemons were not woken for message \(id) on: \(DatabaseError.describe(error))")
            }
        }
    }
}
