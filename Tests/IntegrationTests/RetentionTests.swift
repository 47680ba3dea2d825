import Foundation
import PostgresNIO
import Testing

@testable import Settings
@testable import Storage
@testable import Support

/// The hourly prune job's retention: old messages, users that never got a token, handled invalid-token reports;
/// what is newer, or still pending, stays.
@Suite struct RetentionTests {
    /// `pushchat-api queue prune --older-than 7d`, as cron runs it; its output (it exited 0).
    static func prune(_ url: DatabaseURL) throws -> Executable.Result {
        let result = try Executable(name: "pushchat-api").run(
            ["queue", "prune", "--older-than", "7d", "development"],
            environment: ["PUSHCHAT_DATABASE_URL": url.connectionString, "PUSHCHAT_LOG_FILE": "-"]
        )
        #expect(result.status == 0, "\(result.standardError)")
        return result
    }

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
                    // Webhook POSTs: one past the retry window (3 days), one within it.
                    """
                    INSERT INTO webhooks (name, app, url, secret) VALUES ('r', 'default', 'https://hooks.example/r', 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw')
                    """,
                    """
                    INSERT INTO webhook_outbox (webhook_id, events, event_count, created_at)
                    SELECT id, '[{"id":"' || e || '"}]', 1, now() - CASE e WHEN 'old' THEN interval '4 days' ELSE interval '2 days' END
                    FROM webhooks, (VALUES ('old'), ('new')) v(e)
                    """,
                    // Browsers' subscriptions: A named by nothing for two hours (deleted), B named by nothing but
                    // registered just now, C by a chat user, D by a device, E by a row waiting to be sent (kept).
                    """
                    INSERT INTO web_subscriptions (device_token, endpoint, p256dh, auth, updated_at)
                    SELECT 'web_' || repeat(l, 43), 'https://push.example/' || l, repeat('P', 87), repeat('a', 22),
                           now() - CASE l WHEN 'B' THEN interval '1 minute' ELSE interval '2 hours' END
                    FROM (VALUES ('A'), ('B'), ('C'), ('D'), ('E')) v(l)
                    """,
                    """
                    INSERT INTO active_users (udid, device_token, nickname, secret_code, platform)
                    VALUES (repeat('4', 40), 'web_' || repeat('C', 43), 'browser', 'r', 'web')
                    """,
                    """
                    INSERT INTO devices (app, device_token, registered_by, platform) VALUES ('default', 'web_' || repeat('D', 43), 'k', 'web')
                    """,
                    """
                    INSERT INTO push_queue (platform, device_token, payload) VALUES ('web', 'web_' || repeat('E', 43), '{}')
                    """,
                ] {
                    try await connection.query(PostgresQuery(unsafeSQL: sql), logger: TestDatabase.logger)
                }
            }
            let result = try Self.prune(url)
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
            #expect(left == "new|2,3,4|t2,t3")
            #expect(
                result.standardOutput.contains("1 browser subscriptions no device or chat user names deleted"),
                "\(result.standardOutput)"
            )
            #expect(
                try await TestDatabase.scalar(
                    url,
                    "SELECT string_agg(left(endpoint, 22), ',' ORDER BY endpoint) FROM web_subscriptions",
                    as: String.self
                )
                    == "https://push.example/B,https://push.example/C,https://push.example/D,https://push.example/E"
            )
            #expect(result.standardOutput.contains("1 webhook POSTs past the retry window (3d) deleted"), "\(result.standardOutput)")
            #expect(
                try await TestDatabase.scalar(url, "SELECT string_agg(events, ',') FROM webhook_outbox", as: String.self)
                    == #"[{"id":"new"}]"#
            )
        }
    }

    /// A waiting webhook POST of notification.sent events names push_history rows (its events are built from them when
    /// it goes): the prune keeps them, and every row after the first it names, until the POST is gone; a POST past
    /// the retry window goes first and keeps nothing.
    @Test func theRowsAWaitingWebhookPostNamesStayUntilItGoes() async throws {
        try await TestDatabase.withFreshDatabase { url in
            try await TestDatabase.withConnection(url) { connection in
                for sql in [
                    """
                    INSERT INTO push_history (message_id, device_token, payload, time_sent)
                    SELECT g, lpad(g::text, 64, '0'), '{}', now() - interval '10 days' FROM unnest('{1001,1002,1003,2001,2002}'::int8[]) g
                    """,
                    """
                    INSERT INTO webhooks (name, app, url, secret, events)
                    VALUES ('r', 'default', 'https://hooks.example/r', 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw', '{notification.sent}')
                    """,
                    """
                    INSERT INTO webhook_outbox (webhook_id, sent_ids, event_count, created_at)
                    SELECT id, ids, cardinality(ids), now() - age FROM webhooks,
                        (VALUES ('{1002,2001}'::int8[], interval '2 days'), ('{1001}', interval '4 days')) v(ids, age)
                    """,
                ] {
                    try await connection.query(PostgresQuery(unsafeSQL: sql), logger: TestDatabase.logger)
                }
            }
            let history: PostgresQuery = "SELECT coalesce(string_agg(message_id::text, ',' ORDER BY message_id), '') FROM push_history"
            let first = try Self.prune(url)
            #expect(first.standardOutput.contains("1 webhook POSTs past the retry window (3d) deleted"), "\(first.standardOutput)")
            #expect(first.standardOutput.contains("1 rows older than 7d deleted"), "\(first.standardOutput)")
            #expect(try await TestDatabase.scalar(url, history, as: String.self) == "1002,1003,2001,2002")
            let events = try await TestDatabase.scalar(url, "SELECT webhook_sent_events(sent_ids) FROM webhook_outbox", as: String.self)
            #expect(events.contains(#""id":"evt_1002_sent""#) && events.contains(#""id":"evt_2001_sent""#), "\(events)")
            // Delivered: the rows go with the next prune.
            try await TestDatabase.withConnection(url) { connection in
                try await connection.query("DELETE FROM webhook_outbox", logger: TestDatabase.logger)
            }
            let second = try Self.prune(url)
            #expect(second.standardOutput.contains("4 rows older than 7d deleted"), "\(second.standardOutput)")
            #expect(try await TestDatabase.scalar(url, history, as: String.self) == "")
        }
    }

    /// `--metrics-file`: the run's figures for node_exporter (the prune-stale alert), written whole and readable by
    /// all; a run that fails writes `success 0` and exits non-zero.
    @Test func thePruneJobWritesItsFiguresForTheTextfileCollector() async throws {
        let directory = NSTemporaryDirectory() + "pushchat-prune-metrics-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        ServiceUser.own(directory)  // as the unit's ReadWritePaths= gives it the metrics folder
        let file = directory + "/pushchat_prune.prom"
        try await TestDatabase.withFreshDatabase { url in
            try await TestDatabase.withConnection(url) { connection in
                try await connection.query(
                    """
                    INSERT INTO messages (secret_code, sender_udid, sender_name, text, created_at) VALUES
                    ('r', 'a', 'Ann', 'old', now() - interval '40 days'), ('r', 'a', 'Ann', 'older', now() - interval '50 days')
                    """,
                    logger: TestDatabase.logger
                )
            }
            let environment = ["PUSHCHAT_DATABASE_URL": url.connectionString, "PUSHCHAT_LOG_FILE": "-"]
            let prune = Executable(name: "pushchat-api")
            let ran = try prune.run(
                ["queue", "prune", "--older-than", "7d", "development", "--metrics-file", file],
                environment: environment
            )
            #expect(ran.status == 0, "\(ran.standardError)")
            let scrape = Scrape(try String(contentsOfFile: file, encoding: .utf8))
            #expect(scrape["pushchat_prune_success"] == 1)
            #expect(scrape["pushchat_prune_rows_deleted"] == 2)
            #expect(scrape.number("pushchat_prune_last_run_timestamp_seconds") >= Date().timeIntervalSince1970 - 60)
            #expect(scrape["process_resident_memory_bytes"] == nil, "only the job's figures: node_exporter exports its own")
            let mode = try FileManager.default.attributesOfItem(atPath: file)[.posixPermissions] as? Int
            #expect(mode == 0o644)
            #expect(try FileManager.default.contentsOfDirectory(atPath: directory) == ["pushchat_prune.prom"], "no temporary left")
            var unreachable = environment
            unreachable["PUSHCHAT_DATABASE_URL"] = "postgres://nobody@127.0.0.1:1/none"
            let failed = try prune.run(
                ["queue", "prune", "--older-than", "7d", "development", "--metrics-file", file],
                environment: unreachable
            )
            #expect(failed.status != 0)
            #expect(Scrape(try String(contentsOfFile: file, encoding: .utf8))["pushchat_prune_success"] == 0)
        }
    }

    /// Provider notifications go once they are past the age and every queue row of theirs is gone (rows sent past
    /// the age are pruned first, in the same run); idempotency keys after their 24 hours, whatever the age asked.
    @Test func providerNotificationsWithoutRowsAndIdempotencyKeysPastADayArePruned() async throws {
        try await TestDatabase.withFreshDatabase { url in
            try await TestDatabase.withConnection(url) { connection in
                for sql in [
                    """
                    INSERT INTO notifications (id, key_name, recipients, push_type, created_at) VALUES
                    ('00000000-0000-0000-0000-000000000001', 'k', 0, 'alert', now() - interval '40 days'),
                    ('00000000-0000-0000-0000-000000000002', 'k', 1, 'alert', now() - interval '40 days'),
                    ('00000000-0000-0000-0000-000000000003', 'k', 0, 'alert', now() - interval '1 day'),
                    ('00000000-0000-0000-0000-000000000004', 'k', 1, 'alert', now() - interval '40 days')
                    """,
                    """
                    INSERT INTO push_queue (device_token, payload, notification_id, time_queued, time_sent) VALUES
                    (repeat('ab', 32), '{}', '00000000-0000-0000-0000-000000000002', now() - interval '40 days', NULL),
                    (repeat('cd', 32), '{}', '00000000-0000-0000-0000-000000000004', now() - interval '40 days',
                     now() - interval '40 days')
                    """,
                    """
                    INSERT INTO idempotency_keys (key_name, idempotency_key, notification_id, request_hash, created_at) VALUES
                    ('k', 'old', '00000000-0000-0000-0000-000000000001', 'h', now() - interval '25 hours'),
                    ('k', 'new', '00000000-0000-0000-0000-000000000003', 'h', now() - interval '23 hours')
                    """,
                ] {
                    try await connection.query(PostgresQuery(unsafeSQL: sql), logger: TestDatabase.logger)
                }
            }
            let result = try Self.prune(url)
            #expect(
                result.standardOutput.contains("2 provider notifications older than 7d and 1 idempotency keys past 24 h deleted"),
                "\(result.standardOutput)"
            )
            let left = try await TestDatabase.scalar(
                url,
                """
                SELECT (SELECT string_agg(right(id::text, 1), ',' ORDER BY id) FROM notifications) || '|'
                    || (SELECT string_agg(idempotency_key, ',') FROM idempotency_keys) || '|'
                    || (SELECT count(*) FROM push_deliveries)
                """,
                as: String.self
            )
            #expect(left == "2,3|new|1", "the one with a pending row and the recent one stay; the sent row was pruned")
        }
    }
}
