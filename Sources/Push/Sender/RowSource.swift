import APNs
import Settings
import Storage

/// Where a driver's rows come from: one app's rows on one platform, of one kind of traffic. ``PushQueue`` in the
/// daemon (claims under lease, `SKIP LOCKED`); a queue in memory in `PushTests`, so the driver is tested without
/// PostgreSQL.
protocol RowSource: Sendable {
    /// Whose rows (`push_queue.app`), for the figures.
    var app: String { get }
    /// Which platform's rows (`push_queue.platform`).
    var platform: Platform { get }
    /// Which of them (``PushQueue/Traffic``).
    var traffic: PushQueue.Traffic { get }

    /// Claims up to `limit` rows under lease, oldest first; `bulkLimit`: at most so many of a broadcast's (nil: the
    /// traffic's own share).
    func claim(limit: Int, bulkLimit: Int?) async throws -> [QueuedNotification]

    /// Whether rows wait that nobody holds (a sender that opens on demand looks before it connects).
    func hasUnclaimed() async throws -> Bool

    /// The same source for `app`'s rows on `platform`.
    func forApp(_ app: String, platform: Platform) -> Self

    /// The same source for `traffic`'s rows only.
    func forTraffic(_ traffic: PushQueue.Traffic) -> Self

    /// The browsers' subscriptions of `tokens` (web rows' device tokens); absent ones are left out.
    func webSubscriptions(_ tokens: [String]) async throws -> [WebSubscriptionRecord]
}

extension RowSource {
    /// A source without browsers' subscriptions (a queue in memory): none.
    func webSubscriptions(_ tokens: [String]) async throws -> [WebSubscriptionRecord] { [] }
}

extension PushQueue: RowSource {}
