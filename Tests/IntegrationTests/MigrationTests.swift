import Foundation
import PostgresNIO
import Testing

@testable import API
@testable import APNs
@testable import Observability
@testable import Settings
@testable import Simulator
@testable import Storage
@testable import Support

@Suite struct MigrationTests {
    @Test func migrateAppliesOnceAndRecords() async throws {
        try await TestDatabase.withEmptyDatabase { url in
            try await TestDatabase.withConnection(url) { connection in
                let migrations = try Migration.load(from: TestDatabase.migrationsDirectory)
                let migrator = Migrator(connection: connection, migrations: migrations, logger: TestDatabase.logger)
                #expect(try await migrator.status().allSatisfy { $0.appliedAt == nil })
                let first = try await migrator.migrate()
                #expect(first.map(\.version) == migrations.map(\.version))
                let second = try await migrator.migrate()
                #expect(second.isEmpty, "running migrate twice is a no-op")
                let status = try await migrator.status()
                #expect(status.allSatisfy { $0.appliedAt != nil && !$0.modified })
            }
            let tables = try await TestDatabase.scalar(
                url,
                "SELECT string_agg(table_name::text, ',' ORDER BY table_name) FROM information_schema.tables WHERE table_schema = 'public'",
                as: String.self
            )
            #expect(
                tables
                    == "active_users,api_keys,apps,devices,idempotency_keys,invalid_tokens,messages,notifications,push_deliveries,push_history,push_queue,schema_migrations,web_subscriptions,webhook_completions,webhook_outbox,webhooks"
            )
            let uncommented = try await TestDatabase.scalar(
                url,
                """
                SELECT count(*) FROM information_schema.columns c
                WHERE c.table_schema = 'public'
                  AND c.table_name IN ('active_users', 'push_queue', 'push_history', 'messages', 'invalid_tokens', 'apps', 'devices', 'api_keys', 'notifications',
                      'webhooks', 'webhook_outbox', 'webhook_completions')
                AND col_description(format('%I', c.table_name)::regclass, c.ordinal_position) IS NULL
                """,
                as: Int64.self
            )
            #expect(uncommented == 0, "every column explains itself to a psql user")
        }
    }

    /// An installation from before apps (schema 008) with rows pending, a device, a key and an invalid-token report:
    /// `migrate` makes all of them the default app's, whose settings are the configuration's, and the push daemon
    /// then sends every pending row as before (nothing lost, no new step).
    @Test func anUpgradeFromBeforeAppsKeepsEveryRowAsTheDefaultApp() async throws {
        try await TestDatabase.withEmptyDatabase { url in
            let all = try Migration.load(from: TestDatabase.migrationsDirectory)
            try await TestDatabase.withConnection(url) { connection in
                _ = try await Migrator(connection: connection, migrations: all.filter { $0.version <= 8 }, logger: TestDatabase.logger)
                    .migrate()
                for statement: PostgresQuery in [
                    "INSERT INTO push_queue (device_token, payload) SELECT lpad(to_hex(g), 64, '0'), '{\"aps\":{\"alert\":\"hi\"}}' FROM generate_series(1, 3) g",
                    "INSERT INTO api_keys (name, key_hash) VALUES ('old', 'hash')",
                    "INSERT INTO devices (device_token, registered_by) VALUES (lpad('a', 64, '0'), 'old')",
                    "INSERT INTO invalid_tokens (device_token, reported_at, source) VALUES (lpad('b', 64, '0'), now(), 'feedback service')",
                ] {
                    try await connection.query(statement, logger: TestDatabase.logger)
                }
                let applied = try await Migrator(connection: connection, migrations: all, logger: TestDatabase.logger).migrate()
                #expect(applied.map(\.version) == all.filter { $0.version > 8 && !$0.isContract }.map(\.version))
                // The release before apps still runs on the expanded schema (guide §16): its statements that name the
                // token keys of devices and invalid_tokens work as before.
                for statement: PostgresQuery in [
                    """
                    INSERT INTO devices AS d (device_token, user_ref, client_info, registered_by) VALUES (lpad('a', 64, '0'), 'u', NULL, 'old')
                    ON CONFLICT (device_token) DO UPDATE SET user_ref = EXCLUDED.user_ref, updated_at = now() RETURNING 1
                    """,
                    """
                    INSERT INTO invalid_tokens (device_token, reported_at, source) VALUES (lpad('b', 64, '0'), now(), 'http2 410 Unregistered')
                    ON CONFLICT (device_token) DO UPDATE SET reported_at = EXCLUDED.reported_at, processed_at = NULL
                    """,
                ] {
                    try await connection.query(statement, logger: TestDatabase.logger)
                }
                let apps = try await AppAdmin(connection: connection, logger: TestDatabase.logger).list()
                #expect(apps.map(\.name) == ["default"])
                #expect(apps.first?.usesConfiguration == true, "the default app takes its settings from the env file")
            }
            for table in ["push_queue", "api_keys", "devices", "invalid_tokens"] {
                let other = try await TestDatabase.scalar(
                    url,
                    PostgresQuery(unsafeSQL: "SELECT count(*) FROM \(table) WHERE app <> 'default'"),
                    as: Int64.self
                )
                #expect(other == 0, "every \(table) row is the default app's")
            }
            let simulator = try APNsSimulator(configuration: SimulatorTests.configuration(), logger: TestDatabase.logger)
            try await simulator.withRunning { ports in
                let harness = PushHarness(url: url, simulator: simulator, ports: ports)
                try await harness.withDaemon {
                    try await harness.waitUntilAllSent(3)
                }
                #expect(Set(harness.acceptedCounts.keys) == [1, 2, 3], "the rows queued before the upgrade went out")
            }
        }
    }

    /// The same token in two apps is two devices once `migrate --contract` moved the keys of devices and invalid-token
    /// reports to (app, device_token). Before it (the release before apps may still run on the schema) this release
    /// refuses the token in a second app with nothing written, and a report of a token another app's report holds
    /// takes it over, as that release did. A release from before the contract migration then does not fit.
    @Test func theSameTokenInTwoAppsWaitsForTheContractMigration() async throws {
        try await TestDatabase.withEmptyDatabase { url in
            let all = try Migration.load(from: TestDatabase.migrationsDirectory)
            let contract = all.filter(\.isContract)
            #expect(!contract.isEmpty)
            let token = String(repeating: "ab", count: 32)
            let report = { (app: String) in
                PushQueue.InvalidToken(token: token, reportedAt: nil, source: "http2 410 Unregistered", app: app)
            }
            let beta = ProviderStore.Key(name: "beta-key", app: "beta", requestsPerMinute: 0, recipientsPerMinute: 0)
            try await TestDatabase.withConnection(url) { connection in
                _ = try await Migrator(connection: connection, migrations: all.filter { $0.version <= 8 }, logger: TestDatabase.logger)
                    .migrate()
                try await connection.query(
                    "INSERT INTO devices (device_token, registered_by) VALUES (\(token), 'old')",
                    logger: TestDatabase.logger
                )
                let migrator = Migrator(connection: connection, migrations: all, logger: TestDatabase.logger)
                let applied = try await migrator.migrate()
                #expect(applied.map(\.version) == all.filter { $0.version > 8 && !$0.isContract }.map(\.version))
                #expect(Migrator.Fit(try await migrator.status()) == .fits, "a pending contract migration holds no release back")
                try await connection.query(
                    """
                    INSERT INTO apps (name, bundle_id, environment, transport, certificate)
                    VALUES ('beta', 'com.example.Beta', 'sandbox', 'binary', '/nonexistent/beta.pem')
                    """,
                    logger: TestDatabase.logger
                )
            }
            try await Self.withStores(url) { store, queue in
                let refused = try await store.register(token: token, user: "mallory", clientInfo: nil, key: beta)
                #expect(refused == nil, "before the contract migration a token belongs to one app")
                try await queue.recordInvalidTokens([report("default")])
                try await queue.recordInvalidTokens([report("beta")])
            }
            let before = try await TestDatabase.scalar(
                url,
                "SELECT (SELECT string_agg(app || '/' || registered_by, ',') FROM devices) || '|' || (SELECT string_agg(app, ',') FROM invalid_tokens)",
                as: String.self
            )
            #expect(before == "default/old|beta", "the device untouched; beta's report took the token's report over")
            try await TestDatabase.withConnection(url) { connection in
                let migrator = Migrator(connection: connection, migrations: all, logger: TestDatabase.logger)
                let applied = try await migrator.migrate(contract: true)
                #expect(applied.map(\.version) == contract.map(\.version))
                let older = Migrator(connection: connection, migrations: all.filter { !$0.isContract }, logger: TestDatabase.logger)
                let fit = Migrator.Fit(try await older.status())
                #expect(fit == .removed(contract.map(\.fileName)), "a release from before it does not fit")
            }
            try await Self.withStores(url) { store, queue in
                let registered = try await store.register(token: token, user: "mallory", clientInfo: nil, key: beta)
                #expect(registered?.created == true, "the token in beta is a device of its own")
                try await queue.recordInvalidTokens([report("default"), report("beta")])
            }
            let after = try await TestDatabase.scalar(
                url,
                """
                SELECT (SELECT string_agg(app || '/' || registered_by, ',' ORDER BY app) FROM devices) || '|'
                    || (SELECT string_agg(app, ',' ORDER BY app) FROM invalid_tokens)
                """,
                as: String.self
            )
            #expect(after == "beta/beta-key,default/old|beta,default")
        }
    }

    /// notification.sent events kept as their push_history rows' ids (031 and the contract step 032): before the
    /// contract step the result statements write the events' text (the release before reads only that), after it the
    /// ids; the deliverer's claim gives both as the text POSTed, and the ids give the same text, byte for byte, as the
    /// events they replace (failed events stay text). A release from before 031 does not fit once 032 ran.
    @Test func sentEventsAreKeptAsIdsOnceTheContractStepRanAndPostTheSameText() async throws {
        try await TestDatabase.withEmptyDatabase { url in
            let all = try Migration.load(from: TestDatabase.migrationsDirectory)
            let contract = try #require(all.first { $0.fileName == "032_webhook_sent_ids_contract.sql" })
            // Rows offset + 1 and + 2 sent (the second's token needs escaping), + 3 failed, + 4 a chat row sent.
            let results = { (offset: Int) -> PostgresQuery in
                """
                INSERT INTO push_history (message_id, device_token, payload, time_sent, time_failed, last_status, last_error, attempts,
                                          notification_id, platform)
                SELECT \(offset) + n, CASE n WHEN 2 THEN 'to"ken' ELSE lpad(n::text, 64, '0') END, '{}',
                       CASE WHEN n <> 3 THEN timestamptz '2026-11-29 05:00:00.1234+00' + n * interval '1 ms' END,
                       CASE WHEN n = 3 THEN timestamptz '2026-11-29 05:00:01+00' END, CASE WHEN n = 3 THEN '400' END,
                       CASE WHEN n = 3 THEN 'BadDeviceToken' END, n,
                       CASE WHEN n <> 4 THEN 'a3bb189e-8bf9-3888-9912-ace4e6543002'::uuid END, CASE n WHEN 1 THEN 'fcm' ELSE 'apns' END
                FROM generate_series(1, 4) n
                """
            }
            try await TestDatabase.withConnection(url) { connection in
                let before = all.filter { $0.version < contract.version }
                _ = try await Migrator(connection: connection, migrations: before, logger: TestDatabase.logger).migrate()
                let migrator = Migrator(connection: connection, migrations: all, logger: TestDatabase.logger)
                #expect(!(try await migrator.migrate().contains { $0.version == contract.version }), "032 waits for migrate --contract")
                try await connection.query(
                    """
                    INSERT INTO webhooks (name, app, url, secret, events) VALUES ('w', 'default', 'https://hooks.example/w',
                        'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw', '{notification.sent,notification.failed,chat}')
                    """,
                    logger: TestDatabase.logger
                )
                try await connection.query(results(100), logger: TestDatabase.logger)
                #expect(try await migrator.migrate(contract: true).map(\.version) == [contract.version])
                let older = Migrator(connection: connection, migrations: all.filter { $0.version < 31 }, logger: TestDatabase.logger)
                #expect(Migrator.Fit(try await older.status()) == .removed([contract.fileName]))
                try await connection.query(results(200), logger: TestDatabase.logger)
            }
            let rows = try await TestDatabase.scalar(
                url,
                """
                SELECT string_agg(coalesce(sent_ids::text, 'text') || ':' || event_count, ' ' ORDER BY id) FROM webhook_outbox
                """,
                as: String.self
            )
            #expect(rows == "text:4 {201,202,204}:3 text:1", "before the contract step one row of text; after it the ids and the failure")
            // Each sent event written as text before the contract step, and the same row's event built from its id.
            let differing = try await TestDatabase.scalar(
                url,
                """
                SELECT count(*) FILTER (WHERE '[' || e::text || ']' IS DISTINCT FROM webhook_sent_events(ARRAY[(e -> 'data' ->> 'message_id')::int8]))
                       || '/' || count(*)
                FROM webhook_outbox o, json_array_elements(o.events::json) e
                WHERE o.events IS NOT NULL AND e ->> 'type' = 'notification.sent'
                """,
                as: String.self
            )
            #expect(differing == "0/3", "the three sent events of the text, built again from the ids")
            try await Self.withDatabase(url) { database in
                let posts = try await WebhookOutbox(database: database, logger: TestDatabase.logger)
                    .claim(webhook: 1, limit: 10, lease: .seconds(60))
                let ids = try posts.map { post in
                    let events = try #require(try JSONSerialization.jsonObject(with: Data(post.events.utf8)) as? [[String: Any]])
                    #expect(events.count == post.eventCount)
                    return events.compactMap { $0["id"] as? String }.joined(separator: ",")
                }
                #expect(
                    ids == [
                        "evt_101_sent,evt_102_sent,evt_103_failed,evt_104_sent", "evt_201_sent,evt_202_sent,evt_204_sent", "evt_203_failed",
                    ]
                )
                #expect(posts[1].events.contains(#""token":"to\"ken""#), "\(posts[1].events)")
            }
        }
    }

    /// A database client on `url`, for as long as `body` runs.
    static func withDatabase(_ url: DatabaseURL, _ body: (DatabaseClient) async throws -> Void) async throws {
        let database = DatabaseClient(url: url, applicationName: "pushchat-tests", keepOpen: false, logger: TestDatabase.logger)
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await database.run() }
            try await database.waitForPool()
            try await body(database)
            group.cancelAll()
        }
    }

    /// A provider store and a push queue on `url`, for as long as `body` runs.
    static func withStores(_ url: DatabaseURL, _ body: (ProviderStore, PushQueue) async throws -> Void) async throws {
        let database = DatabaseClient(url: url, applicationName: "pushchat-tests", keepOpen: false, logger: TestDatabase.logger)
        let client = Database.makeClient(url: url, applicationName: "pushchat-tests", keepOpen: false, logger: TestDatabase.logger)
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await database.run() }
            group.addTask { await client.run() }
            try await database.waitForPool()
            let queue = PushQueue(client: client, instance: "test:1", lease: .seconds(30), logger: TestDatabase.logger)
            try await body(ProviderStore(database: database, logger: TestDatabase.logger), queue)
            group.cancelAll()
        }
    }

    /// Migration 020 on a database that already holds payloads larger than any push service takes (written before
    /// the API checked FCM's whole message): the pending one fails with the reason, every such payload becomes '{}',
    /// so the constraints hold for every later update and move; a broadcast carrying one is canceled.
    @Test func thePayloadLimitMigrationFailsWhatCouldNeverBeSent() async throws {
        try await TestDatabase.withEmptyDatabase { url in
            let all = try Migration.load(from: TestDatabase.migrationsDirectory)
            try await TestDatabase.withConnection(url) { connection in
                _ = try await Migrator(connection: connection, migrations: all.filter { $0.version < 20 }, logger: TestDatabase.logger)
                    .migrate(contract: true)
                for statement: PostgresQuery in [
                    "INSERT INTO push_queue (device_token, payload, platform) VALUES (repeat('a', 150), repeat('x', 100000), 'fcm')",
                    "INSERT INTO push_queue (device_token, payload) VALUES (lpad('1', 64, '0'), '{\"aps\":{}}')",
                    "INSERT INTO push_history (message_id, device_token, payload, time_sent) VALUES (999, lpad('2', 64, '0'), repeat('y', 9000), now())",
                    """
                    INSERT INTO notifications (id, key_name, recipients, push_type, target_kind, payload, fcm_payload, expand_phase, expanded_at)
                    VALUES ('00000000-0000-0000-0000-000000000001', 'k', 5, 'alert', 'all', '{}', repeat('z', 6000), 'devices', NULL)
                    """,
                ] {
                    try await connection.query(statement, logger: TestDatabase.logger)
                }
                _ = try await Migrator(connection: connection, migrations: all, logger: TestDatabase.logger).migrate(contract: true)
            }
            let failed = try await TestDatabase.scalar(
                url,
                "SELECT concat_ws(' ', payload, time_failed IS NOT NULL, last_error) FROM push_queue WHERE platform = 'fcm'",
                as: String.self
            )
            #expect(failed == "{} t payload of 100000 bytes: more than any push service takes (5120)")
            #expect(
                try await TestDatabase.scalar(url, "SELECT count(*) FROM push_queue WHERE time_failed IS NULL", as: Int64.self) == 1,
                "the ordinary row is untouched"
            )
            #expect(try await TestDatabase.scalar(url, "SELECT payload FROM push_history", as: String.self) == "{}")
            #expect(
                try await TestDatabase.scalar(
                    url,
                    "SELECT concat_ws(' ', canceled_at IS NOT NULL, fcm_payload IS NULL) FROM notifications",
                    as: String.self
                ) == "t t"
            )
        }
    }

    @Test func aFailingMigrationRollsBackAndIsNotRecorded() async throws {
        let directory = NSTemporaryDirectory() + "pushchat-migrations-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        try "CREATE TABLE first_table (id int);".write(toFile: directory + "/001_first.sql", atomically: true, encoding: .utf8)
        try "CREATE TABLE half_done (id int);\nSELECT no_such_function();"
            .write(toFile: directory + "/002_broken.sql", atomically: true, encoding: .utf8)
        try await TestDatabase.withEmptyDatabase { url in
            try await TestDatabase.withConnection(url) { connection in
                let migrator = Migrator(
                    connection: connection,
                    migrations: try Migration.load(from: directory),
                    logger: TestDatabase.logger
                )
                let error = await #expect(throws: DatabaseError.self) { try await migrator.migrate() }
                #expect(error?.code == .migrationFailed)
                #expect(error?.description.contains("002_broken.sql") == true)
                #expect(error?.description.contains("no_such_function") == true)
            }
            let halfDone = try await TestDatabase.scalar(url, "SELECT to_regclass('half_done') IS NULL", as: Bool.self)
            #expect(halfDone, "the failed migration's statements are rolled back")
            let recorded = try await TestDatabase.scalar(
                url,
                "SELECT string_agg(version::text, ',') FROM schema_migrations",
                as: String.self
            )
            #expect(recorded == "1")
        }
    }

    @Test func badlyNamedFilesAreRefused() throws {
        let directory = NSTemporaryDirectory() + "pushchat-migrations-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        try "SELECT 1;".write(toFile: directory + "/initial.sql", atomically: true, encoding: .utf8)
        #expect(throws: DatabaseError.self) { try Migration.load(from: directory) }
    }

    @Test func queueingNotifiesOncePerStatementWithTheLowestMessageID() async throws {
        try await TestDatabase.withFreshDatabase { url in
            try await TestDatabase.withConnection(url) { listener in
                try await listener.listen(on: "push_queue") { notifications in
                    try await TestDatabase.withConnection(url) { writer in
                        try await writer.query(
                            "INSERT INTO push_queue (device_token, payload) SELECT md5(g::text) || md5(g::text), '{}' FROM generate_series(1, 50) g",
                            logger: TestDatabase.logger
                        )
                        try await writer.query(
                            "INSERT INTO push_queue (device_token, payload) VALUES ('t', '{}')",
                            logger: TestDatabase.logger
                        )
                        try await writer.query(
                            "INSERT INTO push_queue (device_token, payload) SELECT 't', '{}' WHERE false",
                            logger: TestDatabase.logger
                        )
                        // Delivered in commit order: the marker comes after every notification of the inserts.
                        try await writer.query("SELECT pg_notify('push_queue', 'end')", logger: TestDatabase.logger)
                    }
                    var payloads: [String] = []
                    for try await notification in notifications {
                        if notification.payload == "end" { break }
                        payloads.append(notification.payload)
                    }
                    #expect(
                        payloads == ["1", "51"],
                        "one NOTIFY per statement that queued rows, not per row, each with its lowest message id"
                    )
                }
            }
        }
    }
}

/// `body`'s result, or `nil` when it does not finish within `limit`.
func withDeadlineOrNil<T: Sendable>(_ limit: Duration, _ body: @escaping @Sendable () async throws -> T) async throws -> T? {
    do {
        return try await withDeadline(limit, body)
    } catch is DeadlineExceeded {
        return nil
    }
}
