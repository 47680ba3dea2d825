import APNs
import Foundation
import Logging
import Settings
import Storage

/// What the two workers (``BinaryWorker``, ``HTTP2Worker``) are: one kept-open gateway connection at a time, fed from
/// the shared queue, reconnecting with backoff until graceful shutdown, over one ``WorkerContext``.
protocol PushWorker: Sendable {
    var context: WorkerContext { get }
    var logger: Logger { get }
    /// Runs until graceful shutdown, then gives back what it holds.
    func run() async
}

extension PushWorker {
    var settings: PushSettings { context.settings }
    var pollInterval: Duration { context.pollInterval }
    var queue: PushQueue { context.queue }
    var outcomes: Outcomes { context.outcomes }
    var held: HeldRows { context.held }
    var signal: QueueSignal { context.signal }
    var shutdown: ShutdownFlag { context.shutdown }
    var metrics: PushMetrics { context.metrics }
    var status: PushStatus { context.status }

    /// Claims up to `limit` rows, held under lease until their results are recorded.
    func claim(limit: Int) async throws -> [QueuedNotification] {
        try await held.claim(from: queue, limit: limit, timer: metrics.claimDuration)
    }

    /// Fails a row past its expiry as `expired` instead of sending it (again): APNs would not deliver it any more.
    /// Returns whether it did.
    func failIfExpired(_ notification: QueuedNotification, now: Date) -> Bool {
        guard notification.isExpired(defaultExpiry: settings.expirySeconds, now: now) else { return false }
        logger.warning(
            "Message \(notification.messageID) expired before it could be sent",
            metadata: ["push.message_id": "\(notification.messageID)"]
        )
        outcomes.failed(notification, status: "expired", reason: "expired before it could be sent", kind: "expired")
        return true
    }
}
