import Foundation
import Metrics
import NIOConcurrencyHelpers
package import Observability
import Settings
import Storage

/// The push daemon's figures, exported at `/metrics` on its status listener.
///
/// | name | kind | meaning |
/// |---|---|---|
/// | `pushchat.push.sent` | counter | notifications recorded as sent |
/// | `pushchat.push.failed{reason}` | counter | notifications failed, by reason |
/// | `pushchat.push.resent` | counter | notifications written again on a new connection |
/// | `pushchat.push.in_flight{app,platform,connection}` | gauge | written, not yet known accepted |
/// | `pushchat.push.claim.duration` | histogram | one claim statement |
/// | `pushchat.push.mark.duration` | histogram | one round of result statements |
/// | `pushchat.gateway.connected{app,platform}` | gauge | gateway connections up, by app and platform (APNs or FCM; browsers: senders ready) |
/// | `pushchat.webpush.connections{app}` | gauge | browsers' push services' connections open (closed when idle, at most `webpush_max_connections` idle) |
/// | `pushchat.gateway.reconnects` | counter | connection attempts after the first |
/// | `pushchat.queue.depth` | gauge | rows waiting (sampled) |
/// | `pushchat.queue.oldest_pending_age` | gauge | seconds the oldest waiting row has waited (sampled) |
/// | `pushchat.push.wrong_environment` | gauge | 1 while most answers are BadDeviceToken/DeviceTokenNotForTopic (status 8) |
/// | `pushchat.app.sent{app}` | counter | notifications recorded as sent, by app |
/// | `pushchat.app.failed{app}` | counter | notifications failed for good, by app |
/// | `pushchat.app.pending{app,platform}` | gauge | rows due to be sent, enabled apps only (none deferred) |
/// | `pushchat.app.oldest_pending_age_seconds{app,platform}` | gauge | how long the oldest of those has waited |
/// | `pushchat.app.usable{app}` | gauge | 1 while the daemon sends for the app, 0 while it refuses its files or keys |
/// | `pushchat.credentials.refused_total{app,platform}` | counter | answers refusing our credentials (APNs 403 InvalidProviderToken, BadCertificate…) |
/// | `pushchat.database.up` | gauge | 1 while the database answers the daemon's probe, 0 while it does not |
/// | `pushchat.build_info{version}` | gauge | 1, labelled with the release (its `VERSION` file) |
/// | `pushchat.app.certificate_expiry_seconds{app}` | gauge | when the app's APNs client certificate expires (certificate apps only) |
/// | `pushchat.fcm.token_failures_total{app}` | counter | FCM access tokens the token URI refused or did not give |
/// | `pushchat.broadcast.expanded` | counter | rows this daemon queued expanding broadcasts |
/// | `pushchat.broadcast.pace` | gauge | broadcast rows/s this daemon may send now: `push_broadcast_rate`, or less while chat waits (`push_chat_target`); 0: no limit |
package struct PushMetrics: Sendable {
    package let registry: MetricsRegistry
    let sent: Counter
    let resent: Counter
    let claimDuration: Metrics.Timer
    let markDuration: Metrics.Timer
    let reconnects: Counter
    let broadcastExpanded: Counter
    /// Broadcast rows/s allowed now (0: no limit).
    let broadcastPace: Meter
    let queueDepth: Meter
    let oldestPendingAge: Meter
    /// 1 while most recent answers say the tokens are not valid for this topic and environment.
    let wrongEnvironment: Meter

    package init(registry: MetricsRegistry) {
        self.registry = registry
        sent = registry.counter("pushchat.push.sent")
        resent = registry.counter("pushchat.push.resent")
        claimDuration = registry.timer("pushchat.push.claim.duration")
        markDuration = registry.timer("pushchat.push.mark.duration")
        reconnects = registry.counter("pushchat.gateway.reconnects")
        broadcastExpanded = registry.counter("pushchat.broadcast.expanded")
        broadcastPace = registry.meter("pushchat.broadcast.pace")
        queueDepth = registry.meter("pushchat.queue.depth")
        oldestPendingAge = registry.meter("pushchat.queue.oldest_pending_age")
        wrongEnvironment = registry.meter("pushchat.push.wrong_environment")
        queueDepth.set(0)
        oldestPendingAge.set(0)
        broadcastPace.set(0)
    }

    func failed(reason: String, count: Int = 1) {
        registry.counter("pushchat.push.failed", [("reason", reason)]).increment(by: count)
    }

    /// An app's client certificate expiry as a Unix time (`pushchat_app_certificate_expiry_seconds{app}`), exported
    /// only for apps that authenticate with a certificate: an alert fires a month ahead. The default app's is also
    /// `pushchat_apns_certificate_expiry_seconds`, the name of earlier releases.
    func certificateExpires(_ date: Date, app: String) {
        registry.meter("pushchat.app.certificate_expiry_seconds", [("app", app)]).set(date.timeIntervalSince1970)
        if app == App.defaultName { registry.meter("pushchat.apns.certificate_expiry_seconds").set(date.timeIntervalSince1970) }
    }

    /// The connections up for an app on a platform (`pushchat_gateway_connected{app,platform}`): "no connection to
    /// Apple" and "no connection to Google" are told apart.
    func gatewayConnected(app: String, platform: String) -> Meter {
        registry.meter("pushchat.gateway.connected", [("app", app), ("platform", platform)])
    }

    /// Push services' connections open for an app's browsers (`pushchat_webpush_connections{app}`).
    func webPushConnections(app: String) -> Meter {
        registry.meter("pushchat.webpush.connections", [("app", app)])
    }

    /// An FCM access token the token URI refused or did not give (`pushchat_fcm_token_failures_total{app}`): the app's
    /// Android rows wait until a fetch succeeds.
    func fcmTokenFailures(app: String) -> Counter {
        registry.counter("pushchat.fcm.token_failures_total", [("app", app)])
    }

    func inFlight(app: String, platform: String, connection: String) -> Meter {
        registry.meter("pushchat.push.in_flight", [("app", app), ("platform", platform), ("connection", connection)])
    }

    /// What one round of result writes recorded, by app.
    func recorded(byApp: [String: Outcomes.AppCounts]) {
        for (app, counts) in byApp {
            if counts.sent > 0 { registry.counter("pushchat.app.sent", [("app", app)]).increment(by: counts.sent) }
            if counts.failed > 0 { registry.counter("pushchat.app.failed", [("app", app)]).increment(by: counts.failed) }
        }
    }

    /// `pushchat_app_usable{app}`: 1 while the daemon can send for the app, 0 while it refuses its settings (a file it
    /// cannot read, a key that does not load); nil: the app is gone or disabled (the series reads 1, nothing to say).
    func appUsable(_ app: String, _ usable: Bool?) {
        registry.meter("pushchat.app.usable", [("app", app)]).set(usable == false ? 0 : 1)
    }

    /// An answer that refused the credentials (the row stays queued): by app and platform, so an alert can tell one
    /// app's revoked key from Apple being down.
    func credentialsRefused(app: String, platform: String, count: Int = 1) {
        registry.counter("pushchat.credentials.refused_total", [("app", app), ("platform", platform)]).increment(by: count)
    }

    /// `pushchat_database_up`, read from the probe at every scrape: the queue's gauges keep their last value while
    /// the database is away, so an alert on them alone goes quiet exactly when it matters.
    func watchDatabase(_ health: DatabaseHealth) {
        let up = registry.gauge("pushchat.database.up")
        registry.onScrape { up.record(health.isUp ? 1 : 0) }
    }

    /// Rows due by enabled app and platform, and the age of the oldest of each (the queue-late alert's figures: a
    /// disabled app, or rows deferred after a 429 or a 503, do not make it page).
    func pending(byLane lanes: [PushQueue.Lane]) {
        for lane in lanes {
            let labels = [("app", lane.app), ("platform", lane.platform)]
            registry.meter("pushchat.app.pending", labels).set(lane.pending)
            registry.meter("pushchat.app.oldest_pending_age_seconds", labels).set(lane.oldestAge)
        }
    }
}
