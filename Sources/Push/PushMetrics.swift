import Foundation
import Metrics
import NIOConcurrencyHelpers
package import Observability

/// The push daemon's figures, exported at `/metrics` on its status listener.
///
/// | name | kind | meaning |
/// |---|---|---|
/// | `pushchat.push.sent` | counter | notifications recorded as sent |
/// | `pushchat.push.failed{reason}` | counter | notifications failed, by reason |
/// | `pushchat.push.resent` | counter | notifications written again on a new connection |
/// | `pushchat.push.in_flight{connection}` | gauge | written, not yet known accepted |
/// | `pushchat.push.claim.duration` | histogram | one claim statement |
/// | `pushchat.push.mark.duration` | histogram | one round of result statements |
/// | `pushchat.gateway.connected` | gauge | gateway connections up |
/// | `pushchat.gateway.reconnects` | counter | connection attempts after the first |
/// | `pushchat.queue.depth` | gauge | rows waiting (sampled) |
/// | `pushchat.queue.oldest_pending_age` | gauge | seconds the oldest waiting row has waited (sampled) |
/// | `pushchat.push.wrong_environment` | gauge | 1 while most answers are BadDeviceToken/DeviceTokenNotForTopic (status 8) |
/// | `pushchat.app.sent{app}` | counter | notifications recorded as sent, by app |
/// | `pushchat.app.failed{app}` | counter | notifications failed for good, by app |
/// | `pushchat.app.pending{app}` | gauge | rows waiting, by app (sampled with the queue's depth) |
/// | `pushchat.app.connections{app}` | gauge | gateway connections up, by app |
/// | `pushchat.broadcast.expanded` | counter | rows this daemon queued expanding broadcasts |
package struct PushMetrics: Sendable {
    package let registry: MetricsRegistry
    let sent: Counter
    let resent: Counter
    let claimDuration: Metrics.Timer
    let markDuration: Metrics.Timer
    let connected: Meter
    let reconnects: Counter
    let broadcastExpanded: Counter
    let queueDepth: Meter
    let oldestPendingAge: Meter
    /// 1 while most recent answers say the tokens are not valid for this topic and environment.
    let wrongEnvironment: Meter
    /// Apps whose pending gauge was ever set (set back to 0 when their rows are gone).
    let pendingApps = NIOLockedValueBox(Set<String>())

    package init(registry: MetricsRegistry) {
        self.registry = registry
        sent = registry.counter("pushchat.push.sent")
        resent = registry.counter("pushchat.push.resent")
        claimDuration = registry.timer("pushchat.push.claim.duration")
        markDuration = registry.timer("pushchat.push.mark.duration")
        connected = registry.meter("pushchat.gateway.connected")
        reconnects = registry.counter("pushchat.gateway.reconnects")
        broadcastExpanded = registry.counter("pushchat.broadcast.expanded")
        queueDepth = registry.meter("pushchat.queue.depth")
        oldestPendingAge = registry.meter("pushchat.queue.oldest_pending_age")
        wrongEnvironment = registry.meter("pushchat.push.wrong_environment")
        connected.set(0)
        queueDepth.set(0)
        oldestPendingAge.set(0)
    }

    func failed(reason: String, count: Int = 1) {
        registry.counter("pushchat.push.failed", [("reason", reason)]).increment(by: count)
    }

    /// The client certificate's expiry as a Unix time (`pushchat_apns_certificate_expiry_seconds`), exported only
    /// when the daemon authenticates with a certificate: an alert fires a month ahead.
    func certificateExpires(_ date: Date) {
        registry.meter("pushchat.apns.certificate_expiry_seconds").set(date.timeIntervalSince1970)
    }

    func inFlight(connection: String) -> Meter {
        registry.meter("pushchat.push.in_flight", [("connection", "\(connection)")])
    }

    /// An app's gateway connections (`pushchat_app_connections{app}`).
    func appConnections(_ app: String) -> Meter { registry.meter("pushchat.app.connections", [("app", app)]) }

    /// What one round of result writes recorded, by app.
    func recorded(byApp: [String: Outcomes.AppCounts]) {
        for (app, counts) in byApp {
            if counts.sent > 0 { registry.counter("pushchat.app.sent", [("app", app)]).increment(by: counts.sent) }
            if counts.failed > 0 { registry.counter("pushchat.app.failed", [("app", app)]).increment(by: counts.failed) }
        }
    }

    /// Rows waiting by app; an app seen before with none waiting now reads 0.
    func pending(byApp: [String: Int]) {
        let apps = pendingApps.withLockedValue { seen in
            seen.formUnion(byApp.keys)
            return seen
        }
        for app in apps { registry.meter("pushchat.app.pending", [("app", app)]).set(byApp[app] ?? 0) }
    }
}
