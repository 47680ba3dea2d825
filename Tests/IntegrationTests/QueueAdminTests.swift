import Foundation
import PostgresNIO
import Testing

@testable import API
@testable import APNs
@testable import Observability
@testable import Settings
@testable import Storage
@testable import Support

/// `pushchat-api queue …` and `pushchat-api push` against a real database.
@Suite struct QueueAdminTests {
    static func seed(_ url: DatabaseURL) async throws {
        try await TestDatabase.withConnection(url) { connection in
            try await connection.query(
                """
                INSERT INTO push_queue (device_token, payload, time_queued, time_sent, time_failed, last_status, last_error) VALUES
                    (repeat('a', 64), '{}', now() - interval '10 days', now() - interval '10 days', NULL, NULL, NULL),
                    (repeat('b', 64), '{}', now() - interval '10 min', now() - interval '10 min', NULL, NULL, NULL),
                    (repeat('c', 64), '{}', now() - interval '9 days', NULL, now() - interval '9 days', '8', 'invalid token'),
                    (repeat('d', 64), '{}', now() - interval '1 hour', NULL, now() - interval '1 hour', '8', 'invalid token'),
                    (repeat('e', 64), '{}', now() - interval '1 hour', NULL, now() - interval '1 hour', 'invalid', 'device token is not 64 hex digits'),
                    (repeat('f', 64), '{}', now() - interval '5 min', NULL, NULL, NULL, NULL)
                """,
                logger: TestDatabase.logger
            )
        }
    }

    static func withAdmin<T: Sendable>(_ url: DatabaseURL, _ body: (QueueAdmin) async throws -> T) async throws -> T {
        try await TestDatabase.withConnection(url) { connection in
            try await body(QueueAdmin(connection: connection, logger: TestDatabase.logger))
        }
    }

    @Test func stats() async throws {
        try await TestDatabase.withFreshDatabase { url in
            try await Self.seed(url)
            let stats = try await Self.withAdmin(url) { try await $0.stats() }
            #expect(stats.pending == 1)
            #expect(stats.sentLastHour == 1)
            #expect(stats.oldestPending.map { abs($0.timeIntervalSinceNow + 300) < 60 } == true)
            #expect(stats.failedByReason.map { "\($0.status) \($0.count)" } == ["8 2", "invalid 1"])
        }
    }

    @Test func retryFailedByReasonRequeuesAndWakesTheDaemon() async throws {
        try await TestDatabase.withFreshDatabase { url in
            try await Self.seed(url)
            try await TestDatabase.withConnection(url) { listener in
                try await listener.listen(on: "push_queue") { notifications in
                    let retried = try await Self.withAdmin(url) { try await $0.retryFailed(status: "8") }
                    #expect(retried == 2)
                    var iterator = notifications.makeAsyncIterator()
                    #expect(try await iterator.next() != nil, "the daemons are woken")
                }
            }
            let stats = try await Self.withAdmin(url) { try await $0.stats() }
            #expect(stats.pending == 3)
            #expect(stats.failedByReason.map(\.status) == ["invalid"])
            #expect(try await Self.withAdmin(url) { try await $0.retryFailed(status: nil) } == 1)
        }
    }

    @Test func pruneDeletesOnlyOldSentAndFailedRowsInBatches() async throws {
        try await TestDatabase.withFreshDatabase { url in
            try await Self.seed(url)
            try await TestDatabase.withConnection(url) { connection in
                try await connection.query(
                    """
                    INSERT INTO push_queue (device_token, payload, time_queued, time_sent)
                    SELECT repeat('0', 64), '{}', now() - interval '30 days', now() - interval '30 days' FROM generate_series(1, \(QueueAdmin.pruneBatch + 5))
                    """,
                    logger: TestDatabase.logger
                )
            }
            let deleted = try await Self.withAdmin(url) { try await $0.prune(olderThan: .seconds(7 * 86_400)) }
            #expect(deleted == QueueAdmin.pruneBatch + 5 + 2)
            let left = try await TestDatabase.scalar(
                url,
                "SELECT string_agg(left(device_token, 1), '' ORDER BY message_id) FROM push_deliveries",
                as: String.self
            )
            #expect(left == "bdef")
        }
    }

    @Test func commandLine() async throws {
        try await TestDatabase.withFreshDatabase { url in
            let api = Executable(name: "pushchat-api")
            let environment = ["PUSHCHAT_DATABASE_URL": url.connectionString]
            let token = String(repeating: "AB", count: 32)
            let pushed = try api.run(["push", token, "Hello from the command line", "development"], environment: environment)
            #expect(pushed.status == 0, "\(pushed.standardError)")
            #expect(pushed.standardOutput.hasPrefix("queued message "))
            let payload = try await TestDatabase.scalar(url, "SELECT device_token || ' ' || payload FROM push_deliveries", as: String.self)
            #expect(payload == token.lowercased() + #" {"aps":{"alert":"Hello from the command line","sound":"default"}}"#)
            let stats = try api.run(["queue", "stats", "development"], environment: environment)
            #expect(stats.standardOutput.hasPrefix("pending:         1 (0 in flight)"))
            let bad = try api.run(["push", "123", "hi", "development"], environment: environment)
            #expect(bad.status != 0)
            #expect(bad.standardError.contains("TOKEN: expected 64 hex digits"))
            let badAge = try api.run(["queue", "prune", "--older-than", "soon", "development"], environment: environment)
            #expect(badAge.status != 0)
            #expect(badAge.standardError.contains("--older-than"))
            #expect(
                try await TestDatabase.scalar(url, "SELECT count(*) FROM push_deliveries", as: Int64.self) == 1,
                "bad input writes nothing"
            )
        }
    }
}
