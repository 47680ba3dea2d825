import APNs
import Foundation
import HTTPTypes
import PostgresNIO
import Simulator
import Support
import Testing

@testable import API
@testable import Settings
@testable import Storage

/// Broadcasts in the background (issue 31): a notification to all, a room or users above `api_background_recipients`
/// is accepted with its count and nothing in the queue, expanded by the daemons in batches (each token once, whoever
/// expands and however often it is interrupted), cancellable, and claimed after every other row.
@Suite struct BroadcastTests {
    static func token(_ n: Int) -> String { String(format: "%064x", n) }

    /// `count` registered devices of the default app, tokens first…; user `user0`…`user9` by the token's last digit.
    static func seedDevices(_ url: DatabaseURL, count: Int, from first: Int = 1) async throws {
        try await TestDatabase.withConnection(url) { connection in
            try await connection.query(
                """
                INSERT INTO devices (app, device_token, registered_by, platform, user_ref)
                SELECT 'default', lpad(to_hex(i), 64, '0'), 'seed', 'apns', 'user' || (i % 10)
                FROM generate_series(\(first), \(first + count - 1)) i
                """,
                logger: TestDatabase.logger
            )
        }
    }

    /// `count` chat users in `room`, tokens first…; udids from `udidFrom`.
    static func seedChatUsers(_ url: DatabaseURL, count: Int, tokensFrom first: Int, room: String, udidFrom: Int = 1) async throws {
        try await TestDatabase.withConnection(url) { connection in
            try await connection.query(
                """
                INSERT INTO active_users (udid, device_token, nickname, secret_code)
                SELECT lpad(to_hex(\(udidFrom) + i), 40, '0'), lpad(to_hex(\(first) + i), 64, '0'), 'u' || i, \(room)
                FROM generate_series(0, \(count - 1)) i
                """,
                logger: TestDatabase.logger
            )
        }
    }

    static func notification(_ target: ProviderStore.Target, keyName: String = "backend", badge: Int? = nil) -> ProviderStore.Notification {
        ProviderStore.Notification(
            id: UUID(),
            keyName: keyName,
            app: App.defaultName,
            target: target,
            payload: #"{"aps":{"alert":"everyone"}}"#,
            pushType: "alert",
            priority: nil,
            expiration: nil,
            collapseID: nil,
            topic: nil,
            badge: badge,
            onlyIfBadgeChanged: badge != nil,
            idempotencyKey: nil,
            requestHash: "h"
        )
    }

    /// Expands every broadcast with `expanders` concurrent loops (as several daemons do) in batches of `batch`.
    static func expandAll(_ database: DatabaseClient, expanders: Int = 1, batch: Int) async throws {
        let broadcasts = BroadcastQueue(database: database, logger: TestDatabase.logger)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<expanders {
                group.addTask {
                    while let next = try await broadcasts.next() { _ = try await broadcasts.expand(next, limit: batch) }
                }
            }
            try await group.waitForAll()
        }
    }

    @Test func aBroadcastIsCountedAcceptedAndExpandedInBatchesEachTokenOnce() async throws {
        try await TestDatabase.withFreshDatabase { url in
            // 2,500 devices; 300 chat users, 100 of them with a registered device's token, and 5 without a token.
            try await Self.seedDevices(url, count: 2_500)
            try await Self.seedChatUsers(url, count: 300, tokensFrom: 2_401, room: "lobby")
            try await TestDatabase.withConnection(url) { connection in
                try await connection.query(
                    """
                    INSERT INTO active_users (udid, device_token, nickname, secret_code)
                    SELECT lpad(to_hex(100000 + i), 40, '0'), '0', 'tokenless', 'lobby' FROM generate_series(1, 5) i
                    """,
                    logger: TestDatabase.logger
                )
            }
            try await TestDatabase.withDatabaseClient(url) { database in
                let store = ProviderStore(database: database, logger: TestDatabase.logger)
                let all = Self.notification(.all)
                // Below the threshold: at once, as before.
                let room = try await store.queue(Self.notification(.room("lobby")), maxRecipients: nil, backgroundAbove: 1_000)
                #expect(room == .queued(recipients: 300))
                #expect(try await TestDatabase.scalar(url, "SELECT count(*) FROM push_deliveries WHERE bulk", as: Int64.self) == 0)
                // Above it: counted, accepted, nothing queued yet.
                #expect(try await store.queue(all, maxRecipients: nil, backgroundAbove: 1_000) == .accepted(recipients: 2_700))
                #expect(try await TestDatabase.scalar(url, "SELECT count(*) FROM push_deliveries WHERE bulk", as: Int64.self) == 0)
                var status = try #require(try await store.status(id: all.id, keyName: "backend"))
                #expect(status.state == .expanding && status.recipients == 2_700 && status.queued == 0)
                #expect(try await store.status(id: all.id, keyName: "other") == nil, "another key's is unknown")

                // Three daemons expand it at once, in batches of 400: each recipient once.
                try await Self.expandAll(database, expanders: 3, batch: 400)
                let (rows, tokens) = try await TestDatabase.withConnection(url) { connection in
                    let rows = try await connection.query(
                        "SELECT count(*), count(DISTINCT device_token) FROM push_deliveries WHERE notification_id = \(all.id) AND bulk",
                        logger: TestDatabase.logger
                    )
                    for try await pair in rows.decode((Int64, Int64).self) { return pair }
                    return (0, 0)
                }
                #expect(rows == 2_700 && tokens == 2_700, "every device and every chat user without a device, once")
                status = try #require(try await store.status(id: all.id, keyName: "backend"))
                #expect(status.state == .sending && status.queued == 2_700 && status.pending == 2_700)
                #expect(
                    try await TestDatabase.scalar(
                        url,
                        "SELECT expanded FROM notifications WHERE id = \(all.id) AND expanded_at IS NOT NULL AND expand_phase IS NULL",
                        as: Int32.self
                    ) == 2_700
                )

                // A chat row queued behind the whole broadcast is claimed before it, with the room's notification (queued
                // at once, before the broadcast); the broadcast's rows fill the rest of the claim.
                try await TestDatabase.withConnection(url) { connection in
                    try await connection.query(
                        "INSERT INTO push_queue (device_token, payload) VALUES (\(Self.token(9_999_999)), '{\"aps\":{\"alert\":\"Ann: hi\"}}')",
                        logger: TestDatabase.logger
                    )
                }
                let queue = PushQueue(database: database, instance: "test:1", lease: .seconds(30), logger: TestDatabase.logger)
                let first = try await queue.claim(limit: 400)
                #expect(first.count == 400)
                #expect(first.contains { $0.deviceToken == Self.token(9_999_999) }, "the chat row before the broadcast's")
                let notBulk = try await TestDatabase.scalar(
                    url,
                    "SELECT count(*) FROM push_deliveries WHERE NOT bulk AND claimed_by = 'test:1'",
                    as: Int64.self
                )
                #expect(notBulk == 301, "every row but the broadcast's in the first claim")
                // Then the broadcast's rows, in queue order, all of them once.
                var claimed = Set(first.map(\.messageID))
                while true {
                    let batch = try await queue.claim(limit: 500)
                    if batch.isEmpty { break }
                    for row in batch { #expect(claimed.insert(row.messageID).inserted) }
                }
                #expect(claimed.count == 2_700 + 300 + 1)
            }
        }
    }

    @Test func aBroadcastToUsersAndOnlyIfBadgeChangedIsExpandedAsAtOnce() async throws {
        try await TestDatabase.withFreshDatabase { url in
            try await Self.seedDevices(url, count: 1_000)
            try await TestDatabase.withConnection(url) { connection in
                try await connection.query(
                    "UPDATE devices SET last_badge = 3 WHERE device_token <= lpad(to_hex(100), 64, '0')",
                    logger: TestDatabase.logger
                )
            }
            try await TestDatabase.withDatabaseClient(url) { database in
                let store = ProviderStore(database: database, logger: TestDatabase.logger)
                // user1 and user2: 200 devices, 20 of them noted with badge 3 already.
                let users = Self.notification(.users(["user1", "user2"]), badge: 3)
                #expect(try await store.queue(users, maxRecipients: nil, backgroundAbove: 10) == .accepted(recipients: 180))
                try await Self.expandAll(database, batch: 64)
                #expect(
                    try await TestDatabase.scalar(
                        url,
                        "SELECT count(*) FROM push_deliveries WHERE notification_id = \(users.id)",
                        as: Int64.self
                    )
                        == 180
                )
                #expect(try await TestDatabase.scalar(url, "SELECT count(*) FROM devices WHERE last_badge = 3", as: Int64.self) == 280)
                // The recipient budget is the count: over it, nothing written.
                let again = Self.notification(.all)
                #expect(try await store.queue(again, maxRecipients: 999, backgroundAbove: 10) == .tooManyRecipients(1_000))
                #expect(try await store.status(id: again.id, keyName: "backend") == nil)
            }
        }
    }

    /// Chat comes first, but a backlog of it never starves a broadcast: a tenth of each claim is the broadcast's while
    /// its rows wait, and all of the claim is chat's when none wait.
    @Test func aBacklogOfChatLeavesABroadcastATenthOfEachClaim() async throws {
        try await TestDatabase.withFreshDatabase { url in
            try await TestDatabase.withConnection(url) { connection in
                try await connection.query(
                    """
                    INSERT INTO push_queue (device_token, payload, bulk)
                    SELECT lpad(to_hex(g), 64, '0'), '{}', g > 1000 FROM generate_series(1, 1500) g
                    """,
                    logger: TestDatabase.logger
                )
            }
            try await TestDatabase.withDatabaseClient(url) { database in
                let queue = PushQueue(database: database, instance: "test:1", lease: .seconds(30), logger: TestDatabase.logger)
                var (chat, broadcast) = (0, 0)
                for _ in 0..<5 {
                    let claimed = try await queue.claim(limit: 100)
                    chat += claimed.filter { Int($0.deviceToken, radix: 16) ?? 0 <= 1000 }.count
                    broadcast += claimed.filter { Int($0.deviceToken, radix: 16) ?? 0 > 1000 }.count
                }
                #expect(chat == 450 && broadcast == 50)
                try await TestDatabase.withConnection(url) { connection in
                    try await connection.query("UPDATE push_queue SET time_sent = now() WHERE bulk", logger: TestDatabase.logger)
                }
                #expect(try await queue.claim(limit: 100).count == 100, "no broadcast waiting: the whole claim is chat's")
            }
        }
    }

    @Test func cancelStopsTheExpansionAndFailsWhatNoConnectionHolds() async throws {
        try await TestDatabase.withFreshDatabase { url in
            try await Self.seedDevices(url, count: 2_000)
            try await TestDatabase.withDatabaseClient(url) { database in
                let store = ProviderStore(database: database, logger: TestDatabase.logger)
                let broadcasts = BroadcastQueue(database: database, logger: TestDatabase.logger)
                let all = Self.notification(.all)
                #expect(try await store.queue(all, maxRecipients: nil, backgroundAbove: 0) == .accepted(recipients: 2_000))
                let next = try #require(try await broadcasts.next())
                #expect(try await broadcasts.expand(next, limit: 500) == .init(queued: 500, moved: true, done: false))
                // The same batch again (a daemon that read the cursor before): nothing.
                #expect(try await broadcasts.expand(next, limit: 500) == .init(queued: 0, moved: false, done: false))
                // A daemon holds 50 of them.
                let queue = PushQueue(database: database, instance: "test:1", lease: .seconds(30), logger: TestDatabase.logger)
                let held = try await queue.claim(limit: 50)
                #expect(held.count == 50)
                #expect(try await store.cancel(id: all.id, keyName: "other") == .unknown)
                #expect(try await store.cancel(id: all.id, keyName: "backend") == .canceled(rows: 450))
                #expect(try await broadcasts.next() == nil, "expansion stopped")
                let stale = try await broadcasts.expand(
                    .init(id: next.id, app: next.app, kind: next.kind, users: [], room: nil, phase: "devices", cursor: Self.token(500)),
                    limit: 500
                )
                #expect(stale.queued == 0)
                try await queue.markSent(held.map(\.messageID))
                let status = try #require(try await store.status(id: all.id, keyName: "backend"))
                #expect(status.state == .canceled)
                #expect(status.recipients == 2_000 && status.queued == 500 && status.sent == 50 && status.canceled == 450)
                #expect(status.failed == 0 && status.pending == 0 && status.failures.isEmpty)
                #expect(try await store.cancel(id: all.id, keyName: "backend") == .canceled(rows: 0), "again: nothing more")
            }
        }
    }

    /// Revoking a key left its broadcasts running (a million devices reached by a key the operator had taken away).
    /// Now `keys revoke` cancels them as DELETE does: expansion stops and the rows no connection holds fail as
    /// canceled; another key's broadcast and the key's notifications already done are untouched.
    @Test func revokingAKeyCancelsItsBroadcastsUnderWay() async throws {
        try await TestDatabase.withFreshDatabase { url in
            try await Self.seedDevices(url, count: 1_000)
            _ = try await ProviderAPITests.createKey(url, name: "backend")
            _ = try await ProviderAPITests.createKey(url, name: "other")
            try await TestDatabase.withDatabaseClient(url) { database in
                let store = ProviderStore(database: database, logger: TestDatabase.logger)
                let broadcasts = BroadcastQueue(database: database, logger: TestDatabase.logger)
                let mine = Self.notification(.all)
                let theirs = Self.notification(.all, keyName: "other")
                #expect(try await store.queue(mine, maxRecipients: nil, backgroundAbove: 0) == .accepted(recipients: 1_000))
                #expect(try await store.queue(theirs, maxRecipients: nil, backgroundAbove: 0) == .accepted(recipients: 1_000))
                let next = try #require(try await broadcasts.next())
                #expect(next.id == mine.id, "the older one first")
                #expect(try await broadcasts.expand(next, limit: 300).queued == 300)
                let canceled = try await TestDatabase.withConnection(url) { connection in
                    try await KeyAdmin(connection: connection, logger: TestDatabase.logger).revokeCancelingBroadcasts(name: "backend")
                }
                #expect(canceled?.broadcasts == 1 && canceled?.rows == 300)
                let status = try #require(try await store.status(id: mine.id, keyName: "backend"))
                #expect(status.state == .canceled && status.canceled == 300 && status.pending == 0)
                #expect(try await broadcasts.next()?.id == theirs.id, "only the other key's broadcast is left to expand")
                let again = try await TestDatabase.withConnection(url) { connection in
                    try await KeyAdmin(connection: connection, logger: TestDatabase.logger).revokeCancelingBroadcasts(name: "backend")
                }
                #expect(again == nil, "already revoked")
            }
        }
    }

    /// Oldest-first across apps made one app's million-device broadcast hold back every other app's. Batches now go
    /// round-robin by app: after the default app's, the next app's oldest, then back.
    @Test func broadcastsOfSeveralAppsAreExpandedInTurn() async throws {
        try await TestDatabase.withFreshDatabase { url in
            try await AppsTests.addApp(url, "beta", bundleID: "com.example.Beta")
            try await AppsTests.addApp(url, "zeta", bundleID: "com.example.Zeta")
            try await TestDatabase.admin(
                url,
                """
                INSERT INTO devices (app, device_token, registered_by)
                SELECT app, lpad(to_hex(n), 64, '0'), 'seed' FROM unnest(ARRAY['default', 'beta', 'zeta']) AS app, generate_series(1, 3) n
                """
            )
            try await TestDatabase.withDatabaseClient(url) { database in
                let store = ProviderStore(database: database, logger: TestDatabase.logger)
                let broadcasts = BroadcastQueue(database: database, logger: TestDatabase.logger)
                var queued: [UUID: String] = [:]
                for app in ["default", "default", "zeta", "beta"] {
                    var notification = Self.notification(.all)
                    notification.app = app
                    _ = try await store.queue(notification, maxRecipients: nil, backgroundAbove: 0)
                    queued[notification.id] = app
                }
                var order: [String] = []
                var previous = "default"
                for _ in 0..<5 {
                    let next = try #require(try await broadcasts.next(after: previous))
                    order.append(next.app)
                    previous = next.app
                }
                #expect(order == ["zeta", "beta", "default", "zeta", "beta"], "each app in turn, whatever their ages")
                #expect(try await broadcasts.next(after: "")?.app == "beta")
            }
        }
    }

    /// Nothing capped what one app could have waiting. Past `api_app_max_backlog` (queued rows and unexpanded
    /// broadcast recipients together) its sends get 429 with the count, nothing written; another app's go on.
    @Test func anAppWithTooMuchWaitingGets429AndOtherAppsDoNot() async throws {
        try await TestDatabase.withFreshDatabase { url in
            var configuration = APIHarness.configuration(url: TestDatabase.service(url))
            configuration.limits.backgroundRecipients = 100
            configuration.limits.appMaxBacklog = 500
            try await AppsTests.addApp(url, "beta", bundleID: "com.example.Beta")
            try await Self.seedDevices(url, count: 400)
            let key = try await ProviderAPITests.createKey(url)
            let beta = try await ProviderAPITests.createKey(url, name: "beta-backend", app: "beta")
            try await APIHarness.run(configuration: configuration, ownerURL: url) { api in
                let all = #"{"to": {"all": true}, "aps": {"alert": "everyone"}}"#
                let first = try await ProviderAPITests.call(api, .post, "/v1/notifications", key: key, all)
                #expect(first.status == 202 && first.json["recipients"] as? Int == 400, "\(first.json)")
                // Read again once its reading is 5 s old: 400 waiting, under 500.
                try await Task.sleep(for: .milliseconds(5_100))
                let second = try await ProviderAPITests.call(api, .post, "/v1/notifications", key: key, all)
                #expect(second.status == 202, "\(second.json)")
                try await Task.sleep(for: .milliseconds(5_100))
                let before = try await ProviderAPITests.snapshot(api)
                let third = try await ProviderAPITests.call(api, .post, "/v1/notifications", key: key, all)
                #expect(third.status == 429, "\(third.json)")
                #expect((third.json["reason"] as? String)?.contains("800 notifications waiting") == true, "\(third.json)")
                #expect(third.headers[.retryAfter] == "60")
                #expect(try await ProviderAPITests.snapshot(api) == before, "nothing written")
                let other = try await ProviderAPITests.call(
                    api,
                    .post,
                    "/v1/notifications",
                    key: beta,
                    #"{"to": {"tokens": ["\#(Self.token(1))"]}, "aps": {"alert": "x"}}"#
                )
                #expect(other.status == 202, "another app is not held back: \(other.json)")
            }
        }
    }

    /// The HTTP side: 202 at once with the count, the status as it goes, DELETE, and refusals that write nothing.
    @Test func theProviderAPIAcceptsABroadcastAndCancelsIt() async throws {
        try await TestDatabase.withFreshDatabase { url in
            var configuration = APIHarness.configuration(url: TestDatabase.service(url))
            configuration.limits.backgroundRecipients = 100
            try await APIHarness.run(configuration: configuration, ownerURL: url) { api in
                try await Self.seedDevices(url, count: 1_000)
                let key = try await ProviderAPITests.createKey(url)
                let other = try await ProviderAPITests.createKey(url, name: "other")
                let accepted = try await ProviderAPITests.call(
                    api,
                    .post,
                    "/v1/notifications",
                    key: key,
                    #"{"to": {"all": true}, "aps": {"alert": "everyone"}}"#
                )
                #expect(accepted.status == 202)
                #expect(accepted.json["recipients"] as? Int == 1_000)
                let id = try #require(accepted.json["id"] as? String)
                #expect(try await api.count("push_queue") == 0)
                let status = try await ProviderAPITests.call(api, .get, "/v1/notifications/\(id)", key: key)
                #expect(status.json["state"] as? String == "expanding")
                #expect(status.json["queued"] as? Int == 0 && status.json["pending"] as? Int == 0)
                // A small one is queued at once.
                let small = try await ProviderAPITests.call(
                    api,
                    .post,
                    "/v1/notifications",
                    key: key,
                    #"{"to": {"users": ["user1"]}, "aps": {"alert": "hi"}}"#
                )
                #expect(small.status == 202 && small.json["recipients"] as? Int == 100)
                let smallStatus = try await ProviderAPITests.call(
                    api,
                    .get,
                    "/v1/notifications/\(small.json["id"] as? String ?? "")",
                    key: key
                )
                #expect(smallStatus.json["state"] as? String == "sending" && smallStatus.json["queued"] as? Int == 100)

                // Without the broadcast scope a list of users reaches at most what is queued at once (100 here): a
                // long list became a background broadcast with send alone.
                let plain = try await ProviderAPITests.createKey(url, name: "plain", scopes: KeyScope.defaults)
                let beforePlain = try await ProviderAPITests.snapshot(api)
                let wide = try await ProviderAPITests.call(
                    api,
                    .post,
                    "/v1/notifications",
                    key: plain,
                    #"{"to": {"users": ["user1", "user2"]}, "aps": {"alert": "hi"}}"#
                )
                #expect(wide.status == 403, "\(wide.json)")
                #expect((wide.json["reason"] as? String)?.contains("broadcast") == true, "\(wide.json)")
                #expect(try await ProviderAPITests.snapshot(api) == beforePlain, "nothing written")
                let narrow = try await ProviderAPITests.call(
                    api,
                    .post,
                    "/v1/notifications",
                    key: plain,
                    #"{"to": {"users": ["user1"]}, "aps": {"alert": "hi"}}"#
                )
                #expect(narrow.status == 202 && narrow.json["recipients"] as? Int == 100, "\(narrow.json)")

                // Android devices and no message for them: refused, nothing written.
                try await TestDatabase.withConnection(url) { connection in
                    try await connection.query(
                        "INSERT INTO devices (device_token, registered_by, platform) VALUES (repeat('a', 150), 'seed', 'fcm')",
                        logger: TestDatabase.logger
                    )
                }
                let before = try await ProviderAPITests.snapshot(api)
                let refused = try await ProviderAPITests.call(
                    api,
                    .post,
                    "/v1/notifications",
                    key: key,
                    #"{"to": {"all": true}, "aps": {"content-available": 1}, "data": {"n": 1}}"#
                )
                #expect(refused.status == 400, "\(refused.json)")
                #expect(try await ProviderAPITests.snapshot(api) == before)

                #expect(try await ProviderAPITests.call(api, .delete, "/v1/notifications/\(id)", key: other).status == 404)
                #expect(try await ProviderAPITests.call(api, .delete, "/v1/notifications/\(UUID())", key: key).status == 404)
                let canceled = try await ProviderAPITests.call(api, .delete, "/v1/notifications/\(id)", key: key)
                #expect(canceled.status == 200)
                #expect(canceled.json["state"] as? String == "canceled")
                let next = try await TestDatabase.withDatabaseClient(url) { database in
                    try await BroadcastQueue(database: database, logger: TestDatabase.logger).next()
                }
                #expect(next == nil, "expansion stopped")
            }
        }
    }

    /// As deployed: two `pushchat-push` processes expand a 12,000-device broadcast and drain it; a chat message queued
    /// while it drains goes out before the broadcast's backlog; kill -9 of one daemon mid-way loses nothing, queues
    /// nothing twice, and only rows the dead daemon held may reach the gateway twice.
    @Test func daemonsExpandABroadcastChatGoesFirstAndKill9LosesNothing() async throws {
        var simulator = SimulatorTests.configuration()
        simulator.faults.readDelay = .milliseconds(10)
        try await PushHarness.run(simulator: simulator) { harness in
            let devices = 12_000
            try await Self.seedDevices(harness.url, count: devices)
            let all = Self.notification(.all)
            let accepted = try await TestDatabase.withDatabaseClient(harness.url) { database in
                try await ProviderStore(database: database, logger: TestDatabase.logger).queue(all, maxRecipients: nil, backgroundAbove: 0)
            }
            #expect(accepted == .accepted(recipients: devices))
            var environment = harness.environment(harness.configuration())
            // A window of 500 at the 0.5 s settle: each connection sends 1,000 rows/s at most, so the broadcast takes
            // seconds and the chat message has a backlog to overtake (with the whole window, a fast machine sent all
            // 12,000 before the check).
            environment["PUSHCHAT_PUSH_WINDOW"] = "500"
            let daemons = try (1...2).map { _ in try PushProcessTests.start(environment).0 }
            defer { for daemon in daemons where daemon.isRunning { kill(daemon.processIdentifier, SIGKILL) } }
            try await harness.waitUntil(timeout: .seconds(30), "the broadcast is under way") {
                harness.simulator.state.counters.accepted >= 1_500
            }
            // A chat message now: it is claimed before the rest of the broadcast.
            let chat = try await harness.queue(1, from: 9_999_999)[0]
            try await harness.waitUntil(timeout: .seconds(10), "the chat message is sent") {
                try await harness.count("message_id = \(chat) AND time_sent IS NOT NULL") == 1
            }
            let behind = try await harness.count("bulk AND time_sent IS NULL")
            #expect(behind > 1_000, "the chat message did not wait for the broadcast (\(behind) of its rows still to go)")

            kill(daemons[0].processIdentifier, SIGKILL)
            _ = try await PushProcessTests.waitForExit(daemons[0], timeout: .seconds(5))
            let held = try await PushProcessTests.held(by: daemons[0], in: harness.url)
            try await harness.waitUntilAllSent(devices + 1, timeout: .seconds(90))
            daemons[1].terminate()
            #expect(try await PushProcessTests.waitForExit(daemons[1], timeout: .seconds(15)))
            #expect(try await harness.count("notification_id = '\(all.id)'") == Int64(devices), "each device queued once")
            let tokens = try await TestDatabase.scalar(
                harness.url,
                "SELECT count(DISTINCT device_token) FROM push_deliveries WHERE notification_id = \(all.id)",
                as: Int64.self
            )
            #expect(tokens == Int64(devices))
            let ids = try await TestDatabase.withConnection(harness.url) { connection in
                var ids = Set<UInt32>()
                for try await id in try await connection.query("SELECT message_id FROM push_deliveries", logger: TestDatabase.logger)
                    .decode(
                        Int64.self
                    )
                {
                    ids.insert(UInt32(id))
                }
                return ids
            }
            #expect(Set(harness.acceptedCounts.keys) == ids, "every row reached the gateway")
            let twice = Set(harness.acceptedCounts.filter { $0.value > 1 }.keys)
            #expect(twice.isSubset(of: held), "only what the dead daemon held may arrive twice")
            let status = try await TestDatabase.withDatabaseClient(harness.url) { database in
                try await ProviderStore(database: database, logger: TestDatabase.logger).status(id: all.id, keyName: "backend")
            }
            #expect(status?.state == .done && status?.sent == devices)
        }
    }

    /// `push_broadcast_rate` as deployed: a daemon process limited to 500 broadcast rows a second sends a 3,000-device
    /// broadcast no faster than that (a tenth of a second's worth ahead at most), while a chat message queued
    /// meanwhile goes out at once; the broadcast is sent in full, each row once.
    @Test func aBroadcastRateHoldsTheBroadcastBackButNotChat() async throws {
        try await PushHarness.run { harness in
            let devices = 3_000
            let rate = 500
            try await Self.seedDevices(harness.url, count: devices)
            let all = Self.notification(.all)
            _ = try await TestDatabase.withDatabaseClient(harness.url) { database in
                try await ProviderStore(database: database, logger: TestDatabase.logger).queue(all, maxRecipients: nil, backgroundAbove: 0)
            }
            var environment = harness.environment(harness.configuration())
            environment["PUSHCHAT_PUSH_BROADCAST_RATE"] = "\(rate)"
            let started = ContinuousClock.now
            let (daemon, _) = try PushProcessTests.start(environment)
            defer { if daemon.isRunning { kill(daemon.processIdentifier, SIGKILL) } }
            // Never ahead of the budget: what is sent by now was granted since the daemon started.
            let withinRate: @Sendable () async throws -> Int64 = {
                let sent = try await harness.count("bulk AND time_sent IS NOT NULL")
                let allowed = Double(rate) * started.duration(to: .now).seconds + Double(rate) / 10
                #expect(Double(sent) <= allowed, "\(sent) broadcast rows sent, \(Int(allowed)) allowed by now")
                return sent
            }
            try await harness.waitUntil(timeout: .seconds(30), "the broadcast is under way") { try await withinRate() >= 200 }
            let chat = try await harness.queue(1, from: 9_999_999)[0]
            let queued = ContinuousClock.now
            try await harness.waitUntil(timeout: .seconds(10), "the chat message is sent") {
                _ = try await withinRate()
                return try await harness.count("message_id = \(chat) AND time_sent IS NOT NULL") == 1
            }
            let chatTook = queued.duration(to: .now)
            let behind = try await harness.count("bulk AND time_sent IS NULL")
            #expect(behind > 500, "the chat message went out while the broadcast was held back (\(behind) rows to go, \(chatTook))")
            try await harness.waitUntil(timeout: .seconds(60), "the broadcast is sent") {
                try await withinRate() == Int64(devices)
            }
            #expect(Set(harness.acceptedCounts.values) == [1], "each row reached the gateway once")
            #expect(harness.acceptedCounts.count == devices + 1)
            daemon.terminate()
            #expect(try await PushProcessTests.waitForExit(daemon, timeout: .seconds(15)))
        }
    }

}
