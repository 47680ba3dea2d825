import APNs
package import Foundation
import Observability
import Settings
import Storage
import Support

/// The feedback job runs from cron and cannot be scraped, so it leaves its figures in a file in the Prometheus
/// text format (for node_exporter's textfile collector, or any scraper that reads files).
package enum FeedbackMetrics {
    /// The exposition of one run: `pushchat_feedback_tuples_read`, `…_users_deleted`, `…_users_kept`,
    /// `…_invalid_tokens_processed`, `…_truncated_bytes`, `…_success` (1 or 0), `…_duration_seconds` and
    /// `…_last_run_timestamp_seconds`.
    package static func exposition(report: FeedbackReport?, duration: Duration, finishedAt: Date) -> [UInt8] {
        let succeeded = report != nil
        let report = report ?? FeedbackReport()
        let figures: [(String, Double)] = [
            ("pushchat.feedback.tuples_read", Double(report.tuplesRead)),
            ("pushchat.feedback.users_deleted", Double(report.usersDeleted)),
            ("pushchat.feedback.users_kept", Double(report.usersKept)),
            ("pushchat.feedback.invalid_tokens_processed", Double(report.invalidTokensProcessed)),
            ("pushchat.feedback.truncated_bytes", Double(report.truncatedBytes)),
            ("pushchat.feedback.success", succeeded ? 1 : 0),
            ("pushchat.feedback.duration_seconds", duration.seconds),
            ("pushchat.feedback.last_run_timestamp_seconds", finishedAt.timeIntervalSince1970.rounded()),
        ]
        return TextfileMetrics.exposition(figures)
    }
}
