package import Foundation
import Logging
package import PostgresNIO
import Settings

/// `pushchat-api keys create|list|revoke`: the provider API's keys, on one connection.
package struct KeyAdmin: Sendable {
    package struct Listed: Sendable, Equatable {
        package let name: String
        package let app: String
        package let requestsPerMinute: Int
        package let recipientsPerMinute: Int
        package let createdAt: Date
        package let revokedAt: Date?
        package let scopes: Set<KeyScope>
    }

    let connection: PostgresConnection
    let logger: Logger

    package init(connection: PostgresConnection, logger: Logger) {
        self.connection = connection
        self.logger = logger
    }

    /// Stores a new key by its hash; false when a key of that name exists (revoked or not).
    package func create(
        name: String,
        hash: String,
        requestsPerMinute: Int,
        recipientsPerMinute: Int,
        scopes: Set<KeyScope> = KeyScope.defaults,
        app: String = App.defaultName
    ) async throws -> Bool {
        let rows = try await connection.query(
            """
            INSERT INTO api_keys (name, key_hash, requests_per_minute, recipients_per_minute, scopes, app)
            VALUES (\(name), \(hash), \(Int32(requestsPerMinute)), \(Int32(recipientsPerMinute)), \(scopes.sorted().map(\.rawValue)), \(app))
            ON CONFLICT (name) DO NOTHING RETURNING 1
            """,
            logger: logger
        )
        return try await rows.collect().count > 0
    }

    package func list() async throws -> [Listed] {
        let rows = try await connection.query(
            "SELECT name, app, requests_per_minute, recipients_per_minute, created_at, revoked_at, scopes FROM api_keys ORDER BY name",
            logger: logger
        )
        var keys: [Listed] = []
        for try await (name, app, requests, recipients, created, revoked, scopes) in rows.decode(
            (String, String, Int32, Int32, Date, Date?, [String]).self
        ) {
            keys.append(
                Listed(
                    name: name,
                    app: app,
                    requestsPerMinute: Int(requests),
                    recipientsPerMinute: Int(recipients),
                    createdAt: created,
                    revokedAt: revoked,
                    scopes: KeyScope.parse(scopes)
                )
            )
        }
        return keys
    }

    /// Revokes the key; false when there is no unrevoked key of that name.
    package func revoke(name: String) async throws -> Bool {
        try await revokeCancelingBroadcasts(name: name) != nil
    }

    /// Revokes the key and cancels its broadcasts still under way (a revoked key's million-device broadcast went on
    /// expanding): they stop being expanded and their queued rows no connection holds fail as canceled. Nil when
    /// there is no unrevoked key of that name; else the broadcasts and rows canceled.
    package func revokeCancelingBroadcasts(name: String) async throws -> (broadcasts: Int, rows: Int)? {
        try await connection.query("BEGIN", logger: logger)
        do {
            let revoked = try await connection.query(
                "UPDATE api_keys SET revoked_at = now() WHERE name = \(name) AND revoked_at IS NULL RETURNING 1",
                logger: logger
            )
            guard try await revoked.collect().count > 0 else {
                try await connection.query("ROLLBACK", logger: logger)
                return nil
            }
            let stopped = try await connection.query(
                """
                UPDATE notifications n SET canceled_at = now(), expand_phase = NULL
                WHERE n.key_name = \(name) AND n.target_kind IS NOT NULL AND n.canceled_at IS NULL
                  AND (n.expand_phase IS NOT NULL
                       OR EXISTS (SELECT 1 FROM push_queue q
                                  WHERE q.notification_id = n.id AND q.time_sent IS NULL AND q.time_failed IS NULL))
                RETURNING n.id
                """,
                logger: logger
            )
            var (broadcasts, rows) = (0, 0)
            for id in try await stopped.collect().map({ try $0.decode(UUID.self) }) {
                broadcasts += 1
                rows += try await connection.query(ProviderStore.cancelRows(of: id), logger: logger).collect().count
            }
            try await connection.query("COMMIT", logger: logger)
            return (broadcasts, rows)
        } catch {
            _ = try? await connection.query("ROLLBACK", logger: logger)
            throw error
        }
    }
}
