import Foundation
import PostgresNIO
import Testing

@testable import APNs
@testable import Settings
@testable import Simulator
@testable import Storage

/// Issue 31, item 4: rows the daemons are done with leave `push_queue` for `push_history` once the contract migration
/// says so; `push_deliveries` shows both; retention, retry and a notification's status read both.
@Suite(.serialized) struct PushHistoryTests {
    /// As upgraded: on every migration but 019 (the contract pending; `migrate` applies the expand ones after it) a
    /// running `pushchat-push` stamps rows in place, as the release before does; `migrate --contract` while it runs
    /// makes it move the rows it is done with from then on; `queue prune` moves what was stamped in place; a failed row
    /// retried goes back to `push_queue` and fails again once. Every good token reaches the gateway exactly once.
    /// Holds `schema_migrations` until a statement waits for it (the daemon asking whether rows move), then lets it
    /// through and waits until it was answered.
    static func waitForTheDaemonToAsk(_ url: DatabaseURL, _ harness: PushHarness) async throws {
        @Sendable func waiting() async throws -> Int64 {
            try await TestDatabase.scalar(
                url,
                """
                SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
                WHERE c.relname = 'schema_migrations' AND NOT l.granted
                """,
                as: Int64.self
            )
        }
        try await TestDatabase.withConnection(url) { holder in
            try await holder.query("BEGIN", logger: TestDatabase.logger)
            try await holder.query("LOCK TABLE schema_migrations IN ACCESS EXCLUSIVE MODE", logger: TestDatabase.logger)
            try await harness.waitUntil("the daemon asks whether rows move") { try await waiting() > 0 }
            try await holder.query("COMMIT", logger: TestDatabase.logger)
        }
        try await harness.waitUntil("its question is answered") { try await waiting() == 0 }
    }

    @Test func rowsMoveOnceTheContractMigrationRan() async throws {
        try await TestDatabase.withEmptyDatabase { url in
            let all = try Migration.load(from: TestDatabase.migrationsDirectory)
            try await TestDatabase.withConnection(url) { connection in
                _ = try await Migrator(
                    connection: connection,
                    migrations: all.filter { $0.version != PushHistory.contractVersion },
                    logger: TestDatabase.logger
                ).migrate()
            }
            let simulator = try APNsSimulator(configuration: SimulatorTests.configuration(), logger: TestDatabase.logger)
            try await simulator.withRunning { ports in
                let harness = PushHarness(url: url, simulator: simulator, ports: ports)
                @Sendable func table(_ name: String, _ condition: String = "true") async throws -> Int64 {
                    try await TestDatabase.scalar(
                        url,
                        PostgresQuery(unsafeSQL: "SELECT count(*) FROM \(name) WHERE \(condition)"),
                        as: Int64.self
                    )
                }
                try await harness.withDaemon {
                    try await harness.queue(3)
                    try await Self.queueBadToken(url)
                    try await harness.waitUntil("3 sent, 1 failed") { try await harness.sentAndFailed() == [3, 1] }
                    #expect(try await table("push_queue", "time_sent IS NOT NULL OR time_failed IS NOT NULL") == 4, "stamped in place")
                    #expect(try await table("push_history") == 0)

                    try await TestDatabase.withConnection(url) { connection in
                        let applied = try await Migrator(connection: connection, migrations: all, logger: TestDatabase.logger)
                            .migrate(contract: true)
                        #expect(applied.map(\.version) == [PushHistory.contractVersion])
                    }
                    // The daemon asks again every third of its lease (3 s here): the table it reads is held until its
                    // question waits on it, then let go, so the rows below are queued after it was answered.
                    try await Self.waitForTheDaemonToAsk(url, harness)
                    try await harness.queue(3, from: 4)
                    try await harness.waitUntil("6 sent") { try await harness.sentAndFailed() == [6, 1] }
                    #expect(try await table("push_history", "time_sent IS NOT NULL") == 3, "moved by the stamp")
                    #expect(try await table("push_queue", "time_sent IS NOT NULL") == 3, "the rows stamped before stay where they were")
                }
                try await QueueAdminTests.withAdmin(url) { (admin: QueueAdmin) async throws in
                    #expect(try await admin.prune(olderThan: .seconds(86_400)) == 0, "nothing is old")
                    #expect(try await admin.moveStampedRows() == 4)
                    #expect(try await admin.moveStampedRows() == 0)
                    let stats = try await admin.stats()
                    #expect(stats.sentLastHour == 6 && stats.pending == 0)
                    #expect(stats.failedByReason.map { "\($0.status) \($0.count)" } == ["invalid 1"])
                }
                #expect(try await table("push_queue") == 0)
                #expect(try await table("push_history") == 7)
                let statuses = try await TestDatabase.scalar(
                    url,
                    "SELECT string_agg(status || ' ' || n, ', ' ORDER BY status) FROM (SELECT status, count(*) n FROM push_deliveries GROUP BY 1) s",
                    as: String.self
                )
                #expect(statuses == "failed 1, sent 6")

                // Retried: back in push_queue, failed again by the daemon, moved again.
                #expect(try await QueueAdminTests.withAdmin(url) { try await $0.retryFailed(status: nil) } == 1)
                #expect(try await table("push_queue", "time_failed IS NULL AND attempts = 0") == 1)
                try await harness.withDaemon {
                    try await harness.waitUntil("the retried row failed again") { try await table("push_queue") == 0 }
                }
                #expect(try await table("push_history", "time_failed IS NOT NULL AND attempts = 1 AND last_status = 'invalid'") == 1)
                #expect(harness.acceptedCounts.values.sorted() == [1, 1, 1, 1, 1, 1], "each good token once")
            }
        }
    }

    /// A row whose token can never be sent: the daemon fails it without writing it.
    static func queueBadToken(_ url: DatabaseURL) async throws {
        try await TestDatabase.withConnection(url) { connection in
            try await connection.query("INSERT INTO push_queue (device_token, payload) VALUES ('abc', '{}')", logger: TestDatabase.logger)
        }
    }

    /// The daemon's statements once rows move: sent and failed rows (a deferral past the retry limit too) move with
    /// what they were stamped with, a deferral stays queued as `retrying`, and each statement repeated changes nothing.
    @Test func theStampsMoveRowsWithWhatTheyRecord() async throws {
        try await TestDatabase.withFreshDatabase { url in
            let client = Database.makeClient(url: url, applicationName: "history-test", keepOpen: false, logger: TestDatabase.logger)
            try await withThrowingDiscardingTaskGroup { group in
                group.addTask { await client.run() }
                defer { group.cancelAll() }
                let queue = PushQueue(client: client, instance: "test:1", lease: .seconds(30), logger: TestDatabase.logger)
                #expect(try await queue.refreshHistoryMode(), "a fresh database has the contract migration")
                try await TestDatabase.withConnection(url) { connection in
                    try await connection.query(
                        "INSERT INTO push_queue (device_token, payload, attempts) SELECT lpad(to_hex(g), 64, '0'), '{}', g FROM generate_series(1, 4) g",
                        logger: TestDatabase.logger
                    )
                }
                let ids = try await queue.claim(limit: 10).map(\.messageID)
                #expect(ids.count == 4)
                var results = PushQueue.Results()
                results.sent = [ids[0]]
                results.failed = [PushQueue.Failure(messageID: ids[1], status: "410", reason: "Unregistered")]
                results.deferred = [
                    PushQueue.Deferral(messageID: ids[2], delay: .seconds(60), status: "429", reason: "TooManyRequests"),
                    PushQueue.Deferral(messageID: ids[3], delay: .seconds(60), status: "503", reason: "ServiceUnavailable"),
                ]
                // ids[3] had 4 attempts before this claim (5 now): past a limit of 5.
                var limited = queue
                limited.retryLimit = PushQueue.RetryLimit(attempts: 5)
                #expect(try await limited.record(results) == 1, "one deferral was failed instead")
                #expect(try await limited.record(results) == 0, "repeated: nothing left to change")
                let rows = try await TestDatabase.scalar(
                    url,
                    """
                    SELECT string_agg(concat_ws('|', message_id, status, last_status, last_error, time_sent IS NOT NULL, time_failed IS NOT NULL),
                        ', ' ORDER BY message_id) FROM push_deliveries
                    """,
                    as: String.self
                )
                #expect(
                    rows
                        == "\(ids[0])|sent|t|f, \(ids[1])|failed|410|Unregistered|f|t, \(ids[2])|retrying|429|TooManyRequests|f|f, "
                        + "\(ids[3])|failed|503|gave up after 5 attempts: ServiceUnavailable|f|t"
                )
                #expect(
                    try await TestDatabase.scalar(url, "SELECT string_agg(message_id::text, ',') FROM push_queue", as: String.self)
                        == "\(ids[2])",
                    "only the deferred row stays in the queue"
                )
            }
        }
    }
}
