package import APNs
import Foundation
import Logging
package import PostgresNIO
package import Settings
import Support

/// Deletes users whose tokens APNs reported gone, following Apple's rule: only if the token was last registered
/// before the report. One statement (one transaction) per batch.
package struct FeedbackStore: Sendable {
    package static let batchSize = 10_000

    let client: PostgresClient
    let logger: Logger
    /// The app the chat API's users belong to: only its reports delete them.
    let chatApp: String

    package init(client: PostgresClient, logger: Logger, chatApp: String = App.defaultName) {
        self.client = client
        self.logger = logger
        self.chatApp = chatApp
    }

    /// `invalid_tokens.source` of a feedback-service tuple.
    package static let feedbackSource = "feedback service"

    /// What handling the pending reports did, for one source.
    package struct Counts: Sendable, Equatable {
        /// Reports handled.
        package var processed = 0
        /// Users deleted.
        package var deleted = 0
        /// Users kept because they registered the token again after the report.
        package var kept = 0
    }

    /// Every app (the feedback job reads the feedback service of each on the binary interface).
    package func apps() async throws -> [App] {
        let rows = try await client.query("SELECT \(unescaped: AppAdmin.columns) FROM apps ORDER BY name", logger: logger)
        var apps: [App] = []
        for try await row in rows { apps.append(try AppAdmin.decode(row)) }
        return apps
    }

    /// Stores feedback tuples as pending reports in `invalid_tokens` (one statement per batch; the newest report of
    /// a token wins and is handled again), so that they survive a database failure after the service sent them.
    package func record(_ tuples: [FeedbackTuple], app: String = App.defaultName) async throws {
        var start = 0
        while start < tuples.count {
            let reports = tuples[start..<min(start + Self.batchSize, tuples.count)].map {
                PushQueue.InvalidToken(
                    token: $0.tokenHex,
                    reportedAt: Date(timeIntervalSince1970: TimeInterval($0.timestamp)),
                    source: Self.feedbackSource,
                    app: app
                )
            }
            do {
                try await client.query(InvalidTokenUpsert.statement(reports, keyedByToken: false), logger: logger)
            } catch  where InvalidTokenUpsert.isOldKeyConflict(error) {
                try await client.query(InvalidTokenUpsert.statement(reports, keyedByToken: true), logger: logger)
            }
            start += Self.batchSize
        }
    }

    /// The pending reports as one statement saw them: each token with its app and its report's time (microseconds since
    /// 1970, exact where a `Date` would round), so that exactly these are handled and a report added or renewed
    /// meanwhile waits for the next run. What handling them would delete is counted per app, as `feedback_max_prune`
    /// applies per app.
    package struct PendingReports: Sendable, Equatable {
        /// Each report's app (a token is invalid for one app: only that app's devices go).
        package var apps: [String] = []
        package var tokens: [String] = []
        package var reportedAt: [Int64] = []
        /// By app: users handling its reports would delete (chat users and registered devices), and users with a
        /// token (for a `feedback_max_prune` given as a share).
        package var byApp: [String: AppCounts] = [:]

        package struct AppCounts: Sendable, Equatable {
            package var wouldDelete = 0
            package var usersWithToken = 0
        }

        /// Users handling every report would delete.
        package var wouldDelete: Int { byApp.values.reduce(0) { $0 + $1.wouldDelete } }

        /// The reports of `apps` only (the others stay pending).
        package func only(_ apps: Set<String>) -> PendingReports {
            var kept = PendingReports()
            for index in self.apps.indices where apps.contains(self.apps[index]) {
                kept.apps.append(self.apps[index])
                kept.tokens.append(tokens[index])
                kept.reportedAt.append(reportedAt[index])
            }
            kept.byApp = byApp.filter { apps.contains($0.key) }
            return kept
        }
    }

    /// The pending reports, by app what handling them would delete and how many users have a token: one snapshot
    /// (one statement), which ``applyInvalidTokens(_:)`` then handles and nothing else.
    package func pendingReports() async throws -> PendingReports {
        let rows = try await client.query(
            """
            WITH p AS (
                SELECT app, device_token, reported_at FROM invalid_tokens WHERE processed_at IS NULL
            )
            SELECT a.app,
                   (SELECT array_agg(device_token ORDER BY reported_at, device_token) FROM p WHERE p.app = a.app),
                   (SELECT array_agg((extract(epoch FROM reported_at) * 1000000)::bigint ORDER BY reported_at, device_token)
                    FROM p WHERE p.app = a.app),
                   (SELECT count(*) FROM active_users u JOIN p
                        ON p.app = a.app AND a.app = \(chatApp) AND u.device_token = p.device_token AND u.token_updated_at < p.reported_at)
                   + (SELECT count(*) FROM devices d JOIN p
                        ON p.app = a.app AND d.app = a.app AND d.device_token = p.device_token AND d.updated_at < p.reported_at),
                   (SELECT count(*) FROM active_users WHERE a.app = \(chatApp) AND device_token <> '0')
                   + (SELECT count(*) FROM devices d WHERE d.app = a.app)
            FROM (SELECT DISTINCT app FROM p) a ORDER BY a.app
            """,
            logger: logger
        )
        var pending = PendingReports()
        for try await (app, tokens, times, wouldDelete, withToken) in rows.decode((String, [String], [Int64], Int64, Int64).self) {
            pending.apps += Array(repeating: app, count: tokens.count)
            pending.tokens += tokens
            pending.reportedAt += times
            pending.byApp[app] = PendingReports.AppCounts(wouldDelete: Int(wouldDelete), usersWithToken: Int(withToken))
        }
        return pending
    }

    /// Handles the reports ``pendingReports()`` saw (feedback tuples and the push daemon's invalid tokens) by Apple's
    /// rule: a chat user or a registered device is deleted only if the token was last registered before the report.
    /// Marks them processed; one statement per batch. A report renewed since (another `reported_at`) is left pending.
    package func applyInvalidTokens(_ reports: PendingReports) async throws -> (feedback: Counts, daemon: Counts) {
        var feedback = Counts()
        var daemon = Counts()
        for start in stride(from: 0, to: reports.tokens.count, by: Self.batchSize) {
            let end = min(start + Self.batchSize, reports.tokens.count)
            let (apps, tokens, times) = (
                Array(reports.apps[start..<end]), Array(reports.tokens[start..<end]), Array(reports.reportedAt[start..<end])
            )
            let rows = try await client.query(
                """
                WITH pending AS (
                    SELECT i.app, i.device_token, i.reported_at, i.source = \(Self.feedbackSource) AS feedback
                    FROM invalid_tokens i JOIN unnest(\(apps)::text[], \(tokens)::text[], \(times)::bigint[]) AS c(app, device_token, micros)
                    ON i.app = c.app AND i.device_token = c.device_token AND (extract(epoch FROM i.reported_at) * 1000000)::bigint = c.micros
                    WHERE i.processed_at IS NULL
                    FOR UPDATE OF i SKIP LOCKED
                ), deleted AS (
                    DELETE FROM active_users u USING pending p
                    WHERE p.app = \(chatApp) AND u.device_token = p.device_token AND u.token_updated_at < p.reported_at
                    RETURNING p.feedback
                ), deleted_devices AS (
                    DELETE FROM devices d USING pending p
                    WHERE d.app = p.app AND d.device_token = p.device_token AND d.updated_at < p.reported_at
                    RETURNING p.feedback
                ), marked AS (
                    UPDATE invalid_tokens i SET processed_at = now() FROM pending p
                    WHERE i.app = p.app AND i.device_token = p.device_token
                    RETURNING p.feedback
                ), kept AS (
                    SELECT p.feedback FROM active_users u JOIN pending p
                    ON p.app = \(chatApp) AND u.device_token = p.device_token AND u.token_updated_at >= p.reported_at
                    UNION ALL
                    SELECT p.feedback FROM devices d JOIN pending p
                    ON d.app = p.app AND d.device_token = p.device_token AND d.updated_at >= p.reported_at
                ), gone AS (
                    SELECT feedback FROM deleted UNION ALL SELECT feedback FROM deleted_devices
                )
                SELECT (SELECT count(*) FROM marked WHERE feedback), (SELECT count(*) FROM marked WHERE NOT feedback),
                       (SELECT count(*) FROM gone WHERE feedback), (SELECT count(*) FROM gone WHERE NOT feedback),
                       (SELECT count(*) FROM kept WHERE feedback), (SELECT count(*) FROM kept WHERE NOT feedback)
                """,
                logger: logger
            )
            for try await (mf, md, df, dd, kf, kd) in rows.decode((Int64, Int64, Int64, Int64, Int64, Int64).self) {
                feedback.processed += Int(mf)
                daemon.processed += Int(md)
                feedback.deleted += Int(df)
                daemon.deleted += Int(dd)
                feedback.kept += Int(kf)
                daemon.kept += Int(kd)
            }
        }
        return (feedback, daemon)
    }
}
