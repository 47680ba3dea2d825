package import Foundation
import Logging
package import PostgresNIO
import Support

/// `pushchat-api webhooks add|list|remove|rotate|disable|enable`: the receivers of delivery events, on one connection
/// as the schema's owner. Values arrive checked (URL, secret, event types): this type only stores them.
package struct WebhookAdmin: Sendable {
    package struct Listed: Sendable, Equatable {
        package let name: String
        package let app: String
        package let url: String
        package let events: [String]
        package let createdAt: Date
        package let rotating: Bool
        package let pending: Int
        package let oldestPending: Date?
        package let failures: Int
        package let lastError: String?
        package let deliveredAt: Date?
        package let disabledAt: Date?
        package let disabledReason: String?
    }

    let connection: PostgresConnection
    let logger: Logger

    package init(connection: PostgresConnection, logger: Logger) {
        self.connection = connection
        self.logger = logger
    }

    /// Stores a new webhook; false when one of that name exists.
    package func add(name: String, app: String, url: String, secret: String, events: [String]) async throws -> Bool {
        let rows = try await connection.query(
            """
            INSERT INTO webhooks (name, app, url, secret, events) VALUES (\(name), \(app), \(url), \(secret), \(events))
            ON CONFLICT (name) DO NOTHING RETURNING 1
            """,
            logger: logger
        )
        return try await rows.collect().count > 0
    }

    package func list() async throws -> [Listed] {
        let rows = try await connection.query(
            """
            SELECT w.name, w.app, w.url, w.events, w.created_at, w.previous_secret_until > now(),
                   coalesce(o.n, 0), o.oldest, w.failures, w.last_error, w.delivered_at, w.disabled_at, w.disabled_reason
            FROM webhooks w
            LEFT JOIN LATERAL (SELECT count(*) AS n, min(created_at) AS oldest FROM webhook_outbox WHERE webhook_id = w.id) o ON true
            ORDER BY w.name
            """,
            logger: logger
        )
        var listed: [Listed] = []
        for try await (name, app, url, events, created, rotating, pending, oldest, failures, lastError, delivered, disabled, reason)
            in rows.decode((String, String, String, [String], Date, Bool?, Int64, Date?, Int32, String?, Date?, Date?, String?).self)
        {
            listed.append(
                Listed(
                    name: name,
                    app: app,
                    url: url,
                    events: events,
                    createdAt: created,
                    rotating: rotating ?? false,
                    pending: Int(pending),
                    oldestPending: oldest,
                    failures: Int(failures),
                    lastError: lastError,
                    deliveredAt: delivered,
                    disabledAt: disabled,
                    disabledReason: reason
                )
            )
        }
        return listed
    }

    /// Removes the webhook and what waits for it; false when there is none of that name.
    package func remove(name: String) async throws -> Bool {
        try await changed("DELETE FROM webhooks WHERE name = \(name) RETURNING 1")
    }

    /// Signs with `secret` from now on, and with the current secret beside it for `overlap`; false when there is none
    /// of that name.
    package func rotate(name: String, secret: String, overlap: Duration) async throws -> Bool {
        try await changed(
            """
            UPDATE webhooks SET previous_secret = secret, previous_secret_until = now() + make_interval(secs => \(overlap.seconds)),
                secret = \(secret), updated_at = now()
            WHERE name = \(name) RETURNING 1
            """
        )
    }

    /// Stops writing and sending its events (`reason` kept); false when there is none of that name.
    package func disable(name: String, reason: String) async throws -> Bool {
        try await changed(
            """
            UPDATE webhooks SET disabled_at = coalesce(disabled_at, now()), disabled_reason = coalesce(disabled_reason, \(reason)),
                updated_at = now()
            WHERE name = \(name) RETURNING 1
            """
        )
    }

    /// Writes and sends its events again, what still waits at once; false when there is none of that name.
    package func enable(name: String) async throws -> Bool {
        try await changed(
            """
            WITH w AS (
                UPDATE webhooks SET disabled_at = NULL, disabled_reason = NULL, failures = 0, failing_since = NULL,
                    retry_at = NULL, updated_at = now()
                WHERE name = \(name) RETURNING id
            ), due AS (
                UPDATE webhook_outbox SET next_attempt_at = now() WHERE webhook_id IN (SELECT id FROM w)
            )
            SELECT 1 FROM w
            """
        )
    }

    private func changed(_ query: PostgresQuery) async throws -> Bool {
        try await connection.query(query, logger: logger).collect().count > 0
    }
}
