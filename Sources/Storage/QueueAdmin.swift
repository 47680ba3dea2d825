import APNs
package import Foundation
import Logging
package import PostgresNIO
package import Settings
import Support

/// Operator commands on `push_queue` and `push_history`: statistics, a test notification, retrying failed rows, and
/// retention.
package struct QueueAdmin: Sendable {
    /// What `queue stats` prints.
    package struct Stats: Sendable, Equatable {
        package var pending = 0
        package var inFlight = 0
        package var oldestPending: Date?
        package var sentLastHour = 0
        package var failedByReason: [(status: String, reason: String, count: Int)] = []

        package static func == (lhs: Stats, rhs: Stats) -> Bool {
            lhs.pending == rhs.pending && lhs.inFlight == rhs.inFlight && lhs.oldestPending == rhs.oldestPending
                && lhs.sentLastHour == rhs.sentLastHour
                && lhs.failedByReason.map { "\($0.status)|\($0.reason)|\($0.count)" }
                    == rhs.failedByReason.map { "\($0.status)|\($0.reason)|\($0.count)" }
        }
    }

    /// Rows deleted per statement by `prune`, so no statement holds locks for long.
    package static let pruneBatch = 10_000

    let connection: PostgresConnection
    let logger: Logger

    package init(connection: PostgresConnection, logger: Logger) {
        self.connection = connection
        self.logger = logger
    }

    package func stats() async throws -> Stats {
        var stats = Stats()
        let rows = try await connection.query(
            """
            SELECT
                count(*) FILTER (WHERE time_sent IS NULL AND time_failed IS NULL),
                count(*) FILTER (WHERE time_sent IS NULL AND time_failed IS NULL AND claimed_until > now()),
                min(time_queued) FILTER (WHERE time_sent IS NULL AND time_failed IS NULL),
                count(*) FILTER (WHERE time_sent > now() - interval '1 hour')
                    + (SELECT count(*) FROM push_history
                       WHERE coalesce(time_sent, time_failed) > now() - interval '1 hour' AND time_sent IS NOT NULL)
            FROM push_queue
            """,
            logger: logger
        )
        for try await (pending, inFlight, oldest, sent) in rows.decode((Int64, Int64, Date?, Int64).self) {
            stats.pending = Int(pending)
            stats.inFlight = Int(inFlight)
            stats.oldestPending = oldest
            stats.sentLastHour = Int(sent)
        }
        let failed = try await connection.query(
            """
            SELECT coalesce(last_status, '?'), coalesce(last_error, ''), count(*) FROM push_deliveries
            WHERE time_failed IS NOT NULL GROUP BY 1, 2 ORDER BY 3 DESC, 1
            """,
            logger: logger
        )
        for try await (status, reason, count) in failed.decode((String, String, Int64).self) {
            stats.failedByReason.append((status, reason, Int(count)))
        }
        return stats
    }

    /// Queues `{"aps":{"alert":MESSAGE,"sound":"default"}}` for `token`, as the tutorial's `push_test.php` did.
    package func queueTest(token: String, message: String) async throws -> Int64 {
        let payload = PushPayload.alert(message)
        let rows = try await connection.query(
            "INSERT INTO push_queue (device_token, payload) VALUES (\(token), \(payload)) RETURNING message_id",
            logger: logger
        )
        for try await id in rows.decode(Int64.self) { return id }
        throw DatabaseError(code: .queryFailed, context: "queueing a test notification", reason: "no row returned")
    }

    /// Puts failed rows (optionally only those with `last_status` = `status`) back in the queue, from `push_history`
    /// or where they were stamped; the count.
    package func retryFailed(status: String?) async throws -> Int {
        let rows = try await connection.query(
            """
            WITH retried AS (
                UPDATE push_queue SET time_failed = NULL, claimed_until = NULL, attempts = 0
                WHERE time_failed IS NOT NULL AND (\(status)::text IS NULL OR last_status = \(status))
                RETURNING 1
            ), done AS (
                DELETE FROM push_history WHERE time_failed IS NOT NULL AND (\(status)::text IS NULL OR last_status = \(status))
                RETURNING *
            ), requeued AS (
                \(unescaped: Self.requeueInsert) RETURNING 1
            )
            SELECT (SELECT count(*) FROM retried) + (SELECT count(*) FROM requeued), pg_notify('push_queue', '') IS NULL
            """,
            logger: logger
        )
        for try await (count, _) in rows.decode((Int64, Bool).self) { return Int(count) }
        return 0
    }

    /// A failed row back in the queue, as new (`done`: the rows deleted from `push_history`).
    static let requeueInsert = PushHistory.insert(
        into: "push_queue",
        from: "done",
        overriding: ["time_failed": "NULL", "claimed_until": "NULL", "attempts": "0"]
    )

    /// Once rows move to `push_history` (``PushHistory``), moves those a daemon stamped in place (before it knew, or a
    /// release from before `push_history`) there, in batches; the count.
    package func moveStampedRows() async throws -> Int {
        try await repeatUntilShort(
            """
            WITH moving AS (\(unescaped: PushHistory.activeQuery) AS yes
            ), done AS (
                DELETE FROM push_queue WHERE ctid = ANY(ARRAY(
                    SELECT ctid FROM push_queue WHERE (time_sent IS NOT NULL OR time_failed IS NOT NULL) AND (SELECT yes FROM moving)
                    LIMIT \(Self.pruneBatch) FOR UPDATE SKIP LOCKED))
                RETURNING *
            ), moved AS (
                \(unescaped: Self.keepInsert) RETURNING 1
            )
            SELECT count(*) FROM moved
            """
        )
    }

    /// A row as it was, into `push_history` (`done`: the rows deleted from `push_queue`).
    static let keepInsert = PushHistory.insert(into: "push_history", from: "done")

    /// Deletes sent and failed rows older than `age` from both tables, in batches; the count.
    package func prune(olderThan age: Duration) async throws -> Int {
        let seconds = age.seconds
        let history = try await pruneHistory(olderThan: age)
        return try await history
            + repeatUntilShort(
                """
                WITH doomed AS (
                    SELECT message_id FROM push_queue
                    WHERE time_sent < now() - make_interval(secs => \(seconds)) OR time_failed < now() - make_interval(secs => \(seconds))
                    LIMIT \(Self.pruneBatch)
                ), deleted AS (
                    DELETE FROM push_queue q USING doomed d WHERE q.message_id = d.message_id RETURNING 1
                )
                SELECT count(*) FROM deleted
                """
            )
    }

    /// Deletes webhook POSTs written longer than `window` ago (`webhook_retry_window`): past the window nothing retries
    /// them (a webhook failing that long is disabled), whatever became of their webhook; the count.
    package func pruneWebhookOutbox(window: Duration) async throws -> Int {
        try await repeatUntilShort(
            """
            WITH doomed AS (
                SELECT id FROM webhook_outbox WHERE created_at < now() - make_interval(secs => \(window.seconds)) LIMIT \(Self.pruneBatch)
            ), deleted AS (
                DELETE FROM webhook_outbox o USING doomed d WHERE o.id = d.id RETURNING 1
            )
            SELECT count(*) FROM deleted
            """
        )
    }

    /// Deletes browsers' subscriptions (`web_subscriptions`) that no device, chat user or waiting row names any more
    /// (the feedback job deleted the device after a 404/410, or it was unregistered): the count. One registered again
    /// within the last hour is kept, so a registration racing this never loses its subscription.
    package func pruneWebSubscriptions() async throws -> Int {
        try await repeatUntilShort(
            """
            WITH doomed AS (
                SELECT s.device_token FROM web_subscriptions s
                WHERE s.updated_at < now() - interval '1 hour'
                  AND NOT EXISTS (SELECT 1 FROM devices d WHERE d.device_token = s.device_token)
                  AND NOT EXISTS (SELECT 1 FROM active_users u WHERE u.device_token = s.device_token)
                  AND NOT EXISTS (SELECT 1 FROM push_queue q WHERE q.device_token = s.device_token)
                LIMIT \(Self.pruneBatch)
            ), deleted AS (
                DELETE FROM web_subscriptions s USING doomed d WHERE s.device_token = d.device_token RETURNING 1
            )
            SELECT count(*) FROM deleted
            """
        )
    }

    /// Runs `statement` (one batch of at most ``pruneBatch`` rows, answering how many it changed) until a batch is
    /// short; the total.
    private func repeatUntilShort(_ statement: PostgresQuery) async throws -> Int {
        var total = 0
        while true {
            let rows = try await connection.query(statement, logger: logger)
            var changed = 0
            for try await count in rows.decode(Int64.self) { changed = Int(count) }
            total += changed
            if changed < Self.pruneBatch { return total }
        }
    }

    private func pruneHistory(olderThan age: Duration) async throws -> Int {
        try await deleteInBatches(
            age,
            // A row a waiting webhook POST names (webhook_outbox.sent_ids, in order) stays until the POST is gone:
            // its event is built from it when the POST is sent.
            """
            SELECT message_id FROM push_history WHERE coalesce(time_sent, time_failed) < now() - make_interval(secs => $1)
                AND message_id < coalesce((SELECT min(sent_ids[1]) FROM webhook_outbox), 9223372036854775807) LIMIT $2
            """,
            table: "push_history",
            key: "message_id"
        )
    }

    /// Deletes provider notifications older than `age` whose queue rows are all gone (pruned), and idempotency keys
    /// past their 24 hours; the counts.
    package func pruneNotifications(olderThan age: Duration) async throws -> (notifications: Int, idempotencyKeys: Int) {
        let notifications = try await deleteInBatches(
            age,
            """
            SELECT id FROM notifications n WHERE created_at < now() - make_interval(secs => $1)
            AND (n.expanded_at IS NOT NULL OR n.canceled_at IS NOT NULL)
            AND NOT EXISTS (SELECT 1 FROM push_deliveries q WHERE q.notification_id = n.id) LIMIT $2
            """,
            table: "notifications",
            key: "id"
        )
        let keys = try await deleteInBatches(
            .seconds(86_400),
            "SELECT key_name, idempotency_key FROM idempotency_keys WHERE created_at < now() - make_interval(secs => $1) LIMIT $2",
            table: "idempotency_keys",
            key: "(key_name, idempotency_key)"
        )
        return (notifications, keys)
    }

    /// What retention deleted, by table.
    package struct Retention: Sendable, Equatable {
        package var messages = 0
        package var tokenlessUsers = 0
        package var invalidTokens = 0
    }

    /// Deletes, in batches, chat messages, users that never got a token, and handled invalid-token reports older than
    /// `settings` keep them (zero: keep forever).
    package func pruneRetention(_ settings: RetentionSettings) async throws -> Retention {
        var result = Retention()
        result.messages = try await deleteInBatches(
            settings.messages,
            "SELECT id FROM messages WHERE created_at < now() - make_interval(secs => $1) LIMIT $2",
            table: "messages",
            key: "id"
        )
        result.tokenlessUsers = try await deleteInBatches(
            settings.tokenlessUsers,
            "SELECT udid FROM active_users WHERE device_token = '0' AND token_updated_at < now() - make_interval(secs => $1) LIMIT $2",
            table: "active_users",
            key: "udid"
        )
        result.invalidTokens = try await deleteInBatches(
            settings.invalidTokens,
            "SELECT app, device_token FROM invalid_tokens WHERE processed_at < now() - make_interval(secs => $1) LIMIT $2",
            table: "invalid_tokens",
            key: "(app, device_token)"
        )
        return result
    }

    /// `alias.column`, or `(alias.a, alias.b)` for a key written `(a, b)`.
    private func qualified(_ alias: String, _ key: String) -> String {
        guard key.hasPrefix("(") else { return "\(alias).\(key)" }
        let columns = key.dropFirst().dropLast().split(separator: ",").map { "\(alias).\($0.trimmingWhitespace())" }
        return "(" + columns.joined(separator: ", ") + ")"
    }

    /// Runs `DELETE FROM table WHERE key IN (select)` until a batch is short; `select` takes the age in seconds ($1)
    /// and the batch size ($2). The statements are this file's own, never built from input.
    private func deleteInBatches(_ age: Duration, _ select: String, table: String, key: String) async throws -> Int {
        guard age > .zero else { return 0 }
        var bindings = PostgresBindings(capacity: 2)
        bindings.append(age.seconds)
        bindings.append(Int64(Self.pruneBatch))
        let sql =
            "WITH doomed AS (\(select)), deleted AS (DELETE FROM \(table) t USING doomed d WHERE \(qualified("t", key)) = \(qualified("d", key)) RETURNING 1) "
            + "SELECT count(*) FROM deleted"
        return try await repeatUntilShort(PostgresQuery(unsafeSQL: sql, binds: bindings))
    }
}
