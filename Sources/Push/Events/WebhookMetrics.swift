import Metrics
import Observability
import Storage

/// The webhooks' figures, on the push daemon's `/metrics`.
///
/// | name | kind | meaning |
/// |---|---|---|
/// | `pushchat.webhook.pending{webhook}` | gauge | events waiting in the outbox for the webhook (sampled) |
/// | `pushchat.webhook.oldest_pending_age_seconds{webhook}` | gauge | how long the oldest of them has waited |
/// | `pushchat.webhook.disabled{webhook}` | gauge | 1 once the webhook is disabled (by hand or past the retry window) |
/// | `pushchat.webhook.delivered_total{webhook}` | counter | events the receiver took (a 2xx) |
/// | `pushchat.webhook.failed_attempts_total{webhook}` | counter | POSTs that failed (not 2xx, timed out, refused) |
struct WebhookMetrics: Sendable {
    let registry: MetricsRegistry

    func delivered(webhook: String, events: Int) {
        registry.counter("pushchat.webhook.delivered_total", [("webhook", webhook)]).increment(by: events)
    }

    func failedAttempt(webhook: String) {
        registry.counter("pushchat.webhook.failed_attempts_total", [("webhook", webhook)]).increment()
    }

    func backlog(_ backlog: [WebhookOutbox.Backlog]) {
        for webhook in backlog {
            let labels = [("webhook", webhook.name)]
            registry.meter("pushchat.webhook.pending", labels).set(webhook.events)
            registry.meter("pushchat.webhook.oldest_pending_age_seconds", labels).set(webhook.oldestAge)
            registry.meter("pushchat.webhook.disabled", labels).set(webhook.disabled ? 1 : 0)
        }
    }
}
