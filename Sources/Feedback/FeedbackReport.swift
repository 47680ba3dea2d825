package import Support

/// What one run of the feedback job did: the one-line summary operators see in cron mail and the log.
package struct FeedbackReport: Sendable, Equatable, CustomStringConvertible {
    /// False with the HTTP/2 transport: there is no feedback service, only the push daemon's reports.
    package var serviceRead = true
    /// Tuples read from the feedback service.
    package var tuplesRead = 0
    /// Bytes at the end of the stream that did not make a whole tuple (the service closed mid-tuple).
    package var truncatedBytes = 0
    /// The service closed without TLS close_notify (its whole tuples were processed).
    package var uncleanShutdown = false
    /// Users deleted because of the feedback service.
    package var deletedByFeedback = 0
    /// Users kept although the feedback service named their token: they registered it again afterwards.
    package var keptByFeedback = 0
    /// Reports of invalid tokens recorded by the push daemon (binary status 8, HTTP/2 410/400) handled in this run.
    package var invalidTokensProcessed = 0
    package var deletedByInvalidTokens = 0
    package var keptByInvalidTokens = 0

    package init() {}

    package var usersDeleted: Int { deletedByFeedback + deletedByInvalidTokens }
    package var usersKept: Int { keptByFeedback + keptByInvalidTokens }

    package var description: String {
        guard serviceRead else {
            return "Feedback: no feedback service (HTTP/2), \(usersDeleted) users deleted, \(usersKept) kept because re-registered"
                + " (invalid tokens from the push daemon: \(invalidTokensProcessed) processed)"
        }
        var text = "Feedback: \(tuplesRead) tuples read, \(usersDeleted) users deleted, \(usersKept) kept because re-registered"
        text += " (feedback service: \(deletedByFeedback) deleted, \(keptByFeedback) kept;"
        text +=
            " invalid tokens from the push daemon: \(invalidTokensProcessed) processed, \(deletedByInvalidTokens) deleted, \(keptByInvalidTokens) kept)"
        if truncatedBytes > 0 { text += "; ignored a truncated last tuple (\(truncatedBytes) bytes)" }
        if uncleanShutdown { text += "; the service closed without TLS close_notify" }
        return text
    }
}

/// Why a run failed; the job exits non-zero with this one line.
package struct FeedbackError: PushChatError {
    package typealias Code = ErrorCode<FeedbackError>
    package let code: Code
    package let reason: String
    package init(code: Code, reason: String) {
        self.code = code
        self.reason = reason
    }
    package var description: String { reason }
}

extension ErrorCode where Domain == FeedbackError {
    /// The database could not be reached or failed (nothing is lost: reports stay pending).
    package static let database = Self("database")
    /// The feedback service could not be reached, failed TLS, or sent no tuples in time.
    package static let service = Self("service")
    /// The feedback service sent bytes that are not tuples.
    package static let malformedData = Self("malformedData")
    /// More deletions than `feedback_max_prune` allows, without `--force`.
    package static let tooManyDeletions = Self("tooManyDeletions")
}
