import Foundation
import HTTPTypes
import HummingbirdTesting
import Logging
import PostgresNIO
import Testing

@testable import API
@testable import Settings
@testable import Storage
@testable import Support

/// An operator's psql session holding a lock: every session gives up after `lock_timeout` instead of waiting behind
/// it, and migrate lets go, waits and tries again.
@Suite(.serialized) struct LockTimeoutTests {
    /// Runs `body` while another session holds `lock` in an open transaction.
    static func whileLocked<T: Sendable>(
        _ url: DatabaseURL,
        _ lock: String,
        _ body: @Sendable () async throws -> T
    ) async throws -> T {
        try await TestDatabase.withConnection(url) { holder in
            try await holder.query("BEGIN", logger: TestDatabase.logger)
            try await holder.query(PostgresQuery(unsafeSQL: lock), logger: TestDatabase.logger)
            do {
                let result = try await body()
                try await holder.query("ROLLBACK", logger: TestDatabase.logger)
                return result
            } catch {
                _ = try? await holder.query("ROLLBACK", logger: TestDatabase.logger)
                throw error
            }
        }
    }

    @Test func aRequestBehindALockedTableFailsFastAndWritesNothing() async throws {
        try await TestDatabase.withFreshDatabase { url in
            var configuration = APIHarness.configuration(url: TestDatabase.service(url), mode: .development)
            configuration.databaseURL.lockTimeout = .milliseconds(300)
            try await APIHarness.run(configuration: configuration, databaseTimeout: .seconds(10), ownerURL: url) { api in
                let (status, elapsed) = try await Self.whileLocked(url, "LOCK TABLE active_users IN ACCESS EXCLUSIVE MODE") {
                    let start = ContinuousClock.now
                    let response = try await api.post(["cmd": "join", "udid": Device.udid(1), "token": "0", "name": "Ann", "code": "c"])
                    return (response.status.code, start.duration(to: .now))
                }
                #expect(status == 503, "lock_timeout (nothing written, try again), not the 10 s request deadline")
                #expect(elapsed < .seconds(5))
                #expect(try await api.count("active_users") == 0)
                let after = try await api.post(["cmd": "join", "udid": Device.udid(1), "token": "0", "name": "Ann", "code": "c"])
                // postgres-nio keeps a failed preparation for the connection: the store closes it, so this works.
                #expect(after.status == .ok, "the lock is gone: served again (\(after.text))")
            }
        }
    }

    @Test func migrateWaitsOutALockAndFinishes() async throws {
        try await TestDatabase.withEmptyDatabase { url in
            let migrations = try Migration.load(from: TestDatabase.migrationsDirectory)
            // Everything but the last migration (which alters tables the operator's session below holds locked).
            try await TestDatabase.withConnection(url) { connection in
                try await Migrator(connection: connection, migrations: Array(migrations.dropLast()), logger: TestDatabase.logger).migrate()
            }
            let last = try #require(migrations.last)
            let start = ContinuousClock.now
            try await TestDatabase.withConnection(url) { holder in
                try await holder.query("BEGIN", logger: TestDatabase.logger)
                try await holder.query(
                    "LOCK TABLE messages, push_queue, api_keys, devices, invalid_tokens IN ACCESS EXCLUSIVE MODE",
                    logger: TestDatabase.logger
                )
                // Release it after a while, as an operator finishing in psql would.
                async let release: Void = {
                    try await Task.sleep(for: .milliseconds(1500))
                    try await holder.query("ROLLBACK", logger: TestDatabase.logger)
                }()
                try await TestDatabase.withConnection(url) { connection in
                    let migrator = Migrator(
                        connection: connection,
                        migrations: migrations,
                        lockTimeout: .milliseconds(200),
                        logger: TestDatabase.logger
                    )
                    let applied = try await migrator.migrate(contract: true)
                    #expect(applied.map(\.version) == [last.version])
                }
                try await release
            }
            #expect(ContinuousClock.now - start >= .milliseconds(1400), "it waited for the lock to go")
            let indexes = try await TestDatabase.scalar(
                url,
                "SELECT count(*) FROM pg_indexes WHERE indexname IN ('messages_created_at_idx', 'active_users_tokenless_idx', 'invalid_tokens_processed_idx')",
                as: Int64.self
            )
            #expect(indexes == 3)
        }
    }
}
