/// When a POST that failed (any status but 2xx, a timeout, a refused connection) is tried again: exponential backoff
/// with jitter, from 10 s doubling to at most 6 h, for as long as the retry window (3 days by default); past it the
/// webhook is disabled and says why.
package struct WebhookRetry: Sendable, Equatable {
    package var first: Duration = .seconds(10)
    package var maximum: Duration = .seconds(6 * 3600)
    /// How long events are retried before the webhook is disabled.
    package var window: Duration = .seconds(3 * 24 * 3600)

    package init(first: Duration = .seconds(10), maximum: Duration = .seconds(6 * 3600), window: Duration = .seconds(3 * 24 * 3600)) {
        self.first = first
        self.maximum = maximum
        self.window = window
    }

    /// The wait after the `attempt`th failed attempt (1…): between half and all of `first × 2^(attempt−1)` (capped at
    /// `maximum`), `jitter` in 0…1 choosing where, so receivers coming back are not hit by every sender at once.
    package func delay(afterAttempt attempt: Int, jitter: Double) -> Duration {
        precondition(attempt >= 1, "attempts count from 1")
        let doublings = min(attempt - 1, 40)
        let full = min(first * (1 << doublings), maximum)
        return full * (0.5 + 0.5 * min(max(jitter, 0), 1))
    }

    /// Whether an event first tried `since` ago is still retried, or its webhook is disabled.
    package func givesUp(after since: Duration) -> Bool { since >= window }
}
