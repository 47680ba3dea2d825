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
        let rows = try await connection.query(
            "UPDATE api_keys SET revoked_at = now() WHERE name = \(name) AND revoked_at IS NULL RETURNING 1",
            logger: logger
        )
        return try await rows.collect().count > 0
    }
}
