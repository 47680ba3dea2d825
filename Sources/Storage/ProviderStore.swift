package import Foundation
package import Logging
import PostgresNIO
package import Settings
import Support

/// The provider API's reads and writes: key lookup, the device registry, notifications into `push_queue`, and their
/// status.
package struct ProviderStore: Sendable {
    /// An API key that may make requests, with its limits (0: none).
    package struct Key: Sendable, Equatable {
        package let name: String
        /// The app it works in: it sees and sends only within it.
        package var app = App.defaultName
        /// The app was disabled (`pushchat-api apps disable`): the key may do nothing.
        package var appDisabled = false
        /// The app's bundle id (nil: the configuration's `apns_topic`, for the default app as migrated).
        package var bundleID: String? = nil
        /// The app's APNs interface, which bounds its payloads (nil: the configuration's, for the default app).
        package var transport: APNsTransport? = nil
        /// The public half of the app's own VAPID key (`apps … --vapid-key-file`; nil: none, or the configuration's for
        /// the default app).
        package var webPushPublicKey: String? = nil
        package let requestsPerMinute: Int
        package let recipientsPerMinute: Int
        /// What it may do.
        package var scopes: Set<KeyScope> = Set(KeyScope.allCases)

        package func allows(_ scope: KeyScope) -> Bool { scopes.contains(scope) }
    }

    /// A registered device.
    package struct Device: Sendable, Equatable {
        package let token: String
        package let user: String?
        package let clientInfo: String?
        package let registeredAt: Date
        package let updatedAt: Date
        package let lastBadge: Int?
        package let platform: Platform

        /// From the row of ``ProviderStore/deviceColumns``.
        init(row: (String, String?, String?, Date, Date, Int32?, String)) {
            (token, user, clientInfo, registeredAt, updatedAt) = (row.0, row.1, row.2, row.3, row.4)
            lastBadge = row.5.map(Int.init)
            platform = Platform(rawValue: row.6) ?? .apns
        }
    }

    /// Who a notification is for, as the statement selects them.
    package enum Target: Sendable, Equatable {
        case tokens([String])
        case users([String])
        case udids([String])
        case room(String)
        case all
    }

    /// A notification to queue, one row per recipient token.
    package struct Notification: Sendable {
        package var id: UUID
        package var keyName: String
        /// The key's app: its devices are the recipients, its credentials send.
        package var app: String
        package var target: Target
        package var payload: String
        /// The FCM message for Android recipients (without the token); nil: it cannot go to one, and a notification
        /// whose recipients include one is refused (``QueueResult/notForAndroid(_:)``).
        package var fcmPayload: String? = nil
        /// The Declarative Web Push JSON for browsers (encrypted for each when sent); nil: it cannot go to one, and a
        /// notification whose recipients include one is refused (``QueueResult/notForBrowsers(_:)``).
        package var webPayload: String? = nil
        package var pushType: String
        package var priority: Int?
        /// Unix seconds; 0 means deliver once.
        package var expiration: Int64?
        package var collapseID: String?
        package var topic: String?
        /// The badge to note on registered devices, and whether devices already noted with it are skipped.
        package var badge: Int?
        package var onlyIfBadgeChanged: Bool
        /// The `Idempotency-Key` header and a hash of the body.
        package var idempotencyKey: String?
        package var requestHash: String

        package init(
            id: UUID,
            keyName: String,
            app: String,
            target: Target,
            payload: String,
            fcmPayload: String? = nil,
            webPayload: String? = nil,
            pushType: String,
            priority: Int?,
            expiration: Int64?,
            collapseID: String?,
            topic: String?,
            badge: Int?,
            onlyIfBadgeChanged: Bool,
            idempotencyKey: String?,
            requestHash: String
        ) {
            self.id = id
            self.keyName = keyName
            self.app = app
            self.target = target
            self.payload = payload
            self.fcmPayload = fcmPayload
            self.webPayload = webPayload
            self.pushType = pushType
            self.priority = priority
            self.expiration = expiration
            self.collapseID = collapseID
            self.topic = topic
            self.badge = badge
            self.onlyIfBadgeChanged = onlyIfBadgeChanged
            self.idempotencyKey = idempotencyKey
            self.requestHash = requestHash
        }
    }

    /// What queueing did.
    package enum QueueResult: Sendable, Equatable {
        /// Queued for this many recipients.
        case queued(recipients: Int)
        /// Accepted for this many recipients (counted), to be expanded into the queue in the background.
        case accepted(recipients: Int)
        /// More recipients than `maxRecipients`: nothing written.
        case tooManyRecipients(Int)
        /// The idempotency key was used within 24 hours (by a request racing this one): nothing written.
        case duplicate
        /// This many recipients are Android devices and the notification has no FCM message: nothing written.
        case notForAndroid(Int)
        /// This many recipients are browsers and the notification has no Web Push message: nothing written.
        case notForBrowsers(Int)
    }

    /// A notification sent earlier with the same idempotency key.
    package struct Earlier: Sendable, Equatable {
        package let id: UUID
        package let recipients: Int
        package let requestHash: String
    }

    /// Counts of a notification's rows and its first failures.
    package struct Status: Sendable, Equatable {
        package struct Failure: Sendable, Equatable {
            package let token: String
            package let status: String?
            package let reason: String
        }

        /// The request named its tokens (`to.tokens`): its failures' tokens are the caller's own.
        package var namedTokens = false

        /// Where a notification stands.
        package enum State: String, Sendable {
            /// A broadcast whose rows are still being queued.
            case expanding
            /// Every row queued; some not yet sent or failed.
            case sending
            /// Every row sent or failed.
            case done
            /// Canceled (`DELETE /v1/notifications/ID`).
            case canceled
        }

        package let id: UUID
        package let state: State
        /// Counted when it was accepted.
        package let recipients: Int
        /// Rows in the queue so far (all of them but for a broadcast still expanding).
        package let queued: Int
        package let sent: Int
        package let failed: Int
        package let canceled: Int
        package let pending: Int
        package var failures: [Failure]
    }

    /// Most failures a status lists.
    package static let failureLimit = 100
    /// How long an idempotency key answers with its first notification.
    package static let idempotencyWindow = "24 hours"

    let database: DatabaseClient
    let logger: Logger
    /// The app the chat API's users (`active_users`) belong to: only its keys reach them by udid, room or `all`.
    let chatApp: String

    package init(database: DatabaseClient, logger: Logger, chatApp: String = App.defaultName) {
        self.database = database
        self.logger = logger
        self.chatApp = chatApp
    }

    /// The unrevoked key whose SHA-256 (hex) is `hash`.
    package func key(hash: String) async throws -> Key? {
        let rows = try await database.query(
            """
            SELECT k.name, k.requests_per_minute, k.recipients_per_minute, k.scopes, k.app, a.disabled_at IS NOT NULL, a.bundle_id,
                   a.transport, a.webpush_public_key
            FROM api_keys k JOIN apps a ON a.name = k.app WHERE k.key_hash = \(hash) AND k.revoked_at IS NULL
            """,
            logger: logger
        )
        for (name, requests, recipients, scopes, app, disabled, bundleID, transport, vapid) in try rows.decode(
            (String, Int32, Int32, [String], String, Bool, String?, String?, String?).self
        ) {
            return Key(
                name: name,
                app: app,
                appDisabled: disabled,
                bundleID: bundleID,
                transport: transport.flatMap(APNsTransport.init(rawValue:)),
                webPushPublicKey: vapid,
                requestsPerMinute: Int(requests),
                recipientsPerMinute: Int(recipients),
                scopes: KeyScope.parse(scopes)
            )
        }
        return nil
    }

    /// Registers the token (again) in the key's app: the user and client info are replaced and `updated_at` stamped
    /// (so the feedback job keeps it after an older report). Returns the device and whether it is new. The same token
    /// in another app is another device; nil (nothing written) while the keys from before `migrate --contract` hold a
    /// token to one app and another app has it.
    package func register(
        token: String,
        user: String?,
        clientInfo: String?,
        platform: Platform = .apns,
        subscription: WebSubscriptionRecord? = nil,
        key: Key
    ) async throws -> (Device, created: Bool)? {
        var bindings = PostgresBindings(capacity: 9)
        bindings.append(key.app)
        bindings.append(token)
        bindings.append(user)
        bindings.append(clientInfo)
        bindings.append(key.name)
        bindings.append(platform.rawValue)
        WebSubscriptionRecord.append(subscription, to: &bindings)
        // A browser's subscription in the same statement: neither is stored without the other.
        let sql = """
            WITH registered AS (
                INSERT INTO devices AS d (app, device_token, user_ref, client_info, registered_by, platform)
                VALUES ($1, $2, $3, $4, $5, $6)
                ON CONFLICT (app, device_token) DO UPDATE SET user_ref = EXCLUDED.user_ref, client_info = EXCLUDED.client_info,
                    registered_by = EXCLUDED.registered_by, platform = EXCLUDED.platform, updated_at = now()
                RETURNING \(Self.deviceColumns), (xmax = 0) AS created
            ), subscription AS (
            \(WebSubscriptionRecord.upsert(token: 2, first: 7, condition: "EXISTS (SELECT 1 FROM registered)"))
            )
            SELECT * FROM registered
            """
        let rows: DatabaseRows
        do {
            rows = try await database.query(PostgresQuery(unsafeSQL: sql, binds: bindings), logger: logger, committed: true)
        } catch  where DatabaseError.sqlState(of: error) == "23505" {
            return nil
        }
        for row in rows {
            let (token, user, info, registered, updated, badge, platform, created) = try row.decode(
                (String, String?, String?, Date, Date, Int32?, String, Bool).self
            )
            return (Device(row: (token, user, info, registered, updated, badge, platform)), created)
        }
        return nil
    }

    /// Removes a device registered in `app`; whether it was registered there.
    package func unregister(token: String, app: String) async throws -> Bool {
        let rows = try await database.query(
            "DELETE FROM devices WHERE app = \(app) AND device_token = \(token) RETURNING 1",
            logger: logger,
            committed: true
        )
        return rows.count > 0
    }

    /// A user's devices registered in `app`, oldest registration first.
    package func devices(user: String, app: String) async throws -> [Device] {
        let rows = try await database.query(
            """
            SELECT \(unescaped: Self.deviceColumns) FROM devices WHERE app = \(app) AND user_ref = \(user)
            ORDER BY registered_at, device_token LIMIT 1000
            """,
            logger: logger
        )
        var devices: [Device] = []
        for row in try rows.decode((String, String?, String?, Date, Date, Int32?, String).self) {
            devices.append(Device(row: row))
        }
        return devices
    }

    static let deviceColumns = "device_token, user_ref, client_info, registered_at, updated_at, last_badge, platform"

    /// The notification an idempotency key of this API key answers with, if it was used within 24 hours.
    package func earlier(keyName: String, idempotencyKey: String) async throws -> Earlier? {
        let rows = try await database.query(
            """
            SELECT i.notification_id, n.recipients, i.request_hash FROM idempotency_keys i JOIN notifications n ON n.id = i.notification_id
            WHERE i.key_name = \(keyName) AND i.idempotency_key = \(idempotencyKey)
              AND i.created_at >= now() - \(Self.idempotencyWindow)::interval
            """,
            logger: logger
        )
        for (id, recipients, hash) in try rows.decode((UUID, Int32, String).self) {
            return Earlier(id: id, recipients: Int(recipients), requestHash: hash)
        }
        return nil
    }

    /// Notifications each app has waiting: rows queued and neither sent nor failed, and the recipients of its
    /// broadcasts not yet expanded.
    package func backlog() async throws -> [String: Int] {
        let rows = try await database.query(
            """
            SELECT app, sum(n)::int8 FROM (
                SELECT app, count(*) AS n FROM push_queue WHERE time_sent IS NULL AND time_failed IS NULL GROUP BY app
                UNION ALL
                SELECT app, sum(greatest(recipients - coalesce(expanded, 0), 0)) FROM notifications
                WHERE expanded_at IS NULL AND canceled_at IS NULL AND expand_phase IS NOT NULL GROUP BY app
            ) waiting GROUP BY app
            """,
            logger: logger
        )
        var backlog: [String: Int] = [:]
        for (app, count) in try rows.decode((String, Int64).self) { backlog[app] = Int(count) }
        return backlog
    }

    /// Queues the notification for its recipients (each token once). A notification to all, a room or users that counts
    /// more than `backgroundAbove` recipients is accepted for the daemons to expand in the background
    /// (``accept(_:recipients:maxRecipients:)``, ``QueueResult/accepted(recipients:)``); any other is queued at once
    /// in one statement. Nothing is written when the recipients are more than `maxRecipients` (nil: no limit) or the
    /// idempotency key was taken meanwhile.
    package func queue(_ notification: Notification, maxRecipients: Int?, backgroundAbove threshold: Int? = nil) async throws -> QueueResult
    {
        if let threshold, notification.target.mayBroadcast {
            let (recipients, android, browsers) = try await count(notification)
            if recipients > threshold {
                if android > 0 && notification.fcmPayload == nil { return .notForAndroid(android) }
                if browsers > 0 && notification.webPayload == nil { return .notForBrowsers(browsers) }
                return try await accept(notification, recipients: recipients, maxRecipients: maxRecipients)
            }
        }
        return try await queueAtOnce(notification, maxRecipients: maxRecipients)
    }

    /// The notification row, one `push_queue` row per recipient, the badge note, the idempotency key: one statement.
    func queueAtOnce(_ notification: Notification, maxRecipients: Int?) async throws -> QueueResult {
        let (kind, list, room) = notification.target.parts
        let expiration = notification.expiration.map { Date(timeIntervalSince1970: TimeInterval($0)) }
        let priority = notification.priority.map { Int16($0) }
        let badge = notification.badge.map { Int32($0) }
        let app = notification.app
        // The chat API's users belong to its app: another app's key never reaches them.
        let chat = app == chatApp
        let rows = try await database.query(
            """
            WITH candidates AS (
                SELECT t AS device_token,
                       CASE WHEN t ~ '^[0-9a-f]{64}$' THEN 'apns' WHEN t ~ '^web_[A-Za-z0-9_-]{43}$' THEN 'web' ELSE 'fcm' END AS platform
                    FROM unnest(\(list)::text[]) AS t WHERE \(kind) = 'tokens'
                UNION ALL SELECT device_token, platform FROM devices
                    WHERE \(kind) = 'users' AND app = \(app) AND user_ref = ANY(\(list)::text[])
                UNION ALL SELECT device_token, platform FROM active_users
                    WHERE \(kind) = 'udids' AND \(chat) AND udid = ANY(\(list)::text[]) AND device_token <> '0'
                UNION ALL SELECT device_token, platform FROM active_users
                    WHERE \(kind) = 'room' AND \(chat) AND secret_code = \(room) AND device_token <> '0'
                UNION ALL SELECT device_token, platform FROM devices WHERE \(kind) = 'all' AND app = \(app)
                UNION ALL SELECT device_token, platform FROM active_users WHERE \(kind) = 'all' AND \(chat) AND device_token <> '0'
            ), targets AS (
                SELECT DISTINCT ON (c.device_token) c.device_token, c.platform FROM candidates c
                WHERE NOT (\(notification.onlyIfBadgeChanged)
                           AND EXISTS (SELECT 1 FROM devices d
                                       WHERE d.app = \(app) AND d.device_token = c.device_token AND d.last_badge = \(badge)))
            ), counted AS (
                SELECT count(*) AS n, count(*) FILTER (WHERE platform = 'fcm') AS android,
                       count(*) FILTER (WHERE platform = 'web') AS browsers
                FROM targets
            ), within AS (
                SELECT (\(Int64(maxRecipients ?? -1)) < 0 OR n <= \(Int64(maxRecipients ?? -1)))
                    AND (android = 0 OR \(notification.fcmPayload)::text IS NOT NULL)
                    AND (browsers = 0 OR \(notification.webPayload)::text IS NOT NULL) AS ok
                FROM counted
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
                INSERT INTO notifications (id, key_name, app, recipients, push_type, named_tokens)
                SELECT \(notification.id), \(notification.keyName), \(app), (SELECT n FROM counted), \(notification.pushType),
                       \(kind) = 'tokens'
                WHERE (SELECT ok FROM go)
                RETURNING 1
            ), queued AS (
                INSERT INTO push_queue (app, platform, device_token, payload, priority, expiration, collapse_id, push_type, topic, notification_id)
                SELECT \(app), platform, device_token,
                       CASE platform WHEN 'fcm' THEN \(notification.fcmPayload) WHEN 'web' THEN \(notification.webPayload)
                                     ELSE \(notification.payload) END,
                       \(priority), \(expiration), \(notification.collapseID), \(notification.pushType), \(notification.topic), \(notification.id)
                FROM targets WHERE (SELECT ok FROM go)
                RETURNING 1
            ), badges AS (
                UPDATE devices SET last_badge = \(badge)
                WHERE \(badge)::int IS NOT NULL AND (SELECT ok FROM go) AND app = \(app) AND device_token IN (SELECT device_token FROM targets)
                RETURNING 1
            )
            SELECT (SELECT ok FROM within), (SELECT ok FROM go), (SELECT n FROM counted), (SELECT count(*) FROM queued),
                   (SELECT android FROM counted), (SELECT browsers FROM counted)
            """,
            logger: logger,
            committed: true
        )
        for (within, go, count, queued, android, browsers) in try rows.decode((Bool, Bool, Int64, Int64, Int64, Int64).self) {
            if !within && android > 0 && notification.fcmPayload == nil { return .notForAndroid(Int(android)) }
            if !within && browsers > 0 && notification.webPayload == nil { return .notForBrowsers(Int(browsers)) }
            if !within { return .tooManyRecipients(Int(count)) }
            if !go { return .duplicate }
            return .queued(recipients: Int(queued))
        }
        return .duplicate
    }

    /// A notification's counts (queued so far, sent, failed, canceled, pending), where it stands, and its first
    /// ``failureLimit`` failures; nil if unknown or queued by another key than `keyName`.
    package func status(id: UUID, keyName: String) async throws -> Status? {
        let canceled = Self.canceledStatus
        let counts = try await database.query(
            """
            SELECT n.recipients, n.expanded_at IS NOT NULL, n.canceled_at IS NOT NULL, n.named_tokens, count(q.message_id),
                   count(q.message_id) FILTER (WHERE q.time_sent IS NOT NULL),
                   count(q.message_id) FILTER (WHERE q.time_failed IS NOT NULL AND q.last_status IS DISTINCT FROM \(canceled)),
                   count(q.message_id) FILTER (WHERE q.time_failed IS NOT NULL AND q.last_status = \(canceled)),
                   count(q.message_id) FILTER (WHERE q.time_sent IS NULL AND q.time_failed IS NULL)
            FROM notifications n LEFT JOIN push_deliveries q ON q.notification_id = n.id
            WHERE n.id = \(id) AND n.key_name = \(keyName)
            GROUP BY n.id
            """,
            logger: logger
        )
        var found: Status?
        for (recipients, expandedAll, wasCanceled, namedTokens, queued, sent, failed, canceledRows, pending) in try counts.decode(
            (Int32, Bool, Bool, Bool, Int64, Int64, Int64, Int64, Int64).self
        ) {
            let state: Status.State =
                if wasCanceled { .canceled } else if !expandedAll { .expanding } else if pending > 0 { .sending } else { .done }
            found = Status(
                id: id,
                state: state,
                recipients: Int(recipients),
                queued: Int(queued),
                sent: Int(sent),
                failed: Int(failed),
                canceled: Int(canceledRows),
                pending: Int(pending),
                failures: []
            )
            found?.namedTokens = namedTokens
        }
        guard var status = found else { return nil }
        if status.failed > 0 {
            let rows = try await database.query(
                """
                SELECT device_token, last_status, coalesce(last_error, 'failed') FROM push_deliveries
                WHERE notification_id = \(id) AND time_failed IS NOT NULL AND last_status IS DISTINCT FROM \(canceled)
                ORDER BY message_id LIMIT \(Self.failureLimit)
                """,
                logger: logger
            )
            for (token, rowStatus, reason) in try rows.decode((String, String?, String).self) {
                status.failures.append(Status.Failure(token: token, status: rowStatus, reason: reason))
            }
        }
        return status
    }
}
