package import Foundation
package import Logging
import PostgresNIO
import Support

/// The push daemon's statements on `webhook_outbox` (migrations/027_webhooks.sql): the receivers to POST to, a claim of
/// one receiver's due rows under a lease (`SKIP LOCKED`: several daemons share the outbox), and what became of each
/// POST. The rows themselves are written by the statements that record results (triggers), never here.
package struct WebhookOutbox: Sendable {
    /// An enabled webhook, with what its POSTs need.
    package struct Receiver: Sendable, Equatable {
        package let id: Int64
        package let name: String
        package let app: String
        package let url: String
        package let secret: String
        /// The secret before the last rotation while it still signs beside the new one.
        package let previousSecret: String?
        /// Failed POSTs in a row.
        package let failures: Int
    }

    /// One claimed row: one POST.
    package struct Post: Sendable, Equatable {
        package let id: Int64
        /// The JSON array of events: as stored, or built from the push_history rows the row names (notification.sent,
        /// migrations/031); its text is the same on every retry.
        package let events: String
        package let eventCount: Int
        package let createdAt: Date
        package let attempts: Int
        /// `webhook-id`: the same on every retry of this POST.
        package var messageID: String { "msg_\(id)" }
    }

    /// One webhook's backlog, for the metrics.
    package struct Backlog: Sendable, Equatable {
        package let name: String
        package let pending: Int
        package let events: Int
        package let oldestAge: Double
        package let disabled: Bool
    }

    let database: DatabaseClient
    let logger: Logger

    package init(database: DatabaseClient, logger: Logger) {
        self.database = database
        self.logger = logger
    }

    /// A FROM item that commits the statement's transaction without waiting for the WAL to reach the disk
    /// (`synchronous_commit` off for this transaction alone, so through a transaction pooler too). The deliverer's
    /// bookkeeping only: the events themselves are written by the result statements, committed as every result is. A
    /// claim, a delivery or a failure lost in a crash of PostgreSQL (its last fraction of a second) means a POST sent
    /// again with the same webhook-id: at-least-once, as promised. Their flushes were as many as the drain's own
    /// (a 1,000,000-device broadcast: 1,000 POSTs, a claim and a delivery each).
    static let asynchronousCommit = "(SELECT set_config('synchronous_commit', 'off', true)) AS asynchronous_commit"

    /// The enabled webhooks.
    package func receivers() async throws -> [Receiver] {
        let rows = try await database.query(
            """
            SELECT id, name, app, url, secret, CASE WHEN previous_secret_until > now() THEN previous_secret END, failures
            FROM webhooks WHERE disabled_at IS NULL ORDER BY id
            """,
            logger: logger
        )
        return try rows.decode((Int64, String, String, String, String, String?, Int32).self).map {
            Receiver(id: $0.0, name: $0.1, app: $0.2, url: $0.3, secret: $0.4, previousSecret: $0.5, failures: Int($0.6))
        }
    }

    /// Up to `limit` of the webhook's due rows, held for `lease` (a daemon that dies leaves them due again after it);
    /// none while the webhook waits out a backoff or is disabled. `olderThan`: only rows written at least that long ago
    /// (held back while a broadcast drains). A row of notification.sent ids has its events built here, from
    /// push_history (`webhook_sent_events`): after the drain, not in its result statements.
    package func claim(webhook: Int64, limit: Int, lease: Duration, olderThan age: Duration = .zero) async throws -> [Post] {
        let rows = try await database.query(
            """
            UPDATE webhook_outbox o SET next_attempt_at = now() + make_interval(secs => \(lease.seconds))
            FROM \(unescaped: Self.asynchronousCommit), (
                SELECT id FROM webhook_outbox
                WHERE webhook_id = \(webhook) AND next_attempt_at <= now()
                    AND created_at <= now() - make_interval(secs => \(age.seconds))
                    AND EXISTS (SELECT 1 FROM webhooks w WHERE w.id = \(webhook) AND w.disabled_at IS NULL
                                AND (w.retry_at IS NULL OR w.retry_at <= now()))
                ORDER BY next_attempt_at, id LIMIT \(Int64(limit))
                FOR UPDATE SKIP LOCKED
            ) c
            WHERE o.id = c.id
            RETURNING o.id, coalesce(o.events, webhook_sent_events(o.sent_ids)), o.event_count, o.created_at, o.attempts
            """,
            logger: logger,
            committed: true
        )
        return try rows.decode((Int64, String, Int32, Date, Int32).self)
            .map { Post(id: $0.0, events: $0.1, eventCount: Int($0.2), createdAt: $0.3, attempts: Int($0.4)) }
            .sorted { $0.id < $1.id }
    }

    /// The receiver took the POST: it leaves the outbox, and the webhook's failure streak ends.
    package func delivered(_ post: Int64, webhook: Int64) async throws {
        _ = try await database.query(
            """
            WITH d AS (DELETE FROM webhook_outbox WHERE id = \(post))
            UPDATE webhooks SET failures = 0, failing_since = NULL, retry_at = NULL, last_error = NULL, delivered_at = now()
            FROM \(unescaped: Self.asynchronousCommit)
            WHERE id = \(webhook)
            """,
            logger: logger,
            committed: true
        )
    }

    /// Deletes a POST with nothing left to say (every push_history row it named was deleted by hand before it went).
    package func discard(_ post: Int64) async throws {
        _ = try await database.query(
            "DELETE FROM webhook_outbox WHERE id = \(post)",
            logger: logger,
            committed: true
        )
    }

    /// The POST failed: it is due again once the webhook's backoff (`retryIn`) has passed; past `window` of failures in
    /// a row the webhook is disabled. Returns whether it was.
    package func failed(_ post: Int64, webhook: Int64, error: String, retryIn: Duration, window: Duration) async throws -> Bool {
        let rows = try await database.query(
            """
            WITH o AS (
                UPDATE webhook_outbox SET attempts = attempts + 1, last_error = \(error), next_attempt_at = now() WHERE id = \(post)
            )
            UPDATE webhooks SET failures = failures + 1, failing_since = coalesce(failing_since, now()),
                retry_at = now() + make_interval(secs => \(retryIn.seconds)), last_error = \(error),
                disabled_at = CASE WHEN failing_since <= now() - make_interval(secs => \(window.seconds)) THEN now() END,
                disabled_reason = CASE WHEN failing_since <= now() - make_interval(secs => \(window.seconds))
                    THEN 'failing since ' || to_char(failing_since AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') || ' (the retry window): ' || \(error) END
            FROM \(unescaped: Self.asynchronousCommit)
            WHERE id = \(webhook) AND disabled_at IS NULL
            RETURNING disabled_at IS NOT NULL
            """,
            logger: logger,
            committed: true
        )
        return try rows.decode(Bool.self).first ?? false
    }

    /// Writes `notification.completed` for the noted notifications whose every recipient is final (migrations/027:
    /// judged once their results are committed; one event each, whichever daemon sweeps first). Returns how many.
    @discardableResult
    package func sweepCompletions() async throws -> Int {
        let rows = try await database.query(
            "SELECT webhook_completions_sweep() FROM \(unescaped: Self.asynchronousCommit)",
            logger: logger,
            committed: true
        )
        return Int(try rows.decode(Int64.self).first ?? Int64(0))
    }

    /// What waits for each webhook (disabled ones too), for the metrics.
    package func backlog() async throws -> [Backlog] {
        let rows = try await database.query(
            """
            SELECT w.name, coalesce(o.n, 0), coalesce(o.events, 0),
                   coalesce(extract(epoch FROM now() - o.oldest)::float8, 0), w.disabled_at IS NOT NULL
            FROM webhooks w
            LEFT JOIN LATERAL (
                SELECT count(*) AS n, sum(event_count) AS events, min(created_at) AS oldest FROM webhook_outbox WHERE webhook_id = w.id
            ) o ON true
            """,
            logger: logger
        )
        return try rows.decode((String, Int64, Int64, Double, Bool).self).map {
            Backlog(name: $0.0, pending: Int($0.1), events: Int($0.2), oldestAge: $0.3, disabled: $0.4)
        }
    }

    /// Deletes what waited for disabled webhooks longer than `window` (nobody will take it). Returns how many rows.
    @discardableResult
    package func prune(window: Duration) async throws -> Int {
        let rows = try await database.query(
            """
            WITH d AS (
                DELETE FROM webhook_outbox o USING webhooks w
                WHERE o.webhook_id = w.id AND w.disabled_at IS NOT NULL
                    AND o.created_at < now() - make_interval(secs => \(window.seconds))
                RETURNING 1
            )
            SELECT count(*) FROM d
            """,
            logger: logger
        )
        return Int(try rows.decode(Int64.self).first ?? Int64(0))
    }
}
