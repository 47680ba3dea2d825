package import Foundation
package import Logging
import PostgresNIO
import Support

/// Broadcasts in the background: a notification to all of an app's devices, a room or a list of users that counts more
/// than ``ProviderStore/queue(_:maxRecipients:backgroundAbove:)``'s threshold is accepted by one small statement (the
/// notification row, counted, with what its rows will carry) and expanded into `push_queue` by the push daemons,
/// ``BroadcastQueue``, batch by batch.
extension ProviderStore {
    /// How many recipients a notification to all, a room or users has, and how many of them are Android devices,
    /// counted from the indexes without gathering the tokens: the app's devices (unique per app), then the chat API's
    /// users that are not among them (for all, with the chat app's keys) or the room's users.
    func count(_ notification: Notification) async throws -> (recipients: Int, android: Int, browsers: Int) {
        let (kind, list, room) = notification.target.parts
        let badge = notification.badge.map { Int32($0) }
        let chat = notification.app == chatApp
        let rows = try await database.query(
            """
            SELECT count(*), count(*) FILTER (WHERE platform = 'fcm'), count(*) FILTER (WHERE platform = 'web') FROM (
                SELECT platform FROM devices
                WHERE \(kind) IN ('all', 'users') AND app = \(notification.app) AND (\(kind) = 'all' OR user_ref = ANY(\(list)::text[]))
                    AND NOT (\(notification.onlyIfBadgeChanged) AND coalesce(last_badge = \(badge), false))
                UNION ALL
                SELECT DISTINCT ON (a.device_token) a.platform FROM active_users a
                WHERE \(chat) AND a.device_token <> '0' AND (\(kind) = 'all' OR (\(kind) = 'room' AND a.secret_code = \(room)))
                    AND NOT EXISTS (SELECT 1 FROM devices d WHERE d.app = \(notification.app) AND d.device_token = a.device_token
                                    AND (\(kind) = 'all' OR (\(notification.onlyIfBadgeChanged) AND d.last_badge = \(badge))))
            ) recipients
            """,
            logger: logger
        )
        for (recipients, android, browsers) in try rows.decode((Int64, Int64, Int64).self) {
            return (Int(recipients), Int(android), Int(browsers))
        }
        return (0, 0, 0)
    }

    /// Accepts a broadcast of `recipients` (counted) for expansion in the background: the notification row with what
    /// its rows will carry, the idempotency key, and a NOTIFY that wakes the daemons, in one statement. Nothing is
    /// written when the recipients are more than `maxRecipients` or the idempotency key was taken meanwhile.
    func accept(_ notification: Notification, recipients: Int, maxRecipients: Int?) async throws -> QueueResult {
        let (kind, list, room) = notification.target.parts
        let limit = Int64(maxRecipients ?? -1)
        let chat = notification.app == chatApp
        let rows = try await database.query(
            """
            WITH within AS (
                SELECT (\(limit) < 0 OR \(Int64(recipients)) <= \(limit)) AS ok
            ), idem AS (
                INSERT INTO idempotency_keys AS i (key_name, idempotency_key, notification_id, request_hash)
                SELECT \(notification.keyName), \(notification.idempotencyKey), \(notification.id), \(notification.requestHash)
                WHERE \(notification.idempotencyKey)::text IS NOT NULL AND (SELECT ok FROM within)
                ON CONFLICT (key_name, idempotency_key) DO UPDATE SET
                    notification_id = EXCLUDED.notification_id, request_hash = EXCLUDED.request_hash, created_at = now()
                WHERE i.created_at < now() - \(Self.idempotencyWindow)::interval
                RETURNING 1
            ), go AS (
                SELECT (SELECT ok FROM within) AND (\(notification.idempotencyKey)::text IS NULL OR EXISTS (SELECT 1 FROM idem)) AS ok
            ), note AS (
                INSERT INTO notifications (id, key_name, app, recipients, push_type, target_kind, target_list, target_room, include_chat,
                    payload, fcm_payload, web_payload, priority, expiration, collapse_id, topic, badge, only_if_badge_changed,
                    expand_phase, expanded, expanded_at)
                SELECT \(notification.id), \(notification.keyName), \(notification.app), \(Int32(clamping: recipients)), \(notification.pushType),
                    \(kind), \(kind == "users" ? list : nil), \(room), \(kind == "all" && chat),
                    \(notification.payload), \(notification.fcmPayload), \(notification.webPayload), \(notification.priority.map { Int16($0) }),
                    \(notification.expiration.map { Date(timeIntervalSince1970: TimeInterval($0)) }), \(notification.collapseID),
                    \(notification.topic), \(notification.badge.map { Int32($0) }), \(notification.onlyIfBadgeChanged),
                    \(kind == "room" ? "chat" : "devices"), 0, NULL
                WHERE (SELECT ok FROM go)
                RETURNING pg_notify('push_queue', '')
            )
            SELECT (SELECT ok FROM within), (SELECT ok FROM go), (SELECT count(*) FROM note)
            """,
            logger: logger,
            committed: true
        )
        for (within, go, _) in try rows.decode((Bool, Bool, Int64).self) {
            if !within { return .tooManyRecipients(recipients) }
            if !go { return .duplicate }
            return .accepted(recipients: recipients)
        }
        return .duplicate
    }

    /// What canceling did.
    package enum Cancellation: Sendable, Equatable {
        /// Canceled now or before: `rows` queued rows no connection held were failed as canceled.
        case canceled(rows: Int)
        /// No notification with this id was queued by this key.
        case unknown
    }

    /// Cancels a notification of `keyName`: a broadcast stops expanding, and its rows no connection holds (queued or
    /// waiting to be retried) are failed as canceled. Rows a connection holds are on their way and go.
    ///
    /// Two statements: the first waits for a batch being expanded and stops the next; the second, in a snapshot taken
    /// after it, sees every row a batch queued.
    package func cancel(id: UUID, keyName: String) async throws -> Cancellation {
        let stopped = try await database.query(
            """
            UPDATE notifications SET canceled_at = coalesce(canceled_at, now()), expand_phase = NULL
            WHERE id = \(id) AND key_name = \(keyName) RETURNING 1
            """,
            logger: logger,
            committed: true
        )
        guard stopped.count > 0 else { return .unknown }
        let rows = try await database.query(Self.cancelRows(of: id), logger: logger, committed: true)
        return .canceled(rows: rows.count)
    }

    /// Fails the queued rows of notification `id` that no connection holds, as canceled: failed where they are, or
    /// moved to push_history once rows move there (PushHistory): the statement decides. One row per row canceled.
    static func cancelRows(of id: UUID) -> PostgresQuery {
        """
        WITH moving AS (\(unescaped: PushHistory.activeQuery) AS yes
        ), stamped AS (
            UPDATE push_queue SET time_failed = now(), last_status = \(Self.canceledStatus), last_error = 'canceled by the sender',
                claimed_until = NULL
            WHERE notification_id = \(id) AND time_sent IS NULL AND time_failed IS NULL
              AND (claimed_until IS NULL OR claimed_by = 'retry-later') AND NOT (SELECT yes FROM moving)
            RETURNING 1
        ), done AS (
            DELETE FROM push_queue
            WHERE notification_id = \(id) AND time_sent IS NULL AND time_failed IS NULL
              AND (claimed_until IS NULL OR claimed_by = 'retry-later') AND (SELECT yes FROM moving)
            RETURNING *, \(Self.canceledStatus)::text AS f_status, 'canceled by the sender' AS f_reason
        ), moved AS (
            \(unescaped: PushQueue.failedInsert) RETURNING 1
        )
        SELECT 1 FROM stamped UNION ALL SELECT 1 FROM moved
        """
    }

    /// `last_status` of a row a cancellation failed.
    package static let canceledStatus = "canceled"
}

extension ProviderStore.Target {
    /// The statement parameters: the kind, the list (tokens, users or udids), the room.
    var parts: (kind: String, list: [String], room: String?) {
        switch self {
        case .tokens(let tokens): ("tokens", tokens, nil)
        case .users(let users): ("users", users, nil)
        case .udids(let udids): ("udids", udids, nil)
        case .room(let code): ("room", [], code)
        case .all: ("all", [], nil)
        }
    }

    /// Whether the recipients are found in the database and may be many (all, a room, users): such a notification is
    /// counted first and expanded in the background when it has many.
    package var mayBroadcast: Bool {
        switch self {
        case .all, .room, .users: true
        case .tokens, .udids: false
        }
    }
}

/// The push daemons' side of broadcasts: find one to expand, and queue its next batch of rows.
package struct BroadcastQueue: Sendable {
    /// A broadcast being expanded, as its row says.
    package struct Broadcast: Sendable, Equatable {
        package let id: UUID
        package let app: String
        package let kind: String
        package let users: [String]
        package let room: String?
        package let phase: String
        package let cursor: String
    }

    /// One batch's result.
    package struct Batch: Sendable, Equatable {
        /// Rows queued.
        package let queued: Int
        /// Whether this batch moved the broadcast on (false: another daemon's batch or a cancellation came first).
        package let moved: Bool
        /// Whether the broadcast is now fully expanded.
        package let done: Bool
    }

    let database: DatabaseClient
    let logger: Logger

    package init(database: DatabaseClient, logger: Logger) {
        self.database = database
        self.logger = logger
    }

    /// The next broadcast to expand a batch of, round-robin by app: the oldest of the first app (by name) after
    /// `previousApp` that has one, wrapping around. Oldest-first across apps made one app's million-device broadcast
    /// hold back every other app's until it was queued in full.
    package func next(after previousApp: String = "") async throws -> Broadcast? {
        let rows = try await database.query(
            """
            SELECT id, app, target_kind, coalesce(target_list, '{}'), target_room, expand_phase, expand_cursor FROM notifications
            WHERE expanded_at IS NULL AND canceled_at IS NULL AND expand_phase IS NOT NULL
            ORDER BY app <= \(previousApp), app, created_at LIMIT 1
            """,
            logger: logger
        )
        for (id, app, kind, users, room, phase, cursor) in try rows.decode((UUID, String, String, [String], String?, String, String).self) {
            return Broadcast(id: id, app: app, kind: kind, users: users, room: room, phase: phase, cursor: cursor)
        }
        return nil
    }

    /// Queues the broadcast's next `limit` recipients (in token order, after its cursor) and moves its cursor past them,
    /// in one statement: the row lock it takes first (`SKIP LOCKED`) and the cursor it checks let one daemon's batch
    /// through and turn another's at the same place into nothing.
    package func expand(_ broadcast: Broadcast, limit: Int) async throws -> Batch {
        let limit = Int64(limit)
        let rows = try await database.query(
            """
            WITH b AS (
                SELECT * FROM notifications
                WHERE id = \(broadcast.id) AND expand_phase = \(broadcast.phase) AND expand_cursor = \(broadcast.cursor)
                    AND expanded_at IS NULL AND canceled_at IS NULL
                FOR UPDATE SKIP LOCKED
            ), batch AS (
                (SELECT device_token, platform FROM devices
                 WHERE \(broadcast.phase) = 'devices' AND app = \(broadcast.app) AND device_token > \(broadcast.cursor)
                     AND (\(broadcast.kind) = 'all' OR user_ref = ANY(\(broadcast.users)::text[]))
                 ORDER BY device_token LIMIT \(limit))
                UNION ALL
                (SELECT DISTINCT ON (device_token) device_token, platform FROM active_users
                 WHERE \(broadcast.phase) = 'chat' AND device_token > \(broadcast.cursor) AND device_token <> '0'
                     AND (\(broadcast.kind) = 'all' OR secret_code = \(broadcast.room))
                 ORDER BY device_token LIMIT \(limit))
            ), chosen AS (
                SELECT c.device_token, c.platform FROM batch c, b
                WHERE CASE c.platform WHEN 'fcm' THEN b.fcm_payload IS NOT NULL WHEN 'web' THEN b.web_payload IS NOT NULL ELSE true END
                  AND NOT (b.only_if_badge_changed
                           AND EXISTS (SELECT 1 FROM devices d WHERE d.app = b.app AND d.device_token = c.device_token AND d.last_badge = b.badge))
                  -- A chat user with a registered device was reached in the devices phase.
                  AND NOT (\(broadcast.phase) = 'chat' AND b.target_kind = 'all'
                           AND EXISTS (SELECT 1 FROM devices d WHERE d.app = b.app AND d.device_token = c.device_token))
            ), queued AS (
                INSERT INTO push_queue (app, platform, device_token, payload, priority, expiration, collapse_id, push_type, topic,
                    notification_id, bulk)
                SELECT b.app, c.platform, c.device_token,
                       CASE c.platform WHEN 'fcm' THEN b.fcm_payload WHEN 'web' THEN b.web_payload ELSE b.payload END,
                       b.priority, b.expiration, b.collapse_id, b.push_type, b.topic, b.id, true
                FROM chosen c, b
                RETURNING 1
            ), badges AS (
                UPDATE devices d SET last_badge = b.badge FROM b
                WHERE b.badge IS NOT NULL AND d.app = b.app AND d.device_token IN (SELECT device_token FROM chosen)
                RETURNING 1
            ), counted AS (
                SELECT count(*) AS n, max(device_token) AS last FROM batch
            ), moved AS (
                UPDATE notifications n SET
                    expand_phase = CASE WHEN c.n >= \(limit) THEN n.expand_phase
                                        WHEN n.expand_phase = 'devices' AND n.include_chat THEN 'chat' END,
                    expand_cursor = CASE WHEN c.n >= \(limit) THEN c.last ELSE '' END,
                    expanded = coalesce(n.expanded, 0) + (SELECT count(*) FROM queued),
                    expanded_at = CASE WHEN c.n < \(limit) AND NOT (n.expand_phase = 'devices' AND n.include_chat) THEN now() END
                FROM b, counted c WHERE n.id = b.id
                RETURNING n.expanded_at IS NOT NULL
            )
            SELECT (SELECT count(*) FROM queued), (SELECT count(*) FROM moved), coalesce((SELECT bool_or(m) FROM moved m(m)), false),
                   (SELECT count(*) FROM badges)
            """,
            logger: logger,
            committed: true
        )
        for (queued, moved, done, _) in try rows.decode((Int64, Int64, Bool, Int64).self) {
            return Batch(queued: Int(queued), moved: moved > 0, done: done)
        }
        return Batch(queued: 0, moved: false, done: false)
    }
}
