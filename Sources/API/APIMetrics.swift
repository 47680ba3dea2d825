import Hummingbird
import Metrics
import NIOCore
import Observability
import Storage

/// The API's figures: requests by command (or provider endpoint, e.g. `notifications.send`) and status, their durations, notifications queued.
///
/// Exported as `pushchat_api_requests{command,status}`, `pushchat_api_request_duration` (a histogram in seconds per
/// command) and `pushchat_api_notifications_queued`.
struct APIMetrics: Sendable {
    static let commands = [
        "join", "leave", "update", "message", "fetch", "unparsed",
        "devices.register", "devices.list", "devices.unregister", "notifications.send", "notifications.status",
    ]

    let registry: MetricsRegistry
    private let durations: [String: Metrics.Timer]
    private let queuedCounter: Counter

    init(registry: MetricsRegistry) {
        self.registry = registry
        var durations: [String: Metrics.Timer] = [:]
        for command in Self.commands {
            durations[command] = registry.timer("pushchat.api.request.duration", [("command", command)])
        }
        self.durations = durations
        self.queuedCounter = registry.counter("pushchat.api.notifications.queued")
    }

    func request(command: String, status: Int, duration: Duration) {
        registry.counter("pushchat.api.requests", [("command", command), ("status", "\(status)")]).increment()
        durations[command]?.record(duration: duration)
    }

    func queued(_ count: Int) {
        if count > 0 { queuedCounter.increment(by: count) }
    }

    /// `pushchat_database_up`: 1 while the database answers the API's probe, read at every scrape.
    func watchDatabase(_ health: DatabaseHealth) {
        let up = registry.gauge("pushchat.database.up")
        registry.onScrape { up.record(health.isUp ? 1 : 0) }
    }
}
