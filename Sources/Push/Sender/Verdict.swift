import APNs
import Foundation

/// One row's answer and what it means.
struct Answer: Sendable {
    var row: QueuedNotification
    var verdict: Verdict

    init(_ row: QueuedNotification, _ verdict: Verdict) {
        self.row = row
        self.verdict = verdict
    }
}

/// What an answer means for its row: every destination classifies its answers into these, and ``SenderDriver``
/// records each the same way (see `record(_:)`).
enum Verdict: Sendable, Equatable {
    /// Accepted.
    case sent
    /// Send again at once, before anything new (a refreshed provider token; a gateway's processing error, with the
    /// row's retries counted when `countsAsRetry`).
    case again(reason: String, countsAsRetry: Bool)
    /// Send again after `after`, keeping the answer in the row (HTTP/2 429 and 5xx); with `growing`, `after` doubles
    /// with each attempt the row has had (exponential backoff, when the far end gave no `Retry-After`).
    case retryLater(after: Duration, status: String, reason: String, growing: Bool = false)
    /// Failed for good.
    case failed(Failure)
    /// The destination says the token is no longer valid: failed, and the token recorded for the feedback job with
    /// the destination's timestamp (`since`; nil: the database's clock).
    case unregistered(status: String, reason: String, since: Date?, source: String)
    /// The destination refused our credentials: the row stays queued (retried after a minute), and the operator is told.
    case credentialsRefused(status: String, reason: String, message: String)

    /// A failure as the row records it.
    struct Failure: Sendable, Equatable {
        /// `last_status`: `8`, `400`, `invalid`.
        var status: String
        /// `last_error`.
        var reason: String
        /// The `reason` label of `pushchat_push_failed_total`.
        var kind: String
        /// The token is not valid for this topic and environment (counted for the wrong-environment alarm; the user
        /// is kept).
        var wrongEnvironment = false
    }
}
