import Foundation
import PostgresNIO
import Testing

@testable import Settings
@testable import Storage
@testable import Support

/// The hourly prune job's retention: old messages, users that never got a token, handled invalid-token reports;
/// what is newer, or still pending, stays.
@Suite struct RetentionTests {
    @Test func thePruneJobDeletesWhatIsPastItsRetentionAndNothingElse() async throws {
        try await TestDatabase.withFreshDatabase { url in
            try await TestDatabase.withConnection(url) { connection in
                for sql in [
                    """
                    INSERT INTO messages (secret_code, sender_udid, sender_name, text, created_at) VALUES
                    ('r', 'a', 'Ann', 'old', now() - interval '40 days'), ('r', 'a', 'Ann', 'new', now() - interval '1 day')
                    """,
                    """
                    INSERT INTO active_users (udid, device_token, nickname, secret_code, token_updated_at) VALUES
                    (repeat('1', 40), '0', 'never got a token', 'r', now() - interval '40 days'),
                    (repeat('2', 40), '0', 'just joined', 'r', now()),
                    (repeat('3', 40), repeat('ab', 32), 'has a token', 'r', now() - interval '400 days')
                    """,
                    """
                    INSERT INTO invalid_tokens (device_token, reported_at, source, processed_at) VALUES
                    ('t1', now() - interval '50 days', 'x', now() - interval '40 days'),
                    ('t2', now() - interval '50 days', 'x', NULL),
                    ('t3', now(), 'x', now())
                    """,
                ] {
                    try await connection.query(PostgresQuery(unsafeSQL: sql), logger: TestDatabase.logger)
                }
            }
            let result = try await Executable(name: "pushchat-api").run(
                ["queue", "prune", "--older-than", "7d", "development"],
                environment: ["PUSHCHAT_DATABASE_URL": url.connectionString, "PUSHCHAT_LOG_FILE": "-"]
            )
            #expect(result.status == 0, "\(result.standardError)")
            #expect(
                result.standardOutput.contains(
                    "retention: 1 messages older than 30d, 1 users without a token after 30d, 1 handled invalid-token reports older than 30d deleted"
                ),
                "\(result.standardOutput)"
            )
            let left = try await TestDatabase.scalar(
                url,
                """
                SELECT (SELECT string_agg(text, ',') FROM messages) || '|'
                    || (SELECT string_agg(left(udid, 1), ',' ORDER BY udid) FROM active_users)
                    || '|' || (SELECT string_agg(device_token, ',' ORDER BY device_token) FROM invalid_tokens)
                """,
                as: String.self
            )
            #expect(left == "new|2,3|t2,t3")
        }
    }
}
