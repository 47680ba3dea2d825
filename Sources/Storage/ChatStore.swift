import APNs
package import Foundation
package import Logging
import PostgresNIO
package import Settings
import Support

/// The API's reads and writes: `active_users`, `messages` and the fan-out into `push_queue`.
package struct ChatStore: Sendable {
    /// A stored chat message, as `fetch` returns it.
    package struct StoredMessage: Sendable, Equatable {
        package let id: Int64
        package let name: String
        package let text: String
        package let createdAt: Date
    }

    /// What `message` did.
    package struct MessageResult: Sendable, Equatable {
        /// The stored message's id; `nil` when the sender is not in a room (nothing was written).
        package let messageID: Int64?
        /// How many notifications were queued.
        package let queued: Int
        /// The room had more recipients than allowed: nothing was written.
        package var refused = false
        /// How many devices the message was (or would have been) for.
        package var recipients = 0
    }

    /// Most messages one `fetch` returns.
    package static let fetchLimit = 200

    let database: DatabaseClient
    package let logger: Logger

    /// The app the chat API belongs to (`chat_app`).
    let app: String

    package init(database: DatabaseClient, logger: Logger, app: String = App.defaultName) {
        self.app = app
        self.database = database
        self.logger = logger
    }

    /// Registers the device in a room, replacing any earlier registration of the same udid.
    /// Returns false, writing nothing, when the room already holds `maxRoomSize` other devices (0: no limit).
    @discardableResult
    package func join(
        udid: String,
        token: String,
        name: String,
        code: String,
        platform: Platform = .apns,
        subscription: WebSubscriptionRecord? = nil,
        ipAddress: String?,
        maxRoomSize: Int = 0
    ) async throws -> Bool {
        let statement = ChatStatements.Join(
            udid: udid,
            token: token,
            name: name,
            code: code,
            platform: platform,
            ipAddress: ipAddress,
            maxRoomSize: maxRoomSize,
            subscription: subscription
        )
        // Not confirmed: a join is repeated by the app at each start (an upsert), and the extra round trip cost a quarter
        // of the join rate (docs/BENCHMARKS.md, 2026-11-25 night); a message is confirmed.
        return try await execute(statement).count > 0
    }

    /// Removes the device; returns whether it was registered.
    @discardableResult
    package func leave(udid: String) async throws -> Bool {
        let rows = try await database.query("DELETE FROM active_users WHERE udid = \(udid) RETURNING 1", logger: logger)
        return rows.count > 0
    }

    /// Stores a new token for the device, stamping `token_updated_at`; returns whether it was registered.
    @discardableResult
    package func update(
        udid: String,
        token: String,
        platform: Platform = .apns,
        subscription: WebSubscriptionRecord? = nil
    ) async throws -> Bool {
        var bindings = PostgresBindings(capacity: 6)
        bindings.append(token)
        bindings.append(platform.rawValue)
        bindings.append(udid)
        WebSubscriptionRecord.append(subscription, to: &bindings)
        let sql = """
            WITH updated AS (
                UPDATE active_users SET device_token = $1, platform = $2, token_updated_at = now() WHERE udid = $3 RETURNING 1
            ), subscription AS (
            \(WebSubscriptionRecord.upsert(token: 1, first: 4, condition: "EXISTS (SELECT 1 FROM updated)"))
            )
            SELECT 1 FROM updated
            """
        let rows = try await database.query(PostgresQuery(unsafeSQL: sql, binds: bindings), logger: logger)
        return rows.count > 0
    }

    /// Stores the message and queues one notification per other member of the sender's room that has a token
    /// (each token once, never the sender's), in one statement.
    /// Stores a message and queues it for the sender's room, unless it has more than `maxRecipients` recipients
    /// (nil: no limit; then nothing is written and the result says `refused`).
    package func message(udid: String, text: String, maxRecipients: Int? = nil) async throws -> MessageResult {
        for _ in 0..<2 {
            let statement = ChatStatements.Message(udid: udid, text: text, maxRecipients: maxRecipients ?? -1, app: app)
            var result = MessageResult(messageID: nil, queued: 0)
            var legacyName: String?
            for (id, queued, name, recipients) in try await execute(statement, committed: true) {
                result = MessageResult(messageID: id, queued: Int(queued))
                result.refused = maxRecipients.map { Int(recipients) > $0 } ?? false
                result.recipients = Int(recipients)
                legacyName = name
            }
            guard let legacyName else { return result }
            // Joined before `alert_name` existed: fill it in once, then queue.
            try await database.query(
                "UPDATE active_users SET alert_name = \(PushPayload.alertName(legacyName)) WHERE udid = \(udid) AND alert_name IS NULL",
                logger: logger
            )
        }
        return MessageResult(messageID: nil, queued: 0)
    }

    /// How many devices a `message` from `udid` would be queued for (the fan-out budget reserves that many first).
    package func recipientCount(udid: String) async throws -> Int {
        let rows = try await database.query(
            """
            SELECT count(DISTINCT u.device_token) FROM active_users u JOIN active_users s ON u.secret_code = s.secret_code
            WHERE s.udid = \(udid) AND u.udid <> s.udid AND u.device_token <> '0' AND u.device_token <> s.device_token
            """,
            logger: logger
        )
        for count in try rows.decode(Int64.self) { return Int(count) }
        return 0
    }

    /// The sender's room's messages with an id greater than `since`, oldest first, at most ``fetchLimit``;
    /// empty when the device is not in a room.
    package func fetch(udid: String, since: Int64) async throws -> [StoredMessage] {
        let rows = try await database.query(
            """
            SELECT m.id, m.sender_name, m.text, m.created_at FROM messages m
            WHERE m.secret_code = (SELECT secret_code FROM active_users WHERE udid = \(udid)) AND m.id > \(since)
            ORDER BY m.id LIMIT \(Self.fetchLimit)
            """,
            logger: logger
        )
        var messages: [StoredMessage] = []
        for (id, name, text, createdAt) in try rows.decode((Int64, String, String, Date).self) {
            messages.append(StoredMessage(id: id, name: name, text: text, createdAt: createdAt))
        }
        return messages
    }

    /// The number of registered devices (the database check page).
    package func userCount() async throws -> Int {
        let rows = try await database.query("SELECT count(*) FROM active_users", logger: logger)
        for count in try rows.decode(Int64.self) { return Int(count) }
        return 0
    }

    /// Runs one of the hot statements (see ``DatabaseClient/execute(_:logger:committed:)``); with `committed` (a
    /// message) the answer waits for the commit, so a 200 is never given for a statement PostgreSQL rolled back (a
    /// restart between the statement's end and its commit).
    func execute<Statement: PostgresPreparedStatement>(_ statement: Statement, committed: Bool = false) async throws -> [Statement.Row]
    where Statement.Row: Sendable {
        try await database.execute(statement, logger: logger, committed: committed)
    }
}
