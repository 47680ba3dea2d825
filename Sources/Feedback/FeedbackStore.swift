import Foundation
import Logging
import PostgresNIO
import Shared

/// Deletes users whose tokens APNs reported gone, following Apple's rule: only if the token was last registered
/// before the report. One statement (one transaction) per batch.
public struct FeedbackStore: Sendable {
    public static let batchSize = 10_000

    let client: PostgresClient
    let logger: Logger

    public init(client: PostgresClient, logger: Logger) {
        self.client = client
        self.logger = logger
    }

    /// Applies feedback tuples; returns (deleted, kept because re-registered).
    public func apply(_ tuples: [FeedbackTuple]) async throws -> (deleted: Int, kept: Int) {
        var deleted = 0
        var kept = 0
        var start = 0
        while start < tuples.count {
            let batch = tuples[start..<min(start + Self.batchSize, tuples.count)]
            let tokens = batch.map(\.tokenHex)
            let times = batch.map { Date(timeIntervalSince1970: TimeInterval($0.timestamp)) }
            let rows = try await client.query(
                """
                WITH reports AS (
                    SELECT lower(t) AS token, max(r) AS reported_at FROM unnest(\(tokens)::text[], \(times)::timestamptz[]) AS x(t, r)
                    GROUP BY lower(t)
                ), deleted AS (
                    DELETE FROM active_users u USING reports r
                    WHERE u.device_token = r.token AND u.token_updated_at < r.reported_at
                    RETURNING 1
                )
                SELECT (SELECT count(*) FROM deleted),
                       (SELECT count(*) FROM active_users u JOIN reports r ON u.device_token = r.token AND u.token_updated_at >= r.reported_at)
                """,
                logger: logger
            )
            for try await (d, k) in rows.decode((Int64, Int64).self) {
                deleted += Int(d)
                kept += Int(k)
            }
            start += Self.batchSize
        }
        return (deleted, kept)
    }

    /// Handles the push daemon's pending invalid-token reports the same way and marks them processed;
    /// returns (reports processed, deleted, kept).
    public func applyInvalidTokens() async throws -> (processed: Int, deleted: Int, kept: Int) {
        var total = (processed: 0, deleted: 0, kept: 0)
        while true {
            let rows = try await client.query(
                """
                WITH pending AS (
                    SELECT device_token, reported_at FROM invalid_tokens WHERE processed_at IS NULL
                    ORDER BY reported_at LIMIT \(Self.batchSize) FOR UPDATE SKIP LOCKED
                ), deleted AS (
                    DELETE FROM active_users u USING pending p
                    WHERE u.device_token = p.device_token AND u.token_updated_at < p.reported_at
                    RETURNING 1
                ), marked AS (
                    UPDATE invalid_tokens i SET processed_at = now() FROM pending p
                    WHERE i.device_token = p.device_token
                    RETURNING 1
                )
                SELECT (SELECT count(*) FROM marked), (SELECT count(*) FROM deleted),
                       (SELECT count(*) FROM active_users u JOIN pending p ON u.device_token = p.device_token AND u.token_updated_at >= p.reported_at)
                """,
                logger: logger
            )
            var processed = 0
            for try await (p, d, k) in rows.decode((Int64, Int64, Int64).self) {
                processed = Int(p)
                total.processed += Int(p)
                total.deleted += Int(d)
                total.kept += Int(k)
            }
            if processed < Self.batchSize { return total }
        }
    }
}
